#!/usr/bin/env bash
# Smoke test of make bench's instrument, so that it cannot rot: the driver
# builds without warnings, every scenario and variant of bench/scenarios.bash
# runs a few hundred calls with 2 clients, its result line parses, and every
# call ends with the outcome the variant must have (RS001 for refused holds,
# 00000 otherwise); the sold_out scenario sells a small product out exactly
# (and its check would see an oversold one); the sweep scenario sweeps a small
# backlog of its own while its live clients succeed, and times out when told
# to; every hold of hold_reclaim reclaims an expired one; the PL/pgSQL port
# keeps its idempotency promises.
# Prints "ok - ..." / "not ok - ..." per assertion; exits 0.
# Needs PGHOST, PGPORT, PGUSER (a superuser) for a running server; creates and
# drops its own database.
. "$(dirname "$0")/lib.bash"
load_setup hc_bench_smoke 10

export HC_BENCH_ASSETS=300 HC_BENCH_POOL=250 HC_BENCH_RECLAIM_ASSETS=300 HC_BENCH_SEATS_ROWS=2
bench_db=$db
bench_work=$work
. "$(dirname "$0")/../../bench/scenarios.bash"
calls=400
# check_line WHAT SED-SCRIPT WANT: check what sed -nE SED-SCRIPT prints of the result line $line.
check_line() { check "$1" "$(echo "$line" | sed -nE "$2")" "$3"; }

warnings=$(bench_build_driver "$bench_driver" 2>&1)
check "driver builds with -Wall -Wextra and no warning" "$? ${warnings:-none}" "0 none"
[ -x "$bench_driver" ] || exit 0
bench_install "$db"
check "holdcommit, the PL/pgSQL port and the seed tables install" "$?" "0"

# The timed part starts once every client is set up: a pool query of 2 s is
# no part of a run of 0.3 s (64 connections on a busy machine can take longer
# than a whole run to set up).  A run timed with its set-up would last 2.3 s
# or more; a busy machine may stretch the run itself, so it may take up to 2.
echo "- SELECT 1" >"$work/slow-steps"
line=$("$bench_driver" -d "dbname=$db" -c 2 -T 0.3 -C -P "SELECT 1 FROM pg_sleep(2) WHERE \$1::integer >= 0" \
    -l slow "$work/slow-steps")
check_line "driver: a slow set-up is not timed (calls made, the run under the set-up's 2 s)" \
    's/.* seconds=[01]\.[0-9]* calls=[1-9][0-9]* .*/yes/p' "yes"

# smoke_run SCENARIO VARIANT SYNC SECONDS CLIENTS [DRIVER-ARGS...]: one run
# (bench_run), its result line in $line, what it said on stderr as "#" lines.
smoke_run() {
    line=$(bench_run "$@" 2>"$work/stderr")
    if [ -s "$work/stderr" ]; then sed 's/^/#   /' "$work/stderr" | head -5; fi
}

# check_run SCENARIO VARIANT SECONDS CLIENTS WHAT SED-SCRIPT WANT: one run with
# synchronous_commit off (smoke_run), its result line checked (check_line).
check_run() {
    smoke_run "$1" "$2" off "$3" "$4"
    check_line "$5" "$6" "$7"
}

# run_smoke SCENARIO VARIANT SYNC [DRIVER-ARGS...]: one short run with CLIENTS
# clients (default 2), checked; EXPECT_CALLS: the calls it makes (default $calls)
run_smoke() {
    local scenario=$1 variant=$2 sync=$3 line want got
    shift 3
    smoke_run "$scenario" "$variant" "$sync" 10 "${CLIENTS:-2}" "$@"
    want="label=$scenario/$variant/$sync clients=N seconds=N calls=N calls_per_s=N p50_ms=N p99_ms=N max_ms=N"
    got=$(echo "$line" | sed -E 's/=[0-9]+(\.[0-9]+)?/=N/g' | cut -d' ' -f1-8)
    check "$scenario/$variant/$sync: the result line parses" "$got" "$want"
    got=$(echo "$line" | sed -nE 's/.* calls=([0-9]+) .*outcomes=([^ ]*) .*failed_clients=([0-9]+).*/\1 \2 \3/p')
    want="${EXPECT_CALLS:-$calls} $(bench_expected "$scenario" "$variant"):${EXPECT_CALLS:-$calls} 0"
    check "$scenario/$variant/$sync: every call ends with $(bench_expected "$scenario" "$variant")" "$got" "$want"
    RESULT=$line
}

for scenario in $(bench_scenarios); do
    # below: they run until their sweep ends, until their stock is sold out
    [ "$scenario" = sweep ] || [ "$scenario" = sold_out ] || [ "$scenario" = seats ] && continue
    for variant in $(bench_variants "$scenario"); do
        # The optimistic variant gives a call up (40001) after -r lost races;
        # two clients on a busy machine can lose 100 in a row, so here it
        # retries until it wins: this checks the instrument, not the scheme.
        run_smoke "$scenario" "$variant" off -n "$calls" $([ "$variant" = optimistic ] && echo "-r 1000000")
    done
done
run_smoke hold holdcommit on -n "$calls"
# hold_reclaim: every hold took its asset from an expired hold, which it ended.
run_smoke hold_reclaim holdcommit off -n "$calls"
check "hold_reclaim: each of the $calls holds reclaimed an expired one" \
    "$(echo "SELECT count(*) FILTER (WHERE status = 'EXPIRED' AND id LIKE 'old-%'),
                   count(*) FILTER (WHERE status = 'HELD' AND id LIKE 'old-%') = count(*) - 2 * $calls
              FROM hc_reservations" | bq)" "$calls|t"
check "synchronous_commit = on reaches the session" \
    "$(psql -X -qAt -d "dbname=$db options='-c synchronous_commit=on'" -c "SHOW synchronous_commit")" "on"

CLIENTS=1 EXPECT_CALLS=100 run_smoke memory holdcommit off -n 100 -m 25
mem=$(echo "$RESULT" | sed -nE 's/.* mem_start=([0-9]+) mem_warm=([0-9]+) mem_end=([0-9]+) mem_max=([0-9]+) .*/\1 \2 \3 \4/p')
check "memory: four samples of the backend's memory contexts" "$(echo "$mem" | wc -w)" "4"

# The sold_out scenario: a product of 300 units sold out by 4 clients, each
# stopping at its first RS002: exactly 300 calls succeed and 4 are RS002, and
# the tables agree (hc_check() empty for holdcommit).
bench_sold_out_stock=300
for variant in $(bench_variants sold_out); do
    check_run sold_out "$variant" 10 4 "sold_out/$variant/off: 300 units sold, each once, one RS002 per client, the tables agree" \
        's/^label=([^ ]*) .* outcomes=([^ ]*) .*failed_clients=([0-9]+) (stock=.*) timeout_s=[0-9.]+$/\1 \2 \3 \4/p' \
        "sold_out/$variant/off 00000:300,RS002:4 0 stock=300 reserved=300 reservations=300 ledger=300 check=0 sold_out=yes exact=yes"
    # An oversold product (one unit more reserved than sold) is not exact.
    if [ "$variant" = seed_plpgsql ]; then
        echo "UPDATE bench_seed.inventories SET reserved = reserved + 1" | bq
        check "sold_out: a product reserved beyond what was sold is not exact" \
            "$(bench_sold_out_state "$variant" "$line" | sed -E 's/.*(reserved=[0-9]+) .*(check=[0-9]+) .*(exact=[a-z]+)$/\1 \2 \3/')" \
            "reserved=301 check=3 exact=no"
    fi
done
# The seats scenario: a pool of 200 seats, 2 at a time, sold out by 4
# clients, each stopping at its first RS002: exactly 100 holds and 4 RS002,
# every seat held once.
for variant in $(bench_variants seats); do
    check_run seats "$variant" 10 4 "seats/$variant/off: 200 seats held 2 at a time, one RS002 per client" \
        's/^label=([^ ]*) .* outcomes=([^ ]*) .*failed_clients=([0-9]+).*/\1 \2 \3/p' \
        "seats/$variant/off 00000:100,RS002:4 0"
done
check "seats: every seat held once, by a hold of 2, hc_check() empty" \
    "$(echo "SELECT (SELECT count(*) FROM hc_assets WHERE status = 'HELD'),
                   (SELECT count(DISTINCT asset_id) FROM hc_reservations WHERE seats = 2),
                   (SELECT count(*) FROM hc_check())" | bq)" "200|200|0"
# With a timeout too short for the sale: reported as not sold out.
bench_sold_out_stock=100000 bench_sold_out_timeout=0.2
check_run sold_out holdcommit 10 2 "sold_out: a run past its timeout is reported as not sold out" \
    's/.* (sold_out=[a-z]+ exact=[a-z]+) timeout_s=0.2$/\1/p' "sold_out=no exact=no"
bench_sold_out_timeout=120

# The sweep scenario: a backlog of 500 expired holds swept by hand while 2
# live clients hold and release; then one that cannot finish in 10 ms.
bench_sweep_holds=500
for variant in $(bench_variants sweep); do
    check_run sweep "$variant" 1 2 "sweep/$variant/off: the backlog swept by hand, every live call 00000, with and without the sweep" \
        's/^label=([^ ]*) .* outcomes=([0-9]+):[0-9]+ .*failed_clients=([0-9]+) stmt_s=[0-9.]+ stmt_outcome=([0-9A-Z]+) stmt_result=([^ ]*) base_calls=[0-9]+ base_calls_per_s=[0-9.]+ base_p50_ms=[0-9.]+ base_p99_ms=[0-9.]+ base_max_ms=[0-9.]+ base_outcomes=([0-9]+):[0-9]+ holds=([0-9]+) .*/\1 \2 \3 \4 \5 \6 \7/p' \
        "sweep/$variant/off 00000 0 00000 500 00000 500"
done
check "sweep: the extension's tables are a new install's again afterwards" \
    "$(echo "SELECT count(*) FROM hc_assets UNION ALL SELECT count(*) FROM pg_class c
            WHERE c.relkind = 'r' AND c.relname LIKE 'hc\_%' AND c.reloptions IS NOT NULL" | bq | tr '\n' ' ')" "0 0 "
bench_sweep_holds=2000 bench_sweep_timeout=0.01
check_run sweep fresh 1 2 "sweep: a sweep past its statement_timeout is reported as one (57014)" \
    's/.* stmt_outcome=([0-9A-Z]+) stmt_result=([^ ]*) .*/\1 \2/p' "57014 none"
bench_sweep_timeout=60

# The PL/pgSQL port keeps the contract's idempotency promises.
check "plpgsql hold: the same key and arguments replay the stored row" "$(bq <<'SQL'
INSERT INTO bench_plpgsql.assets (id) VALUES ('idem-1');
SELECT a.reservation_id = b.reservation_id AND NOT a.replayed AND b.replayed
  FROM bench_plpgsql.hold('idem-1', 'b1', 'idem-key') a, bench_plpgsql.hold('idem-1', 'b1', 'idem-key') b;
SQL
)" "t"
check "plpgsql hold: the same key with other arguments is RS005" "$(bq <<'SQL' 2>&1
DO $$
BEGIN
    PERFORM bench_plpgsql.hold('idem-1', 'b2', 'idem-key');
EXCEPTION WHEN OTHERS THEN
    RAISE WARNING 'sqlstate %', SQLSTATE;
END
$$;
SQL
)" "WARNING:  sqlstate RS005"
exit 0
