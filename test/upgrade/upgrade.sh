#!/usr/bin/env bash
# Updating from 0.1.0 gives what installing the current version (holdcommit.control) gives, and keeps the data.
#   hc_upgrade_old: CREATE EXTENSION holdcommit VERSION '0.1.0', data in every
#                   state, refused by this library (55000) until it is
#                   updated; ALTER EXTENSION holdcommit UPDATE TO '0.2.0',
#                   which this library serves, then UPDATE to the current one;
#   hc_upgrade_new: CREATE EXTENSION holdcommit (the current version directly).
# (From 0.2.0: test/upgrade/upgrade-0.2.0.sh; 0.2.0 in public: test/upgrade/move.sh; what is
# compared: test/upgrade/upgrade-lib.bash.)  Then the data made under 0.1.0 must work
# under the current version, and every function as in a fresh install.
# Both grant hc_upgrade_app with hc_grant_app and hc_upgrade_ops with
# hc_grant_operator (old: before the update and, as CHANGELOG.md's 0.2.0 notes
# say to, again after it), so the privileges existing roles end up with are
# compared too, in the catalog and in what a plain pg_dump keeps.
# Needs PGHOST, PGPORT, PGUSER (a superuser) for a running server.
cd "$(dirname "$0")/../.."
. test/upgrade/upgrade-lib.bash

app=hc_upgrade_app
ops=hc_upgrade_ops
upgrade_scratch hc_upgrade_old hc_upgrade_new $app $ops

# Data in every state, as 0.1.0 stored it.  The installed library is the
# new one, which needs the 0.2.0 schema, so the 0.1.0 functions cannot make
# it: it is written as they wrote it (rows, idempotency keys with the
# fingerprint 0.1.0 computed, ledger rows), and 0.1.0's own hc_check(), plain
# SQL, confirms it is consistent.  Live rows end in 30 minutes; ended ones
# are an hour old; nothing depends on the machine's speed.
if ! q $old >"$work/setup.log" 2>&1 <<'SQL'; then
\set VERBOSITY terse
CREATE EXTENSION holdcommit VERSION '0.1.0';
BEGIN;  -- one now() for every row
-- 0.1.0's fingerprint: SHA-256 of "len:value;" for the function and its arguments.
CREATE FUNCTION pg_temp.fp(VARIADIC v text[]) RETURNS bytea LANGUAGE sql AS $$
    SELECT sha256(convert_to(string_agg(octet_length(x) || ':' || x || ';', '' ORDER BY i), 'UTF8'))
      FROM unnest(v) WITH ORDINALITY AS u (x, i) $$;
CREATE FUNCTION pg_temp.ledger(kind text, entity text, event text, source text, fn text,
                               rid text, buyer text, rdelta int, sdelta int, detail text DEFAULT NULL)
RETURNS void LANGUAGE sql AS $$
    INSERT INTO hc_ledger (at, kind, entity_id, event, source, function, reservation_id,
                           buyer_id, reserved_delta, stock_delta, actor, detail)
    VALUES (now(), kind, entity, event, source, fn, rid, buyer, rdelta, sdelta, current_user, detail) $$;

INSERT INTO hc_assets (id, name, status, hold_expires_at, current_reservation_id, version) VALUES
    ('UP-AVAILABLE', 'never held', 'AVAILABLE', NULL, NULL, 1),
    ('UP-HELD', 'held', 'HELD', now() + interval '30 minutes', 'res_01UPG000000000000000000001', 2),
    ('UP-SOLD', 'sold', 'SOLD', NULL, 'res_01UPG000000000000000000002', 3),
    ('UP-RELEASED', 'held, then released', 'AVAILABLE', NULL, NULL, 3),
    ('UP-EXPIRED', 'held, expired, released late', 'AVAILABLE', NULL, NULL, 3);
INSERT INTO hc_reservations (id, asset_id, buyer_id, idempotency_key, status, expires_at, created_at, ended_at) VALUES
    ('res_01UPG000000000000000000001', 'UP-HELD', 'alice', 'up-hold-held', 'HELD',
     now() + interval '30 minutes', now(), NULL),
    ('res_01UPG000000000000000000002', 'UP-SOLD', 'bob', 'up-hold-sold', 'COMMITTED',
     now() - interval '30 minutes', now() - interval '1 hour', now() - interval '50 minutes'),
    ('res_01UPG000000000000000000003', 'UP-RELEASED', 'carol', 'up-hold-released', 'RELEASED',
     now() - interval '30 minutes', now() - interval '1 hour', now() - interval '50 minutes'),
    ('res_01UPG000000000000000000004', 'UP-EXPIRED', 'erin', 'up-hold-expired', 'EXPIRED',
     now() - interval '30 minutes', now() - interval '1 hour', now() - interval '20 minutes');
INSERT INTO hc_idempotency_keys (scope_id, key, function, fingerprint, reservation_id, status, expires_at, created_at)
SELECT asset_id, idempotency_key, 'hc_hold',
       pg_temp.fp('hc_hold', asset_id, buyer_id, '1800000000'), id, 'HELD', expires_at, created_at
  FROM hc_reservations;
SELECT pg_temp.ledger('asset', id, 'add', 'adjustment', 'hc_asset_add', NULL, NULL, 0, 1)
  FROM hc_assets ORDER BY id;
SELECT pg_temp.ledger('asset', asset_id, 'hold', 'call', 'hc_hold', id, buyer_id, 1, 0)
  FROM hc_reservations ORDER BY id;
SELECT pg_temp.ledger('asset', 'UP-SOLD', 'commit', 'call', 'hc_commit', 'res_01UPG000000000000000000002', 'bob', -1, -1);
SELECT pg_temp.ledger('asset', 'UP-RELEASED', 'release', 'call', 'hc_release', 'res_01UPG000000000000000000003', 'carol', -1, 0);
SELECT pg_temp.ledger('asset', 'UP-EXPIRED', 'expire', 'reclaim', 'hc_release', 'res_01UPG000000000000000000004', 'erin', -1, 0);

-- Products: UP-P1 set to 20; UP-P2 set to 10 and restocked by 5.  Orders
-- (scope = first product): one expired, two reserved (one a single-product
-- hc_reserve), one finalized, one released.
INSERT INTO hc_inventory (product_id, stock, reserved, version) VALUES
    ('UP-P1', 16, 3, 8), ('UP-P2', 14, 3, 8);
SELECT pg_temp.ledger('product', 'UP-P1', 'stock_set', 'adjustment', 'hc_stock_set', NULL, NULL, 0, 20, 'created');
SELECT pg_temp.ledger('product', 'UP-P2', 'stock_set', 'adjustment', 'hc_stock_set', NULL, NULL, 0, 10, 'created');
SELECT pg_temp.ledger('product', 'UP-P2', 'stock_adjust', 'adjustment', 'hc_stock_adjust', NULL, NULL, 0, 5,
                      'restock before the update');
CREATE TEMP TABLE orders (id text, fn text, buyer text, key text, status text, items text[][]);
INSERT INTO orders VALUES
    ('res_01UPG000000000000000000011', 'hc_reserve_items', 'erin', 'up-order-expired', 'EXPIRED',
     '{{UP-P1,1},{UP-P2,1}}'),
    ('res_01UPG000000000000000000012', 'hc_reserve_items', 'dave', 'up-order-reserved', 'RESERVED',
     '{{UP-P1,2},{UP-P2,3}}'),
    ('res_01UPG000000000000000000013', 'hc_reserve', 'dave', 'up-order-single', 'RESERVED',
     '{{UP-P1,1}}'),
    ('res_01UPG000000000000000000014', 'hc_reserve_items', 'frank', 'up-order-finalized', 'FINALIZED',
     '{{UP-P1,4},{UP-P2,1}}'),
    ('res_01UPG000000000000000000015', 'hc_reserve_items', 'grace', 'up-order-released', 'RELEASED',
     '{{UP-P1,1},{UP-P2,2}}');
CREATE TEMP VIEW lines AS
SELECT o.*, o.items[n][1] AS product_id, o.items[n][2]::int AS qty
  FROM orders o, generate_subscripts(o.items, 1) n;
INSERT INTO hc_stock_reservations (scope_id, id, buyer_id, idempotency_key, status, expires_at, created_at, ended_at)
SELECT items[1][1], id, buyer, key, status,
       CASE WHEN status = 'RESERVED' THEN now() + interval '30 minutes' ELSE now() - interval '30 minutes' END,
       CASE WHEN status = 'RESERVED' THEN now() ELSE now() - interval '1 hour' END,
       CASE WHEN status = 'RESERVED' THEN NULL ELSE now() - interval '20 minutes' END
  FROM orders;
INSERT INTO hc_stock_reservation_lines (product_id, reservation_id, qty, status, expires_at)
SELECT l.product_id, l.id, l.qty, l.status, r.expires_at
  FROM lines l JOIN hc_stock_reservations r ON r.id = l.id;
INSERT INTO hc_idempotency_keys (scope_id, key, function, fingerprint, reservation_id, status, expires_at, created_at)
SELECT r.scope_id, r.idempotency_key, o.fn,
       pg_temp.fp(VARIADIC ARRAY[o.fn, o.buyer, '1800000000'] ||
                  ARRAY(SELECT v.x FROM lines l, LATERAL (VALUES (1, l.product_id), (2, l.qty::text)) v (k, x)
                         WHERE l.id = o.id ORDER BY l.product_id COLLATE "C", v.k)),
       r.id, 'RESERVED', r.expires_at, r.created_at
  FROM orders o JOIN hc_stock_reservations r ON r.id = o.id;
SELECT pg_temp.ledger('product', product_id, 'reserve', 'call', fn, id, buyer, qty, 0)
  FROM lines ORDER BY id, product_id;
SELECT pg_temp.ledger('product', product_id,
                      CASE status WHEN 'EXPIRED' THEN 'expire' WHEN 'FINALIZED' THEN 'finalize' ELSE 'release' END,
                      CASE status WHEN 'EXPIRED' THEN 'reclaim' ELSE 'call' END,
                      CASE status WHEN 'FINALIZED' THEN 'hc_finalize' ELSE 'hc_unreserve' END,
                      id, buyer, -qty, CASE status WHEN 'FINALIZED' THEN -qty ELSE 0 END)
  FROM lines WHERE status <> 'RESERVED' ORDER BY id, product_id;
COMMIT;
SQL
    echo "not ok - data in every state under 0.1.0"
    sed 's/^/#   /' "$work/setup.log"
    exit 0
fi
q $old -c "SELECT hc_grant_app('$app'), hc_grant_operator('$ops')" >/dev/null ||
    echo "not ok - hc_grant_app and hc_grant_operator under 0.1.0"

states="SELECT string_agg(t, ' ' ORDER BY t) FROM (
    SELECT 'asset:' || status || '=' || count(*) t FROM hc_assets GROUP BY status UNION ALL
    SELECT 'hold:' || status || '=' || count(*) FROM hc_reservations GROUP BY status UNION ALL
    SELECT 'order:' || status || '=' || count(*) FROM hc_stock_reservations GROUP BY status UNION ALL
    SELECT 'line:' || status || '=' || count(*) FROM hc_stock_reservation_lines GROUP BY status) s"
check "0.1.0 data has every state" "$(q $old -c "$states")" \
    "asset:AVAILABLE=3 asset:HELD=1 asset:SOLD=1 hold:COMMITTED=1 hold:EXPIRED=1 hold:HELD=1 hold:RELEASED=1 line:EXPIRED=2 line:FINALIZED=2 line:RELEASED=2 line:RESERVED=3 order:EXPIRED=1 order:FINALIZED=1 order:RELEASED=1 order:RESERVED=2"
check "hc_check() is empty under 0.1.0" "$(q $old -c 'SELECT count(*) FROM hc_check()')" "0"

counts="SELECT concat_ws(' ',
    (SELECT count(*) FROM hc_assets), (SELECT count(*) FROM hc_reservations),
    (SELECT count(*) FROM hc_inventory), (SELECT count(*) FROM hc_stock_reservations),
    (SELECT count(*) FROM hc_stock_reservation_lines), (SELECT count(*) FROM hc_idempotency_keys),
    (SELECT count(*) FROM hc_ledger))"
before=$(q $old -c "$counts")
last_seq="SELECT string_agg(entity_id || ':' || seq, ' ' ORDER BY entity_id) FROM (
    SELECT entity_id, max(seq) AS seq FROM hc_ledger
     WHERE entity_id IN ('UP-HELD', 'UP-P1', 'UP-P2') GROUP BY entity_id) s"
seq_before=$(q $old -c "$last_seq")

# This library does not serve 0.1.0: every function refuses before it
# touches anything, and the session goes on.
refused=$(q $old -c "SELECT p.proname || '(' || coalesce((SELECT string_agg(CASE t
                            WHEN 'text'::regtype THEN quote_literal('x')
                            WHEN 'interval'::regtype THEN quote_literal('1 minute') || '::interval'
                            WHEN 'jsonb'::regtype THEN quote_literal('[{\"product_id\": \"x\", \"qty\": 1}]') || '::jsonb'
                            WHEN 'regrole'::regtype THEN 'current_user::regrole'
                            WHEN 'boolean'::regtype THEN 'false'
                            ELSE '1' END, ', ' ORDER BY i)
                        FROM unnest(p.proargtypes) WITH ORDINALITY u (t, i)), '') || ')'
                       FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
                      WHERE p.pronamespace = 'holdcommit'::regnamespace AND l.lanname = 'c'
                        AND p.prorettype <> 'event_trigger'::regtype ORDER BY 1" |
    while read -r call; do
        psql -X -qAt -d $old -v VERBOSITY=sqlstate -c "SELECT $call" -c "SELECT 1" 2>&1 | tr '\n' ' '
        echo
    done | sort -u)
check "a 0.1.0 database: every function refuses with 55000, the session goes on" \
    "$refused" "ERROR:  55000 1 "
check "... and nothing changed" "$(q $old -c "$states")" \
    "asset:AVAILABLE=3 asset:HELD=1 asset:SOLD=1 hold:COMMITTED=1 hold:EXPIRED=1 hold:HELD=1 hold:RELEASED=1 line:EXPIRED=2 line:FINALIZED=2 line:RELEASED=2 line:RESERVED=3 order:EXPIRED=1 order:FINALIZED=1 order:RELEASED=1 order:RESERVED=2"

if ! q $old -c "ALTER EXTENSION holdcommit UPDATE TO '0.2.0'" \
        -c "SELECT hc_grant_app('$app'), hc_grant_operator('$ops')" \
        >"$work/update.log" 2>&1; then
    echo "not ok - ALTER EXTENSION holdcommit UPDATE TO '0.2.0'"
    sed 's/^/#   /' "$work/update.log"
    exit 0
fi
echo "ok - ALTER EXTENSION holdcommit UPDATE TO '0.2.0'"
check "this library serves 0.2.0" "$(q $old -c 'SELECT count(*) FROM hc_check()' 2>&1)" "0"
if ! q $old -c "ALTER EXTENSION holdcommit UPDATE" >"$work/update3.log" 2>&1; then
    echo "not ok - ALTER EXTENSION holdcommit UPDATE (to $current)"
    sed 's/^/#   /' "$work/update3.log"
    exit 0
fi
echo "ok - ALTER EXTENSION holdcommit UPDATE (to $current)"
check "... which names the operator to grant again" \
    "$(grep -o 'cannot read hc_sweeper_databases or hc_workers until they are granted again: .*' "$work/update3.log")" "cannot read hc_sweeper_databases or hc_workers until they are granted again: $ops"
check "... and the roles that read the table hc_inventory was" \
    "$(grep -o 'cannot read hc_inventory until they are granted again: .*' "$work/update3.log")" \
    "cannot read hc_inventory until they are granted again: $app, $ops"
q $old -c "SELECT hc_grant_app('$app'), hc_grant_operator('$ops')" >/dev/null
if ! q $new -c "CREATE EXTENSION holdcommit" -c "SELECT hc_grant_app('$app'), hc_grant_operator('$ops')" \
        >"$work/create.log" 2>&1; then
    echo "not ok - CREATE EXTENSION holdcommit ($current)"
    sed 's/^/#   /' "$work/create.log"
    exit 0
fi

version="SELECT extversion FROM pg_extension WHERE extname = 'holdcommit'"
check "extversion after the update" "$(q $old -c "$version")" "$current"
check "extversion of a fresh install" "$(q $new -c "$version")" "$current"

check_same_schema $old $new "0.1.0 updated"
check_same_grants $old $new $app
check_same_grants $old $new $ops

# The data survived and works.
check "row counts after the update" "$(q $old -c "$counts")" "$before"
check "states after the update" "$(q $old -c "$states")" \
    "asset:AVAILABLE=3 asset:HELD=1 asset:SOLD=1 hold:COMMITTED=1 hold:EXPIRED=1 hold:HELD=1 hold:RELEASED=1 line:EXPIRED=2 line:FINALIZED=2 line:RELEASED=2 line:RESERVED=3 order:EXPIRED=1 order:FINALIZED=1 order:RELEASED=1 order:RESERVED=2"
check "hc_check() is empty after the update" "$(q $old -c 'SELECT count(*) FROM hc_check()')" "0"

held=$(q $old -c "SELECT id FROM hc_reservations WHERE asset_id = 'UP-HELD'")
check "a 0.1.0 hold key replays the stored hold" \
    "$(q $old -c "SELECT reservation_id = '$held', status, replayed
                    FROM hc_hold('UP-HELD', 'alice', 'up-hold-held', '30 minutes')" 2>&1)" "t|HELD|t"
check "a 0.1.0 hold commits" \
    "$(q $old -c "SELECT status, replayed FROM hc_commit('$held')" 2>&1)" "COMMITTED|f"
check "the committed hold sold its asset" \
    "$(q $old -c "SELECT status, current_reservation_id = '$held' FROM hc_assets WHERE id = 'UP-HELD'")" "SOLD|t"

order=$(q $old -c "SELECT r.id FROM hc_stock_reservations r JOIN hc_idempotency_keys k
                     ON k.reservation_id = r.id WHERE k.key = 'up-order-reserved'")
check "a 0.1.0 order key replays the stored reservation" \
    "$(q $old -c "SELECT reservation_id = '$order', status, replayed
                    FROM hc_reserve_items('[{\"product_id\": \"UP-P1\", \"qty\": 2}, {\"product_id\": \"UP-P2\", \"qty\": 3}]',
                                          'dave', 'up-order-reserved', '30 minutes')" 2>&1)" "t|RESERVED|t"
check "a 0.1.0 sold hold replays" \
    "$(q $old -c "SELECT status, replayed FROM hc_hold('UP-SOLD', 'bob', 'up-hold-sold', '30 minutes')" 2>&1)" \
    "HELD|t"
check "a RESERVED 0.1.0 order finalizes" \
    "$(q $old -c "SELECT status, replayed, items FROM hc_finalize('$order')" 2>&1)" \
    'FINALIZED|f|[{"qty": 2, "product_id": "UP-P1"}, {"qty": 3, "product_id": "UP-P2"}]'
check "the finalize took the stock" \
    "$(q $old -c "SELECT string_agg(concat_ws(':', product_id, stock, reserved), ' ' ORDER BY product_id)
                    FROM hc_inventory")" "UP-P1:14:1 UP-P2:11:0"
check "new calls work on the old data" \
    "$(q $old -c "SELECT status FROM hc_hold('UP-AVAILABLE', 'heidi', 'up-new-hold', '30 minutes')" \
              -c "SELECT status FROM hc_reserve('UP-P2', 11, 'heidi', 'up-new-order', '30 minutes')" 2>&1 | tr '\n' ' ')" \
    "HELD RESERVED "
# Each entity's ledger order continues past what 0.1.0 wrote.
seq_after=$(q $old -c "$last_seq")
check "each entity's ledger order continues after the update" \
    "$(for b in $seq_before; do a=$(tr ' ' '\n' <<<"$seq_after" | grep "^${b%%:*}:"); \
         [ "${a##*:}" -gt "${b##*:}" ] && echo -n "${b%%:*} "; done)" "UP-HELD UP-P1 UP-P2 "
check "hc_check() is empty after calls under $current" "$(q $old -c 'SELECT count(*) FROM hc_check()')" "0"
check_tour $old $new
exit 0
