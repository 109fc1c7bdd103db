-- The database owner's threat model (doc/reference.md, Privileges).
--
-- A non-superuser role owns a database, so in PostgreSQL 15 it owns the
-- schema public (through pg_database_owner); the superuser installed
-- holdcommit into its own schema, holdcommit, which the superuser owns, and
-- gave the database owner hc_grant_app.  In one backend, as a
-- connection pool would share it, the victims (the superuser and an
-- application role) first call every hc_* function so that their plans are
-- cached; then the owner sets traps, one attack at a time, and after each the
-- victims call every function again by its schema-qualified name
-- (test/security/victim_calls.sql).  Every trap runs attacker.pwn(), which
-- warns, writes a row (current_user, session_user, the victim's call, what)
-- into attacker.log and tries to make the owner a superuser.  After each
-- attack:
--   - every call reached the extension: the reservations it returned exist
--     in the state the calls left them in, its ledger rows name the caller,
--     hc_check() reports the planted CHECK-CANARY, the grants were given;
--   - no foreign code ran: no warning, attacker.log is empty, and the owner
--     is not a superuser.

\set VERBOSITY terse
SET client_min_messages = warning;
SELECT current_database() AS regress_db \gset
CREATE ROLE regress_hc_dbowner NOLOGIN;
CREATE ROLE regress_hc_victim_app NOLOGIN;
-- The grantees of rounds 0 to 5.
SELECT format('CREATE ROLE %I NOLOGIN', 'regress_hc_grantee_' || kind || '_' || i)
  FROM generate_series(0, 5) i, unnest(ARRAY['app', 'op']) kind \gexec
CREATE DATABASE regress_hc_owned OWNER regress_hc_dbowner;
\c regress_hc_owned
SET client_min_messages = warning;
-- The test's own statements run with this search_path and name every
-- object by its schema: the attacker's objects are never looked up by them.
SET search_path = pg_catalog, pg_temp;

-- The superuser installs holdcommit; the database owner owns public, not
-- the extension's schema.
CREATE EXTENSION holdcommit;
SELECT n.nspowner::regrole AS public_owner,
       pg_has_role('regress_hc_dbowner', n.nspowner, 'USAGE') AS dbowner_owns_public,
       x.nspname AS extension_schema, x.nspowner::regrole AS extension_schema_owner,
       e.extowner::regrole AS extension_owner
  FROM pg_namespace n, pg_extension e JOIN pg_namespace x ON x.oid = e.extnamespace
 WHERE n.nspname = 'public' AND e.extname = 'holdcommit';
SELECT holdcommit.hc_grant_app('regress_hc_dbowner'), holdcommit.hc_grant_app('regress_hc_victim_app');
-- A product without ledger rows: hc_check() reports it, and only it.
INSERT INTO holdcommit.hc_stock_parts (product_id, stock) VALUES ('CHECK-CANARY', 7);

-- The attacker's kit, in a schema of the attacker's own.
SET SESSION AUTHORIZATION regress_hc_dbowner;
CREATE SCHEMA attacker;
GRANT USAGE ON SCHEMA attacker TO PUBLIC;
CREATE TABLE attacker.log (ran_as name, session name, during text, what text);
GRANT SELECT, INSERT ON attacker.log TO PUBLIC;
-- The payload: whoever runs it, record it and try to make the owner superuser.
CREATE FUNCTION attacker.pwn(what text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    RAISE WARNING 'foreign code ran as %: %', current_user, what;
    INSERT INTO attacker.log
        VALUES (current_user, session_user,
                pg_catalog.substring(pg_catalog.current_query(), '\.(hc_[a-z_]+)\('), what);
    BEGIN
        ALTER ROLE regress_hc_dbowner SUPERUSER;
    EXCEPTION WHEN OTHERS THEN
        NULL;
    END;
    RETURN true;
END $$;
CREATE FUNCTION attacker.pwn_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM attacker.pwn(TG_ARGV[0] || ' ' || TG_WHEN || ' ' || TG_OP || ' on ' || TG_TABLE_NAME);
    IF TG_LEVEL = 'ROW' THEN
        RETURN COALESCE(NEW, OLD);
    END IF;
    RETURN NULL;
END $$;
-- Look-alikes of every function of the extension (same name and arguments)
-- in the schema target; each runs the payload.
CREATE FUNCTION attacker.plant_functions(target text, source text, tag text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    p record;
BEGIN
    FOR p IN SELECT proname, pg_get_function_arguments(oid) AS args, pg_get_function_result(oid) AS result
               FROM pg_proc WHERE pronamespace = source::regnamespace AND proname LIKE 'hc\_%'
                AND prorettype <> 'event_trigger'::regtype
    LOOP
        EXECUTE format('CREATE FUNCTION %s.%I(%s) RETURNS %s LANGUAGE plpgsql AS %L',
                       target, p.proname, p.args, p.result,
                       format('BEGIN PERFORM attacker.pwn(%L); RETURN%s; END', tag || ' ' || p.proname,
                              CASE WHEN p.result ~ '^(TABLE|SETOF)' OR p.result = 'void' THEN '' ELSE ' NULL' END));
    END LOOP;
END $$;
-- Views named like every table of the extension, passing every row of the
-- real table through the payload; security_invoker so that whoever reads or
-- updates through them (the extension's owner) has the rights on the real
-- table: the extension keeps working, and the payload runs as its owner.
CREATE FUNCTION attacker.plant_views(target text, source text, tag text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    t name;
BEGIN
    FOR t IN SELECT relname FROM pg_class
              WHERE relnamespace = source::regnamespace AND relkind = 'r' AND relname LIKE 'hc\_%'
    LOOP
        EXECUTE format('CREATE VIEW %s.%I WITH (security_invoker = true) AS SELECT * FROM %I.%I WHERE attacker.pwn(%L)',
                       target, t, source, t, tag || ' ' || t);
    END LOOP;
END $$;
-- Tables named like every table of the extension, with the same columns and
-- triggers that run the payload on every write; and a look-alike sequence.
CREATE FUNCTION attacker.plant_tables(target text, source text, tag text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    t record;
BEGIN
    FOR t IN SELECT c.relname,
                    string_agg(format('%I %s', a.attname, format_type(a.atttypid, a.atttypmod)), ', '
                               ORDER BY a.attnum) AS columns
               FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
              WHERE c.relnamespace = source::regnamespace AND c.relkind = 'r' AND c.relname LIKE 'hc\_%'
              GROUP BY c.relname
    LOOP
        EXECUTE format('CREATE TABLE %I.%I (%s)', target, t.relname, t.columns);
        EXECUTE format('GRANT ALL ON %I.%I TO PUBLIC', target, t.relname);
        EXECUTE format('CREATE TRIGGER pwn_row BEFORE INSERT OR UPDATE OR DELETE ON %I.%I'
                       ' FOR EACH ROW EXECUTE FUNCTION attacker.pwn_trigger(%L)', target, t.relname, tag);
        EXECUTE format('CREATE TRIGGER pwn_statement BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON %I.%I'
                       ' FOR EACH STATEMENT EXECUTE FUNCTION attacker.pwn_trigger(%L)', target, t.relname, tag);
    END LOOP;
    EXECUTE format('CREATE SEQUENCE %I.hc_ledger_seq', target);
END $$;
-- Look-alike operators, functions, aggregates, domains and a cast in the
-- schema target, each running the payload and otherwise behaving like the
-- original, so that a call that uses one goes on and commits: the
-- operators and functions that the extension's statements use, and
-- overloads that match some arguments better than pg_catalog's do.
CREATE FUNCTION attacker.plant_lures(target text) RETURNS void
LANGUAGE plpgsql AS $plant$
DECLARE
    ddl text;
BEGIN
    FOREACH ddl IN ARRAY ARRAY[
        $ddl$CREATE FUNCTION %1$I.text_eq(a text, b text) RETURNS boolean LANGUAGE sql
            AS $$ SELECT attacker.pwn('operator =(text,text)') AND a OPERATOR(pg_catalog.=) b $$$ddl$,
        $ddl$CREATE OPERATOR %1$I.= (LEFTARG = text, RIGHTARG = text, FUNCTION = %1$I.text_eq)$ddl$,
        $ddl$CREATE FUNCTION %1$I.text_ne(a text, b text) RETURNS boolean LANGUAGE sql
            AS $$ SELECT attacker.pwn('operator <>(text,text)') AND a OPERATOR(pg_catalog.<>) b $$$ddl$,
        $ddl$CREATE OPERATOR %1$I.<> (LEFTARG = text, RIGHTARG = text, FUNCTION = %1$I.text_ne)$ddl$,
        $ddl$CREATE FUNCTION %1$I.text_cat(a text, b text) RETURNS text LANGUAGE sql
            AS $$ SELECT CASE WHEN attacker.pwn('operator ||(text,text)') THEN a OPERATOR(pg_catalog.||) b END $$$ddl$,
        $ddl$CREATE OPERATOR %1$I.|| (LEFTARG = text, RIGHTARG = text, FUNCTION = %1$I.text_cat)$ddl$,
        $ddl$CREATE FUNCTION %1$I.ts_le(a timestamptz, b timestamptz) RETURNS boolean LANGUAGE sql
            AS $$ SELECT attacker.pwn('operator <=(timestamptz,timestamptz)') AND a OPERATOR(pg_catalog.<=) b $$$ddl$,
        $ddl$CREATE OPERATOR %1$I.<= (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = %1$I.ts_le)$ddl$,
        $ddl$CREATE FUNCTION %1$I.int_add(a integer, b integer) RETURNS integer LANGUAGE sql
            AS $$ SELECT CASE WHEN attacker.pwn('operator +(integer,integer)') THEN a OPERATOR(pg_catalog.+) b END $$$ddl$,
        $ddl$CREATE OPERATOR %1$I.+ (LEFTARG = integer, RIGHTARG = integer, FUNCTION = %1$I.int_add)$ddl$,
        $ddl$CREATE FUNCTION %1$I.int_sub(a integer, b integer) RETURNS integer LANGUAGE sql
            AS $$ SELECT CASE WHEN attacker.pwn('operator -(integer,integer)') THEN a OPERATOR(pg_catalog.-) b END $$$ddl$,
        $ddl$CREATE OPERATOR %1$I.- (LEFTARG = integer, RIGHTARG = integer, FUNCTION = %1$I.int_sub)$ddl$,
        $ddl$CREATE FUNCTION %1$I.clock_timestamp() RETURNS timestamptz LANGUAGE sql
            AS $$ SELECT CASE WHEN attacker.pwn('clock_timestamp()') THEN pg_catalog.clock_timestamp() END $$$ddl$,
        $ddl$CREATE FUNCTION %1$I.now() RETURNS timestamptz LANGUAGE sql
            AS $$ SELECT CASE WHEN attacker.pwn('now()') THEN pg_catalog.now() END $$$ddl$,
        $ddl$CREATE FUNCTION %1$I.nextval(s regclass) RETURNS bigint LANGUAGE sql
            AS $$ SELECT CASE WHEN attacker.pwn('nextval(regclass)') THEN pg_catalog.nextval(s) END $$$ddl$,
        $ddl$CREATE FUNCTION %1$I.unnest(a anyarray) RETURNS SETOF anyelement LANGUAGE sql
            AS $$ SELECT x FROM pg_catalog.unnest(a) x WHERE attacker.pwn('unnest(anyarray)') $$$ddl$,
        $ddl$CREATE FUNCTION %1$I.format(f text) RETURNS text LANGUAGE sql
            AS $$ SELECT CASE WHEN attacker.pwn('format(text)') THEN f END $$$ddl$,
        $ddl$CREATE FUNCTION %1$I.format(f text, VARIADIC a text[]) RETURNS text LANGUAGE sql
            AS $$ SELECT CASE WHEN attacker.pwn('format(text, text[])') THEN pg_catalog.format(f, VARIADIC a) END $$$ddl$,
        $ddl$CREATE FUNCTION %1$I.jsonb_array_elements(j jsonb) RETURNS SETOF jsonb LANGUAGE sql
            AS $$ SELECT x FROM pg_catalog.jsonb_array_elements(j) x WHERE attacker.pwn('jsonb_array_elements(jsonb)') $$$ddl$,
        $ddl$CREATE FUNCTION %1$I.count_step(n bigint) RETURNS bigint LANGUAGE sql
            AS $$ SELECT CASE WHEN attacker.pwn('count(*)') THEN n OPERATOR(pg_catalog.+) 1 END $$$ddl$,
        $ddl$CREATE AGGREGATE %1$I.count(*) (SFUNC = %1$I.count_step, STYPE = bigint, INITCOND = '0')$ddl$,
        $ddl$CREATE FUNCTION %1$I.sum_step(s bigint, v integer) RETURNS bigint LANGUAGE sql
            AS $$ SELECT CASE WHEN attacker.pwn('sum(integer)') THEN COALESCE(s, 0) OPERATOR(pg_catalog.+) v END $$$ddl$,
        $ddl$CREATE AGGREGATE %1$I.sum(integer) (SFUNC = %1$I.sum_step, STYPE = bigint)$ddl$,
        $ddl$CREATE FUNCTION %1$I.count_text_step(n bigint, v text) RETURNS bigint LANGUAGE sql
            AS $$ SELECT CASE WHEN attacker.pwn('count(text)') THEN n OPERATOR(pg_catalog.+) 1 END $$$ddl$,
        $ddl$CREATE AGGREGATE %1$I.count(text) (SFUNC = %1$I.count_text_step, STYPE = bigint, INITCOND = '0')$ddl$,
        $ddl$CREATE FUNCTION %1$I.unnest(a text[]) RETURNS SETOF text LANGUAGE sql
            AS $$ SELECT x FROM pg_catalog.unnest(a) x WHERE attacker.pwn('unnest(text[])') $$$ddl$,
        $ddl$CREATE DOMAIN %1$I.text AS pg_catalog.text CHECK (attacker.pwn('domain text'))$ddl$,
        $ddl$CREATE DOMAIN %1$I.jsonb AS pg_catalog.jsonb CHECK (attacker.pwn('domain jsonb'))$ddl$,
        $ddl$CREATE DOMAIN %1$I.timestamptz AS pg_catalog.timestamptz CHECK (attacker.pwn('domain timestamptz'))$ddl$,
        $ddl$CREATE DOMAIN %1$I.int4 AS pg_catalog.int4 CHECK (attacker.pwn('domain int4'))$ddl$,
        $ddl$CREATE TYPE %1$I.lure_status AS ENUM ('HELD', 'RESERVED')$ddl$,
        $ddl$CREATE FUNCTION %1$I.lure_status(s pg_catalog.text) RETURNS %1$I.lure_status LANGUAGE sql
            AS $$ SELECT CASE WHEN attacker.pwn('cast text AS lure_status') THEN 'HELD'::%1$I.lure_status END $$$ddl$,
        $ddl$CREATE CAST (pg_catalog.text AS %1$I.lure_status) WITH FUNCTION %1$I.lure_status(pg_catalog.text) AS IMPLICIT$ddl$
    ]
    LOOP
        EXECUTE format(ddl, target);
    END LOOP;
END $plant$;
-- Overloads of the extension's functions in the schema target, each running
-- the payload: regrole arguments become text (which an untyped literal
-- prefers), text arguments become varchar.
CREATE FUNCTION attacker.plant_overloads(target text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    p record;
BEGIN
    FOR p IN SELECT proname, pg_get_function_result(oid) AS result,
                    (SELECT string_agg(CASE a WHEN 'regrole'::regtype THEN 'text'
                                              WHEN 'text'::regtype THEN 'varchar'
                                              ELSE format_type(a, NULL) END, ', ' ORDER BY i)
                       FROM unnest(proargtypes) WITH ORDINALITY u (a, i)) AS args
               FROM pg_proc
              WHERE pronamespace = target::regnamespace AND proname LIKE 'hc\_%'
                AND ('regrole'::regtype = ANY (proargtypes) OR 'text'::regtype = ANY (proargtypes))
    LOOP
        EXECUTE format('CREATE FUNCTION %I.%I(%s) RETURNS %s LANGUAGE plpgsql AS %L',
                       target, p.proname, p.args, p.result,
                       format('BEGIN PERFORM attacker.pwn(%L); RETURN%s; END', 'overload ' || p.proname,
                              CASE WHEN p.result ~ '^(TABLE|SETOF)' OR p.result = 'void' THEN '' ELSE ' NULL' END));
    END LOOP;
END $$;
RESET SESSION AUTHORIZATION;

-- Round 0, no attack yet: the victims call every function; the backend now
-- has every plan of the extension cached.
\set ext holdcommit
\set victim_path '"$user", public'
\set app regress_hc_victim_app
\set round 0
\i test/security/owner_round.sql

-- Attack 1: look-alike operators, functions, aggregates, domains, a cast and
-- look-alikes of the extension's tables and functions, in a schema the
-- attacker puts first on the victims' search_path.  What stops it: the
-- extension names everything by schema and runs with search_path pinned to
-- pg_catalog, pg_temp; and hc_guard_names refuses the look-alike hc_*
-- functions, which a victim's own call could otherwise reach.
SET SESSION AUTHORIZATION regress_hc_dbowner;
CREATE SCHEMA lure;
GRANT USAGE ON SCHEMA lure TO PUBLIC;
SELECT attacker.plant_lures('lure');
SELECT attacker.plant_views('lure', 'holdcommit', 'lure view');
SELECT attacker.plant_functions('lure', 'holdcommit', 'lure function');
RESET SESSION AUTHORIZATION;
\set victim_path 'lure, pg_catalog, public'
\set round 1
\i test/security/owner_round.sql

-- Attack 2: in the shared backend, the attacker leaves views and functions
-- named like the extension's in pg_temp, which the victims then put first
-- on their search_path.  What stops it: the extension names its tables by
-- schema and pg_temp is never searched for functions or operators.
SET SESSION AUTHORIZATION regress_hc_dbowner;
SELECT attacker.plant_views('pg_temp', 'holdcommit', 'temp view');
SELECT attacker.plant_functions('pg_temp', 'holdcommit', 'temp function');
CREATE SEQUENCE pg_temp.hc_ledger_seq;
CREATE FUNCTION pg_temp.clock_timestamp() RETURNS timestamptz LANGUAGE sql
    AS $$ SELECT CASE WHEN attacker.pwn('pg_temp.clock_timestamp()') THEN pg_catalog.clock_timestamp() END $$;
RESET SESSION AUTHORIZATION;
\set victim_path 'pg_temp, pg_catalog, public'
\set round 2
\i test/security/owner_round.sql
DISCARD TEMP;

-- Attack 3: the owner tries to rename the extension's schema, and renames
-- public to shop instead and creates a new public full of look-alikes:
-- views over the real tables that run the payload for every row, and
-- functions named like the extension's.  What stops it: only the schema's
-- owner (the superuser) may rename it, and nothing of the extension is
-- looked up in public.
SET SESSION AUTHORIZATION regress_hc_dbowner;
ALTER SCHEMA holdcommit RENAME TO vault;
ALTER SCHEMA public RENAME TO shop;
CREATE SCHEMA public;
GRANT USAGE ON SCHEMA public TO PUBLIC;
SELECT attacker.plant_views('public', 'holdcommit', 'renamed view');
SELECT attacker.plant_functions('public', 'holdcommit', 'renamed function');
CREATE SEQUENCE public.hc_ledger_seq;
RESET SESSION AUTHORIZATION;
\set victim_path '"$user", public'
\set round 3
\i test/security/owner_round.sql

-- Attack 4: the owner fills public and shop with look-alike tables whose
-- triggers run the payload, then does to the extension's tables all that a
-- database owner may: ANALYZE (forcing re-plans), VACUUM, VACUUM FULL and
-- REINDEX DATABASE.  What stops it: the plans follow the extension's schema
-- by its OID, and none of these changes what a statement means: they
-- rebuild the same rows and the same unique indexes.
SET SESSION AUTHORIZATION regress_hc_dbowner;
DROP SCHEMA public CASCADE;
CREATE SCHEMA public;
GRANT USAGE ON SCHEMA public, shop TO PUBLIC;
SELECT attacker.plant_tables('public', 'holdcommit', 'table public');
SELECT attacker.plant_tables('shop', 'holdcommit', 'table shop');
SELECT attacker.plant_functions('public', 'holdcommit', 'public function');
SELECT attacker.plant_functions('shop', 'holdcommit', 'shop function');
ANALYZE holdcommit.hc_assets, holdcommit.hc_reservations, holdcommit.hc_ledger,
        holdcommit.hc_stock_parts, holdcommit.hc_stock_orders,
        holdcommit.hc_stock_order_lines;
VACUUM holdcommit.hc_assets, holdcommit.hc_reservations, holdcommit.hc_ledger,
       holdcommit.hc_stock_parts, holdcommit.hc_stock_orders,
       holdcommit.hc_stock_order_lines;
VACUUM FULL holdcommit.hc_assets, holdcommit.hc_reservations;
REINDEX DATABASE regress_hc_owned;
RESET SESSION AUTHORIZATION;
\set victim_path '"$user", public'
\set round 4
\i test/security/owner_round.sql

-- Attack 5: the owner tries to fill the extension's own schema with the
-- look-alike operators, functions, aggregates, domains and cast of attack 1,
-- and with overloads of the extension's functions (hc_grant_app(text) would
-- win over hc_grant_app(regrole) for an untyped literal).  What stops it:
-- the owner may create nothing there.
SET SESSION AUTHORIZATION regress_hc_dbowner;
SELECT attacker.plant_overloads('holdcommit');
SELECT attacker.plant_lures('holdcommit');
RESET SESSION AUTHORIZATION;
\set victim_path '"$user", public'
\set round 5
\i test/security/owner_round.sql

-- Attack 6: dropping hc_reservations_one_committed would remove the last
-- guard against a second sale, and DROP INDEX CONCURRENTLY commits its
-- first phases before any check of an event trigger could run; dropping
-- the schema would drop every row, the ledger with them.  What stops it:
-- only the owner of the schema and its indexes (the superuser) may drop
-- them, which PostgreSQL checks before the first phase; dropping public,
-- which the owner may, drops nothing of the extension.
SET SESSION AUTHORIZATION regress_hc_dbowner;
DROP INDEX holdcommit.hc_reservations_one_committed;
DROP INDEX CONCURRENTLY holdcommit.hc_reservations_one_committed;
DROP INDEX holdcommit.hc_reservations_key;
DROP SCHEMA holdcommit CASCADE;
DROP SCHEMA public, shop CASCADE;
RESET SESSION AUTHORIZATION;
SELECT c.relname AS index, i.indisvalid, i.indisready
  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
 WHERE c.relnamespace = 'holdcommit'::regnamespace
   AND c.relname IN ('hc_reservations_one_committed', 'hc_reservations_key')
 ORDER BY 1;
SELECT count(*) > 0 AS assets_kept, (SELECT count(*) > 0 FROM holdcommit.hc_ledger) AS ledger_kept
  FROM holdcommit.hc_assets;
-- A superuser may (a distributed deployment drops the single-node indexes).
BEGIN;
DROP INDEX holdcommit.hc_reservations_key;
ROLLBACK;

-- Every call of every round left the extension's state consistent: only
-- the canary is reported.
SELECT subject FROM holdcommit.hc_check();

\c :regress_db
SET client_min_messages = warning;
DROP DATABASE regress_hc_owned;
DROP ROLE regress_hc_dbowner;
DROP ROLE regress_hc_victim_app;
SELECT format('DROP ROLE %I', 'regress_hc_grantee_' || kind || '_' || i)
  FROM generate_series(0, 5) i, unnest(ARRAY['app', 'op']) kind \gexec
