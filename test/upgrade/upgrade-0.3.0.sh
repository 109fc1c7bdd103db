#!/usr/bin/env bash
# Updating from 0.3.0, the last release, gives what installing the current
# version gives, and keeps the data, keys, ledger and grants.
#   hc_up3_old: CREATE EXTENSION holdcommit VERSION '0.3.0', data in every
#               state made by 0.3.0's own calls (this library serves 0.3.0):
#               holds, orders of one product and of several, a product in
#               parts, leases, attempts with and without a request key; an
#               application, an operator and a monitoring role; then ALTER
#               EXTENSION holdcommit UPDATE;
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
SELECT hc_stock_set('U3-P1', 20), hc_stock_set('U3-P2', 10), hc_stock_set('U3-HOT', 40);
SELECT hc_stock_adjust('U3-P2', 5, 'restock before the update');
SELECT hc_stock_spread('U3-HOT', 4);
SELECT hc_reserve_items('[{"product_id": "U3-P1", "qty": 2}, {"product_id": "U3-P2", "qty": 3}]',
                        'erin', 'u3-order-reserved', '30 minutes');
SELECT hc_reserve('U3-P1', 1, 'erin', 'u3-order-single', '30 minutes');
SELECT hc_reserve('U3-HOT', 3, 'erin', 'u3-order-hot', '30 minutes');
SELECT hc_finalize(reservation_id) FROM hc_reserve_items(
    '[{"product_id": "U3-P1", "qty": 4}, {"product_id": "U3-P2", "qty": 1}]', 'frank', 'u3-order-final');
SELECT hc_finalize(reservation_id) FROM hc_reserve('U3-HOT', 2, 'frank', 'u3-order-hot-final');
SELECT hc_unreserve(reservation_id) FROM hc_reserve('U3-P2', 2, 'grace', 'u3-order-released');
SELECT hc_reserve('U3-P1', 1, 'heidi', 'u3-order-swept', '1 millisecond');
SELECT pg_sleep(0.01);
SELECT * FROM hc_sweep();
SELECT hc_hold('U3-5', 'ivan', 'u3-hold-expired', '1 millisecond');
SELECT hc_reserve('U3-P2', 1, 'ivan', 'u3-order-expired', '1 millisecond');
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
# data kept, read as an application reads it.
rows="SELECT md5(string_agg(r, E'\n' ORDER BY r)) FROM (
    SELECT 'a' || row(id, name, status, current_reservation_id, version)::text r FROM hc_assets UNION ALL
    SELECT 'r' || row(id, asset_id, buyer_id, idempotency_key, status, expires_at, created_at, ended_at,
                      fingerprint)::text FROM hc_reservations UNION ALL
    SELECT 'i' || row(product_id, stock, reserved, available, version)::text FROM hc_inventory UNION ALL
    SELECT 'p' || row(product_id, part, stock, reserved)::text FROM hc_stock_parts UNION ALL
    SELECT 's' || row(id, scope_id, buyer_id, idempotency_key, status, expires_at, created_at, ended_at,
                      fingerprint)::text FROM hc_stock_reservations UNION ALL
    SELECT 'l' || row(product_id, reservation_id, qty, status, expires_at, buyer_id)::text
      FROM hc_stock_reservation_lines UNION ALL
    SELECT 'k' || row(resource, owner, token, stale_after, version)::text FROM hc_locks UNION ALL
    SELECT 't' || row(resource, status, attempts, total_attempts, last_marker, external_ref)::text
      FROM hc_attempts UNION ALL
    SELECT 'g' || row(kind, entity_id, seq, at, event, source, function, reservation_id, buyer_id,
                      reserved_delta, stock_delta, actor, detail)::text FROM hc_ledger) s"
want_states="asset:AVAILABLE=2 asset:HELD=3 asset:SOLD=1 attempt:COMPLETED:1/1 attempt:MANUAL_REVIEW:1/1 attempt:OPEN:1/1 hold:COMMITTED=1 hold:EXPIRED=1 hold:HELD=3 hold:RELEASED=1 lease:false:1 lease:true:1 lease:true:1 lease:true:2 line:EXPIRED=1 line:FINALIZED=3 line:RELEASED=1 line:RESERVED=5 order:EXPIRED=1 order:FINALIZED=2 order:RELEASED=1 order:RESERVED=4 stock:U3-HOT=38/3 stock:U3-P1=16/3 stock:U3-P2=14/4"
check "0.3.0 data has every state" "$(q $old -c "$states")" "$want_states"
check "hc_check() is empty under 0.3.0" "$(q $old -c 'SELECT count(*) FROM hc_check()')" "0"
rows_before=$(q $old -c "$rows")
seqs="SELECT string_agg(kind || ':' || entity_id || ':' || seq, ' ' ORDER BY kind, entity_id)
        FROM (SELECT kind, entity_id, max(seq) seq FROM hc_ledger GROUP BY kind, entity_id) s"
seqs_before=$(q $old -c "$seqs")

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
check "the monitoring role reads the metrics" \
    "$(q $old -c "SET ROLE $mon" -c "SELECT count(*) > 0 FROM hc_metrics" 2>&1)" "t"
seqs_after=$(q $old -c "$seqs")
check "each entity's ledger order continues after the update" \
    "$(for b in $seqs_before; do a=$(tr ' ' '\n' <<<"$seqs_after" | grep "^${b%:*}:"); \
         [ "${a##*:}" -ge "${b##*:}" ] || echo -n "${b%:*} "; done)" ""
check "hc_check() is empty after calls under $current" "$(q $old -c 'SELECT count(*) FROM hc_check()')" "0"
check_tour $old $new
exit 0
