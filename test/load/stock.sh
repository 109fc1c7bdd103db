#!/usr/bin/env bash
# Parallel load checks for counted stock, with pgbench.
#   (a) flash sale: stock 100, 2,000 hc_reserve(qty 1) calls from 50 clients:
#       exactly 100 succeed, 1,900 RS002; then all 100 finalized from 50
#       clients at once, each twice (the second a replay): stock 0, reserved 0
#   (b) opposite item order: 400 two-item orders, half [A,B], half [B,A], from
#       40 clients: all succeed, no deadlock (40P01)
#   (c) baseline: the plain-SQL conditional UPDATE of the seed article under
#       the same flash-sale load, for a calls/s ratio (informational)
#   (d) a hot product in 16 parts (hc_stock_spread), 300 units, 50 clients x
#       40 calls of a mix: reserves of 1-3 units, some with a ttl of 50-200 ms,
#       reserves rolled back in their transaction, unreserves of the client's
#       last reservation: only 00000 and RS002, hc_check() empty, then a
#       reserve of 1 at a time until RS002 finds exactly the units the load
#       left: no unit lost or counted twice in any part
#   (e) the flash sale of (a) on a product of 100 units in 16 parts (2,000
#       calls) and on one of 1 unit in 4 parts (200 calls): exactly 100 and 1
#       succeed, the rest RS002, no part left with a free unit
# Prints "ok - ..." / "not ok - ..." per assertion and "# ..." figures; exits 0.
# Needs PGHOST, PGPORT, PGUSER (a superuser) for a running server; creates and
# drops its own database.
. "$(dirname "$0")/lib.bash"
load_setup hc_load_stock 50

# Test helpers, not part of the extension: make a call, record the outcome
# (SQLSTATE 00000 on success) instead of aborting the pgbench client.
# start_epoch is a barrier: every client waits until that instant, so the
# calls really run at the same moment.  The baseline goes through the same
# kind of wrapper, so both sides pay the same bookkeeping.
q "
CREATE EXTENSION holdcommit;
CREATE TABLE load_results (
    phase           text NOT NULL,
    client          int NOT NULL,
    idempotency_key text,
    sqlstate        text NOT NULL,
    reservation_id  text,
    replayed        boolean,
    started_at      timestamptz NOT NULL,
    at              timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE FUNCTION load_wait(start_epoch double precision) RETURNS void LANGUAGE plpgsql AS \$\$
DECLARE
    wait double precision := start_epoch - extract(epoch FROM clock_timestamp());
BEGIN
    IF wait > 0 THEN
        PERFORM pg_sleep(wait);
    END IF;
END
\$\$;
-- One outcome of a call that started at t0; returns its SQLSTATE.
CREATE FUNCTION load_record(phase text, client int, key text, t0 timestamptz, state text,
                            reservation_id text DEFAULT NULL, replayed boolean DEFAULT NULL)
RETURNS text LANGUAGE sql AS \$\$
    INSERT INTO load_results (phase, client, idempotency_key, sqlstate, reservation_id, replayed, started_at)
    VALUES (phase, client, key, state, reservation_id, replayed, t0)
    RETURNING sqlstate
\$\$;
CREATE FUNCTION load_try_reserve(phase text, client int, product text, qty int, buyer text, key text,
                                 ttl interval DEFAULT '10 minutes', items jsonb DEFAULT NULL)
RETURNS text LANGUAGE plpgsql AS \$\$
DECLARE
    r hc_stock_reservation;
    t0 timestamptz := clock_timestamp();
BEGIN
    -- items: an order of several products (hc_reserve_items) instead of one.
    IF items IS NULL THEN
        r := hc_reserve(product, qty, buyer, key, ttl);
    ELSE
        r := hc_reserve_items(items, buyer, key, ttl);
    END IF;
    RETURN load_record(phase, client, key, t0, '00000', r.reservation_id, r.replayed);
EXCEPTION WHEN OTHERS THEN
    RETURN load_record(phase, client, key, t0, SQLSTATE);
END
\$\$;
CREATE FUNCTION load_try_finalize(phase text, client int, job int, start_epoch double precision DEFAULT 0)
RETURNS text LANGUAGE plpgsql AS \$\$
DECLARE
    r hc_stock_reservation;
    id text := (SELECT reservation_id FROM fin_jobs WHERE n = job);
    t0 timestamptz;
BEGIN
    PERFORM load_wait(start_epoch);
    t0 := clock_timestamp();
    BEGIN
        r := hc_finalize(id);
        INSERT INTO load_results (phase, client, sqlstate, reservation_id, replayed, started_at)
        VALUES (phase, client, '00000', r.reservation_id, r.replayed, t0);
        RETURN '00000';
    EXCEPTION WHEN OTHERS THEN
        INSERT INTO load_results (phase, client, sqlstate, reservation_id, started_at)
        VALUES (phase, client, SQLSTATE, id, t0);
        RETURN SQLSTATE;
    END;
END
\$\$;
CREATE TABLE fin_jobs (n int PRIMARY KEY, reservation_id text NOT NULL);

-- The baseline: the seed article's plain SQL on its own tables.
CREATE TABLE inventory (
    product_id text PRIMARY KEY,
    stock      integer NOT NULL,
    reserved   integer NOT NULL DEFAULT 0,
    CHECK (stock >= reserved AND reserved >= 0)
);
CREATE TABLE reservations (
    id         bigserial PRIMARY KEY,
    product_id text NOT NULL REFERENCES inventory,
    buyer_id   text NOT NULL,
    qty        integer NOT NULL,
    status     text NOT NULL DEFAULT 'RESERVED',
    expires_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE FUNCTION baseline_reserve(product text, buyer text) RETURNS bigint LANGUAGE plpgsql AS \$\$
DECLARE
    rid bigint;
BEGIN
    UPDATE inventory SET reserved = reserved + 1 WHERE product_id = product AND stock - reserved >= 1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'insufficient stock for product \"%\"', product USING ERRCODE = 'RS002';
    END IF;
    INSERT INTO reservations (product_id, buyer_id, qty, expires_at)
    VALUES (product, buyer, 1, clock_timestamp() + interval '10 minutes') RETURNING id INTO rid;
    RETURN rid;
END
\$\$;
CREATE FUNCTION load_try_baseline(phase text, client int, product text, buyer text, key text)
RETURNS text LANGUAGE plpgsql AS \$\$
DECLARE
    rid bigint;
    t0 timestamptz := clock_timestamp();
BEGIN
    rid := baseline_reserve(product, buyer);
    RETURN load_record(phase, client, key, t0, '00000', rid::text, false);
EXCEPTION WHEN OTHERS THEN
    RETURN load_record(phase, client, key, t0, SQLSTATE);
END
\$\$;
SELECT count(hc_stock_set('flash-1', 100));
SELECT count(hc_stock_set('item-A', 1000));
SELECT count(hc_stock_set('item-B', 1000));
INSERT INTO inventory (product_id, stock) VALUES ('flash-base', 100);
" >/dev/null || { echo "not ok - load database set up"; exit 0; }

# now_plus SECONDS: the epoch of a barrier SECONDS from now (server clock).
now_plus() { q "SELECT extract(epoch FROM clock_timestamp()) + $1"; }

# pgbench_tps LOG: the tps line of a pgbench run
pgbench_tps() { grep -E '^tps' "$1" | sed -E 's/^tps = ([0-9.]+).*/\1/' | head -1; }

# phase_ms PHASE: first call start to last call end on the server clock
phase_ms() {
    q "SELECT round(extract(epoch FROM max(at) - min(started_at)) * 1000)
         FROM load_results WHERE phase = '$1'"
}

# per_s N MS
per_s() { awk -v n="$1" -v ms="$2" 'BEGIN { if (ms > 0) printf "%.0f", n / (ms / 1000); else print "inf" }'; }

##############################################################################
# (a) flash sale: stock 100, 2,000 reserves of 1 from 50 clients
##############################################################################
# Each client keeps its own counter i (pgbench variables live per client).
cat >"$work/flash.sql" <<'SQL'
\set i :i + 1
SELECT load_try_reserve('flash', :client_id, 'flash-1', 1, 'buyer-' || :client_id, 'key-flash-' || :client_id || '-' || :i);
SQL
pgbench_phase flash "flash sale: pgbench ran 50 x 40 reserves" -c 50 -j 4 -t 40 -D i=0
check_outcomes flash "flash sale" reserves 2000 100 RS002 1900
check "flash sale: the 100 winners are new reservations with distinct ids" \
    "$(q "SELECT count(DISTINCT reservation_id) || '/' || count(*) FILTER (WHERE NOT replayed)
            FROM load_results WHERE phase = 'flash' AND sqlstate = '00000'")" "100/100"
check "flash sale: inventory stock 100, reserved 100" \
    "$(q "SELECT stock || '/' || reserved FROM hc_inventory WHERE product_id = 'flash-1'")" "100/100"
check "flash sale: 100 RESERVED reservations, the winners'" \
    "$(q "SELECT count(*) || '/' || count(w.reservation_id)
            FROM hc_stock_reservations r
            JOIN hc_stock_reservation_lines l ON l.reservation_id = r.id AND l.product_id = 'flash-1'
            LEFT JOIN load_results w ON w.reservation_id = r.id AND w.phase = 'flash'
           WHERE r.status = 'RESERVED'")" "100/100"
check "flash sale: sum of qty of RESERVED lines = reserved" \
    "$(q "SELECT (SELECT coalesce(sum(qty), 0) FROM hc_stock_reservation_lines
                   WHERE product_id = 'flash-1' AND status = 'RESERVED')
               = (SELECT reserved FROM hc_inventory WHERE product_id = 'flash-1')")" "t"
check "flash sale: 100 reserve rows in the ledger" \
    "$(q "SELECT count(*) || '/' || sum(reserved_delta) FROM hc_ledger
           WHERE entity_id = 'flash-1' AND event = 'reserve'")" "100/100"
check "flash sale: failed reserves stored no idempotency key" \
    "$(q "SELECT count(*) FROM hc_idempotency_keys WHERE key LIKE 'key-flash-%'")" "100"
check "flash sale: hc_check() is empty" "$(q "SELECT count(*) FROM hc_check()")" "0"
flash_ms=$(phase_ms flash)
flash_rate=$(per_s 2000 "$flash_ms")
echo "# flash sale: 2000 hc_reserve calls, 50 clients: ${flash_ms} ms (server clock, first start to last end)," \
     "${flash_rate} calls/s; pgbench tps $(pgbench_tps "$work/flash.log")"
echo "# flash sale: $(grep -E '^latency average' "$work/flash.log" | head -1)"

# Finalize all 100 from 50 clients at once, each reservation twice: job n and
# job n + 100 name the same reservation, and client c runs jobs 4c+1 .. 4c+4,
# so the two finalizes of a reservation run in clients c and c + 25 together.
q "INSERT INTO fin_jobs
   SELECT row_number() OVER (PARTITION BY d ORDER BY reservation_id) + d * 100, reservation_id
     FROM load_results, generate_series(0, 1) d
    WHERE phase = 'flash' AND sqlstate = '00000'" >/dev/null
check "finalize: 200 jobs for 100 reservations" \
    "$(q "SELECT count(*) || '/' || count(DISTINCT reservation_id) FROM fin_jobs")" "200/100"
cat >"$work/finalize.sql" <<'SQL'
\set i :i + 1
\set n :client_id * 4 + :i
SELECT load_try_finalize('finalize', :client_id, :n, :start);
SQL
start=$(now_plus 3)
pgbench_phase finalize "finalize: pgbench ran 50 x 4 finalizes" -c 50 -j 4 -t 4 -D i=0 -D start="$start"
check "finalize: all 200 calls succeeded" \
    "$(q "SELECT count(*) FILTER (WHERE sqlstate = '00000') || '/' || count(*)
            FROM load_results WHERE phase = 'finalize'")" "200/200"
check "finalize: 100 first finalizes, 100 replays" \
    "$(q "SELECT count(*) FILTER (WHERE NOT replayed) || '/' || count(*) FILTER (WHERE replayed)
            FROM load_results WHERE phase = 'finalize' AND sqlstate = '00000'")" "100/100"
check "finalize: each reservation finalized exactly once and replayed once" \
    "$(q "SELECT count(*) FROM (SELECT reservation_id FROM load_results
                                 WHERE phase = 'finalize' AND sqlstate = '00000'
                                 GROUP BY reservation_id
                                HAVING count(*) FILTER (WHERE NOT replayed) = 1
                                   AND count(*) FILTER (WHERE replayed) = 1) f")" "100"
check "finalize: inventory stock 0, reserved 0" \
    "$(q "SELECT stock || '/' || reserved FROM hc_inventory WHERE product_id = 'flash-1'")" "0/0"
check "finalize: all 100 reservations FINALIZED" \
    "$(q "SELECT count(*) FROM hc_stock_reservations r JOIN fin_jobs j ON j.reservation_id = r.id AND j.n <= 100
           WHERE r.status = 'FINALIZED'")" "100"
check "finalize: 100 finalize rows in the ledger, stock -100, reserved -100" \
    "$(q "SELECT count(*) || '/' || sum(stock_delta) || '/' || sum(reserved_delta) FROM hc_ledger
           WHERE entity_id = 'flash-1' AND event = 'finalize'")" "100/-100/-100"
check "finalize: hc_check() is empty" "$(q "SELECT count(*) FROM hc_check()")" "0"
fin_ms=$(phase_ms finalize)
echo "# finalize: 200 hc_finalize calls (100 + 100 replays), 50 clients: ${fin_ms} ms (server clock)," \
     "$(per_s 200 "$fin_ms") calls/s"

##############################################################################
# (b) 400 two-item orders in opposite item orders from 40 clients
##############################################################################
cat >"$work/items.sql" <<'SQL'
\set i :i + 1
\set n :client_id * 10 + :i
SELECT load_try_reserve('items', :client_id, NULL, NULL, 'buyer-items-' || :n, 'key-items-' || :n, items =>
       CASE WHEN :n % 2 = 0 THEN '[{"product_id": "item-A", "qty": 1}, {"product_id": "item-B", "qty": 1}]'
            ELSE '[{"product_id": "item-B", "qty": 1}, {"product_id": "item-A", "qty": 1}]' END::jsonb);
SQL
pgbench_phase items "opposite order: pgbench ran 40 x 10 orders" -c 40 -j 4 -t 10 -D i=0
check "opposite order: 400 outcomes recorded" \
    "$(q "SELECT count(*) FROM load_results WHERE phase = 'items'")" "400"
check "opposite order: zero deadlocks (40P01)" \
    "$(q "SELECT count(*) FROM load_results WHERE phase = 'items' AND sqlstate = '40P01'")" "0"
check "opposite order: all 400 orders succeeded" \
    "$(q "SELECT count(*) FROM load_results WHERE phase = 'items' AND sqlstate = '00000' AND NOT replayed")" "400"
check "opposite order: no other outcome" \
    "$(q "SELECT coalesce(string_agg(DISTINCT sqlstate, ','), '') FROM load_results
           WHERE phase = 'items' AND sqlstate <> '00000'")" ""
check "opposite order: reserved A 400, B 400" \
    "$(q "SELECT string_agg(product_id || '=' || reserved, ',' ORDER BY product_id) FROM hc_inventory
           WHERE product_id IN ('item-A', 'item-B')")" "item-A=400,item-B=400"
check "opposite order: 400 RESERVED reservations with 2 lines each" \
    "$(q "SELECT count(*) FROM (SELECT r.id FROM hc_stock_reservations r
                                  JOIN hc_stock_reservation_lines l ON l.reservation_id = r.id
                                 WHERE r.status = 'RESERVED' AND l.status = 'RESERVED'
                                   AND l.product_id IN ('item-A', 'item-B')
                                 GROUP BY r.id HAVING count(*) = 2) o")" "400"
check "opposite order: hc_check() is empty" "$(q "SELECT count(*) FROM hc_check()")" "0"
items_ms=$(phase_ms items)
echo "# opposite order: 400 hc_reserve_items orders (2 lines), 40 clients: ${items_ms} ms (server clock)," \
     "$(per_s 400 "$items_ms") orders/s; pgbench tps $(pgbench_tps "$work/items.log")"
echo "# opposite order: outcomes: $(q "SELECT string_agg(sqlstate || ' x' || n, ', ')
                                       FROM (SELECT sqlstate, count(*) n FROM load_results
                                              WHERE phase = 'items' GROUP BY 1 ORDER BY 1) s")"

##############################################################################
# (c) baseline: the plain-SQL conditional UPDATE under the same flash sale
##############################################################################
cat >"$work/baseline.sql" <<'SQL'
\set i :i + 1
SELECT load_try_baseline('baseline', :client_id, 'flash-base', 'buyer-' || :client_id, 'key-base-' || :client_id || '-' || :i);
SQL
pgbench_phase baseline "baseline: pgbench ran 50 x 40 reserves" -c 50 -j 4 -t 40 -D i=0
check "baseline: exactly 100 succeeded, 1900 refused" \
    "$(q "SELECT count(*) FILTER (WHERE sqlstate = '00000') || '/' || count(*) FILTER (WHERE sqlstate = 'RS002')
               || '/' || count(*)
            FROM load_results WHERE phase = 'baseline'")" "100/1900/2000"
check "baseline: inventory stock 100, reserved 100, 100 reservation rows" \
    "$(q "SELECT stock || '/' || reserved || '/' || (SELECT count(*) FROM reservations)
            FROM inventory WHERE product_id = 'flash-base'")" "100/100/100"
base_ms=$(phase_ms baseline)
base_rate=$(per_s 2000 "$base_ms")
echo "# baseline: 2000 plain-SQL reserves, 50 clients: ${base_ms} ms (server clock)," \
     "${base_rate} calls/s; pgbench tps $(pgbench_tps "$work/baseline.log")"
echo "# ratio holdcommit/baseline calls/s (flash sale): $(awk -v a="$flash_rate" -v b="$base_rate" \
     'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }')" \
     "(server clock; pgbench tps ratio $(awk -v a="$(pgbench_tps "$work/flash.log")" \
     -v b="$(pgbench_tps "$work/baseline.log")" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'))"

##############################################################################
# (d) a hot product in parts, under a mix of reserves, rollbacks, expiries
##############################################################################
q "SELECT count(hc_stock_set('flash-parts', 300)), count(hc_stock_spread('flash-parts', 16))" >/dev/null
q "
CREATE FUNCTION load_unreserve_last(client int) RETURNS text LANGUAGE plpgsql AS \$\$
DECLARE
    id text := (SELECT reservation_id FROM load_results r
                 WHERE r.phase = 'parts' AND r.client = load_unreserve_last.client AND r.sqlstate = '00000'
                 ORDER BY r.at DESC LIMIT 1);
    t0 timestamptz := clock_timestamp();
BEGIN
    IF id IS NOT NULL THEN
        PERFORM hc_unreserve(id);
    END IF;
    INSERT INTO load_results (phase, client, sqlstate, reservation_id, started_at)
    VALUES ('parts-unreserve', client, '00000', id, t0);
    RETURN '00000';
EXCEPTION WHEN OTHERS THEN
    INSERT INTO load_results (phase, client, sqlstate, reservation_id, started_at)
    VALUES ('parts-unreserve', client, SQLSTATE, id, t0);
    RETURN SQLSTATE;
END
\$\$;
" >/dev/null || echo "not ok - parts: helpers"
cat >"$work/parts.sql" <<'SQL'
\set i :i + 1
\set r random(1, 10)
\set q random(1, 3)
\set ttl random(50, 200)
\if :r <= 5
SELECT load_try_reserve('parts', :client_id, 'flash-parts', :q, 'buyer-' || :client_id, 'key-parts-' || :client_id || '-' || :i);
\elif :r <= 7
SELECT load_try_reserve('parts', :client_id, 'flash-parts', :q, 'buyer-' || :client_id, 'key-parts-' || :client_id || '-' || :i, (:ttl || ' milliseconds')::interval);
\elif :r <= 8
BEGIN;
SELECT load_try_reserve('parts-rolled-back', :client_id, 'flash-parts', :q, 'buyer-' || :client_id, 'key-parts-' || :client_id || '-' || :i);
ROLLBACK;
\else
SELECT load_unreserve_last(:client_id);
\endif
SQL
pgbench_phase parts "parts: pgbench ran 50 x 40 calls of the mix" -c 50 -j 4 -t 40 -D i=0
check "parts: only 00000 and RS002" \
    "$(q "SELECT coalesce(string_agg(DISTINCT sqlstate, ','), '') FROM load_results
           WHERE phase LIKE 'parts%' AND sqlstate NOT IN ('00000', 'RS002')")" ""
check "parts: hc_check() is empty after the load" "$(q "SELECT count(*) FROM hc_check()")" "0"
echo "# parts: outcomes: $(q "SELECT string_agg(phase || ' ' || sqlstate || ' x' || n, ', ')
                               FROM (SELECT phase, sqlstate, count(*) n FROM load_results
                                      WHERE phase LIKE 'parts%' GROUP BY 1, 2 ORDER BY 1, 2) s")"
# Every reservation of the load given back, then a drain: one unit at a time
# until refused must find exactly the product's 300 units, wherever the
# parts hold them, and leave every part sold out.
q "SELECT count(hc_unreserve(reservation_id)) FROM load_results WHERE phase = 'parts' AND sqlstate = '00000'" \
    >/dev/null
check "parts: every unit free again once the load's reservations are given back" \
    "$(q "SELECT stock || '/' || reserved FROM hc_inventory WHERE product_id = 'flash-parts'")" "300/0"
drained=$(q "
    DO \$\$
    DECLARE n int := 0;
    BEGIN
        LOOP
            BEGIN
                PERFORM hc_reserve('flash-parts', 1, 'drain', 'key-drain-' || n);
            EXCEPTION WHEN SQLSTATE 'RS002' THEN
                EXIT;
            END;
            n := n + 1;
        END LOOP;
        RAISE NOTICE 'drained %', n;
    END
    \$\$" 2>&1 | sed -n 's/.*drained //p')
check "parts: a reserve of 1 at a time until RS002 takes exactly 300" "${drained:-none}" "300"
check "parts: sold out to the unit: every part empty, reserved lines = stock = 300" \
    "$(q "SELECT (SELECT count(*) FROM hc_stock_parts WHERE product_id = 'flash-parts' AND stock > reserved)
               || '/' || (SELECT sum(qty) FROM hc_stock_reservation_lines
                           WHERE product_id = 'flash-parts' AND status = 'RESERVED')
               || '/' || (SELECT stock FROM hc_inventory WHERE product_id = 'flash-parts')")" "0/300/300"
check "parts: hc_check() is empty after the drain" "$(q "SELECT count(*) FROM hc_check()")" "0"

##############################################################################
# (e) the flash sale of (a) on products in parts: 100 units in 16 parts, and
#     1 unit in 4 parts, each sold exactly once however the calls meet
##############################################################################
# parts_sale PRODUCT STOCK PARTS CALLS_PER_CLIENT: 50 clients reserve 1 unit
# a call with a new key; exactly STOCK succeed, the rest RS002.
parts_sale() {
    local product=$1 stock=$2 parts=$3 per_client=$4 calls=$((50 * $4))
    q "SELECT count(hc_stock_set('$product', $stock)), count(hc_stock_spread('$product', $parts))" >/dev/null
    cat >"$work/$product.sql" <<SQL
\set i :i + 1
SELECT load_try_reserve('$product', :client_id, '$product', 1, 'buyer-' || :client_id, 'key-$product-' || :client_id || '-' || :i);
SQL
    pgbench_phase "$product" "$product: pgbench ran 50 x $per_client reserves" -c 50 -j 4 -t "$per_client" -D i=0
    check "$product (stock $stock in $parts parts): exactly $stock of $calls succeeded, the rest RS002" \
        "$(q "SELECT count(*) FILTER (WHERE sqlstate = '00000') || '/' || count(*) FILTER (WHERE sqlstate = 'RS002')
                     || '/' || count(*)
                FROM load_results WHERE phase = '$product'")" "$stock/$((calls - stock))/$calls"
    check "$product: reserved = stock = the RESERVED lines' qty, no part with a free unit" \
        "$(q "SELECT (SELECT stock || '/' || reserved FROM hc_inventory WHERE product_id = '$product')
                   || '/' || (SELECT sum(qty) FROM hc_stock_reservation_lines
                               WHERE product_id = '$product' AND status = 'RESERVED')
                   || '/' || (SELECT count(*) FROM hc_stock_parts
                               WHERE product_id = '$product' AND stock > reserved)")" "$stock/$stock/$stock/0"
    check "$product: hc_check() is empty" "$(q "SELECT count(*) FROM hc_check()")" "0"
}
parts_sale flash-16 100 16 40
parts_sale flash-one 1 4 4

exit 0
