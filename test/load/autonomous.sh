#!/usr/bin/env bash
# Lease and attempt calls run in a worker's transaction of their own.  What
# the isolation tester cannot stage (it sees a session as blocked only while
# that session waits for a lock, and a caller waits for its worker), staged
# here with background sessions:
#   - pg_cancel_backend while the worker waits for the lease row: the caller
#     fails at once and stays usable; the worker's call commits whole later;
#   - a cancelled acquire stops its retries (each a call of its own);
#   - a deadlock between a worker and another session: 40P01 for the caller;
#   - a worker terminated mid-call: a clear error, the pool goes on;
#   - a pipeline (psycopg's pipeline(), libpq's pipeline mode) whose last
#     statement fails: the lease and the marker stay;
#   - crossed waits of two sessions through their workers, a full pool whose
#     worker waits for its caller: 40P01;
#   - max_worker_processes exhausted, with and without the preload: 53000;
#     no room for a second worker while one is busy: the call waits.
# Prints "ok - ..." / "not ok - ..."; exits 0.
. "$(dirname "$0")/lib.bash"
load_setup hc_load_autonomous 20
python=${HC_PYTHON:-/usr/bin/python3}
q "CREATE EXTENSION holdcommit" >/dev/null || { echo "not ok - extension created"; exit 0; }
export PGOPTIONS="-c search_path=public,holdcommit"

# wait_for SQL: until SQL says t (at most 60 s by the clock, however slow each poll is).
wait_for() {
    local end=$((SECONDS + 60))
    while [ "$SECONDS" -le "$end" ]; do
        [ "$(q "$1")" = t ] && return 0
        sleep 0.02
    done
    return 1
}
# hold_rows RESOURCE: a session holds the lease and attempt rows until
# release_rows (120 s at most), so that a call on them waits until the test
# lets it go, however slow the machine: never a sleep that may end first.
hold_rows() {
    PGAPPNAME=hold-rows psql -X -q -d "$db" -c "BEGIN" \
        -c "SELECT FROM hc_locks WHERE resource = '$1' FOR UPDATE" \
        -c "SELECT FROM hc_attempts WHERE resource = '$1' FOR UPDATE" \
        -c "SELECT pg_sleep(120)" -c "COMMIT" >/dev/null 2>&1 &
    holder=$!
    wait_for "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE application_name = 'hold-rows' AND query LIKE 'SELECT pg_sleep%')"
}
# release_rows: cancel the holder's sleep, which ends its transaction (it wrote nothing).
release_rows() {
    q "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'hold-rows'" >/dev/null
    wait "$holder"
}
# caller NAME SQL: run SQL in the background as application NAME, then show
# its SQLSTATE and whether the session is still usable.
caller() {
    printf '%s\n' '\set ON_ERROR_STOP 0' '\set VERBOSITY terse' "SET application_name = '$1';" \
        "$2" '\echo sqlstate :SQLSTATE' 'SELECT 1 AS usable;' |
        psql -X -qAt -d "$db" >"$work/$1.out" 2>&1 &
    called=$!
}
waiting_for_worker() {
    echo "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE application_name = '$1' AND wait_event = 'Extension')"
}
worker_waiting_for_lock="SELECT EXISTS (SELECT FROM pg_stat_activity WHERE datname = '$db'
                            AND backend_type = 'holdcommit worker' AND wait_event_type = 'Lock')"

# A cancel while the worker waits for the lease row.
q "SELECT hc_lock_acquire('C-1', 'w1', '1 hour', 0), hc_attempt_begin('C-1', 'w1', 1, '0 seconds', 9)" >/dev/null
before=$(q "SELECT heartbeat_at FROM hc_locks WHERE resource = 'C-1'")
hold_rows C-1
caller cancel-beat "SELECT hc_lock_heartbeat('C-1', 'w1', 1) IS NOT NULL AS beat;"
wait_for "$(waiting_for_worker cancel-beat)" && wait_for "$worker_waiting_for_lock"
q "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'cancel-beat'" >/dev/null
wait "$called"
check "cancel: the caller's heartbeat ends with 57014, and its session is usable" \
    "$(tr '\n' ' ' <"$work/cancel-beat.out")" "ERROR:  canceling statement due to user request sqlstate 57014 1 "
release_rows
wait_for "SELECT heartbeat_at > '$before' FROM hc_locks WHERE resource = 'C-1'"
check "cancel: the worker's heartbeat committed once the row was free" \
    "$(q "SELECT heartbeat_at > '$before' FROM hc_locks WHERE resource = 'C-1'")" "t"

# A cancelled acquire stops retrying.
caller cancel-acquire "SELECT hc_lock_acquire('C-1', 'w2', '1 hour', 20);"
wait_for "$(waiting_for_worker cancel-acquire)"
sleep 0.3
q "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'cancel-acquire'" >/dev/null
wait
t1=$(date +%s)
wait_for "SELECT NOT EXISTS (SELECT FROM pg_stat_activity WHERE datname = '$db'
             AND backend_type = 'holdcommit worker' AND state = 'active')"
check "cancel: an acquire with 20 retries stops retrying within one backoff (at most 2 s)" \
    "$(( $(date +%s) - t1 <= 3 ))/$(q "SELECT owner FROM hc_locks WHERE resource = 'C-1'")" "1/w1"

# A deadlock: the worker holds the lease row and waits for the attempt row,
# which session d holds and then asks for the lease row.
q "SELECT hc_lock_acquire('C-3', 'w1', '1 hour', 0), hc_attempt_begin('C-3', 'w1', 1, '0 seconds', 9)" >/dev/null
psql -X -q -d "$db" -c "SET deadlock_timeout = '10s'" -c "BEGIN" \
    -c "SELECT FROM hc_attempts WHERE resource = 'C-3' FOR UPDATE" \
    -c "DO \$\$ BEGIN FOR i IN 1 .. 1000 LOOP
          PERFORM pg_stat_clear_snapshot();
          EXIT WHEN EXISTS (SELECT FROM pg_locks l JOIN pg_stat_activity s USING (pid)
                             WHERE NOT l.granted AND s.backend_type = 'holdcommit worker');
          PERFORM pg_sleep(0.01); END LOOP; END \$\$" \
    -c "SELECT FROM hc_locks WHERE resource = 'C-3' FOR UPDATE" -c "COMMIT" >/dev/null 2>&1 &
wait_for "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE datname = '$db' AND query LIKE 'DO %')"
caller deadlock "SELECT status FROM hc_attempt_begin('C-3', 'w1', 1, '0 seconds', 9);"
wait
check "deadlock: the caller gets 40P01 and its session is usable" \
    "$(grep -c 'deadlock detected' "$work/deadlock.out")/$(tail -2 "$work/deadlock.out" | tr '\n' ' ')" "1/sqlstate 40P01 1 "
check "deadlock: nothing of the failed begin was kept" \
    "$(q "SELECT attempts FROM hc_attempts WHERE resource = 'C-3'")" "1"

# Two sessions, each holding a lease row in its block, each calling on the
# other's row: their workers wait for the sessions, the sessions for their
# workers.  Each caller follows the waits through the other's worker.
q "SELECT hc_lock_acquire('D-1', 'w1', '1 hour', 0), hc_lock_acquire('D-2', 'w1', '1 hour', 0)" >/dev/null
for pair in "D-1 D-2" "D-2 D-1"; do
    set -- $pair
    printf '%s\n' '\set ON_ERROR_STOP 0' '\set VERBOSITY terse' "SET application_name = 'cross-$1';" 'BEGIN;' \
        "UPDATE hc_locks SET heartbeat_at = heartbeat_at WHERE resource = '$1';" 'SELECT pg_sleep(0.5);' \
        "SELECT hc_lock_heartbeat('$2', 'w1', 1) IS NOT NULL AS beat;" '\echo sqlstate :SQLSTATE' \
        'ROLLBACK;' 'SELECT 1 AS usable;' |
        timeout 30 psql -X -qAt -d "$db" >"$work/cross-$1.out" 2>&1 &
done
wait
check "crossed waits through two workers: a 40P01 within seconds, both sessions usable" \
    "$(cat "$work"/cross-D-*.out | grep -c 'sqlstate 40P01' | sed 's/^[12]$/yes/')/$(cat "$work"/cross-D-*.out | grep -c '^1$')" "yes/2"

# A full pool (one worker) whose worker waits for this transaction: the
# caller does not wait for a worker for ever.
q "ALTER SYSTEM SET holdcommit.max_workers = 1" >/dev/null && q "SELECT pg_reload_conf()" >/dev/null
sleep 0.5
psql -X -q -d "$db" -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'holdcommit worker'" >/dev/null
printf '%s\n' '\set ON_ERROR_STOP 0' '\set VERBOSITY terse' 'SET deadlock_timeout = 200;' 'BEGIN;' \
    "UPDATE hc_locks SET heartbeat_at = heartbeat_at WHERE resource = 'D-1';" 'SELECT pg_sleep(1);' \
    "SELECT hc_lock_heartbeat('D-2', 'w1', 1) IS NOT NULL AS beat;" '\echo sqlstate :SQLSTATE' 'ROLLBACK;' 'SELECT 1 AS usable;' |
    timeout 30 psql -X -qAt -d "$db" >"$work/full.out" 2>&1 &
sleep 0.3
caller full-waiter "SELECT hc_lock_heartbeat('D-1', 'w1', 1) IS NOT NULL AS beat;"
wait
check "full pool, its worker waiting for the caller: 40P01 for the caller, the waiting call then served" \
    "$(grep -c 'every one waits for a lock that this transaction holds' "$work/full.out")/$(tail -2 "$work/full.out" | tr '\n' ' ')/$(grep -c '^t$' "$work/full-waiter.out")" \
    "1/sqlstate 40P01 1 /1"
q "ALTER SYSTEM RESET holdcommit.max_workers" >/dev/null && q "SELECT pg_reload_conf()" >/dev/null

# A worker terminated while it waits: the caller learns it, the pool goes on.
hold_rows C-1
caller terminated "SELECT hc_lock_heartbeat('C-1', 'w1', 1) IS NOT NULL AS beat;"
wait_for "$worker_waiting_for_lock"
q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '$db'
      AND backend_type = 'holdcommit worker' AND wait_event_type = 'Lock'" >/dev/null
wait "$called"
release_rows
check "terminated worker: the caller gets 08006 and its session is usable" \
    "$(grep -c 'ended before it answered' "$work/terminated.out")/$(tail -2 "$work/terminated.out" | tr '\n' ' ')" "1/sqlstate 08006 1 "
check "terminated worker: the next call is served" \
    "$(q "SELECT hc_lock_heartbeat('C-1', 'w1', 1) IS NOT NULL")" "t"

# A pipeline: several statements, one Sync, one implicit transaction; the
# last fails.  The caller's own INSERT is rolled back, the lease and the
# marker are not.
q "CREATE TABLE pipeline_log (note text)" >/dev/null
out=$("$python" - "$db" <<'PY' 2>&1
import sys, psycopg
with psycopg.connect(dbname=sys.argv[1], autocommit=True) as conn:
    try:
        with conn.pipeline():
            token = conn.execute("SELECT hc_lock_acquire('P-1', 'pipeline', '1 hour', 0)")
            attempt = conn.execute("SELECT status FROM hc_attempt_begin('P-1', 'pipeline', 1, '1 hour', 3)")
            conn.execute("INSERT INTO pipeline_log VALUES ('sent')")
            conn.execute("SELECT 1 / 0")
    except psycopg.errors.DivisionByZero:
        print("failed", token.fetchone()[0], attempt.fetchone()[0])
PY
)
check "pipeline: the client saw token 1 and PROCEED before the pipeline failed" "$out" "failed 1 PROCEED"
check "pipeline: its INSERT was rolled back, the lease and the marker stay" \
    "$(q "SELECT (SELECT count(*) FROM pipeline_log) || ' ' || owner || ' ' || token
                 || ' ' || (SELECT attempts FROM hc_attempts WHERE resource = 'P-1')
            FROM hc_locks WHERE resource = 'P-1'")" "0 pipeline 1 1"
check "pipeline: the next worker gets token 2 and sees the attempt" \
    "$(q "SELECT hc_lock_release('P-1', 'pipeline', 1)")/$(q "SELECT hc_lock_acquire('P-1', 'next', '1 hour', 0)")/$(q "SELECT (hc_attempt_begin('P-1', 'next', 2, '1 hour', 3)).status")" \
    "t/2/COOLDOWN"
check "hc_check() is empty" "$(q "SELECT count(*) FROM hc_check()")" "0"

# The transaction that creates the extension cannot call it: the worker
# cannot see it yet.  A clear 55000, not a wait or a lookup failure.
psql -X -q -d postgres -c "DROP DATABASE IF EXISTS ${db}_new" -c "CREATE DATABASE ${db}_new" >/dev/null 2>&1
out=$(printf '%s\n' '\set VERBOSITY terse' 'BEGIN;' 'CREATE EXTENSION holdcommit;' \
          "SELECT holdcommit.hc_lock_acquire('N-1', 'w1');" '\echo sqlstate :SQLSTATE' 'ROLLBACK;' 'SELECT 1;' |
      psql -X -qAt -d "${db}_new" 2>&1 | tr '\n' ' ')
check "the transaction that creates the extension gets 55000 from a lease call, and rolls back" "$out" \
    "ERROR:  hc_lock_acquire cannot run in the transaction that created or updated extension \"holdcommit\" sqlstate 55000 1 "
# A session-bound acquire refused there takes no binding lock with it.
psql -X -q -d postgres -c "DROP DATABASE IF EXISTS ${db}_new WITH (FORCE)" -c "CREATE DATABASE ${db}_new" >/dev/null 2>&1
out=$(printf '%s\n' '\set VERBOSITY terse' 'BEGIN;' 'CREATE EXTENSION holdcommit;' 'SAVEPOINT a;' \
          "SELECT holdcommit.hc_lock_acquire_session('N-2', 'w1');" 'ROLLBACK TO a;' 'COMMIT;' \
          "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();" |
      psql -X -qAt -d "${db}_new" 2>&1 | tr '\n' ' ')
check "a session-bound acquire refused with 55000 leaves no advisory lock" "$out" \
    "ERROR:  hc_lock_acquire_session cannot run in the transaction that created or updated extension \"holdcommit\" 0 "
psql -X -q -d postgres -c "DROP DATABASE IF EXISTS ${db}_new WITH (FORCE)" >/dev/null 2>&1
psql -X -q -d postgres -c "CREATE DATABASE ${db}_new" >/dev/null 2>&1

# A grant in the same transaction rewrites the functions' catalog rows, but
# their committed versions are there for the worker: the call runs.
psql -X -q -d "${db}_new" -c "CREATE EXTENSION holdcommit" -c "CREATE ROLE ${db}_grantee" >/dev/null 2>&1
out=$(printf '%s\n' '\set VERBOSITY terse' 'BEGIN;' "SELECT holdcommit.hc_grant_app('${db}_grantee');" \
          "SELECT holdcommit.hc_lock_acquire('N-1', 'w1');" 'COMMIT;' |
      psql -X -qAt -d "${db}_new" 2>&1 | tr '\n' ' ')
check "a lease call in the transaction of a grant runs" "$out" " 1 "
psql -X -q -d postgres -c "DROP DATABASE IF EXISTS ${db}_new WITH (FORCE)" -c "DROP ROLE IF EXISTS ${db}_grantee" \
    >/dev/null 2>&1
unset PGOPTIONS

# max_worker_processes exhausted: with the preload (the launcher takes the
# only worker) and without (none at all).  A clear 53000, a usable session.
exhausted() {
    local what=$1 port=$2
    if ! HC_PRELOAD=$3 HC_MAX_WORKER_PROCESSES=$4 test/harness/server.sh start "$port" >/dev/null 2>&1; then
        echo "not ok - $what: a server starts"
        return
    fi
    out=$(printf '%s\n' '\set VERBOSITY terse' 'CREATE EXTENSION holdcommit;' \
              "SELECT holdcommit.hc_lock_acquire('X-1', 'w1');" '\echo sqlstate :SQLSTATE' 'SELECT 1;' |
          psql -X -qAt -h "${TMPDIR:-/tmp}/holdcommit-$port" -p "$port" -d postgres 2>&1 | tr '\n' ' ')
    test/harness/server.sh stop "$port"
    check "$what: 53000 and a usable session" "$out" \
        "ERROR:  hc_lock_acquire could not start a holdcommit worker sqlstate 53000 1 "
}
exhausted "preloaded, max_worker_processes = 1" $((PGPORT + 11)) holdcommit 1

# No room for a second worker while the only one is busy (max_worker_processes
# 3: the logical replication launcher, holdcommit's launcher, one worker): a call waits for
# it, and its statement_timeout still ends the wait.
port=$((PGPORT + 11))
if HC_PRELOAD=holdcommit HC_MAX_WORKER_PROCESSES=3 test/harness/server.sh start "$port" >/dev/null 2>&1; then
    sq() { psql -X -qAt -h "${TMPDIR:-/tmp}/holdcommit-$port" -p "$port" -d postgres "$@"; }
    sq -c "CREATE EXTENSION holdcommit" -c "SELECT holdcommit.hc_lock_acquire('W-1', 'w1')" >/dev/null
    sq -c "BEGIN" -c "SELECT FROM holdcommit.hc_locks WHERE resource = 'W-1' FOR UPDATE" -c "SELECT pg_sleep(3)" \
        -c "COMMIT" >/dev/null 2>&1 &
    sleep 0.5
    sq -c "SELECT holdcommit.hc_lock_heartbeat('W-1', 'w1', 1)" >/dev/null 2>&1 &
    sleep 0.5
    t0=$(date +%s%N)
    out=$(printf '%s\n' '\set VERBOSITY terse' "SET statement_timeout = '500ms';" \
              "SELECT holdcommit.hc_lock_acquire('W-2', 'w2');" '\echo sqlstate :SQLSTATE' 'SELECT 1;' |
          sq 2>&1 | tr '\n' ' ')
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    wait
    test/harness/server.sh stop "$port"
    check "no room for a second worker: the call waits, and its statement_timeout ends it (57014, under 2 s)" \
        "$out/$((ms < 2000))" "ERROR:  canceling statement due to statement timeout sqlstate 57014 1 /1"
else
    echo "not ok - max_worker_processes = 3: a server starts"
fi
exhausted "not preloaded, max_worker_processes = 0" $((PGPORT + 11)) "" 0
exit 0
