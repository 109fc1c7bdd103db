#!/usr/bin/env bash
# The workers that spread and gather products are shared by every database
# (holdcommit.max_spreaders, 2 by default): no database takes all of them.
#   (a) database A has three hot products at once, each spread kept waiting
#       by a transaction that holds its part 0: A runs one spreader at a
#       time (its share, max_spreaders - 1), never two
#   (b) meanwhile database B's hot product is spread
#   (c) A's spreader terminated: its seat comes back, and A's next hot
#       product is spread
#   (d) a gatherer per database at most: A's gather kept waiting, another
#       sweep of A starts none, B's sweep starts B's
#   (e) DROP DATABASE B ends B's spreaders at once, however long they would
#       wait
# Each product is hot with holdcommit.stock_spread_callers = 2: a reserve
# that finds another in flight starts the spread.  The spreads and gathers
# wait for part 0 up to 3 s (a gather 1 s) plus holdcommit.stock_spread_stall
# (20 s here), so they last as long as the test's transactions hold it.
# Prints "ok - ..." / "not ok - ..." per assertion; exits 0.
# Needs PGHOST, PGPORT, PGUSER (a superuser) for a running server with holdcommit
# preloaded; creates and drops its own two databases.
. "$(dirname "$0")/lib.bash"
load_setup hc_load_spreaders 16
dba=$db
dbb=${db}_b
trap 'psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $dbb WITH (FORCE)" >/dev/null 2>&1; load_cleanup' EXIT
psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $dbb WITH (FORCE)" -c "CREATE DATABASE $dbb" >/dev/null

check "holdcommit.max_spreaders is 2" "$(q "SHOW holdcommit.max_spreaders")" "2"
for d in "$dba" "$dbb"; do
    psql -X -qAt -v ON_ERROR_STOP=1 -d "$d" >/dev/null <<SQL
CREATE EXTENSION holdcommit;
ALTER DATABASE $d SET holdcommit.stock_spread_callers = 2;
ALTER DATABASE $d SET holdcommit.stock_spread_stall = 20000;
SELECT hc_stock_set(p, 100) FROM unnest(ARRAY['P1', 'P2', 'P3', 'G']) p;
SQL
done
qa() { psql -X -qAt -v ON_ERROR_STOP=1 -d "$dba" -c "$1"; }
qb() { psql -X -qAt -v ON_ERROR_STOP=1 -d "$dbb" -c "$1"; }
spreaders="SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'holdcommit spreader'"

# hot DB PRODUCT: a transaction holds PRODUCT's part 0 (application_name
# blocker) until terminated; a second reserve of it, in flight with it,
# starts its spread and queues behind it (application_name trigger).
hot() {
    psql -X -qAt -d "$1" -c "SET application_name = blocker" \
        -c "BEGIN" -c "SELECT hc_reserve('$2', 1, 'b', 'block-$2-$RANDOM$RANDOM')" \
        -c "SELECT pg_sleep(120)" -c "COMMIT" >/dev/null 2>&1 &
    wait_for 10 "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'blocker'
                  AND datname = '$1' AND wait_event = 'PgSleep'
                  AND query LIKE '%pg_sleep%' AND backend_xid IS NOT NULL
                  AND pid NOT IN (SELECT pid FROM blockers)" "1" >/dev/null
    q "INSERT INTO blockers SELECT pid FROM pg_stat_activity WHERE application_name = 'blocker'
       AND datname = '$1' AND pid NOT IN (SELECT pid FROM blockers)" >/dev/null
    psql -X -qAt -d "$1" -c "SET application_name = trigger" \
        -c "SELECT hc_reserve('$2', 1, 'b', 'trigger-$2-$RANDOM$RANDOM')" >/dev/null 2>&1 &
}
q "CREATE TABLE blockers (pid int)" >/dev/null
# spreading DB PRODUCT: whether a spread of it runs now (the watch's flag).
spreading() {
    psql -X -qAt -d "$1" -c "SELECT coalesce(bool_or(spreading), false) FROM hc_stock_waits() WHERE product_id = '$2'"
}
# The most spreaders at once, in A and over the server, every 10 ms until stopped.
psql -X -qAt -d postgres -c "SET application_name = sampler" -c "DO \$\$
    DECLARE a int; n int; most_a int := 0; most int := 0;
    BEGIN
        LOOP
            PERFORM pg_stat_clear_snapshot();
            SELECT count(*) FILTER (WHERE datname = '$dba'), count(*) INTO a, n
              FROM pg_stat_activity WHERE backend_type = 'holdcommit spreader';
            most_a := greatest(most_a, a);
            most := greatest(most, n);
            RAISE NOTICE '% %', most_a, most;
            PERFORM pg_sleep(0.01);
        END LOOP;
    END \$\$" 2>"$work/sampler" >/dev/null &

# (a) Three hot products in A.
for p in P1 P2 P3; do hot "$dba" "$p"; done
# P2's and P3's reserves queue on their part 0 once their spread was refused a seat.
wait_for 20 "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'trigger'
              AND datname = '$dba' AND wait_event_type = 'Lock'" 2 >/dev/null
# P1's spreader has its seat since its reserve decided; its process may take a while to start.
check "(a) A runs one spreader while its three products are hot" \
    "$(wait_for 20 "$spreaders AND datname = '$dba'" 1 >/dev/null; q "$spreaders AND datname = '$dba'")" "1"
check "(a) ... P1's, the first" "$(spreading "$dba" P1)/$(spreading "$dba" P2)/$(spreading "$dba" P3)" "t/f/f"

# (b) B's hot product is spread meanwhile.
hot "$dbb" P1
check "(b) B's product is spread while A's wait" \
    "$(wait_for 10 "$spreaders AND datname = '$dbb'" 1 >/dev/null; spreading "$dbb" P1)" "t"
check "(b) two spreaders run, one per database" \
    "$(q "SELECT string_agg(datname, ',' ORDER BY datname) FROM pg_stat_activity WHERE backend_type = 'holdcommit spreader'")" \
    "$dba,$dbb"

# (c) A's spreader terminated: its seat is free again, A's next product is spread.
q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
    WHERE backend_type = 'holdcommit spreader' AND datname = '$dba'" >/dev/null
wait_for 10 "$spreaders AND datname = '$dba'" 0 >/dev/null
check "(c) the terminated spread of P1 is over" "$(spreading "$dba" P1)" "f"
# A product's spread is tried again a second after the last try at the soonest.
wait_for 10 "SELECT now() - query_start > interval '1.1 s' FROM pg_stat_activity
              WHERE application_name = 'trigger' AND query LIKE '%P2%'" t >/dev/null
psql -X -qAt -d "$dba" -c "SELECT hc_reserve('P2', 1, 'b', 'again-$RANDOM')" >/dev/null 2>&1 &
check "(c) a seat is free again: P2 is spread" \
    "$(wait_for 10 "$spreaders AND datname = '$dba'" 1 >/dev/null; spreading "$dba" P2)" "t"

# Every blocker ends: the spreads that waited go on, nothing else is started.
q "SELECT pg_terminate_backend(pid) FROM blockers" >/dev/null
wait_for 30 "$spreaders" 0 >/dev/null
check "(a-c) the spreads that had seats spread their products" \
    "$(qa "SELECT string_agg(product_id, ',' ORDER BY product_id) FROM hc_stock_spreads WHERE spreads > 0")/$(
       qb "SELECT string_agg(product_id, ',' ORDER BY product_id) FROM hc_stock_spreads WHERE spreads > 0")" "P2/P1"
q "TRUNCATE blockers" >/dev/null

# (d) One gatherer per database: each waits on G's part 0; a second sweep of
# A starts none while A's waits; B's sweep starts B's.
gparts="SELECT count(*) FROM hc_stock_parts WHERE product_id = 'G'"
for d in "$dba" "$dbb"; do
    psql -X -qAt -v ON_ERROR_STOP=1 -d "$d" >/dev/null <<'SQL'
SELECT hc_stock_auto_spread('G', 2);
UPDATE hc_stock_spreads SET changed_at = '-infinity' WHERE product_id = 'G';
SQL
    psql -X -qAt -d "$d" -c "SET application_name = blocker" -c "BEGIN" \
        -c "SELECT 1 FROM hc_stock_parts WHERE product_id = 'G' AND part = 0 FOR UPDATE" \
        -c "SELECT pg_sleep(120)" -c "COMMIT" >/dev/null 2>&1 &
done
wait_for 10 "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'blocker' AND wait_event = 'PgSleep'" 2 >/dev/null
q "INSERT INTO blockers SELECT pid FROM pg_stat_activity WHERE application_name = 'blocker'" >/dev/null
qa "SELECT count(*) FROM hc_sweep()" >/dev/null
wait_for 10 "$spreaders AND datname = '$dba' AND wait_event_type = 'Lock'" 1 >/dev/null
qa "SELECT count(*) FROM hc_sweep()" >/dev/null
qb "SELECT count(*) FROM hc_sweep()" >/dev/null
wait_for 10 "$spreaders AND datname = '$dbb' AND wait_event_type = 'Lock'" 1 >/dev/null
check "(d) A's gather waits on G, a second sweep of A started no other; B's runs" \
    "$(q "SELECT count(*) FILTER (WHERE datname = '$dba') || '/' || count(*) FILTER (WHERE datname = '$dbb')
           FROM pg_stat_activity WHERE backend_type = 'holdcommit spreader'")" "1/1"
q "SELECT pg_terminate_backend(pid) FROM blockers" >/dev/null
check "(d) once G's part 0 is free, each database's gather gathers it" \
    "$(wait_for 30 "$spreaders" 0 >/dev/null; qa "$gparts")/$(qb "$gparts")" "1/1"

q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'sampler'" >/dev/null
wait
most=$(sed -n 's/^NOTICE: *//p' "$work/sampler" | tail -1)
echo "# the most spreaders at once: $most (in A, over the server)"
check "A never ran more than its share, the server never more than holdcommit.max_spreaders" \
    "$(awk '{ print ($1 <= 1 && $2 <= 2) ? "within" : "beyond: " $0 }' <<<"$most")" "within"
for d in "$dba" "$dbb"; do
    check "hc_check() is empty in $d" "$(psql -X -qAt -d "$d" -c "SELECT count(*) FROM hc_check()")" "0"
done

# (e) DROP DATABASE stops the database's spreaders: B's gather waits on G's
# part 0 (for up to 21 s); the DROP, which waits 5 s for B's sessions to go,
# ends it at once; then the session holding G goes, and the DROP succeeds.
qb "SELECT hc_stock_auto_spread('G', 2); UPDATE hc_stock_spreads SET changed_at = '-infinity' WHERE product_id = 'G'" >/dev/null
psql -X -qAt -d "$dbb" -c "SET application_name = blocker" -c "BEGIN" \
    -c "SELECT 1 FROM hc_stock_parts WHERE product_id = 'G' AND part = 0 FOR UPDATE" \
    -c "SELECT pg_sleep(120)" -c "COMMIT" >/dev/null 2>&1 &
wait_for 10 "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'blocker' AND wait_event = 'PgSleep'" 1 >/dev/null
qb "SELECT count(*) FROM hc_sweep()" >/dev/null
wait_for 10 "$spreaders AND datname = '$dbb' AND wait_event_type = 'Lock'" 1 >/dev/null
psql -X -q -d postgres -c "DROP DATABASE $dbb" >"$work/drop" 2>&1 &
dropping=$!
waited=$(wait_for 3 "$spreaders AND datname = '$dbb'" 0)
check "(e) DROP DATABASE ends B's gather at once (in $waited s), though it waits for G's part 0" \
    "$waited" "${waited#timeout}"
q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'blocker'" >/dev/null
wait $dropping
check "(e) ... and succeeds once B's last session is gone" \
    "$(cat "$work/drop")$(q "SELECT count(*) FROM pg_database WHERE datname = '$dbb'")" "0"

psql -X -q -d postgres -c "SELECT 1" >/dev/null
check "the session is usable" "$(q "SELECT 1")" "1"
exit 0
