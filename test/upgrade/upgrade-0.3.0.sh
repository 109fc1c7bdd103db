#!/usr/bin/env bash
# Updating from 0.3.0, the last release, gives what installing the current
# version gives, and keeps the data, keys, ledger and grants.
#   hc_up3_old: CREATE EXTENSION holdcommit VERSION '0.3.0', data in every
#               state made by 0.3.0's own calls (this library serves 0.3.0's
#               holds, leases and attempts), its stock as 0.3.0's calls
#               stored it (this library refuses 0.3.0's stock calls until the
#               update): orders of one product and of several, a product in
#               parts, an order a reclaimer left RESERVED; leases, attempts
#               with and without a request key; an application, an operator
#               and a monitoring role; then ALTER EXTENSION holdcommit UPDATE,
#               which converts the stock (an order of one product becomes one
#               row);
#   hc_up3_new: CREATE EXTENSION holdcommit, the same roles granted.
# (From 0.2.0: test/upgrade/upgrade-0.2.0.sh; from 0.1.0: test/upgrade/upgrade.sh.)
# Needs PGHOST, PGPORT, PGUSER (a superuser) for a running server.
cd "$(dirname "$0")/../.."
. test/upgrade/upgrade-lib.bash

app=hc_up3_app
ops=hc_up3_ops
mon=hc_up3_mon
q() { local d=$1; shift; psql -X -qAt -v ON_ERROR_STOP=1 -d "$d" -c "SET search_path = holdcommit, public" "$@"; }
upgrade_scratch hc_up3_old hc_up3_new $app $ops $mon

if ! psql -X -q -v ON_ERROR_STOP=1 -d $old >"$work/setup.log" 2>&1 <<SQL; then
\set VERBOSITY terse
CREATE EXTENSION holdcommit VERSION '0.3.0';
SET search_path = holdcommit, public;
SELECT hc_grant_app('$app'), hc_grant_operator('$ops'), hc_grant_monitor('$mon');
SELECT hc_asset_add('U3-' || n, 'asset ' || n) FROM generate_series(1, 6) n;
SELECT hc_hold('U3-1', 'alice', 'u3-hold-held', '30 minutes');
SELECT hc_commit(reservation_id) FROM hc_hold('U3-2', 'bob', 'u3-hold-sold');
SELECT hc_release(reservation_id) FROM hc_hold('U3-3', 'carol', 'u3-hold-released');
SELECT hc_extend(reservation_id, '20 minutes') FROM hc_hold('U3-6', 'carol', 'u3-hold-extended', '5 minutes');
SELECT hc_hold('U3-4', 'dave', 'u3-hold-swept', '1 millisecond');
SELECT pg_sleep(0.01);
SELECT * FROM hc_sweep();
SELECT hc_hold('U3-5', 'ivan', 'u3-hold-expired', '1 millisecond');
-- Stock as 0.3.0's calls stored it: U3-P1 set to 20, U3-P2 to 10 and
-- restocked by 5, U3-HOT set to 40 and spread over 4 parts of 10; orders
-- reserved (of several products, of one, of U3-HOT in its part 1),
-- finalized (of several; of U3-HOT in its part 2), released, expired and
-- swept, expired and not swept, and one whose line a reclaim expired while
-- its row stayed RESERVED (the reclaim skipped the locked row).  Every order
-- names its products and every line its part and its order's scope; keys
-- carry the fingerprint the calls computed (SHA-256 of "len:value;" of the
-- function, the buyer, the ttl in microseconds, then each product and qty);
-- a part's ledger rows have the seq part * 2^48 + its version.
CREATE FUNCTION pg_temp.fp(VARIADIC v text[]) RETURNS bytea LANGUAGE sql AS \$\$
    SELECT sha256(convert_to(string_agg(octet_length(x) || ':' || x || ';', '' ORDER BY i), 'UTF8'))
      FROM unnest(v) WITH ORDINALITY AS u (x, i) \$\$;
BEGIN;  -- one now() for every row
CREATE TEMP TABLE orders (n int, id text, fn text, buyer text, key text, status text, items text[][],
                          ttl interval, line_status text);
INSERT INTO orders VALUES
    (1, 'res_01U3ORDER0000000000000011', 'hc_reserve_items', 'erin', 'u3-order-reserved', 'RESERVED',
     '{{U3-P1,2,0},{U3-P2,3,0}}', '30 minutes', NULL),
    (2, 'res_01U3ORDER0000000000000012', 'hc_reserve', 'erin', 'u3-order-single', 'RESERVED',
     '{{U3-P1,1,0}}', '30 minutes', NULL),
    (3, 'res_01U3ORDER0000000000000013', 'hc_reserve', 'erin', 'u3-order-hot', 'RESERVED',
     '{{U3-HOT,3,1}}', '30 minutes', NULL),
    (4, 'res_01U3ORDER0000000000000014', 'hc_reserve_items', 'frank', 'u3-order-final', 'FINALIZED',
     '{{U3-P1,4,0},{U3-P2,1,0}}', '10 minutes', NULL),
    (5, 'res_01U3ORDER0000000000000015', 'hc_reserve', 'frank', 'u3-order-hot-final', 'FINALIZED',
     '{{U3-HOT,2,2}}', '10 minutes', NULL),
    (6, 'res_01U3ORDER0000000000000016', 'hc_reserve', 'grace', 'u3-order-released', 'RELEASED',
     '{{U3-P2,2,0}}', '10 minutes', NULL),
    (7, 'res_01U3ORDER0000000000000017', 'hc_reserve', 'heidi', 'u3-order-swept', 'EXPIRED',
     '{{U3-P1,1,0}}', '-1 minute', NULL),
    (8, 'res_01U3ORDER0000000000000018', 'hc_reserve', 'ivan', 'u3-order-expired', 'RESERVED',
     '{{U3-P2,1,0}}', '-1 minute', NULL),
    (9, 'res_01U3ORDER0000000000000019', 'hc_reserve', 'judy', 'u3-order-left', 'RESERVED',
     '{{U3-P2,1,0}}', '-1 minute', 'EXPIRED');
CREATE TEMP VIEW lines AS
SELECT o.*, o.items[k][1] AS product_id, o.items[k][2]::int AS qty, o.items[k][3]::smallint AS part,
       COALESCE(o.line_status, o.status) AS lstatus
  FROM orders o, generate_subscripts(o.items, 1) k;
INSERT INTO hc_stock_reservations (scope_id, id, buyer_id, idempotency_key, status, expires_at, created_at,
                                   ended_at, fingerprint, products)
SELECT items[1][1], id, buyer, key, status, now() + ttl, now() - interval '2 minutes',
       CASE WHEN status = 'RESERVED' THEN NULL ELSE now() - interval '1 minute' END,
       pg_temp.fp(VARIADIC ARRAY[fn, buyer, (CASE WHEN ttl > '0' THEN extract(epoch FROM ttl)::bigint * 1000000
                                                  ELSE 1000 END)::text] ||
                  ARRAY(SELECT v.x FROM lines l, LATERAL (VALUES (1, l.product_id), (2, l.qty::text)) v (j, x)
                         WHERE l.id = o.id ORDER BY l.product_id COLLATE "C", v.j)),
       ARRAY(SELECT l.product_id FROM lines l WHERE l.id = o.id ORDER BY l.product_id COLLATE "C")
  FROM orders o;
INSERT INTO hc_stock_reservation_lines (product_id, reservation_id, qty, status, expires_at, buyer_id, part,
                                        scope_id)
SELECT l.product_id, l.id, l.qty, l.lstatus, now() + l.ttl, l.buyer, l.part, l.items[1][1] FROM lines l;
-- The parts' changes, each a version of its part and a ledger row of its own,
-- in order (hc_stock_spread moved units between U3-HOT's parts: no ledger).
CREATE TEMP TABLE changes AS
SELECT row_number() OVER (PARTITION BY product_id, part ORDER BY n, step) AS version, *
  FROM (SELECT product_id, 0::smallint AS part, 0 AS n, 0 AS step, 'stock_set' AS event,
               'adjustment' AS source, 'hc_stock_set' AS fn, NULL::text AS rid, NULL::text AS buyer,
               0 AS rdelta, stock AS sdelta, 'created' AS detail
          FROM (VALUES ('U3-P1', 20), ('U3-P2', 10), ('U3-HOT', 40)) p (product_id, stock)
        UNION ALL
        SELECT 'U3-P2', 0, 0, 1, 'stock_adjust', 'adjustment', 'hc_stock_adjust', NULL, NULL, 0, 5,
               'restock before the update'
        UNION ALL
        SELECT product_id, part, n, 2, 'reserve', 'call', fn, id, buyer, qty, 0, NULL FROM lines
        UNION ALL
        SELECT product_id, part, n, 3,
               CASE lstatus WHEN 'EXPIRED' THEN 'expire' WHEN 'FINALIZED' THEN 'finalize' ELSE 'release' END,
               CASE WHEN line_status IS NOT NULL THEN 'reclaim' WHEN lstatus = 'EXPIRED' THEN 'sweep'
                    ELSE 'call' END,
               CASE WHEN line_status IS NOT NULL THEN 'hc_reserve' WHEN lstatus = 'EXPIRED' THEN 'hc_sweep'
                    WHEN lstatus = 'FINALIZED' THEN 'hc_finalize' ELSE 'hc_unreserve' END,
               id, buyer, -qty, CASE lstatus WHEN 'FINALIZED' THEN -qty ELSE 0 END, NULL
          FROM lines WHERE lstatus <> 'RESERVED') c;
-- U3-HOT: part 0 keeps what stock_set gave it less what the spread moved to
-- parts 1 to 3 (10 each).
INSERT INTO hc_stock_parts (product_id, part, stock, reserved, version)
SELECT product_id, part, sum(sdelta) + CASE WHEN product_id <> 'U3-HOT' THEN 0 WHEN part = 0 THEN -30 ELSE 10 END,
       sum(rdelta), max(version)
  FROM changes GROUP BY product_id, part
UNION ALL
SELECT 'U3-HOT', p, 10, 0, 0 FROM generate_series(1, 3) p
 WHERE NOT EXISTS (SELECT FROM changes c WHERE c.product_id = 'U3-HOT' AND c.part = p);
INSERT INTO hc_ledger (kind, entity_id, seq, at, event, source, function, reservation_id, buyer_id,
                       reserved_delta, stock_delta, actor, detail)
SELECT 'product', product_id, part * 281474976710656 + version, now(), event, source, fn, rid, buyer,
       rdelta, sdelta, current_user, detail
  FROM changes;
COMMIT;
SELECT hc_lock_acquire('u3-invoice', 'worker-1');
SELECT hc_attempt_begin('u3-invoice', 'worker-1', 1, '0', 5, 'req-1');
SELECT hc_attempt_complete('u3-invoice', 'worker-1', 1, 'INV-U3');
SELECT hc_lock_acquire('u3-review', 'worker-1');
SELECT hc_attempt_begin('u3-review', 'worker-1', 1, '0', 1);
SELECT hc_attempt_begin('u3-review', 'worker-1', 1, '0', 1);
SELECT hc_lock_release('u3-review', 'worker-1', 1);
SELECT hc_lock_acquire('u3-cooling', 'worker-2');
SELECT hc_attempt_begin('u3-cooling', 'worker-2', 1, '1 hour', 5, 'req-2');
SELECT hc_lock_acquire('u3-taken', 'worker-3', '1 millisecond');
SELECT pg_sleep(0.01);
SELECT hc_lock_acquire('u3-taken', 'worker-4');
SQL
    echo "not ok - data in every state under 0.3.0"
    sed 's/^/#   /' "$work/setup.log"
    exit 0
fi

states="SELECT string_agg(t, ' ' ORDER BY t) FROM (
    SELECT 'asset:' || status || '=' || count(*) t FROM hc_assets GROUP BY status UNION ALL
    SELECT 'hold:' || status || '=' || count(*) FROM hc_reservations GROUP BY status UNION ALL
    SELECT 'order:' || status || '=' || count(*) FROM hc_stock_reservations GROUP BY status UNION ALL
    SELECT 'line:' || status || '=' || count(*) FROM hc_stock_reservation_lines GROUP BY status UNION ALL
    SELECT 'stock:' || product_id || '=' || stock || '/' || reserved FROM hc_inventory UNION ALL
    SELECT 'lease:' || (owner IS NOT NULL) || ':' || token FROM hc_locks UNION ALL
    SELECT 'attempt:' || status || ':' || attempts || '/' || total_attempts FROM hc_attempts) s"
# Every row of every documented table and view, less what only says when: the
# data kept, read as an application reads it (the order a reclaim left
# RESERVED ends EXPIRED in the update: checked apart).
left=res_01U3ORDER0000000000000019
rows="SELECT md5(string_agg(r, E'\n' ORDER BY r)) FROM (
    SELECT 'a' || row(id, name, status, current_reservation_id, version)::text r FROM hc_assets UNION ALL
    SELECT 'r' || row(id, asset_id, buyer_id, idempotency_key, status, expires_at, created_at, ended_at,
                      fingerprint)::text FROM hc_reservations UNION ALL
    SELECT 'i' || row(product_id, stock, reserved, available, version)::text FROM hc_inventory UNION ALL
    SELECT 'p' || row(product_id, part, stock, reserved)::text FROM hc_stock_parts UNION ALL
    SELECT 's' || row(id, scope_id, buyer_id, idempotency_key, status, expires_at, created_at, ended_at,
                      fingerprint, products)::text FROM hc_stock_reservations WHERE id <> '$left' UNION ALL
    SELECT 'l' || row(product_id, reservation_id, qty, status, expires_at, buyer_id, part, scope_id)::text
      FROM hc_stock_reservation_lines UNION ALL
    SELECT 'k' || row(resource, owner, token, stale_after, version)::text FROM hc_locks UNION ALL
    SELECT 't' || row(resource, status, attempts, total_attempts, last_marker, external_ref)::text
      FROM hc_attempts UNION ALL
    SELECT 'g' || row(kind, entity_id, seq, at, event, source, function, reservation_id, buyer_id,
                      reserved_delta, stock_delta, actor, detail)::text FROM hc_ledger) s"
want_states="asset:AVAILABLE=2 asset:HELD=3 asset:SOLD=1 attempt:COMPLETED:1/1 attempt:MANUAL_REVIEW:1/1 attempt:OPEN:1/1 hold:COMMITTED=1 hold:EXPIRED=1 hold:HELD=3 hold:RELEASED=1 lease:false:1 lease:true:1 lease:true:1 lease:true:2 line:EXPIRED=2 line:FINALIZED=3 line:RELEASED=1 line:RESERVED=5 order:EXPIRED=2 order:FINALIZED=2 order:RELEASED=1 order:RESERVED=4 stock:U3-HOT=38/3 stock:U3-P1=16/3 stock:U3-P2=14/4"
check "0.3.0 data has every state (one order left RESERVED by a reclaim)" "$(q $old -c "$states")" \
    "$(sed 's/order:EXPIRED=2/order:EXPIRED=1/; s/order:RESERVED=4/order:RESERVED=5/' <<<"$want_states")"
check "hc_check() is empty under 0.3.0" "$(q $old -c 'SELECT count(*) FROM hc_check()')" "0"
rows_before=$(q $old -c "$rows")
seqs="SELECT string_agg(kind || ':' || entity_id || ':' || seq, ' ' ORDER BY kind, entity_id)
        FROM (SELECT kind, entity_id, max(seq) seq FROM hc_ledger GROUP BY kind, entity_id) s"
seqs_before=$(q $old -c "$seqs")

# This library serves 0.3.0's holds, leases and attempts, and refuses its
# stock until the update (55000, with the update in the hint); its sweep
# leaves the expired orders.
check "served under 0.3.0: every stock call is refused with 55000 and the update as its hint" \
    "$(for call in "hc_reserve('U3-P1', 1, 'x', 'u3-x')" "hc_reserve_items('[{\"product_id\": \"U3-P1\", \"qty\": 1}]', 'x', 'u3-y')" \
                   "hc_finalize('res_01U3ORDER0000000000000011')" "hc_unreserve('res_01U3ORDER0000000000000011')" \
                   "hc_stock_set('U3-P1', 30)" "hc_stock_adjust('U3-P1', 1, 'x')" "hc_stock_spread('U3-P1', 2)"; do
           q $old -v VERBOSITY=verbose -c "SELECT $call" 2>&1 | grep -cE '^(ERROR:  55000: .* needs holdcommit 0.4.0 SQL, and 0.3.0 is installed|HINT:  Run ALTER EXTENSION holdcommit UPDATE in this database)'
       done | tr '\n' ' ')" "2 2 2 2 2 2 2 "
check "served under 0.3.0: holds and keys work, the sweep takes the expired hold and leaves the orders" \
    "$(q $old -c "BEGIN" -c "SELECT status, replayed FROM hc_hold('U3-1', 'alice', 'u3-hold-held', '30 minutes')" \
              -c "SELECT expired_holds, expired_reservations FROM hc_sweep()" -c "ROLLBACK" | tr '\n' ' ')" \
    "HELD|t 1|0 "

version="SELECT extversion || ' in ' || extnamespace::regnamespace FROM pg_extension WHERE extname = 'holdcommit'"
if ! q $old -c "ALTER EXTENSION holdcommit UPDATE" >"$work/update.log" 2>&1; then
    echo "not ok - ALTER EXTENSION holdcommit UPDATE (0.3.0 to $current)"
    sed 's/^/#   /' "$work/update.log"
    exit 0
fi
echo "ok - ALTER EXTENSION holdcommit UPDATE (0.3.0 to $current)"
check "... names the operator that lacks 0.4.0's additions" \
    "$(grep -o 'cannot see the automatic spreads .* until they are granted again: .*' "$work/update.log")" \
    "cannot see the automatic spreads (hc_stock_spreads, hc_stock_waits, hc_stock_auto_spread) until they are granted again: $ops"
check "... which the operator lacks" \
    "$(q $old -c "SET ROLE $ops" -v VERBOSITY=sqlstate -c "SELECT count(*) FROM hc_stock_spreads" 2>&1)" "ERROR:  42501"
check "the floor of a product spread under 0.3.0 is its parts" \
    "$(q $old -c "SELECT string_agg(product_id || '=' || min_parts, ' ') FROM hc_stock_spreads")" "U3-HOT=4"
# As the WARNING and doc/operations.md say.
q $old -c "SELECT hc_grant_operator('$ops')" >/dev/null
if ! q $new -c "CREATE EXTENSION holdcommit" \
        -c "SELECT hc_grant_app('$app'), hc_grant_operator('$ops'), hc_grant_monitor('$mon')" \
        >"$work/create.log" 2>&1; then
    echo "not ok - CREATE EXTENSION holdcommit ($current)"
    sed 's/^/#   /' "$work/create.log"
    exit 0
fi
check "the update gives $current in its schema" "$(q $old -c "$version")" "$current in holdcommit"
check "... as a fresh install does" "$(q $new -c "$version")" "$current in holdcommit"

check_same_schema $old $new "0.3.0 updated"
check_same_grants $old $new $app
check_same_grants $old $new $ops
check_same_grants $old $new $mon

# The data is kept, row for row, and works.
check "every row of every table and view kept" "$(q $old -c "$rows")" "$rows_before"
check "every state kept" "$(q $old -c "$states")" "$want_states"
check "the order a reclaim left RESERVED ended EXPIRED with its line" \
    "$(q $old -c "SELECT o.status, o.ended_at IS NOT NULL, l.status, l.qty FROM hc_stock_reservations o
                    JOIN hc_stock_reservation_lines l ON l.reservation_id = o.id WHERE o.id = '$left'")" \
    "EXPIRED|t|EXPIRED|1"
check "each order of one product is one row now, each of several keeps its lines" \
    "$(q $old -c "SELECT string_agg(o.buyer_id || ':' || (o.qty IS NOT NULL) || ':' ||
                                    (SELECT count(*) FROM hc_stock_order_lines l WHERE l.reservation_id = o.id),
                                    ' ' ORDER BY o.id) FROM hc_stock_orders o")" \
    "erin:false:2 erin:true:0 erin:true:0 frank:false:2 frank:true:0 grace:true:0 heidi:true:0 ivan:true:0 judy:true:0"
check "hc_check() is empty after the update" "$(q $old -c 'SELECT count(*) FROM hc_check()')" "0"
check "a 0.3.0 hold key replays" \
    "$(q $old -c "SELECT status, replayed FROM hc_hold('U3-1', 'alice', 'u3-hold-held', '30 minutes')")" "HELD|t"
check "0.3.0 order keys replay, of several products and of one" \
    "$(q $old -c "SELECT status, replayed, items FROM hc_reserve_items(
                    '[{\"product_id\": \"U3-P2\", \"qty\": 3}, {\"product_id\": \"U3-P1\", \"qty\": 2}]',
                    'erin', 'u3-order-reserved', '30 minutes')" \
              -c "SELECT status, replayed FROM hc_reserve('U3-HOT', 3, 'erin', 'u3-order-hot', '30 minutes')" |
       tr '\n' ' ')" \
    'RESERVED|t|[{"qty": 2, "product_id": "U3-P1"}, {"qty": 3, "product_id": "U3-P2"}] RESERVED|t '
check "a 0.3.0 key with other arguments is refused (RS005), a hold's key by a reserve too" \
    "$(q $old -v VERBOSITY=sqlstate -c "SELECT hc_hold('U3-6', 'alice', 'u3-hold-held')" 2>&1)/$(
       q $old -v VERBOSITY=sqlstate -c "SELECT hc_reserve('U3-P1', 1, 'alice', 'u3-hold-held')" 2>&1)" \
    "ERROR:  RS005/ERROR:  RS005"
check "the sweep takes 0.3.0's expired hold and order" \
    "$(q $old -c "SELECT expired_holds, expired_reservations FROM hc_sweep()")" "1|1"
check "the held 0.3.0 hold commits; the reserved orders finalize and unreserve" \
    "$(q $old -c "SELECT status FROM hc_commit((SELECT id FROM hc_reservations WHERE idempotency_key = 'u3-hold-held'))" \
              -c "SELECT status FROM hc_finalize((SELECT id FROM hc_stock_reservations
                                                   WHERE idempotency_key = 'u3-order-reserved'))" \
              -c "SELECT status FROM hc_unreserve((SELECT id FROM hc_stock_reservations
                                                    WHERE idempotency_key = 'u3-order-hot'))" | tr '\n' ' ')" \
    "COMMITTED FINALIZED RELEASED "
check "the stock adds up after them" \
    "$(q $old -c "SELECT string_agg(product_id || '=' || stock || '/' || reserved, ' ' ORDER BY product_id)
                    FROM hc_inventory")" "U3-HOT=38/0 U3-P1=14/1 U3-P2=11/0"
check "the lease keeps its token; a heartbeat works; a takeover goes on from it" \
    "$(q $old -c "SELECT hc_lock_acquire('u3-invoice', 'worker-1')" \
              -c "SELECT hc_lock_heartbeat('u3-taken', 'worker-4', 2) IS NOT NULL" \
              -c "SELECT hc_lock_release('u3-invoice', 'worker-1', 1)" \
              -c "SELECT hc_lock_acquire('u3-invoice', 'worker-5')" | tr '\n' ' ')" "1 t t 2 "
check "the attempts keep their count, outcome and request key" \
    "$(q $old -c "SELECT status, attempt, external_ref FROM hc_attempt_begin('u3-invoice', 'worker-5', 2)" \
              -c "SELECT status, attempt FROM hc_attempt_begin('u3-cooling', 'worker-2', 1, '1 hour', 5, 'req-2')" \
              -c "SELECT status FROM hc_attempt_begin('u3-cooling', 'worker-2', 1, '1 hour', 5, 'req-3')" 2>&1 |
       tr '\n' ' ')" \
    "COMPLETED|1|INV-U3 PROCEED|1 COOLDOWN "
check "the application role calls, in its grants" \
    "$(q $old -c "SET ROLE $app" -c "SELECT status FROM hc_reserve('U3-P1', 1, 'judy', 'u3-new-order')" 2>&1)" \
    "RESERVED"
check "the roles read the orders and their lines as before, not granted again" \
    "$(q $old -c "SET ROLE $app" -c "SELECT count(id), count(products) FROM hc_stock_reservations" \
              -c "SELECT count(*) FROM hc_stock_reservation_lines" -c "SET ROLE $ops" \
              -c "SELECT count(idempotency_key) > 0 FROM hc_stock_reservations" 2>&1 | tr '\n' ' ')" \
    "10|10 12 t "
check "the monitoring role reads the metrics" \
    "$(q $old -c "SET ROLE $mon" -c "SELECT count(*) > 0 FROM hc_metrics" 2>&1)" "t"
seqs_after=$(q $old -c "$seqs")
check "each entity's ledger order continues after the update" \
    "$(for b in $seqs_before; do a=$(tr ' ' '\n' <<<"$seqs_after" | grep "^${b%:*}:"); \
         [ "${a##*:}" -ge "${b##*:}" ] || echo -n "${b%:*} "; done)" ""
check "hc_check() is empty after calls under $current" "$(q $old -c 'SELECT count(*) FROM hc_check()')" "0"
check_tour $old $new
exit 0
