-- Privileges and search_path safety (doc/reference.md, Privileges).  The database owner's
-- attacks (schema rename, re-plans, pg_temp) are in owner_attack.sql.

-- Nothing is granted to PUBLIC: no function, no table.
SELECT p.oid::regprocedure AS public_can_execute
  FROM pg_proc p
 WHERE p.pronamespace = 'holdcommit'::regnamespace AND p.proname LIKE 'hc\_%'
   AND (p.proacl IS NULL OR EXISTS (SELECT FROM aclexplode(p.proacl) a WHERE a.grantee = 0));
SELECT c.relname AS public_can_read
  FROM pg_class c
 WHERE c.relnamespace = 'holdcommit'::regnamespace AND c.relname LIKE 'hc\_%'
   AND EXISTS (SELECT FROM aclexplode(c.relacl) a WHERE a.grantee = 0);

-- pg_dump keeps the data of the extension's tables.
SELECT unnest(extconfig)::regclass AS dumped FROM pg_extension WHERE extname = 'holdcommit' ORDER BY 1::text;

-- What a role may do with the members of the extension, as has_*_privilege
-- says (whatever the grant that gives it): EXECUTE on a function by its
-- signature, SELECT on a relation (every column) or on the listed columns,
-- and every other privilege on a relation.
CREATE FUNCTION regress_hc_privileges(r regrole) RETURNS TABLE (privilege text, object text)
LANGUAGE sql AS $$
    WITH members AS (
        SELECT d.classid, d.objid FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
         WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e' AND e.extname = 'holdcommit'),
    relations AS (
        SELECT c.oid, c.relname, c.relkind FROM pg_class c JOIN members m
            ON m.classid = 'pg_class'::regclass AND m.objid = c.oid),
    readable AS (
        SELECT c.relname, count(*) AS columns,
               count(*) FILTER (WHERE has_column_privilege(r, c.oid, a.attnum, 'SELECT')) AS readable,
               string_agg(a.attname, ', ' ORDER BY a.attnum)
                   FILTER (WHERE has_column_privilege(r, c.oid, a.attnum, 'SELECT')) AS names
          FROM relations c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
         WHERE c.relkind <> 'S'
         GROUP BY c.relname)
    SELECT 'EXECUTE', m.objid::regprocedure::text FROM members m
     WHERE m.classid = 'pg_proc'::regclass AND has_function_privilege(r, m.objid, 'EXECUTE')
    UNION ALL
    SELECT 'SELECT', relname || CASE WHEN readable = columns THEN '' ELSE ' (' || names || ')' END
      FROM readable WHERE readable > 0
    UNION ALL
    SELECT p.privilege, c.relname FROM relations c,
           unnest(ARRAY['INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER']) p (privilege)
     WHERE c.relkind <> 'S'
       AND CASE WHEN p.privilege IN ('INSERT', 'UPDATE', 'REFERENCES')
                THEN has_any_column_privilege(r, c.oid, p.privilege)
                ELSE has_table_privilege(r, c.oid, p.privilege) END
    UNION ALL
    SELECT p.privilege, c.relname FROM relations c, unnest(ARRAY['USAGE', 'SELECT', 'UPDATE']) p (privilege)
     WHERE c.relkind = 'S' AND has_sequence_privilege(r, c.oid, p.privilege)
$$;

-- What hc_grant_app and hc_grant_operator must give, and nothing more: the
-- calls of an application (holds, stock and leases, not the operator calls), read
-- access to the state without the idempotency keys; for an operator, also
-- the operator calls and read access to everything.  The lease, attempt and
-- sweep members count where they exist.
CREATE TABLE regress_hc_expected (grantee text, privilege text, object text);
INSERT INTO regress_hc_expected
SELECT g, p, o
  FROM unnest(ARRAY['app', 'operator']) g,
       (VALUES ('EXECUTE', 'hc_hold(text,text,text,interval)'),
               ('EXECUTE', 'hc_hold_many(text[],text,text,interval)'),
               ('EXECUTE', 'hc_hold_many(text,text[],text,text,interval)'),
               ('EXECUTE', 'hc_hold_best(text,integer,text,text,interval)'),
               ('EXECUTE', 'hc_commit(text,boolean)'),
               ('EXECUTE', 'hc_release(text)'),
               ('EXECUTE', 'hc_extend(text,interval)'),
               ('EXECUTE', 'hc_reserve(text,integer,text,text,interval)'),
               ('EXECUTE', 'hc_reserve_items(jsonb,text,text,interval)'),
               ('EXECUTE', 'hc_finalize(text,boolean)'),
               ('EXECUTE', 'hc_unreserve(text)'),
               ('EXECUTE', 'hc_commit(text,text,boolean)'),
               ('EXECUTE', 'hc_release(text,text)'),
               ('EXECUTE', 'hc_extend(text,text,interval)'),
               ('EXECUTE', 'hc_finalize(text,text,boolean)'),
               ('EXECUTE', 'hc_unreserve(text,text)'),
               ('EXECUTE', 'hc_order_step(text,text,text[])'),
               ('EXECUTE', 'hc_check()'),
               ('EXECUTE', 'hc_lock_acquire(text,text,interval,integer)'),
               ('EXECUTE', 'hc_lock_acquire_session(text,text,interval,integer)'),
               ('EXECUTE', 'hc_lock_heartbeat(text,text,bigint)'),
               ('EXECUTE', 'hc_lock_release(text,text,bigint)'),
               ('EXECUTE', 'hc_lock_check(text,text,bigint)'),
               ('EXECUTE', 'hc_attempt_begin(text,text,bigint,interval,integer,text)'),
               ('EXECUTE', 'hc_attempt_complete(text,text,bigint,text)'),
               ('SELECT', 'hc_assets'),
               ('SELECT', 'hc_inventory'), ('SELECT', 'hc_stock_parts'),
               ('SELECT', 'hc_stock_reservation_lines'), ('SELECT', 'hc_stock_order_lines'),
               ('SELECT', 'hc_locks'),
               ('SELECT', 'hc_attempts'), ('SELECT', 'hc_lease_status'),
               ('SELECT', 'hc_attempt_status'), ('SELECT', 'hc_sweeper_status'),
               ('SELECT', 'hc_routes'), ('UPDATE', 'hc_routes')) v (p, o)
UNION ALL
VALUES ('app', 'SELECT', 'hc_reservations (id, asset_id, buyer_id, status, expires_at, created_at, ended_at, seats, scope_id)'),
       ('app', 'SELECT', 'hc_stock_reservations (scope_id, id, buyer_id, status, expires_at, created_at, ended_at, products)'),
       ('app', 'SELECT', 'hc_stock_orders (scope_id, id, buyer_id, status, expires_at, created_at, ended_at, products, qty, part)'),
       ('operator', 'EXECUTE', 'hc_asset_add(text,text)'),
       ('operator', 'EXECUTE', 'hc_asset_add(text,text,text,integer,text,integer)'),
       ('operator', 'EXECUTE', 'hc_asset_add(text,text,text,text,integer,text,integer)'),
       ('operator', 'EXECUTE', 'hc_stock_set(text,integer)'),
       ('operator', 'EXECUTE', 'hc_stock_adjust(text,integer,text)'),
       ('operator', 'EXECUTE', 'hc_attempt_reset(text,text)'),
       ('operator', 'EXECUTE', 'hc_sweep(integer)'),
       ('operator', 'EXECUTE', 'hc_sweeper_state()'),
       ('operator', 'EXECUTE', 'hc_stock_spread(text,integer)'),
       ('operator', 'EXECUTE', 'hc_worker_state()'),
       ('operator', 'EXECUTE', 'hc_stock_auto_spread(text,integer)'),
       ('operator', 'EXECUTE', 'hc_stock_waits()'),
       ('operator', 'SELECT', 'hc_stock_spreads'),
       ('operator', 'SELECT', 'hc_reservations'),
       ('operator', 'SELECT', 'hc_stock_reservations'),
       ('operator', 'SELECT', 'hc_stock_orders'),
       ('operator', 'SELECT', 'hc_idempotency_keys'),
       ('operator', 'SELECT', 'hc_ledger'),
       ('operator', 'SELECT', 'hc_overview'),
       ('operator', 'SELECT', 'hc_sweeper_databases'),
       ('operator', 'SELECT', 'hc_workers');
DELETE FROM regress_hc_expected
 WHERE CASE privilege WHEN 'EXECUTE' THEN to_regprocedure(object) IS NULL
                      ELSE to_regclass(split_part(object, ' ', 1)) IS NULL END;

-- The extension lives in its own schema, which the superuser who installed
-- it owns; nobody else may create anything there (an overload such as
-- hc_commit(varchar) would win over the real one for a varchar argument).
-- Look-alikes in public, which an untrusted role may own, are not reached
-- by a caller whose search_path puts holdcommit first, as the README says.
SELECT n.nspowner = e.extowner AS schema_owned_by_extension_owner
  FROM pg_namespace n, pg_extension e
 WHERE e.extname = 'holdcommit' AND n.oid = e.extnamespace;
CREATE ROLE regress_hc_squatter;
GRANT CREATE ON SCHEMA public TO regress_hc_squatter;
SET SESSION AUTHORIZATION regress_hc_squatter;
CREATE FUNCTION holdcommit.hc_commit(varchar) RETURNS text LANGUAGE sql AS $$ SELECT 'not holdcommit' $$;
-- An overload in public would win over the extension's function for an
-- untyped literal whatever the search_path order (hc_grant_app(text) over
-- hc_grant_app(regrole)); hc_guard_names refuses hc_* functions everywhere
-- but in the extension, whoever creates, renames or moves them.
CREATE FUNCTION public.hc_grant_app(role text) RETURNS void
    LANGUAGE sql AS $$ SELECT $$;
CREATE FUNCTION public.lookalike(varchar) RETURNS text LANGUAGE sql AS $$ SELECT 'not holdcommit' $$;
ALTER FUNCTION public.lookalike(varchar) RENAME TO hc_commit;
RESET SESSION AUTHORIZATION;
CREATE SCHEMA elsewhere;
CREATE FUNCTION elsewhere.hc_hold(varchar, varchar, varchar) RETURNS text
    LANGUAGE sql AS $$ SELECT 'not holdcommit' $$;
SELECT count(*) AS strangers FROM pg_proc
 WHERE proname LIKE 'hc\_%' AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.objid = pg_proc.oid AND d.deptype = 'e');
DROP SCHEMA elsewhere;
DROP FUNCTION public.lookalike(varchar);
REVOKE CREATE ON SCHEMA public FROM regress_hc_squatter;
CREATE ROLE regress_hc_app;
CREATE ROLE regress_hc_operator;
CREATE ROLE regress_hc_nobody;
SELECT hc_grant_app('regress_hc_app');
SELECT hc_grant_operator('regress_hc_operator');

-- Granted and not expected, or expected and not granted: nothing.
SELECT 'granted, not expected' AS difference, g.grantee, p.privilege, p.object
  FROM (VALUES ('app', 'regress_hc_app'::regrole), ('operator', 'regress_hc_operator'),
               ('nobody', 'regress_hc_nobody')) g (grantee, role),
       regress_hc_privileges(g.role) p
 WHERE NOT EXISTS (SELECT FROM regress_hc_expected e
                    WHERE e.grantee = g.grantee AND e.privilege = p.privilege AND e.object = p.object)
UNION ALL
SELECT 'expected, not granted', e.grantee, e.privilege, e.object
  FROM regress_hc_expected e
 WHERE NOT EXISTS (SELECT FROM regress_hc_privileges(CASE e.grantee WHEN 'app' THEN 'regress_hc_app'
                                                                    ELSE 'regress_hc_operator' END::regrole) p
                    WHERE p.privilege = e.privilege AND p.object = e.object)
 ORDER BY 1, 2, 3, 4;
-- Granting again changes nothing.
SELECT hc_grant_app('regress_hc_app');
SELECT count(*) AS app_privileges_after_regrant FROM regress_hc_privileges('regress_hc_app')
 WHERE (privilege, object) NOT IN (SELECT privilege, object FROM regress_hc_expected WHERE grantee = 'app');

-- An application role gets the calls and read access, nothing that
-- bypasses them, and no idempotency key: a buyer who learned another's key
-- could replay their reservation.
INSERT INTO hc_assets (id) VALUES ('SEC-1'), ('SEC-2');
SELECT hc_stock_set('SEC-P', 5) IS NOT NULL AS stocked;
SET ROLE regress_hc_app;
SELECT reservation_id AS sec_hold FROM hc_hold('SEC-1', 'app-buyer', 'sec-key-1') \gset
SELECT reservation_id AS sec_order FROM hc_reserve('SEC-P', 2, 'app-buyer', 'sec-key-2') \gset
SELECT status FROM hc_assets WHERE id = 'SEC-1';
SELECT id = :'sec_hold' AS found, asset_id, buyer_id, status, expires_at > created_at AS live, ended_at
  FROM hc_reservations WHERE id = :'sec_hold';
SELECT scope_id, id = :'sec_order' AS found, buyer_id, status, expires_at > created_at AS live, ended_at
  FROM hc_stock_reservations WHERE id = :'sec_order';
SELECT product_id, qty, status FROM hc_stock_reservation_lines WHERE reservation_id = :'sec_order';
SELECT product_id, stock, reserved, available FROM hc_inventory WHERE product_id = 'SEC-P';
SELECT idempotency_key FROM hc_reservations WHERE id = :'sec_hold';
SELECT * FROM hc_reservations WHERE id = :'sec_hold';
SELECT idempotency_key FROM hc_stock_reservations WHERE id = :'sec_order';
SELECT * FROM hc_stock_reservations WHERE id = :'sec_order';
SELECT count(*) FROM hc_idempotency_keys;
SELECT key FROM hc_idempotency_keys;
SELECT count(*) FROM hc_ledger;
SELECT count(*) FROM hc_check();
INSERT INTO hc_assets (id) VALUES ('SEC-3');
UPDATE hc_assets SET status = 'AVAILABLE' WHERE id = 'SEC-1';
DELETE FROM hc_reservations;
UPDATE hc_reservations SET status = 'COMMITTED';
UPDATE hc_stock_parts SET reserved = 0;
DELETE FROM hc_ledger;
SELECT hc_asset_add('SEC-3', 'not for apps');
SELECT hc_stock_set('SEC-P', 100);
RESET ROLE;

-- An operator reads everything, the keys and the ledger included.
SET ROLE regress_hc_operator;
SELECT idempotency_key FROM hc_reservations WHERE id = :'sec_hold';
SELECT idempotency_key FROM hc_stock_reservations WHERE id = :'sec_order';
SELECT key, kind FROM hc_idempotency_keys WHERE key LIKE 'sec-key-%' ORDER BY key;
SELECT event, actor FROM hc_ledger WHERE entity_id IN ('SEC-1', 'SEC-P') ORDER BY seq;
SELECT stock FROM hc_stock_adjust('SEC-P', 1, 'operator restock');
DELETE FROM hc_ledger;
RESET ROLE;

-- The ledger records the caller, not the extension's owner.
SELECT actor, event FROM hc_ledger WHERE entity_id IN ('SEC-1', 'SEC-P') ORDER BY seq;

-- A role granted nothing can call nothing: it cannot even reach the schema.
SET ROLE regress_hc_nobody;
SELECT holdcommit.hc_hold('SEC-2', 'x', 'sec-key-3');
SELECT * FROM holdcommit.hc_check();
RESET ROLE;

-- Objects on the caller's search_path never run inside hc_* functions.
-- Someone who can create objects in a schema the callers put first on
-- their search_path fills it with look-alikes, each of which warns and
-- records that it ran, and otherwise behaves like the original: operators,
-- functions, aggregates, a domain, and tables named like the extension's.
-- Then every hc_* function is called, by the superuser and by an
-- application role, under that search_path (test/security/victim_calls.sql);
-- each call must reach the extension, and nothing of regress_evil may run.
CREATE SCHEMA regress_evil;
GRANT USAGE ON SCHEMA regress_evil TO PUBLIC;
CREATE TABLE regress_evil.ran (ran_as name, what text);
GRANT INSERT ON regress_evil.ran TO PUBLIC;
CREATE FUNCTION regress_evil.ran(what text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    RAISE WARNING 'regress_evil ran as %: %', current_user, what;
    INSERT INTO regress_evil.ran VALUES (current_user, what);
    RETURN true;
END $$;
CREATE FUNCTION regress_evil.evil_eq(a text, b text) RETURNS boolean LANGUAGE sql
    AS $$ SELECT regress_evil.ran('operator =') AND a OPERATOR(pg_catalog.=) b $$;
CREATE OPERATOR regress_evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = regress_evil.evil_eq);
CREATE FUNCTION regress_evil.evil_le(a timestamptz, b timestamptz) RETURNS boolean LANGUAGE sql
    AS $$ SELECT regress_evil.ran('operator <=') AND a OPERATOR(pg_catalog.<=) b $$;
CREATE OPERATOR regress_evil.<= (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = regress_evil.evil_le);
CREATE FUNCTION regress_evil.evil_plus(a integer, b integer) RETURNS integer LANGUAGE sql
    AS $$ SELECT CASE WHEN regress_evil.ran('operator +') THEN a OPERATOR(pg_catalog.+) b END $$;
CREATE OPERATOR regress_evil.+ (LEFTARG = integer, RIGHTARG = integer, FUNCTION = regress_evil.evil_plus);
CREATE FUNCTION regress_evil.clock_timestamp() RETURNS timestamptz LANGUAGE sql
    AS $$ SELECT CASE WHEN regress_evil.ran('clock_timestamp') THEN pg_catalog.clock_timestamp() END $$;
CREATE FUNCTION regress_evil.now() RETURNS timestamptz LANGUAGE sql
    AS $$ SELECT CASE WHEN regress_evil.ran('now') THEN pg_catalog.now() END $$;
CREATE FUNCTION regress_evil.format(f text, VARIADIC a text[]) RETURNS text LANGUAGE sql
    AS $$ SELECT CASE WHEN regress_evil.ran('format') THEN pg_catalog.format(f, VARIADIC a) END $$;
CREATE FUNCTION regress_evil.unnest(a text[]) RETURNS SETOF text LANGUAGE sql
    AS $$ SELECT x FROM pg_catalog.unnest(a) x WHERE regress_evil.ran('unnest') $$;
CREATE FUNCTION regress_evil.nextval(s regclass) RETURNS bigint LANGUAGE sql
    AS $$ SELECT CASE WHEN regress_evil.ran('nextval') THEN pg_catalog.nextval(s) END $$;
CREATE FUNCTION regress_evil.count_step(n bigint) RETURNS bigint LANGUAGE sql
    AS $$ SELECT CASE WHEN regress_evil.ran('count') THEN n OPERATOR(pg_catalog.+) 1 END $$;
CREATE AGGREGATE regress_evil.count(*) (SFUNC = regress_evil.count_step, STYPE = bigint, INITCOND = '0');
CREATE FUNCTION regress_evil.sum_step(s bigint, v integer) RETURNS bigint LANGUAGE sql
    AS $$ SELECT CASE WHEN regress_evil.ran('sum') THEN COALESCE(s, 0) OPERATOR(pg_catalog.+) v END $$;
CREATE AGGREGATE regress_evil.sum(integer) (SFUNC = regress_evil.sum_step, STYPE = bigint);
CREATE DOMAIN regress_evil.text AS pg_catalog.text CHECK (regress_evil.ran('domain text'));
CREATE TABLE regress_evil.hc_assets (LIKE holdcommit.hc_assets);
CREATE TABLE regress_evil.hc_reservations (LIKE holdcommit.hc_reservations);
CREATE TABLE regress_evil.hc_inventory (LIKE holdcommit.hc_inventory);
CREATE TABLE regress_evil.hc_stock_parts (LIKE holdcommit.hc_stock_parts);
CREATE TABLE regress_evil.hc_ledger (LIKE holdcommit.hc_ledger);
CREATE FUNCTION regress_evil.on_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM regress_evil.ran('trigger on ' || TG_TABLE_NAME);
    RETURN NULL;
END $$;
CREATE TRIGGER on_write BEFORE INSERT OR UPDATE OR DELETE ON regress_evil.hc_assets
    FOR EACH STATEMENT EXECUTE FUNCTION regress_evil.on_write();
CREATE TRIGGER on_write BEFORE INSERT OR UPDATE OR DELETE ON regress_evil.hc_reservations
    FOR EACH STATEMENT EXECUTE FUNCTION regress_evil.on_write();
CREATE TRIGGER on_write BEFORE INSERT OR UPDATE OR DELETE ON regress_evil.hc_inventory
    FOR EACH STATEMENT EXECUTE FUNCTION regress_evil.on_write();
CREATE TRIGGER on_write BEFORE INSERT OR UPDATE OR DELETE ON regress_evil.hc_stock_parts
    FOR EACH STATEMENT EXECUTE FUNCTION regress_evil.on_write();
CREATE TRIGGER on_write BEFORE INSERT OR UPDATE OR DELETE ON regress_evil.hc_ledger
    FOR EACH STATEMENT EXECUTE FUNCTION regress_evil.on_write();
GRANT ALL ON ALL TABLES IN SCHEMA regress_evil TO PUBLIC;
-- A product without ledger rows: hc_check() must report it, and only it.
INSERT INTO hc_stock_parts (product_id, stock) VALUES ('CHECK-CANARY', 7);
CREATE ROLE regress_hc_grantee_app;
CREATE ROLE regress_hc_grantee_op;
\set ext holdcommit
\set victim_path 'regress_evil, pg_catalog, public'
\set app regress_hc_app
\set s sec
\set grantee_app regress_hc_grantee_app
\set grantee_op regress_hc_grantee_op
\i test/security/victim_calls.sql
SELECT what, ran_as, count(*) FROM regress_evil.ran GROUP BY 1, 2 ORDER BY 1, 2;
RESET search_path;
DELETE FROM hc_stock_parts WHERE product_id = 'CHECK-CANARY';
SET client_min_messages = warning;
DROP SCHEMA regress_evil CASCADE;
RESET client_min_messages;

DROP TABLE regress_hc_expected;
DROP FUNCTION regress_hc_privileges(regrole);
DROP OWNED BY regress_hc_app, regress_hc_operator, regress_hc_grantee_app, regress_hc_grantee_op;
DROP ROLE regress_hc_app, regress_hc_operator, regress_hc_nobody, regress_hc_grantee_app, regress_hc_grantee_op;
SELECT * FROM hc_check();

-- holdcommit refuses to install into a schema holdcommit that someone else
-- created first (judged by its owner, not its name), and installs into one
-- that a superuser made.
SELECT current_database() AS regress_db \gset
CREATE DATABASE regress_hc_squatted;
\c regress_hc_squatted
CREATE SCHEMA holdcommit AUTHORIZATION regress_hc_squatter;
SET SESSION AUTHORIZATION regress_hc_squatter;
CREATE TABLE holdcommit.planted (x int);
RESET SESSION AUTHORIZATION;
-- The refusal's detail and hint, without its CONTEXT (from 18 on, the whole
-- statement of the install script and its line).
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE EXTENSION holdcommit;
\set SHOW_CONTEXT errors
\set VERBOSITY terse
SELECT count(*) AS installed FROM pg_extension WHERE extname = 'holdcommit';
ALTER SCHEMA holdcommit OWNER TO CURRENT_USER;
-- Given to a superuser, it still holds what the squatter put there; and one
-- where anyone may create is no better.
CREATE EXTENSION holdcommit;
DROP SCHEMA holdcommit CASCADE;
CREATE SCHEMA holdcommit;
GRANT CREATE ON SCHEMA holdcommit TO PUBLIC;
CREATE EXTENSION holdcommit;
REVOKE CREATE ON SCHEMA holdcommit FROM PUBLIC;
CREATE FUNCTION public.hc_hold(varchar) RETURNS text LANGUAGE sql AS $$ SELECT 'not holdcommit' $$;
CREATE EXTENSION holdcommit;
DROP FUNCTION public.hc_hold(varchar);
CREATE EXTENSION holdcommit;
SELECT extnamespace::regnamespace AS installed_in FROM pg_extension WHERE extname = 'holdcommit';
\c :regress_db
DROP DATABASE regress_hc_squatted;
DROP ROLE regress_hc_squatter;
