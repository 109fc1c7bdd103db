#!/usr/bin/env bash
# Crashes during a mixed load, on a server of its own (port HC_CRASH_PORT,
# default the harness's port + 15) with synchronous_commit = on (and fsync on),
# holdcommit preloaded and installed in its own schema, its sweeper every
# second in the load's database.  Six clients (test/load/crash.py) make holds,
# commits, releases, extends, reserves, multi-item orders, finalizes,
# unreserves, stock adjustments, hc_sweep() calls and lease cycles (acquire,
# heartbeat, attempt, complete, release), and record every call on the
# client side: its arguments before it is sent, and what the client saw
# after it (the result, the SQLSTATE, or nothing: not acknowledged).  In
# each scenario, 2.5 s into the load (HC_CRASH_BEFORE):
#   1. kill -9 of a client backend running a holdcommit call
#   2. kill -9 of a holdcommit worker running a lease or attempt call
#   3. kill -9 of a holdcommit sweeper run
#   4. pg_ctl stop -m immediate, then start
# then, with synchronous_commit = off for the server and every client:
#   5. lease and attempt calls (and sweeps) only, and pg_ctl stop -m
#      immediate: their worker commits them synchronously whatever the
#      caller's setting, so every token and marker is kept;
#   6. four holds, a lease and an attempt, three holds (more until the last
#      one's WAL is not written out yet), and kill -9 of that backend at once
#      (the WAL writer asleep for 10 s): holds after the lease call are taken
#      back by the crash, the others are not -- the replay check sees a lost
#      acknowledged call, which is what synchronous_commit = off weakens
#      (doc/operations.md).
# The clients reconnect and go on after the recovery.  After each recovery:
# hc_check() empty (at once, in one snapshot, and with the clients stopped);
# every call acknowledged since the previous crash replays with its key as
# recorded, or is found in the tables and the ledger; every call not
# acknowledged, retried with its key, succeeds or gives its contract's
# SQLSTATE, and the next retry replays it; no token handed to two owners,
# and tokens and attempt counts higher after a crash than before it; the
# stock arithmetic; the launcher, a sweep and the worker pool back; the
# crash and the recovery in the server log; no session left broken.
# Prints "ok - ..." / "not ok - ..." and "# ..." figures; exits 0.
cd "$(dirname "$0")/../.." || exit 1
. test/load/lib.bash
python=${HC_PYTHON:-/usr/bin/python3}
driver=$PWD/test/load/crash.py
port=${HC_CRASH_PORT:-$((PGPORT + 15))}
export PGHOST=${TMPDIR:-/tmp}/holdcommit-$port PGPORT=$port
export HC_CRASH_DB=hc_crash
db=$HC_CRASH_DB
data=$PGHOST/data
log=$PGHOST/server.log
clients=${HC_CRASH_CLIENTS:-6}
pre_s=${HC_CRASH_BEFORE:-2.5}   # seconds of load before each crash
t_start=$(date +%s)

# As postgres, from / (test/harness/server.sh says why).
as_server() {
    if [ "$(id -u)" -eq 0 ]; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}
ctl() { as_server "$bin/pg_ctl" -D "$data" "$@"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
log_size() { stat -c %s "$log"; }
# log_has OFFSET TEXT: how many lines of the log after OFFSET bytes contain TEXT.
log_has() { tail -c +$(($1 + 1)) "$log" | grep -cF -- "$2"; }

# The server: PostgreSQL's default search_path, holdcommit preloaded (no
# pg_cron); then the durability settings of a production server.
if ! HC_PRELOAD=holdcommit HC_SEARCH_PATH= test/harness/server.sh start "$port" >/dev/null 2>&1; then
    echo "not ok - a server starts on port $port"
    exit 0
fi
# HC_CRASH_KEEP=DIR: keep the clients' records and the server's log there.
trap '[ -n "${HC_CRASH_KEEP:-}" ] && { mkdir -p "$HC_CRASH_KEEP"; cp -r "$work"/. "$log" "$HC_CRASH_KEEP"/; }
      test/harness/server.sh stop "$port"; rm -rf "$work"' EXIT
# fsync: the crashes here are crashes of PostgreSQL, not of the machine, and what
# a process wrote survives them in the page cache either way; fsync = on is what
# a server in production runs, and costs little here (a flush is ~0.3 ms).
for setting in "synchronous_commit = on" "fsync = on" "full_page_writes = on" "restart_after_crash = on" \
               "holdcommit.sweep_interval = 1" "holdcommit.databases = '$db'"; do
    psql -X -q -d postgres -c "ALTER SYSTEM SET $setting" || { echo "not ok - ALTER SYSTEM SET $setting"; exit 0; }
done
ctl -l "$log" -w -t 60 -m fast restart >/dev/null || { echo "not ok - the server restarts"; exit 0; }
check "the server runs with synchronous_commit = on and fsync = on, holdcommit preloaded" \
    "$(psql -X -qAt -d postgres -c "SELECT string_agg(setting, ' ' ORDER BY name) FROM pg_settings
                                     WHERE name IN ('synchronous_commit', 'fsync', 'shared_preload_libraries')")" \
    "on holdcommit on"

# The load's database, holdcommit installed as the README says: its own schema.
psql -X -q -d postgres -c "CREATE DATABASE $db" >/dev/null
if ! psql -X -q -v ON_ERROR_STOP=1 -d "$db" >/dev/null <<'SQL'; then
CREATE EXTENSION holdcommit;
SELECT count(holdcommit.hc_asset_add('A-' || lpad(i::text, 4, '0'))) FROM generate_series(1, 3000) i;
SELECT count(holdcommit.hc_stock_set(p, s))
  FROM (VALUES ('P-1', 3000), ('P-2', 3000), ('P-3', 3000), ('P-4', 3000), ('P-5', 3000), ('P-6', 40)) v(p, s);
-- Emptied by crash recovery, as every unlogged table: a client that still
-- sees its row is connected to the server from before the crash.
CREATE UNLOGGED TABLE public.crash_mark (scenario int);
SQL
    echo "not ok - the load's database is set up"
    exit 0
fi
check "holdcommit lives in its own schema, not on the search_path" \
    "$(q "SELECT extnamespace::regnamespace || ' ' || current_setting('search_path') FROM pg_extension WHERE extname = 'holdcommit'")" \
    'holdcommit "$user", public'

# ready_wait OFFSET: wait (60 s at most) for the log after OFFSET to say that
# the server accepts connections again, and for a connection.
ready_wait() {
    local i
    for i in $(seq 1 600); do
        if [ "$(log_has "$1" "database system is ready to accept connections")" -gt 0 ] &&
            psql -X -qAt -d "$db" -c "SELECT 1" >/dev/null 2>&1; then
            return 0
        fi
        sleep 0.1
    done
    return 1
}

# after_recovery N LABEL OFFSET CRASH_START: the checks of a server just recovered.
after_recovery() {
    local n=$1 label=$2 offset=$3 t0=$4 ready_at
    if ! ready_wait "$offset"; then
        echo "not ok - $label: the server accepts connections again within 60 s"
        tail -20 "$log" | sed 's/^/#   /'
        return 1
    fi
    echo "# $label: the server accepted connections again $(since "$t0") s after the crash"
    # The server's clock when it was ready (log_line_prefix starts with %m).
    ready_at=$(tail -c +$((offset + 1)) "$log" | grep -F "database system is ready to accept connections" |
               tail -1 | cut -d' ' -f1-3)
    check "$label: hc_check() is empty right after the recovery (in one snapshot, the clients reconnecting)" \
        "$(psql -X -qAt -d "$db" -c "BEGIN ISOLATION LEVEL REPEATABLE READ" \
               -c "SELECT count(*) FROM holdcommit.hc_check()" -c "COMMIT" 2>&1)" "0"
    echo "$ready_at" >"$work/ready-$n"
}

# server_checks N LABEL OFFSET: what the log says of the crash, and what is back.
server_checks() {
    local n=$1 label=$2 offset=$3 ready_at
    ready_at=$(cat "$work/ready-$n")
    check "$label: the log shows the automatic recovery and the server ready again" \
        "$(log_has "$offset" "database system was not properly shut down; automatic recovery in progress")/$(
            log_has "$offset" "redo done at")/$([ "$(log_has "$offset" "database system is ready to accept connections")" -gt 0 ] && echo ready)" \
        "1/1/ready"
    check "$label: nothing in the log at PANIC, no process ended by a signal but the one killed" \
        "$(log_has "$offset" "PANIC")/$(log_has "$offset" "was terminated by signal")" "0/$4"
    check "$label: the launcher runs again, and a sweep ran in the load's database after the recovery" \
        "$(q "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'holdcommit launcher' AND backend_start >= '$ready_at'::timestamptz - interval '1 second'")/$(
            wait_for 15 "SELECT last_swept > '$ready_at' FROM holdcommit.hc_sweeper_databases WHERE database = '$db'" t >/dev/null && echo swept)" \
        "1/swept"
    check "$label: the worker pool serves lease calls again (a worker started after the recovery)" \
        "$(q "SELECT holdcommit.hc_lock_acquire('pool-$n', 'probe', '1 minute', 0)")/$(
            q "SELECT count(*) > 0 FROM pg_stat_activity WHERE backend_type = 'holdcommit worker' AND backend_start > '$ready_at'")" \
        "1/t"
    check "$label: no session is left in a transaction" \
        "$(q "SELECT count(*) FROM pg_stat_activity WHERE datname = '$db' AND state LIKE 'idle in transaction%'")" "0"
}

# scenario N LABEL CRASH [MIX]: the load from $clients clients, the crash
# $pre_s s into it, the recovery, a second more of load, then the checks.
scenario() {
    local n=$1 label=$2 crash=$3 mix=${4:-all} offset pids=() c rc t0 victim="" killed=1 i
    offset=$(log_size)
    q "INSERT INTO public.crash_mark VALUES ($n)" >/dev/null
    for c in $(seq 1 "$clients"); do
        "$python" "$driver" client --dir "$work" --epoch "$n" --client "$c" --mix "$mix" \
            2>"$work/e$n-c$c.err" &
        pids+=($!)
    done
    # every client connected (Python starts slowly on a busy machine), then 2.5 s of load
    for i in $(seq 1 300); do
        [ "$(ls "$work"/e"$n"-c*.ready 2>/dev/null | wc -l)" -eq "$clients" ] && break
        sleep 0.1
    done
    sleep "$pre_s"
    t0=$(now)
    case $crash in
    backend | worker | sweeper)
        if ! victim=$("$python" "$driver" kill --what "$crash" 2>&1); then
            echo "not ok - $label: a process to kill is found"
            echo "#   $victim"
            echo abort >"$work/e$n.stop"
            for c in "${pids[@]}"; do wait "$c"; done
            return
        fi
        echo "# $label: killed pid $victim"
        ;;
    immediate)
        ctl -m immediate stop >/dev/null
        killed=0
        check "$label: the log shows the immediate shutdown" \
            "$(log_has "$offset" "received immediate shutdown request")" "1"
        ctl -l "$log" -w -t 60 start >/dev/null
        ;;
    esac
    if ! after_recovery "$n" "$label" "$offset" "$t0"; then
        echo abort >"$work/e$n.stop"
        for c in "${pids[@]}"; do wait "$c"; done
        return
    fi
    # The clients go on until each has been answered for a second after the recovery.
    touch "$work/e$n.stop"
    rc=0
    for c in "${pids[@]}"; do wait "$c" || rc=1; done
    check "$label: the $clients clients ran to their end, reconnecting after the crash" \
        "$rc/$(cat "$work"/e"$n"-c*.err)" "0/"
    case $crash in
    backend) what="server process (PID ${victim%% *}) was terminated by signal 9" ;;
    worker) what="background worker \"holdcommit worker\" (PID ${victim%% *}) was terminated by signal 9" ;;
    sweeper) what="background worker \"holdcommit sweeper\" (PID ${victim%% *}) was terminated by signal 9" ;;
    esac
    if [ "$killed" = 1 ]; then
        check "$label: the log shows the process killed and every backend restarted" \
            "$(log_has "$offset" "$what")/$(log_has "$offset" "all server processes terminated; reinitializing")" "1/1"
    fi
    "$python" "$driver" verify --dir "$work" --epoch "$n" --label "$label" --mix "$mix"
    server_checks "$n" "$label" "$offset" "$killed"
}

scenario 1 "kill -9 of a client backend" backend
scenario 2 "kill -9 of a holdcommit worker" worker
scenario 3 "kill -9 of a holdcommit sweeper" sweeper
scenario 4 "immediate shutdown" immediate

# synchronous_commit = off, for the server and so for every client session:
# the lease and attempt calls are committed synchronously by their worker.
psql -X -q -d postgres -c "ALTER SYSTEM SET synchronous_commit = off" -c "SELECT pg_reload_conf()" >/dev/null
check "synchronous_commit is off for new sessions" "$(q "SHOW synchronous_commit")" "off"
scenario 5 "synchronous_commit = off, leases and attempts, immediate shutdown" immediate lease

# The WAL writer asleep for 10 s (and the sweeper and autovacuum off: nothing
# else writes or flushes WAL), then holds, a lease, an attempt and holds from
# one session, and kill -9 of its backend at once.
psql -X -q -d postgres -c "ALTER SYSTEM SET wal_writer_delay = '10s'" -c "ALTER SYSTEM SET autovacuum = off" \
    -c "ALTER SYSTEM SET holdcommit.sweep_interval = 0" -c "SELECT pg_reload_conf()" >/dev/null
sleep 1.5
offset=$(log_size)
q "INSERT INTO public.crash_mark VALUES (6)" >/dev/null
t0=$(now)
victim=$("$python" "$driver" tail --dir "$work" --epoch 6 2>&1)
read -r victim written inserted <<<"$victim"
echo "# synchronous_commit = off: the WAL was written up to $written, inserted up to $inserted, when pid $victim was killed"
check "synchronous_commit = off: the tail's calls were acknowledged, then its backend killed" \
    "$(grep -c '"t": "ok"' "$work/e6-ctail.jsonl" | awk '{ print ($1 >= 9) }')/$(log_has "$offset" "server process (PID $victim) was terminated by signal 9")" "1/1"
label="synchronous_commit = off, kill -9 right after the calls"
after_recovery 6 "$label" "$offset" "$t0"
psql -X -q -d postgres -c "ALTER SYSTEM RESET wal_writer_delay" -c "ALTER SYSTEM RESET autovacuum" \
    -c "ALTER SYSTEM SET holdcommit.sweep_interval = 1" -c "SELECT pg_reload_conf()" >/dev/null
"$python" "$driver" verify --dir "$work" --epoch 6 --label "$label" --expect-loss t6-after-
server_checks 6 "$label" "$offset" 1

echo "# $(cat "$work"/e*-c*.jsonl | grep -c '"t": "ok"') calls acknowledged, $(cat "$work"/e*-c*.jsonl | grep -c '"t": "lost"') not, in all (the verifier's included); $(($(date +%s) - t_start)) s"
exit 0
