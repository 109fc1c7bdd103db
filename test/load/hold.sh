#!/usr/bin/env bash
# Parallel load checks for unique-asset holds, with pgbench.
#   (a) flash sale: 100 clients hold ONE asset at the same instant: 1 wins, 99 RS001
#   (b) throughput: 1,000 holds of 1,000 distinct assets from 20 clients
#   (c) retry storm: 20 clients each send the same key 10 times for their own asset
#   (d) same key at the same moment: 50 clients send one request: 1 reservation, 49 replays
#   (e) reclaim race: 30 clients for 10 s on 5 assets with 1-20 ms holds, so
#       that a hold often takes over an expired hold made after its
#       statement began (the case 0.2.0's one-statement hold first got wrong)
# Prints "ok - ..." / "not ok - ..." per assertion and "# ..." figures; exits 0.
# Needs PGHOST, PGPORT, PGUSER (a superuser) for a running server; creates and
# drops its own database.
. "$(dirname "$0")/lib.bash"
load_setup hc_load_holds 100

# Test helpers, not part of the extension: try a hold, record the outcome
# (SQLSTATE 00000 on success) instead of aborting the pgbench client.
# start_epoch is a barrier: every client waits until that instant, so the
# calls really run at the same moment.
q "
CREATE EXTENSION holdcommit;
CREATE TABLE load_results (
    phase           text NOT NULL,
    client          int NOT NULL,
    asset_id        text NOT NULL,
    idempotency_key text NOT NULL,
    sqlstate        text NOT NULL,
    reservation_id  text,
    replayed        boolean,
    call_ms         double precision,
    at              timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE FUNCTION load_try_hold(phase text, client int, asset text, buyer text, key text,
                              start_epoch double precision DEFAULT 0,
                              ttl interval DEFAULT '10 minutes')
RETURNS text LANGUAGE plpgsql AS \$\$
DECLARE
    r hc_reservation;
    wait double precision := start_epoch - extract(epoch FROM clock_timestamp());
    t0 timestamptz;
BEGIN
    IF wait > 0 THEN
        PERFORM pg_sleep(wait);
    END IF;
    t0 := clock_timestamp();
    BEGIN
        r := hc_hold(asset, buyer, key, ttl);
        INSERT INTO load_results (phase, client, asset_id, idempotency_key, sqlstate, reservation_id, replayed, call_ms)
        VALUES (phase, client, asset, key, '00000', r.reservation_id, r.replayed,
                extract(epoch FROM clock_timestamp() - t0) * 1000);
        RETURN '00000';
    EXCEPTION WHEN OTHERS THEN
        INSERT INTO load_results (phase, client, asset_id, idempotency_key, sqlstate, call_ms)
        VALUES (phase, client, asset, key, SQLSTATE, extract(epoch FROM clock_timestamp() - t0) * 1000);
        RETURN SQLSTATE;
    END;
END
\$\$;
SELECT count(hc_asset_add('flash-1', 'the one asset everybody wants'));
SELECT count(hc_asset_add('bulk-' || i)) FROM generate_series(1, 1000) i;
SELECT count(hc_asset_add('storm-' || i)) FROM generate_series(0, 19) i;
SELECT count(hc_asset_add('samekey-1'));
" >/dev/null || { echo "not ok - load database set up"; exit 0; }

# now_plus SECONDS: the epoch of a barrier SECONDS from now (server clock).
now_plus() { q "SELECT extract(epoch FROM clock_timestamp()) + $1"; }

# ms_between T0 T1 (epoch seconds)
ms_between() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", (b - a) * 1000 }'; }

# pgbench_tps LOG: the tps line of a pgbench run
pgbench_tps() { grep -E '^tps' "$1" | sed -E 's/^tps = ([0-9.]+).*/\1/' | head -1; }

##############################################################################
# (a) flash sale: 100 clients, one asset, distinct buyers and keys
##############################################################################
cat >"$work/flash.sql" <<'SQL'
SELECT load_try_hold('flash', :client_id, 'flash-1', 'buyer-' || :client_id, 'key-flash-' || :client_id, :start);
SQL
start=$(now_plus 4)
pgbench_phase flash "flash sale: pgbench ran 100 clients" -c 100 -j 4 -t 1 -D start="$start"
check_outcomes flash "flash sale" hold 100 1 RS001 99
check "flash sale: one reservation for the asset, HELD by the winner" \
    "$(q "SELECT count(*) FILTER (WHERE r.status = 'HELD' AND r.id = w.reservation_id)
               || '/' || count(*)
            FROM hc_reservations r, load_results w
           WHERE r.asset_id = 'flash-1' AND w.phase = 'flash' AND w.sqlstate = '00000'")" "1/1"
check "flash sale: the asset is HELD by the winning reservation" \
    "$(q "SELECT a.status FROM hc_assets a JOIN load_results w
             ON w.reservation_id = a.current_reservation_id
          WHERE a.id = 'flash-1' AND w.phase = 'flash'")" "HELD"
check "flash sale: one hold in the ledger" \
    "$(q "SELECT count(*) FROM hc_ledger WHERE entity_id = 'flash-1' AND event = 'hold'")" "1"
check "flash sale: failed holds stored no idempotency key" \
    "$(q "SELECT count(*) FROM hc_idempotency_keys WHERE key LIKE 'key-flash-%'")" "1"
check "flash sale: hc_check() is empty" "$(q "SELECT count(*) FROM hc_check()")" "0"
spread=$(q "SELECT round(extract(epoch FROM max(at) - min(at)) * 1000) FROM load_results WHERE phase = 'flash'")
echo "# flash sale: 100 calls finished within ${spread} ms of each other (barrier start)"
echo "# flash sale: hc_hold call time (ms) by outcome, after the barrier:" \
     "$(q "SELECT string_agg(format('%s: n=%s avg %s max %s', sqlstate, n, avg_ms, max_ms), '; ')
             FROM (SELECT sqlstate, count(*) n, round(avg(call_ms)::numeric, 2) avg_ms,
                          round(max(call_ms)::numeric, 2) max_ms
                     FROM load_results WHERE phase = 'flash' GROUP BY 1 ORDER BY 1) s")"

##############################################################################
# (b) throughput: 1,000 holds on 1,000 distinct assets from 20 clients
##############################################################################
# Each client keeps its own counter i (pgbench variables live per client):
# client c holds bulk-(c*50+1) .. bulk-(c*50+50).
cat >"$work/bulk.sql" <<'SQL'
\set i :i + 1
\set n :client_id * 50 + :i
SELECT reservation_id FROM hc_hold('bulk-' || :n, 'buyer-bulk-' || :n, 'key-bulk-' || :n);
SQL
t0=$(date +%s.%N)
pgbench_phase bulk "throughput: pgbench ran 20 x 50 holds" -c 20 -j 4 -t 50 -D i=0
t1=$(date +%s.%N)
check "throughput: 1000 HELD reservations on 1000 distinct assets" \
    "$(q "SELECT count(*) || '/' || count(DISTINCT asset_id) FROM hc_reservations
           WHERE asset_id LIKE 'bulk-%' AND status = 'HELD'")" "1000/1000"
check "throughput: all 1000 assets are HELD" \
    "$(q "SELECT count(*) FROM hc_assets WHERE id LIKE 'bulk-%' AND status = 'HELD'")" "1000"
check "throughput: each asset is held by its own buyer" \
    "$(q "SELECT count(*) FROM hc_reservations
           WHERE asset_id LIKE 'bulk-%' AND buyer_id = 'buyer-' || asset_id")" "1000"
check "throughput: 1000 holds in the ledger" \
    "$(q "SELECT count(*) FROM hc_ledger WHERE entity_id LIKE 'bulk-%' AND event = 'hold'")" "1000"
check "throughput: hc_check() is empty" "$(q "SELECT count(*) FROM hc_check()")" "0"
wall_ms=$(ms_between "$t0" "$t1")
server_ms=$(q "SELECT round(extract(epoch FROM max(created_at) - min(created_at)) * 1000)
                 FROM hc_reservations WHERE asset_id LIKE 'bulk-%'")
echo "# throughput: 1000 hc_hold calls, 20 clients: ${wall_ms} ms wall (incl. 20 connections)," \
     "$(awk -v ms="$wall_ms" 'BEGIN { printf "%.0f", 1000 / (ms / 1000) }') calls/s"
echo "# throughput: first to last hold on the server clock: ${server_ms} ms"
echo "# throughput: pgbench tps $(pgbench_tps "$work/bulk.log") (without connection time)," \
     "$(grep -E '^latency average' "$work/bulk.log" | head -1)"

##############################################################################
# (c) retry storm: 20 clients, each its own asset, the same key 10 times
##############################################################################
cat >"$work/storm.sql" <<'SQL'
SELECT load_try_hold('storm', :client_id, 'storm-' || :client_id, 'buyer-storm-' || :client_id, 'key-storm-' || :client_id);
SQL
t0=$(date +%s.%N)
pgbench_phase storm "retry storm: pgbench ran 20 x 10 calls" -c 20 -j 4 -t 10
t1=$(date +%s.%N)
check "retry storm: all 200 calls succeeded" \
    "$(q "SELECT count(*) FILTER (WHERE sqlstate = '00000') || '/' || count(*)
            FROM load_results WHERE phase = 'storm'")" "200/200"
check "retry storm: exactly 20 reservations" \
    "$(q "SELECT count(*) FROM hc_reservations WHERE asset_id LIKE 'storm-%'")" "20"
check "retry storm: 20 first calls, 180 replays" \
    "$(q "SELECT count(*) FILTER (WHERE NOT replayed) || '/' || count(*) FILTER (WHERE replayed)
            FROM load_results WHERE phase = 'storm'")" "20/180"
check "retry storm: each client got one reservation id for all 10 calls" \
    "$(q "SELECT count(*) FROM (SELECT client FROM load_results WHERE phase = 'storm'
                                 GROUP BY client HAVING count(DISTINCT reservation_id) = 1
                                                    AND count(*) = 10) c")" "20"
check "retry storm: the replayed id is the stored reservation" \
    "$(q "SELECT count(*) FROM load_results l JOIN hc_reservations r
             ON r.id = l.reservation_id AND r.asset_id = l.asset_id AND r.status = 'HELD'
          WHERE l.phase = 'storm'")" "200"
check "retry storm: 20 holds in the ledger" \
    "$(q "SELECT count(*) FROM hc_ledger WHERE entity_id LIKE 'storm-%' AND event = 'hold'")" "20"
check "retry storm: hc_check() is empty" "$(q "SELECT count(*) FROM hc_check()")" "0"
echo "# retry storm: 200 calls in $(ms_between "$t0" "$t1") ms wall, pgbench tps $(pgbench_tps "$work/storm.log")"

##############################################################################
# (d) the same key at the same moment from 50 clients: one reservation
##############################################################################
cat >"$work/samekey.sql" <<'SQL'
SELECT load_try_hold('samekey', :client_id, 'samekey-1', 'buyer-samekey', 'key-samekey', :start);
SQL
start=$(now_plus 3)
pgbench_phase samekey "same key at once: pgbench ran 50 clients" -c 50 -j 4 -t 1 -D start="$start"
check "same key at once: all 50 calls succeeded" \
    "$(q "SELECT count(*) FILTER (WHERE sqlstate = '00000') || '/' || count(*)
            FROM load_results WHERE phase = 'samekey'")" "50/50"
check "same key at once: exactly one reservation" \
    "$(q "SELECT count(*) FROM hc_reservations WHERE asset_id = 'samekey-1'")" "1"
check "same key at once: 1 first call, 49 replays of the same id" \
    "$(q "SELECT count(*) FILTER (WHERE NOT replayed) || '/' || count(*) FILTER (WHERE replayed)
               || '/' || count(DISTINCT reservation_id)
            FROM load_results WHERE phase = 'samekey'")" "1/49/1"
check "same key at once: hc_check() is empty" "$(q "SELECT count(*) FROM hc_check()")" "0"
other=$(q "SELECT coalesce(string_agg(sqlstate || ' x' || n, ', '), 'none')
             FROM (SELECT sqlstate, count(*) n FROM load_results
                    WHERE phase = 'samekey' AND sqlstate <> '00000' GROUP BY 1) s")
echo "# same key at once: errors: $other; call time (ms):" \
     "$(q "SELECT format('first avg %s, replays avg %s max %s',
                         round(avg(call_ms) FILTER (WHERE NOT replayed)::numeric, 2),
                         round(avg(call_ms) FILTER (WHERE replayed)::numeric, 2),
                         round(max(call_ms) FILTER (WHERE replayed)::numeric, 2))
             FROM load_results WHERE phase = 'samekey' AND sqlstate = '00000'")"

##############################################################################
# (e) reclaim race: expired holds taken over while they are being made
##############################################################################
q "SELECT count(hc_asset_add('race-' || i)) FROM generate_series(1, 5) i" >/dev/null
cat >"$work/race.sql" <<'SQL'
\set n random(1, 5)
\set ttl random(1, 20)
SELECT load_try_hold('race', :client_id, 'race-' || :n, 'buyer-' || :client_id,
                     'race-' || :client_id || '-' || random(), 0, (:ttl || ' ms')::interval);
SQL
pgbench_phase race "reclaim race: pgbench ran 30 clients for 10 s" -c 30 -j 2 -T 10
check "reclaim race: only successes and RS001" \
    "$(q "SELECT coalesce(string_agg(DISTINCT sqlstate, ','), 'none') FROM load_results
           WHERE phase = 'race' AND sqlstate NOT IN ('00000', 'RS001')")" "none"
check "reclaim race: some holds took over an expired hold" \
    "$(q "SELECT count(*) > 100 FROM hc_ledger WHERE event = 'reclaim' AND entity_id LIKE 'race-%'")" "t"
check "reclaim race: hc_check() is empty" "$(q "SELECT count(*) FROM hc_check()")" "0"

exit 0
