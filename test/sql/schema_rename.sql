-- The schema's owner renames the extension's schema and plants look-alike
-- tables under its old name (core/search_path.c): between two calls of one
-- backend, which keeps its statements, and in the middle of a call.  The
-- owner is a superuser here (owner_attack.sql shows that nobody else may
-- rename it).  Nothing reaches the look-alikes:
--   - between calls, the calls go on in the renamed schema: on 15 and 16 the
--     statements find it by its OID (an override search path), from 17 on
--     the path names the schema, by the name it has when the call starts;
--   - in the middle of a call, a statement analysed again after the rename
--     still finds the tables by the schema's OID on 15 and 16, and from 17
--     on is refused (42501): it reached a table outside the schema whose OID
--     its text carries.
\set VERBOSITY terse
SELECT current_database() AS regress_db \gset
CREATE DATABASE regress_hc_rename;
\c regress_hc_rename
SET client_min_messages = warning;
SET search_path = pg_catalog, pg_temp;
CREATE EXTENSION holdcommit;
CREATE FUNCTION pg_temp.outcome(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
-- Empty look-alikes of the extension's tables in schema target, a new one.
CREATE FUNCTION pg_temp.plant(target text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    t record;
BEGIN
    EXECUTE format('CREATE SCHEMA %I', target);
    FOR t IN SELECT c.relname,
                    string_agg(format('%I %s', a.attname, format_type(a.atttypid, a.atttypmod)), ', '
                               ORDER BY a.attnum) AS columns
               FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
              WHERE c.relnamespace = (SELECT extnamespace FROM pg_extension WHERE extname = 'holdcommit')
                AND c.relkind = 'r' AND c.relname LIKE 'hc\_%'
              GROUP BY c.relname
    LOOP
        EXECUTE format('CREATE TABLE %I.%I (%s)', target, t.relname, t.columns);
    END LOOP;
END $$;
-- The rows of the look-alikes: hc_* tables outside the extension's schema.
CREATE FUNCTION pg_temp.lookalike_rows() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    t record;
    n bigint;
    total bigint := 0;
BEGIN
    FOR t IN SELECT c.oid::regclass AS rel FROM pg_class c
              WHERE c.relkind = 'r' AND c.relname LIKE 'hc\_%'
                AND c.relnamespace <> (SELECT extnamespace FROM pg_extension WHERE extname = 'holdcommit')
                AND c.relnamespace::regnamespace::text NOT IN ('pg_catalog', 'information_schema')
    LOOP
        EXECUTE format('SELECT count(*) FROM %s', t.rel) INTO n;
        total := total + n;
    END LOOP;
    RETURN total;
END $$;

-- The calls' statements prepared and kept: a hold, a refusal, a hold that
-- ends an expired one (two statements), a reserve.
SELECT count(holdcommit.hc_asset_add(id)) AS added FROM unnest(ARRAY['R-1', 'R-2', 'R-3', 'R-4']) id;
SELECT status FROM holdcommit.hc_hold('R-1', 'first', 'rename-1');
SELECT pg_temp.outcome($$SELECT holdcommit.hc_hold('R-1', 'second', 'rename-2')$$);
SELECT status FROM holdcommit.hc_hold('R-3', 'first', 'rename-3');
SELECT status FROM holdcommit.hc_hold('R-4', 'first', 'rename-4');
UPDATE holdcommit.hc_assets SET hold_expires_at = hold_expires_at - interval '1 day';
UPDATE holdcommit.hc_reservations SET expires_at = expires_at - interval '1 day';
SELECT status FROM holdcommit.hc_hold('R-3', 'second', 'rename-5');
SELECT holdcommit.hc_stock_set('SKU', 10) IS NOT NULL AS stocked;
SELECT status FROM holdcommit.hc_reserve('SKU', 1, 'first', 'rename-6');

-- Between calls.
ALTER SCHEMA holdcommit RENAME TO hc_vault;
SELECT pg_temp.plant('holdcommit');
SELECT hc_vault.hc_asset_add('R-5') IS NOT NULL AS added;
SELECT status FROM hc_vault.hc_hold('R-2', 'second', 'rename-7');
SELECT pg_temp.outcome($$SELECT hc_vault.hc_hold('R-3', 'third', 'rename-8')$$);
SELECT status FROM hc_vault.hc_reserve('SKU', 1, 'second', 'rename-9');
SELECT id, status, current_reservation_id IS NOT NULL AS held_by_one
  FROM hc_vault.hc_assets ORDER BY id;
SELECT pg_temp.lookalike_rows();

-- In the middle of a call: a hold of R-4, whose hold has expired, takes the
-- asset (a first statement, which renames the schema and plants
-- look-alikes under its name), then ends the expired hold (a second
-- statement, analysed again).
CREATE FUNCTION pg_temp.rename_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF to_regnamespace('hc_vault_2') IS NULL THEN
        ALTER SCHEMA hc_vault RENAME TO hc_vault_2;
        PERFORM pg_temp.plant('hc_vault');
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER rename_once AFTER UPDATE ON hc_vault.hc_assets
    FOR EACH STATEMENT EXECUTE FUNCTION pg_temp.rename_once();
SELECT pg_temp.outcome($$SELECT hc_vault.hc_hold('R-4', 'third', 'rename-10')$$) AS outcome \gset
SELECT (current_setting('server_version_num')::int >= 170000)::text AS search_path_by_name \gset
SELECT :'outcome' = CASE WHEN :'search_path_by_name'::boolean
                         THEN '42501: a holdcommit statement reached table "hc_vault.hc_reservations", outside the extension''s schema'
                         ELSE 'ok' END AS as_the_major_does;
SELECT pg_temp.lookalike_rows();
-- The refused call's transaction took the rename back with it.
SELECT extnamespace::regnamespace::text = CASE WHEN :'search_path_by_name'::boolean THEN 'hc_vault' ELSE 'hc_vault_2' END
       AS schema_as_the_major_does
  FROM pg_extension WHERE extname = 'holdcommit';

\c :regress_db
SET client_min_messages = warning;
DROP DATABASE regress_hc_rename;
