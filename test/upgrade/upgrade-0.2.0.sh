#!/usr/bin/env bash
# Updating from 0.2.0, installed as it recommended (its own schema), gives what
# installing the current version gives, and keeps the data, keys, ledger and grants.
#   hc_up2_old: CREATE EXTENSION holdcommit VERSION '0.2.0', data in every
#               state made by 0.2.0's own calls (this library serves 0.2.0),
#               an application, an operator role; then ALTER EXTENSION
#               holdcommit UPDATE;
#   hc_up2_new: CREATE EXTENSION holdcommit (the control file's version), the same roles granted.
# (From 0.1.0: test/upgrade/upgrade.sh; 0.2.0 in public: test/upgrade/move.sh.)
# Needs PGHOST, PGPORT, PGUSER (a superuser) for a running server.
cd "$(dirname "$0")/../.."
. test/upgrade/upgrade-lib.bash

app=hc_up2_app
ops=hc_up2_ops
lost=hc_up2_lost
# A role whose name needs quotes, which passes on the grant it was given.
svc='"Hc-Up2 Svc"'
# q, with the extension's schema first.
q() { local d=$1; shift; psql -X -qAt -v ON_ERROR_STOP=1 -d "$d" -c "SET search_path = holdcommit, public" "$@"; }
upgrade_scratch hc_up2_old hc_up2_new $app $ops $lost "$svc"

# Data in every state, by 0.2.0's calls: holds held, sold, released, expired
# and swept, and one expired unswept; orders reserved, finalized, released,
# expired; a lease held, one released, one taken over; attempts completed,
# in review, cooling down, reset.
if ! psql -X -q -v ON_ERROR_STOP=1 -d $old >"$work/setup.log" 2>&1 <<SQL; then
\set VERBOSITY terse
CREATE EXTENSION holdcommit VERSION '0.2.0';
SET search_path = holdcommit, public;
SELECT hc_grant_app('$app'), hc_grant_operator('$ops');
-- A role that may call a function but cannot reach the schema.
GRANT EXECUTE ON FUNCTION hc_hold(text, text, text, interval) TO $lost;
-- hc_attempt_begin, which 0.3.0 makes again with a new argument: granted
-- to a role whose name needs quotes, with the option to pass it on, which
-- it uses.
GRANT USAGE ON SCHEMA holdcommit TO $svc;
GRANT EXECUTE ON FUNCTION hc_attempt_begin(text, text, bigint, interval, integer) TO $svc WITH GRANT OPTION;
SET ROLE $svc;
GRANT EXECUTE ON FUNCTION hc_attempt_begin(text, text, bigint, interval, integer) TO $lost;
RESET ROLE;
SELECT hc_asset_add('U2-' || n, 'asset ' || n) FROM generate_series(1, 6) n;
SELECT hc_hold('U2-1', 'alice', 'u2-hold-held', '30 minutes');
SELECT hc_commit(reservation_id) FROM hc_hold('U2-2', 'bob', 'u2-hold-sold');
SELECT hc_release(reservation_id) FROM hc_hold('U2-3', 'carol', 'u2-hold-released');
SELECT hc_hold('U2-4', 'dave', 'u2-hold-swept', '1 millisecond');
SELECT pg_sleep(0.01);
SELECT * FROM hc_sweep();
SELECT hc_hold('U2-5', 'ivan', 'u2-hold-expired', '1 millisecond');
-- Stock as 0.2.0's calls stored it (this library refuses a 0.2.0 database's
-- stock calls until the update): U2-P1 set to 20, U2-P2 to 10 and restocked
-- by 5; orders reserved (a multi-item one and a single one), finalized,
-- released, expired and swept, expired and not swept.  Keys carry the
-- fingerprint the calls computed (SHA-256 of "len:value;" of the function,
-- the buyer, the ttl in microseconds, then each product and qty).
CREATE FUNCTION pg_temp.fp(VARIADIC v text[]) RETURNS bytea LANGUAGE sql AS \$\$
    SELECT sha256(convert_to(string_agg(octet_length(x) || ':' || x || ';', '' ORDER BY i), 'UTF8'))
      FROM unnest(v) WITH ORDINALITY AS u (x, i) \$\$;
BEGIN;  -- one now() for every row
CREATE TEMP TABLE orders (n int, id text, fn text, buyer text, key text, status text, items text[][],
                          ttl interval);
INSERT INTO orders VALUES
    (1, 'res_01U2ORDER0000000000000011', 'hc_reserve_items', 'erin', 'u2-order-reserved', 'RESERVED',
     '{{U2-P1,2},{U2-P2,3}}', '30 minutes'),
    (2, 'res_01U2ORDER0000000000000012', 'hc_reserve', 'erin', 'u2-order-single', 'RESERVED',
     '{{U2-P1,1}}', '30 minutes'),
    (3, 'res_01U2ORDER0000000000000013', 'hc_reserve_items', 'frank', 'u2-order-final', 'FINALIZED',
     '{{U2-P1,4},{U2-P2,1}}', '10 minutes'),
    (4, 'res_01U2ORDER0000000000000014', 'hc_reserve', 'grace', 'u2-order-released', 'RELEASED',
     '{{U2-P2,2}}', '10 minutes'),
    (5, 'res_01U2ORDER0000000000000015', 'hc_reserve', 'heidi', 'u2-order-swept', 'EXPIRED',
     '{{U2-P1,1}}', '-1 minute'),
    (6, 'res_01U2ORDER0000000000000016', 'hc_reserve', 'ivan', 'u2-order-expired', 'RESERVED',
     '{{U2-P2,1}}', '-1 minute');
CREATE TEMP VIEW lines AS
SELECT o.*, o.items[k][1] AS product_id, o.items[k][2]::int AS qty
  FROM orders o, generate_subscripts(o.items, 1) k;
INSERT INTO hc_stock_reservations (scope_id, id, buyer_id, idempotency_key, status, expires_at, created_at,
                                   ended_at, fingerprint)
SELECT items[1][1], id, buyer, key, status, now() + ttl, now() - interval '2 minutes',
       CASE WHEN status = 'RESERVED' THEN NULL ELSE now() - interval '1 minute' END,
       pg_temp.fp(VARIADIC ARRAY[fn, buyer, (CASE WHEN ttl > '0' THEN extract(epoch FROM ttl)::bigint * 1000000
                                                  ELSE 1000 END)::text] ||
                  ARRAY(SELECT v.x FROM lines l, LATERAL (VALUES (1, l.product_id), (2, l.qty::text)) v (j, x)
                         WHERE l.id = o.id ORDER BY l.product_id COLLATE "C", v.j))
  FROM orders o;
INSERT INTO hc_stock_reservation_lines (product_id, reservation_id, qty, status, expires_at, buyer_id)
SELECT l.product_id, l.id, l.qty, l.status, now() + l.ttl, l.buyer FROM lines l;
-- The products' changes, each a version and a ledger row of its own, in order.
CREATE TEMP TABLE changes AS
SELECT row_number() OVER (PARTITION BY product_id ORDER BY n, step) AS seq, *
  FROM (SELECT product_id, 0 AS n, 0 AS step, 'stock_set' AS event, 'adjustment' AS source,
               'hc_stock_set' AS fn, NULL::text AS rid, NULL::text AS buyer, 0 AS rdelta, stock AS sdelta,
               'created' AS detail
          FROM (VALUES ('U2-P1', 20), ('U2-P2', 10)) p (product_id, stock)
        UNION ALL
        SELECT 'U2-P2', 0, 1, 'stock_adjust', 'adjustment', 'hc_stock_adjust', NULL, NULL, 0, 5,
               'restock before the update'
        UNION ALL
        SELECT product_id, n, 2, 'reserve', 'call', fn, id, buyer, qty, 0, NULL FROM lines
        UNION ALL
        SELECT product_id, n, 3,
               CASE status WHEN 'EXPIRED' THEN 'expire' WHEN 'FINALIZED' THEN 'finalize' ELSE 'release' END,
               CASE status WHEN 'EXPIRED' THEN 'sweep' ELSE 'call' END,
               CASE status WHEN 'EXPIRED' THEN 'hc_sweep' WHEN 'FINALIZED' THEN 'hc_finalize'
                           ELSE 'hc_unreserve' END,
               id, buyer, -qty, CASE status WHEN 'FINALIZED' THEN -qty ELSE 0 END, NULL
          FROM lines WHERE status <> 'RESERVED') c;
INSERT INTO hc_inventory (product_id, stock, reserved, version)
SELECT product_id, sum(sdelta), sum(rdelta), max(seq) FROM changes GROUP BY product_id;
INSERT INTO hc_ledger (kind, entity_id, seq, at, event, source, function, reservation_id, buyer_id,
                       reserved_delta, stock_delta, actor, detail)
SELECT 'product', product_id, seq, now(), event, source, fn, rid, buyer, rdelta, sdelta, current_user, detail
  FROM changes;
COMMIT;
SELECT hc_lock_acquire('u2-invoice', 'worker-1');
SELECT hc_attempt_begin('u2-invoice', 'worker-1', 1, '0');
SELECT hc_attempt_complete('u2-invoice', 'worker-1', 1, 'INV-U2');
SELECT hc_lock_acquire('u2-review', 'worker-1');
SELECT hc_attempt_begin('u2-review', 'worker-1', 1, '0', 1);
SELECT hc_attempt_begin('u2-review', 'worker-1', 1, '0', 1);
SELECT hc_lock_release('u2-review', 'worker-1', 1);
SELECT hc_lock_acquire('u2-cooling', 'worker-2');
SELECT hc_attempt_begin('u2-cooling', 'worker-2', 1, '1 hour');
SELECT hc_lock_acquire('u2-reset', 'worker-2');
SELECT hc_attempt_begin('u2-reset', 'worker-2', 1, '0', 1);
SELECT hc_attempt_begin('u2-reset', 'worker-2', 1, '0', 1);
SELECT hc_attempt_reset('u2-reset', 'checked the ERP by hand');
SELECT hc_lock_acquire('u2-taken', 'worker-3', '1 millisecond');
SELECT pg_sleep(0.01);
SELECT hc_lock_acquire('u2-taken', 'worker-4');
SQL
    echo "not ok - data in every state under 0.2.0"
    sed 's/^/#   /' "$work/setup.log"
    exit 0
fi

states="SELECT string_agg(t, ' ' ORDER BY t) FROM (
    SELECT 'asset:' || status || '=' || count(*) t FROM hc_assets GROUP BY status UNION ALL
    SELECT 'hold:' || status || '=' || count(*) FROM hc_reservations GROUP BY status UNION ALL
    SELECT 'order:' || status || '=' || count(*) FROM hc_stock_reservations GROUP BY status UNION ALL
    SELECT 'line:' || status || '=' || count(*) FROM hc_stock_reservation_lines GROUP BY status UNION ALL
    SELECT 'lease:' || (owner IS NOT NULL) || ':' || token FROM hc_locks UNION ALL
    SELECT 'attempt:' || status || ':' || attempts || '/' || total_attempts FROM hc_attempts) s"
# Every row of every table, less what only says when: the data kept.
rows="SELECT md5(string_agg(r, E'\n' ORDER BY r)) FROM (
    SELECT 'a' || row(id, name, status, current_reservation_id, version)::text r FROM hc_assets UNION ALL
    SELECT 'r' || row(id, asset_id, buyer_id, idempotency_key, status, fingerprint)::text FROM hc_reservations UNION ALL
    SELECT 'i' || row(product_id, stock, reserved, version)::text FROM hc_inventory UNION ALL
    SELECT 's' || row(id, scope_id, buyer_id, idempotency_key, status, fingerprint)::text
      FROM hc_stock_reservations UNION ALL
    SELECT 'l' || row(product_id, reservation_id, qty, status)::text FROM hc_stock_reservation_lines UNION ALL
    SELECT 'k' || row(resource, owner, token, stale_after, version)::text FROM hc_locks UNION ALL
    SELECT 't' || row(resource, status, attempts, total_attempts, last_marker, external_ref)::text
      FROM hc_attempts UNION ALL
    SELECT 'g' || row(kind, entity_id, seq, event, source, function, reservation_id, buyer_id,
                      reserved_delta, stock_delta, actor, detail)::text FROM hc_ledger) s"
want_states="asset:AVAILABLE=3 asset:HELD=2 asset:SOLD=1 attempt:COMPLETED:1/1 attempt:MANUAL_REVIEW:1/1 attempt:OPEN:0/1 attempt:OPEN:1/1 hold:COMMITTED=1 hold:EXPIRED=1 hold:HELD=2 hold:RELEASED=1 lease:false:1 lease:true:1 lease:true:1 lease:true:1 lease:true:2 line:EXPIRED=1 line:FINALIZED=2 line:RELEASED=1 line:RESERVED=4 order:EXPIRED=1 order:FINALIZED=1 order:RELEASED=1 order:RESERVED=3"
check "0.2.0 data has every state" "$(q $old -c "$states")" "$want_states"
check "hc_check() is empty under 0.2.0" "$(q $old -c 'SELECT count(*) FROM hc_check()')" "0"
# This library serves 0.2.0 as 0.2.0 answered: within the cooldown the same
# owner and token get COOLDOWN (0.2.0 has no request key), nothing written.
check "served under 0.2.0: max_retries keeps 0.2.0's range (500 retries: no 22023)" \
    "$(q $old -c "SELECT hc_lock_acquire('u2-cooling', 'worker-2', '3 minutes', 500)")" "1"
check "served under 0.2.0: the same owner and token within the cooldown get COOLDOWN" \
    "$(q $old -c "SELECT status, attempt FROM hc_attempt_begin('u2-cooling', 'worker-2', 1, '1 hour')")" "COOLDOWN|1"
rows_before=$(q $old -c "$rows")
seqs="SELECT string_agg(kind || ':' || entity_id || ':' || seq, ' ' ORDER BY kind, entity_id)
        FROM (SELECT kind, entity_id, max(seq) seq FROM hc_ledger GROUP BY kind, entity_id) s"
seqs_before=$(q $old -c "$seqs")

version="SELECT extversion || ' in ' || extnamespace::regnamespace FROM pg_extension WHERE extname = 'holdcommit'"
# hc_attempt_begin gains an argument: an object that depends on its 0.2.0
# signature stops the update (rolled back whole), named, with what to do.
q $old -c "CREATE FUNCTION public.u2_begin_wrapper() RETURNS text LANGUAGE sql
           BEGIN ATOMIC SELECT (holdcommit.hc_attempt_begin('u2-x', 'w', 1)).status; END" >/dev/null
check "the update stops at an object that depends on hc_attempt_begin's 0.2.0 signature, naming it" \
    "$(q $old -c "ALTER EXTENSION holdcommit UPDATE" 2>&1 |
       grep -cE 'these depend on its 0.2.0 signature: function (public\.)?u2_begin_wrapper\(\)|HINT:  Drop them, run ALTER EXTENSION')/$(q $old -c "$version")" \
    "2/0.2.0 in holdcommit"
q $old -c "DROP FUNCTION public.u2_begin_wrapper()" >/dev/null
if ! q $old -c "ALTER EXTENSION holdcommit UPDATE" >"$work/update.log" 2>&1; then
    echo "not ok - ALTER EXTENSION holdcommit UPDATE (0.2.0 to $current)"
    sed 's/^/#   /' "$work/update.log"
    exit 0
fi
echo "ok - ALTER EXTENSION holdcommit UPDATE (0.2.0 to $current)"
check "... names the role that cannot reach the schema" \
    "$(grep -o 'cannot reach schema holdcommit: .*' "$work/update.log")" "cannot reach schema holdcommit: $lost"
check "... names the operator that lacks 0.3.0's additions" \
    "$(grep -o 'cannot read hc_sweeper_databases or hc_workers until they are granted again: .*' "$work/update.log")" "cannot read hc_sweeper_databases or hc_workers until they are granted again: $ops"
check "... which the operator lacks" \
    "$(q $old -c "SET ROLE $ops" -v VERBOSITY=sqlstate -c "SELECT count(*) FROM hc_sweeper_databases" 2>&1)" "ERROR:  42501"
if ! q $new -c "CREATE EXTENSION holdcommit" -c "SELECT hc_grant_app('$app'), hc_grant_operator('$ops')" \
        >"$work/create.log" 2>&1; then
    echo "not ok - CREATE EXTENSION holdcommit ($current)"
    sed 's/^/#   /' "$work/create.log"
    exit 0
fi
# Before it is granted again, the operator has every privilege of a fresh
# install's but what 0.3.0 and 0.4.0 added for operators, the calls given a routing
# id and the step of an order on Citus: the update lost nothing.
check "the update kept every privilege of the operator" "$(role_privileges $old $ops)" \
    "$(role_privileges $new $ops | tr ' ' '\n' |
       grep -vE '^(f:hc_sweeper_state\(\)|hc_sweeper_databases:SELECT|f:hc_worker_state\(\)|hc_workers:SELECT|f:hc_stock_(set|adjust|spread|auto_spread|waits)\(.*\)|hc_stock_parts:SELECT|hc_stock_spreads:SELECT|hc_inventory:SELECT|f:hc_(commit|release|extend|finalize|unreserve)\(text,text(,boolean|,interval)?\)|f:hc_order_step\(text,text,text\[\]\)|hc_routes:(SELECT|UPDATE))$' |
       tr '\n' ' ' | sed 's/ $//')"
check "... and the roles that read the table hc_inventory was" \
    "$(grep -o 'cannot read hc_inventory until they are granted again: .*' "$work/update.log")" \
    "cannot read hc_inventory until they are granted again: $app, $ops"
check "hc_attempt_begin's new signature keeps each grant, by its grantor" \
    "$(q $old -c "SELECT string_agg(a.grantee::regrole || '/' || a.grantor::regrole || '/' || a.is_grantable, ' '
                                  ORDER BY a.grantee::regrole::text)
                     FROM pg_proc p, aclexplode(p.proacl) a
                    WHERE p.oid = 'hc_attempt_begin(text, text, bigint, interval, integer, text)'::regprocedure
                      AND a.grantee IN ('$lost'::regrole, '$svc'::regrole)")" \
    "$svc/postgres/true $lost/$svc/false"
# As the WARNINGs and doc/operations.md say.
q $old -c "SELECT hc_grant_app('$app'), hc_grant_operator('$ops')" \
    -c "REVOKE ALL ON FUNCTION hc_hold(text, text, text, interval) FROM $lost" \
    -c "REVOKE ALL ON FUNCTION hc_hold_many(text[], text, text, interval) FROM $lost" \
    -c "REVOKE ALL ON FUNCTION hc_hold_many(text, text[], text, text, interval) FROM $lost" \
    -c "REVOKE ALL ON FUNCTION hc_hold_best(text, integer, text, text, interval) FROM $lost" \
    -c "REVOKE ALL ON FUNCTION hc_attempt_begin(text, text, bigint, interval, integer, text) FROM $svc CASCADE" \
    -c "REVOKE ALL ON SCHEMA holdcommit FROM $svc" \
    -c "DROP OWNED BY $svc" >/dev/null
check "the update gives $current in its schema" "$(q $old -c "$version")" "$current in holdcommit"
check "... as a fresh install does" "$(q $new -c "$version")" "$current in holdcommit"

check_same_schema $old $new "0.2.0 updated"
check_same_grants $old $new $app
check_same_grants $old $new $ops

# The data is kept, row for row, and works.
check "every row of every table kept" "$(q $old -c "$rows")" "$rows_before"
check "every state kept" "$(q $old -c "$states")" "$want_states"
check "hc_check() is empty after the update" "$(q $old -c 'SELECT count(*) FROM hc_check()')" "0"
check "a 0.2.0 hold key replays" \
    "$(q $old -c "SELECT status, replayed FROM hc_hold('U2-1', 'alice', 'u2-hold-held', '30 minutes')")" "HELD|t"
check "a 0.2.0 order key replays" \
    "$(q $old -c "SELECT status, replayed, items FROM hc_reserve_items(
                    '[{\"product_id\": \"U2-P2\", \"qty\": 3}, {\"product_id\": \"U2-P1\", \"qty\": 2}]',
                    'erin', 'u2-order-reserved', '30 minutes')")" \
    'RESERVED|t|[{"qty": 2, "product_id": "U2-P1"}, {"qty": 3, "product_id": "U2-P2"}]'
check "a 0.2.0 key with other arguments is refused (RS005)" \
    "$(q $old -v VERBOSITY=sqlstate -c "SELECT hc_hold('U2-6', 'alice', 'u2-hold-held')" 2>&1)" "ERROR:  RS005"
check "the sweep takes 0.2.0's expired hold and order" \
    "$(q $old -c "SELECT expired_holds, expired_reservations FROM hc_sweep()")" "1|1"
check "the held 0.2.0 hold commits, the reserved order finalizes" \
    "$(q $old -c "SELECT status FROM hc_commit((SELECT id FROM hc_reservations WHERE idempotency_key = 'u2-hold-held'))" \
              -c "SELECT status FROM hc_finalize((SELECT id FROM hc_stock_reservations
                                                   WHERE idempotency_key = 'u2-order-reserved'))" | tr '\n' ' ')" \
    "COMMITTED FINALIZED "
check "the lease keeps its token; a heartbeat works; a takeover goes on from it" \
    "$(q $old -c "SELECT hc_lock_acquire('u2-invoice', 'worker-1')" \
              -c "SELECT hc_lock_heartbeat('u2-taken', 'worker-4', 2) IS NOT NULL" \
              -c "SELECT hc_lock_release('u2-invoice', 'worker-1', 1)" \
              -c "SELECT hc_lock_acquire('u2-invoice', 'worker-5')" | tr '\n' ' ')" "1 t t 2 "
check "the attempts keep their count and outcome" \
    "$(q $old -c "SELECT status, attempt, external_ref FROM hc_attempt_begin('u2-invoice', 'worker-5', 2)" \
              -c "SELECT hc_lock_acquire('u2-review', 'worker-5')" \
              -c "SELECT status, attempt FROM hc_attempt_begin('u2-review', 'worker-5', 2, '0', 5)" 2>&1 | tr '\n' ' ')" \
    "COMPLETED|1|INV-U2 2 MANUAL_REVIEW|1 "
check "after the update: a 0.2.0 attempt is no pass for a request key; a new one's key gets it back" \
    "$(q $old -c "SELECT status FROM hc_attempt_begin('u2-cooling', 'worker-2', 1, '1 hour', 5, 'k-1')" \
              -c "SELECT hc_lock_acquire('u2-keyed', 'worker-6')" \
              -c "SELECT status, attempt FROM hc_attempt_begin('u2-keyed', 'worker-6', 1, '1 hour', 5, 'k-2')" \
              -c "SELECT status, attempt FROM hc_attempt_begin('u2-keyed', 'worker-6', 1, '1 hour', 5, 'k-2')" \
              -c "SELECT status, attempt FROM hc_attempt_begin('u2-keyed', 'worker-6', 1, '1 hour', 5)" 2>&1 | tr '\n' ' ')" \
    "COOLDOWN 1 PROCEED|1 PROCEED|1 COOLDOWN|1 "
check "the application role calls, in its grants" \
    "$(q $old -c "SET ROLE $app" -c "SELECT status FROM hc_hold('U2-6', 'judy', 'u2-new-hold')" 2>&1)" "HELD"
check "the operator role reads the new views" \
    "$(q $old -c "SET ROLE $ops" -c "SELECT count(*) > 0 FROM hc_sweeper_databases" 2>&1)" "t"
seqs_after=$(q $old -c "$seqs")
check "each entity's ledger order continues after the update" \
    "$(for b in $seqs_before; do a=$(tr ' ' '\n' <<<"$seqs_after" | grep "^${b%:*}:"); \
         [ "${a##*:}" -ge "${b##*:}" ] || echo -n "${b%:*} "; done)" ""
check "hc_check() is empty after calls under $current" "$(q $old -c 'SELECT count(*) FROM hc_check()')" "0"
check_tour $old $new
exit 0
