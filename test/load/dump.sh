#!/usr/bin/env bash
# pg_dump keeps holdcommit's data: dump a database with holds,
# reservations, keys and ledger, restore it into a new one, and check that
# state, invariants, idempotency replays and each entity's ledger order carry over.
set -uo pipefail

bin=${HC_PGROOT:-}/usr/lib/postgresql/15/bin
src=hc_dump_src
dst=hc_dump_dst
q() { psql -qXAt -v ON_ERROR_STOP=1 -d "$@"; }
check() { if [ "$2" = "$3" ]; then echo "ok - $1"; else echo "not ok - $1 (got '$2', want '$3')"; fi; }

q postgres -c "DROP DATABASE IF EXISTS $src" -c "DROP DATABASE IF EXISTS $dst" \
    -c "CREATE DATABASE $src" -c "CREATE DATABASE $dst" 2>/dev/null
trap 'q postgres -c "DROP DATABASE IF EXISTS $src" -c "DROP DATABASE IF EXISTS $dst"' EXIT

q $src <<'SQL' >/dev/null
CREATE EXTENSION holdcommit;
SELECT hc_asset_add('DUMP-1', 'held');
SELECT hc_asset_add('DUMP-2', 'sold');
SELECT hc_hold('DUMP-1', 'alice', 'dump-k1');
SELECT hc_commit((hc_hold('DUMP-2', 'bob', 'dump-k2')).reservation_id);
SELECT hc_stock_set('DUMP-P', 5);
SELECT hc_reserve('DUMP-P', 2, 'carol', 'dump-k3');
SQL
before=$(q $src -c "SELECT md5(string_agg(t, '|' ORDER BY t)) FROM (
    SELECT concat_ws(',', id, status, current_reservation_id) t FROM hc_assets UNION ALL
    SELECT concat_ws(',', id, status, expires_at) FROM hc_reservations UNION ALL
    SELECT concat_ws(',', product_id, stock, reserved) FROM hc_inventory UNION ALL
    SELECT concat_ws(',', key, reservation_id) FROM hc_idempotency_keys UNION ALL
    SELECT concat_ws(',', seq, event) FROM hc_ledger) s")

"$bin/pg_dump" -d $src | q $dst >/dev/null
after=$(q $dst -c "SELECT md5(string_agg(t, '|' ORDER BY t)) FROM (
    SELECT concat_ws(',', id, status, current_reservation_id) t FROM hc_assets UNION ALL
    SELECT concat_ws(',', id, status, expires_at) FROM hc_reservations UNION ALL
    SELECT concat_ws(',', product_id, stock, reserved) FROM hc_inventory UNION ALL
    SELECT concat_ws(',', key, reservation_id) FROM hc_idempotency_keys UNION ALL
    SELECT concat_ws(',', seq, event) FROM hc_ledger) s")

check "restored state equals the dumped state" "$after" "$before"
check "hc_check() is empty after restore" "$(q $dst -c 'SELECT count(*) FROM hc_check()')" "0"
check "a retry after restore replays the same hold" \
    "$(q $dst -c "SELECT replayed FROM hc_hold('DUMP-1', 'alice', 'dump-k1')")" "t"
last=$(q $dst -c "SELECT max(seq) FROM hc_ledger WHERE kind = 'asset' AND entity_id = 'DUMP-1'")
q $dst -c "SELECT hc_release(id) FROM hc_reservations WHERE asset_id = 'DUMP-1'" >/dev/null
check "an asset's ledger order continues after restore (seq is the asset's version)" \
    "$(q $dst -c "SELECT max(seq) FROM hc_ledger WHERE kind = 'asset' AND entity_id = 'DUMP-1'")" "$((last + 1))"
