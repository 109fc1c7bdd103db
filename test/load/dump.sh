#!/usr/bin/env bash
# pg_dump keeps holdcommit's data: dump a database with holds,
# reservations, keys and ledger, restore it into a new one, and check that
# state, invariants, idempotency replays and each entity's ledger order carry over.
# Then who may dump it (doc/operations.md, Who can dump and restore): not
# the database owner alone; a member of pg_read_all_data, restored by a
# superuser with pg_restore.
set -uo pipefail

# The programs of the server's major (PG_CONFIG, as test/harness/server.sh).
bin=${HC_PGROOT:-}$("${PG_CONFIG:-pg_config}" --bindir)
src=hc_dump_src
dst=hc_dump_dst
q() { psql -qXAt -v ON_ERROR_STOP=1 -d "$@"; }
check() { if [ "$2" = "$3" ]; then echo "ok - $1"; else echo "not ok - $1 (got '$2', want '$3')"; fi; }

owner=hc_dump_owner
backup=hc_dump_backup
restored=hc_dump_restored
work=$(mktemp -d)
chmod 777 "$work"
drop_all() {
    q postgres -c "DROP DATABASE IF EXISTS $src" -c "DROP DATABASE IF EXISTS $dst" \
        -c "DROP DATABASE IF EXISTS $restored" -c "DROP ROLE IF EXISTS $owner" \
        -c "DROP ROLE IF EXISTS $backup" 2>/dev/null
}
drop_all
q postgres -c "CREATE ROLE $owner LOGIN" -c "CREATE ROLE $backup LOGIN IN ROLE pg_read_all_data" \
    -c "CREATE DATABASE $src OWNER $owner" -c "CREATE DATABASE $dst" 2>/dev/null
trap 'drop_all; rm -rf "$work"' EXIT

q $src <<'SQL' >/dev/null
CREATE EXTENSION holdcommit;
SELECT hc_asset_add('DUMP-1', 'held');
SELECT hc_asset_add('DUMP-2', 'sold');
SELECT hc_hold('DUMP-1', 'alice', 'dump-k1');
SELECT hc_commit((hc_hold('DUMP-2', 'bob', 'dump-k2')).reservation_id);
SELECT hc_stock_set('DUMP-P', 5);
SELECT hc_reserve('DUMP-P', 2, 'carol', 'dump-k3');
SQL
# state DB: the extension's rows in DB, as one hash.
state() {
    q "$1" -c "SELECT md5(string_agg(t, '|' ORDER BY t)) FROM (
        SELECT concat_ws(',', id, status, current_reservation_id) t FROM hc_assets UNION ALL
        SELECT concat_ws(',', id, status, expires_at) FROM hc_reservations UNION ALL
        SELECT concat_ws(',', product_id, stock, reserved) FROM hc_inventory UNION ALL
        SELECT concat_ws(',', key, reservation_id) FROM hc_idempotency_keys UNION ALL
        SELECT concat_ws(',', seq, event) FROM hc_ledger) s"
}
before=$(state $src)

"$bin/pg_dump" -d $src | q $dst >/dev/null
after=$(state $dst)

check "restored state equals the dumped state" "$after" "$before"
check "hc_check() is empty after restore" "$(q $dst -c 'SELECT count(*) FROM hc_check()')" "0"
check "a retry after restore replays the same hold" \
    "$(q $dst -c "SELECT replayed FROM hc_hold('DUMP-1', 'alice', 'dump-k1')")" "t"
last=$(q $dst -c "SELECT max(seq) FROM hc_ledger WHERE kind = 'asset' AND entity_id = 'DUMP-1'")
q $dst -c "SELECT hc_release(id) FROM hc_reservations WHERE asset_id = 'DUMP-1'" >/dev/null
check "an asset's ledger order continues after restore (seq is the asset's version)" \
    "$(q $dst -c "SELECT max(seq) FROM hc_ledger WHERE kind = 'asset' AND entity_id = 'DUMP-1'")" "$((last + 1))"

# The database owner alone may not read the keys, so not dump them.
out=$("$bin/pg_dump" -U $owner -d $src 2>&1 >/dev/null)
check "the database owner alone cannot dump the extension's data" \
    "$(grep -o 'permission denied for schema holdcommit' <<<"$out" | head -1)" \
    "permission denied for schema holdcommit"
# A member of pg_read_all_data can; a superuser restores it, as doc/operations.md says.
if "$bin/pg_dump" -U $backup -Fc -f "$work/src.dump" $src 2>"$work/dump.err" &&
   "$bin/createdb" -U "$PGUSER" $restored && "$bin/pg_restore" -U "$PGUSER" -d $restored "$work/src.dump" 2>"$work/restore.err"; then
    check "a pg_read_all_data member's dump restores to the same state" \
        "$(q $restored -c "SELECT md5(string_agg(t, '|' ORDER BY t)) FROM (
            SELECT concat_ws(',', id, status, current_reservation_id) t FROM hc_assets UNION ALL
            SELECT concat_ws(',', id, status, expires_at) FROM hc_reservations UNION ALL
            SELECT concat_ws(',', product_id, stock, reserved) FROM hc_inventory UNION ALL
            SELECT concat_ws(',', key, reservation_id) FROM hc_idempotency_keys UNION ALL
            SELECT concat_ws(',', seq, event) FROM hc_ledger) s")" "$before"
    check "... into the extension's own schema" \
        "$(q $restored -c "SELECT extnamespace::regnamespace FROM pg_extension WHERE extname = 'holdcommit'")" "holdcommit"
else
    echo "not ok - a pg_read_all_data member dumps, a superuser restores"
    sed 's/^/#   /' "$work/dump.err" "$work/restore.err"
fi
