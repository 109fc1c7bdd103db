#!/usr/bin/env bash
# A 0.2.0 installed in public, as 0.2.0 allowed: the update to 0.3.0 refuses
# it (42501), and the move that doc/operations.md prints, run as printed,
# takes it to its own schema and updates it with its data, keys, ledger,
# grants and pg_dump registrations kept; the result is what a fresh 0.3.0
# install gives.
#   hc_move_old: 0.2.0, moved into public (what a 0.2.0 install there is),
#                data made by its calls, an application role;
#   hc_move_new: CREATE EXTENSION holdcommit (the control file's version).
# Needs PGHOST, PGPORT, PGUSER (a superuser) for a running server.
cd "$(dirname "$0")/../.."
. test/upgrade/upgrade-lib.bash

app=hc_move_app
upgrade_scratch hc_move_old hc_move_new $app -- ${app}_owner

# The move, exactly as doc/operations.md prints it.
recipe=$(perl -0777 -ne 'print $1 if /test\/upgrade\/move\.sh runs this block as printed -->\n```sql\n(.*?)```/s' \
         doc/operations.md)
check "doc/operations.md prints the move" "$(grep -c 'ALTER EXTENSION holdcommit SET SCHEMA' <<<"$recipe")" "1"

if ! q $old >"$work/setup.log" 2>&1 <<SQL; then
\set VERBOSITY terse
CREATE EXTENSION holdcommit VERSION '0.2.0';
-- Where 0.2.0 let it live: public (the reverse of the move).
UPDATE pg_extension SET extrelocatable = true WHERE extname = 'holdcommit';
ALTER EXTENSION holdcommit SET SCHEMA public;
UPDATE pg_extension SET extrelocatable = false WHERE extname = 'holdcommit';
DROP SCHEMA holdcommit;
SET search_path = public;
SELECT hc_grant_app('$app');
SELECT hc_asset_add('MV-1', 'one'), hc_asset_add('MV-2', 'two');
SELECT hc_hold('MV-1', 'alice', 'mv-hold-1');
SELECT hc_commit(reservation_id) FROM hc_hold('MV-2', 'bob', 'mv-hold-2');
-- Stock as 0.2.0's calls stored it (this library refuses a 0.2.0 database's
-- stock calls until the update): MV-P set to 10, 3 of it reserved by carol.
CREATE FUNCTION pg_temp.fp(VARIADIC v text[]) RETURNS bytea LANGUAGE sql AS \$\$
    SELECT sha256(convert_to(string_agg(octet_length(x) || ':' || x || ';', '' ORDER BY i), 'UTF8'))
      FROM unnest(v) WITH ORDINALITY AS u (x, i) \$\$;
BEGIN;  -- one now() for every row
INSERT INTO hc_inventory (product_id, stock, reserved, version) VALUES ('MV-P', 10, 3, 2);
INSERT INTO hc_stock_reservations (scope_id, id, buyer_id, idempotency_key, status, expires_at, created_at, fingerprint)
VALUES ('MV-P', 'res_01MVP000000000000000000001', 'carol', 'mv-order-1', 'RESERVED',
        now() + interval '10 minutes', now(), pg_temp.fp('hc_reserve', 'carol', '600000000', 'MV-P', '3'));
INSERT INTO hc_stock_reservation_lines (product_id, reservation_id, qty, status, expires_at, buyer_id)
VALUES ('MV-P', 'res_01MVP000000000000000000001', 3, 'RESERVED', now() + interval '10 minutes', 'carol');
INSERT INTO hc_ledger (kind, entity_id, seq, at, event, source, function, reservation_id, buyer_id,
                       reserved_delta, stock_delta, actor, detail)
VALUES ('product', 'MV-P', 1, now(), 'stock_set', 'adjustment', 'hc_stock_set', NULL, NULL, 0, 10,
        current_user, 'created'),
       ('product', 'MV-P', 2, now(), 'reserve', 'call', 'hc_reserve', 'res_01MVP000000000000000000001',
        'carol', 3, 0, current_user, NULL);
COMMIT;
SELECT hc_lock_acquire('mv-lease', 'worker-1');
SELECT hc_attempt_begin('mv-lease', 'worker-1', 1);
SQL
    echo "not ok - a 0.2.0 database in public with data"
    sed 's/^/#   /' "$work/setup.log"
    exit 0
fi
counts="SELECT concat_ws(' ', (SELECT count(*) FROM hc_assets), (SELECT count(*) FROM hc_reservations),
    (SELECT count(*) FROM hc_inventory), (SELECT count(*) FROM hc_stock_reservations),
    (SELECT count(*) FROM hc_stock_reservation_lines), (SELECT count(*) FROM hc_locks),
    (SELECT count(*) FROM hc_attempts), (SELECT count(*) FROM hc_ledger),
    (SELECT count(*) FROM hc_idempotency_keys))"
before=$(q $old -c "SET search_path = public" -c "$counts")
check "the 0.2.0 database lives in public" \
    "$(q $old -c "SELECT extversion, extnamespace::regnamespace FROM pg_extension WHERE extname = 'holdcommit'")" \
    "0.2.0|public"

# The database owner (public's owner in PostgreSQL 15) plants an operator
# that the superuser running the move would reach if the move named
# pg_catalog's operators through the search_path: it makes its caller's
# victim, the owner, a superuser.
q postgres -c "CREATE ROLE ${app}_owner" -c "ALTER DATABASE $old OWNER TO ${app}_owner" >/dev/null
q $old >/dev/null 2>&1 <<SQL
SET ROLE ${app}_owner;
CREATE FUNCTION public.oid_ne_int(a oid, b integer) RETURNS boolean LANGUAGE plpgsql AS \$f\$
BEGIN
    BEGIN EXECUTE 'ALTER ROLE ${app}_owner SUPERUSER'; EXCEPTION WHEN OTHERS THEN NULL; END;
    RETURN a::bigint <> b;
END \$f\$;
CREATE OPERATOR public.<> (LEFTARG = oid, RIGHTARG = integer, FUNCTION = public.oid_ne_int);
SQL
check "the database owner planted its operator in public" \
    "$(q $old -c "SELECT count(*) FROM pg_operator WHERE oprnamespace = 'public'::regnamespace")" "1"

# The update refuses public, and changes nothing.
out=$(q $old -v VERBOSITY=verbose -c "ALTER EXTENSION holdcommit UPDATE" 2>&1)
check "the update to 0.3.0 refuses public (42501)" "$(grep -o '42501' <<<"$out" | head -1)" "42501"
# (its HINT: from 18 on the CONTEXT quotes the install script's statement, which holds it too)
check "... and says where the move is" "$(grep -c '^HINT: .*Moving out of public' <<<"$out")" "1"
check "... and changes nothing" \
    "$(q $old -c "SELECT extversion FROM pg_extension WHERE extname = 'holdcommit'")" "0.2.0"

# The move, as printed; the applications' search_path finds it in both places.
if ! q $old -c "$recipe" >"$work/move.log" 2>&1; then
    echo "not ok - the move of doc/operations.md"
    sed 's/^/#   /' "$work/move.log"
    exit 0
fi
echo "ok - the move of doc/operations.md"
check "... with its grants, no role is left to grant again" "$(grep -c 'must be granted again' "$work/move.log")" "0"
check "... but the application, which reads hc_inventory (now a view) after it is granted again" \
    "$(grep -o 'cannot read hc_inventory until they are granted again: .*' "$work/move.log")" \
    "cannot read hc_inventory until they are granted again: $app"
q $old -c "SELECT holdcommit.hc_grant_app('$app')" >/dev/null
check "the move ran none of the database owner's code" \
    "$(q $old -c "SELECT rolsuper FROM pg_roles WHERE rolname = '${app}_owner'")" "f"
check "moved and updated" \
    "$(q $old -c "SELECT extversion, extnamespace::regnamespace FROM pg_extension WHERE extname = 'holdcommit'")" \
    "$current|holdcommit"
check "nothing of it is left in public" \
    "$(q $old -c "SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relname LIKE 'hc\_%'")|$(
       q $old -c "SELECT count(*) FROM pg_proc WHERE pronamespace = 'public'::regnamespace AND proname LIKE 'hc\_%'")" "0|0"
check "every row kept" "$(q $old -c "SET search_path = holdcommit" -c "$counts")" "$before"
check "pg_dump still keeps the tables' data" \
    "$(q $old -c "SELECT string_agg(c::regclass::text, ' ' ORDER BY c::regclass::text)
                    FROM pg_extension, unnest(extconfig) c WHERE extname = 'holdcommit'")" \
    "hc_asset_routes hc_assets hc_attempts hc_ledger hc_locks hc_reservations hc_stock_carries hc_stock_order_lines hc_stock_orders hc_stock_parts hc_stock_spreads"
check "hc_check() is empty after the move" "$(q $old -c "SELECT string_agg(invariant || ': ' || detail, '; ') FROM holdcommit.hc_check()")" ""
check "a key made in public replays" \
    "$(q $old -c "SELECT status, replayed FROM holdcommit.hc_hold('MV-1', 'alice', 'mv-hold-1')")" "HELD|t"
check "the lease and its marker kept" \
    "$(q $old -c "SELECT token FROM holdcommit.hc_locks WHERE resource = 'mv-lease'")|$(
       q $old -c "SELECT status, attempt FROM holdcommit.hc_attempt_begin('mv-lease', 'worker-1', 1, '0')")" \
    "1|PROCEED|2"
check "the application role's grants work in the new schema" \
    "$(q $old -c "SET ROLE $app" -c "SET search_path = holdcommit, public" \
                -c "SELECT status FROM hc_reserve('MV-P', 1, 'dave', 'mv-order-2')" 2>&1)" "RESERVED"

# The same schema and privileges as a fresh install, and every function
# answering as there; what is not the extension's goes first: the owner's
# operator, and the USAGE on public that 0.2.0's hc_grant_app gave there.
q $old -c "DROP OPERATOR public.<> (oid, integer)" -c "DROP FUNCTION public.oid_ne_int(oid, integer)" \
    -c "REVOKE USAGE ON SCHEMA public FROM $app" >/dev/null
q $new -c "CREATE EXTENSION holdcommit" -c "SELECT hc_grant_app('$app')" >/dev/null 2>&1 ||
    echo "not ok - CREATE EXTENSION holdcommit ($current)"
check_same_schema $old $new "the moved 0.2.0"
check_same_grants $old $new $app
check_tour $old $new
exit 0
