# Shared by the load checks in test/load/*.sh (sourced, not run by itself).
# Needs PGHOST, PGPORT, PGUSER (a superuser) for a running server.
#   load_setup DB CLIENTS  check that CLIENTS connections fit, (re)create DB,
#                          drop it again on exit; exits 0 after "not ok" if not
#   q SQL                  run SQL in DB, print rows unaligned
#   check WHAT GOT WANT    print "ok - WHAT" or "not ok - WHAT" with both values
#   check_outcomes ...     the outcomes of a flash sale in load_results (below)
set -uo pipefail

# pgbench of the server's major (PG_CONFIG, as test/harness/server.sh).
bin=$(realpath -ms "${HC_PGROOT:-}$("${PG_CONFIG:-pg_config}" --bindir)")
pgbench=$bin/pgbench
[ -x "$pgbench" ] || pgbench=$(command -v pgbench)
work=$(mktemp -d)

load_cleanup() {
    psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1
    rm -rf "$work"
}

load_setup() {
    local max_conn reserved
    db=$1
    trap load_cleanup EXIT
    max_conn=$(psql -X -qAt -d postgres -c "SHOW max_connections") || {
        echo "not ok - server reachable"; exit 0; }
    reserved=$(psql -X -qAt -d postgres -c "SHOW superuser_reserved_connections")
    echo "# max_connections $max_conn (superuser_reserved_connections $reserved)"
    if [ "$max_conn" -lt $(($2 + 10)) ]; then
        echo "not ok - max_connections ($max_conn) leaves room for $2 clients"
        exit 0
    fi
    psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1
    if ! psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE DATABASE $db" >/dev/null; then
        echo "not ok - create database $db"
        exit 0
    fi
}

# SQL that takes the extension's tables out of autovacuum's reach: an ANALYZE
# during a run would make the plan cache analyse holdcommit's statements again.
no_autovacuum_sql="DO \$\$
DECLARE t regclass;
BEGIN
    FOR t IN SELECT c.oid::regclass FROM pg_depend d JOIN pg_class c ON c.oid = d.objid
              WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'holdcommit')
                AND d.classid = 'pg_class'::regclass AND c.relkind = 'r' LOOP
        EXECUTE format('ALTER TABLE %s SET (autovacuum_enabled = off)', t);
    END LOOP;
END \$\$;"

q() { psql -X -qAt -v ON_ERROR_STOP=1 -d "$db" -c "$1"; }

. "$(dirname "${BASH_SOURCE[0]}")/../harness/tap.bash"

# pgbench_phase NAME WHAT PGBENCH-ARGS...: run $work/NAME.sql with pgbench in
# DB (log in $work/NAME.log) and check that no client aborted.
pgbench_phase() {
    local name=$1 what=$2 rc
    shift 2
    "$pgbench" -n -f "$work/$name.sql" "$@" "$db" >"$work/$name.log" 2>&1
    rc=$?
    check "$what without aborts" "$rc" "0"
    [ $rc -ne 0 ] && { grep -E 'error|ERROR' "$work/$name.log" | sort | uniq -c | head -5
                       tail -3 "$work/$name.log"; } | sed 's/^/#   /'
    return 0
}

# check_outcomes PHASE LABEL CALLS TOTAL WON REFUSAL REFUSED: the phase of a flash sale
# recorded TOTAL outcomes in load_results: WON CALLS succeeded, REFUSED got the SQLSTATE
# REFUSAL, and nothing else happened.
check_outcomes() {
    local phase=$1 label=$2 calls=$3 total=$4 won=$5 refusal=$6 refused=$7
    check "$label: $total outcomes recorded" \
        "$(q "SELECT count(*) FROM load_results WHERE phase = '$phase'")" "$total"
    check "$label: exactly $won $calls succeeded" \
        "$(q "SELECT count(*) FROM load_results WHERE phase = '$phase' AND sqlstate = '00000'")" "$won"
    check "$label: exactly $refused got $refusal" \
        "$(q "SELECT count(*) FROM load_results WHERE phase = '$phase' AND sqlstate = '$refusal'")" "$refused"
    check "$label: no other outcome" \
        "$(q "SELECT coalesce(string_agg(DISTINCT sqlstate, ','), '') FROM load_results
               WHERE phase = '$phase' AND sqlstate NOT IN ('00000', '$refusal')")" ""
}

# sweeper_on DATABASES INTERVAL: turn the background sweeper on for those
# databases only (the test server starts with it off), and off again when
# the script exits.  sweeper_off: turn it off now.
sweeper_off() {
    psql -X -q -d postgres -c "ALTER SYSTEM RESET holdcommit.sweep_interval" \
        -c "ALTER SYSTEM RESET holdcommit.databases" \
        -c "ALTER SYSTEM RESET holdcommit.sweep_batch" -c "SELECT pg_reload_conf()" >/dev/null
}

sweeper_on() {
    trap 'sweeper_off; load_cleanup' EXIT
    psql -X -q -v ON_ERROR_STOP=1 -d postgres \
        -c "ALTER SYSTEM SET holdcommit.databases = '$1'" \
        -c "ALTER SYSTEM SET holdcommit.sweep_interval = $2" -c "SELECT pg_reload_conf()" >/dev/null
}

# sample_sweepers SECONDS [CONDITION]: watch pg_stat_activity every 5 ms for
# SECONDS (the sweeper's runs last milliseconds); print "seen" or "unseen"
# (whether a sweeper process matching CONDITION ran) and the most that ran
# at once.
sample_sweepers() {
    psql -X -qAt -d postgres -c "DO \$\$
        DECLARE
            until timestamptz := clock_timestamp() + interval '$1 seconds';
            n int; most int := 0; seen bool; seen_any bool := false;
        BEGIN
            WHILE clock_timestamp() < until LOOP
                PERFORM pg_stat_clear_snapshot();
                SELECT count(*), coalesce(bool_or(${2:-true}), false) INTO n, seen
                  FROM pg_stat_activity WHERE backend_type = 'holdcommit sweeper';
                most := greatest(most, n);
                seen_any := seen_any OR seen;
                PERFORM pg_sleep(0.005);
            END LOOP;
            RAISE NOTICE '% %', CASE WHEN seen_any THEN 'seen' ELSE 'unseen' END, most;
        END \$\$" 2>&1 | sed -n 's/^NOTICE: *//p'
}

# wait_for SECONDS SQL WANT: poll SQL in DB every 0.1 s until it returns
# WANT or SECONDS pass; print the seconds waited, or "timeout".
wait_for() {
    local until now
    until=$(awk -v s="$1" -v t="$(date +%s.%N)" 'BEGIN { printf "%.3f", t + s }')
    local t0
    t0=$(date +%s.%N)
    while :; do
        if [ "$(q "$2" 2>/dev/null)" == "$3" ]; then
            awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f\n", b - a }'
            return 0
        fi
        now=$(date +%s.%N)
        if awk -v n="$now" -v u="$until" 'BEGIN { exit !(n > u) }'; then
            echo timeout
            return 1
        fi
        sleep 0.1
    done
}
