#!/usr/bin/env bash
# Updating from 0.1.0 gives what installing 0.2.0 gives, and keeps the data.
#   hc_upgrade_old: CREATE EXTENSION holdcommit VERSION '0.1.0', data in every
#                   state, then ALTER EXTENSION holdcommit UPDATE TO '0.2.0';
#   hc_upgrade_new: CREATE EXTENSION holdcommit (0.2.0 directly).
# pg_dump dumps an extension as one CREATE EXTENSION; --binary-upgrade makes
# it dump every member object, which is what is compared.  Then the data made
# under 0.1.0 must work under 0.2.0.
# Needs PGHOST, PGPORT, PGUSER (a superuser) for a running server.
set -uo pipefail

bin=${HC_PGROOT:-}/usr/lib/postgresql/15/bin
old=hc_upgrade_old
new=hc_upgrade_new
work=$(mktemp -d)
q() { local d=$1; shift; psql -X -qAt -v ON_ERROR_STOP=1 -d "$d" "$@"; }
check() {
    if [ "$2" == "$3" ]; then
        echo "ok - $1"
    else
        echo "not ok - $1"
        echo "#   got: $2"
        echo "#   expected: $3"
    fi
}
drop_all() {
    for d in $old $new; do
        psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $d WITH (FORCE)" >/dev/null 2>&1
    done
}
cleanup() { drop_all; rm -rf "$work"; }
trap cleanup EXIT

drop_all
if ! q postgres -c "CREATE DATABASE $old" -c "CREATE DATABASE $new" >/dev/null; then
    echo "not ok - scratch databases"
    exit 0
fi

# Data in every state, made by the 0.1.0 functions.  Long ttls for what must
# stay live; a 1-second ttl, then a sleep, for what must end EXPIRED.
if ! q $old >"$work/setup.log" 2>&1 <<SQL; then
\set VERBOSITY terse
CREATE EXTENSION holdcommit VERSION '0.1.0';
SELECT hc_asset_add('UP-AVAILABLE', 'never held');
SELECT hc_asset_add('UP-HELD', 'held for the test');
SELECT hc_asset_add('UP-SOLD', 'sold');
SELECT hc_asset_add('UP-RELEASED', 'held, then released');
SELECT hc_asset_add('UP-EXPIRED', 'held, expired');
SELECT hc_stock_set('UP-P1', 20);
SELECT hc_stock_set('UP-P2', 10);
SELECT hc_stock_adjust('UP-P2', 5, 'restock before the update');
-- ending EXPIRED: a hold and a two-product order with 1-second ttls
SELECT hc_hold('UP-EXPIRED', 'erin', 'up-hold-expired', '1 second');
SELECT hc_reserve_items('[{"product_id": "UP-P1", "qty": 1}, {"product_id": "UP-P2", "qty": 1}]',
                        'erin', 'up-order-expired', '1 second');
-- live or ended by a call
SELECT hc_hold('UP-HELD', 'alice', 'up-hold-held', '30 minutes');
SELECT hc_commit((hc_hold('UP-SOLD', 'bob', 'up-hold-sold', '30 minutes')).reservation_id);
SELECT hc_release((hc_hold('UP-RELEASED', 'carol', 'up-hold-released', '30 minutes')).reservation_id);
SELECT hc_reserve_items('[{"product_id": "UP-P1", "qty": 2}, {"product_id": "UP-P2", "qty": 3}]',
                        'dave', 'up-order-reserved', '30 minutes');
SELECT hc_reserve('UP-P1', 1, 'dave', 'up-order-single', '30 minutes');
SELECT hc_finalize((hc_reserve_items('[{"product_id": "UP-P2", "qty": 1}, {"product_id": "UP-P1", "qty": 4}]',
                                     'frank', 'up-order-finalized', '30 minutes')).reservation_id);
SELECT hc_unreserve((hc_reserve_items('[{"product_id": "UP-P1", "qty": 1}, {"product_id": "UP-P2", "qty": 2}]',
                                      'grace', 'up-order-released', '30 minutes')).reservation_id);
SELECT pg_sleep(1.2);
SELECT hc_release(id) FROM hc_reservations WHERE asset_id = 'UP-EXPIRED';
SELECT hc_unreserve(r.id) FROM hc_stock_reservations r
  JOIN hc_idempotency_keys k ON k.reservation_id = r.id WHERE k.key = 'up-order-expired';
SQL
    echo "not ok - data in every state under 0.1.0"
    sed 's/^/#   /' "$work/setup.log"
    exit 0
fi

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
seq_before=$(q $old -c "SELECT max(seq) FROM hc_ledger")

if ! q $old -c "ALTER EXTENSION holdcommit UPDATE TO '0.2.0'" >"$work/update.log" 2>&1; then
    echo "not ok - ALTER EXTENSION holdcommit UPDATE TO '0.2.0'"
    sed 's/^/#   /' "$work/update.log"
    exit 0
fi
echo "ok - ALTER EXTENSION holdcommit UPDATE TO '0.2.0'"
if ! q $new -c "CREATE EXTENSION holdcommit" >"$work/create.log" 2>&1; then
    echo "not ok - CREATE EXTENSION holdcommit (0.2.0)"
    sed 's/^/#   /' "$work/create.log"
    exit 0
fi

version="SELECT extversion FROM pg_extension WHERE extname = 'holdcommit'"
check "extversion after the update" "$(q $old -c "$version")" "0.2.0"
check "extversion of a fresh install" "$(q $new -c "$version")" "0.2.0"

# The schema.  Normalized away is only what must differ between two
# databases, or between a table altered in place and one created whole:
# OIDs, LSNs and transaction ids that binary-upgrade mode preserves, the
# sequence position, placeholders of dropped columns, the stored default of a
# column added later (atthasmissing), an ACL entry that only spells out the
# default (left by a REVOKE in the update script), psql's \restrict keys.  The tables whose
# data pg_dump keeps are compared by name.  A column added by the update
# script must come last in the install script too: column order is schema.
config="SELECT string_agg(c::regclass::text, ' ' ORDER BY c::regclass::text)
          FROM pg_extension, unnest(extconfig) c WHERE extname = 'holdcommit'"
check "pg_dump keeps the same tables' data" "$(q $old -c "$config")" "$(q $new -c "$config")"
for d in $old $new; do
    "$bin/pg_dump" --schema-only --binary-upgrade -d $d 2>"$work/$d.err" |
        perl -0777 -pe '
            s/^\\(un)?restrict .*\n//mg;
            s/^.*(binary_upgrade_set_next_|binary_upgrade_set_missing_value).*\n//mg;
            s/^-- set missing value\.\n//mg;
            s/^SET relfrozenxid = .*\n//mg;
            s/^WHERE oid = .*\n//mg;
            s/^.*pg_catalog\.setval\(.*\n//mg;
            s/^-- For binary upgrade, recreate dropped column\.\nUPDATE pg_catalog\.pg_attribute\n(.*\n){3}.*DROP (COLUMN|ATTRIBUTE) "\.+pg\.dropped\.\d+\.+";\n//mg;
            s/^[ \t]*"\.+pg\.dropped\.\d+\.+" .*\n//mg;
            s/,\n\);/\n);/g;
            s/^--\n-- Name: [^\n]*; Type: ACL; [^\n]*\n--\n\nSELECT pg_catalog\.binary_upgrade_set_record_init_privs\(true\);\nSELECT pg_catalog\.binary_upgrade_set_record_init_privs\(false\);\n//mg;
            s/\n{3,}/\n\n/g;
            s/(binary_upgrade_create_empty_extension.*)/my $l = $1; $l =~ s{\b\d{4,}\b}{OID}g; $l/e;
        ' >"$work/$d.sql"
done
if [ -s "$work/$old.sql" ] && [ -s "$work/$new.sql" ] && diff -q "$work/$old.sql" "$work/$new.sql" >/dev/null; then
    echo "ok - pg_dump --schema-only: 0.1.0 updated equals 0.2.0 installed ($(grep -c '^ALTER EXTENSION holdcommit ADD' "$work/$new.sql") members)"
else
    echo "not ok - pg_dump --schema-only: 0.1.0 updated equals 0.2.0 installed"
    cat "$work/$old.err" "$work/$new.err" | sed 's/^/#   /'
    diff -u --label "0.1.0 updated" --label "0.2.0 installed" "$work/$old.sql" "$work/$new.sql" |
        head -200 | sed 's/^/#   /'
fi

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
check "the ledger sequence continues" \
    "$(q $old -c "SELECT count(*) > 0 AND min(seq) > $seq_before FROM hc_ledger WHERE function IN ('hc_commit', 'hc_finalize')
                    AND reservation_id IN ('$held', '$order')")" "t"
check "hc_check() is empty after calls under 0.2.0" "$(q $old -c 'SELECT count(*) FROM hc_check()')" "0"
exit 0
