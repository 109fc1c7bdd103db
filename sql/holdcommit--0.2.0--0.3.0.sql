-- holdcommit 0.2.0 -> 0.3.0.  This file is the one source of 0.3.0: make joins
-- holdcommit--0.2.0.sql and this update into holdcommit--0.3.0.sql, so a fresh
-- install and an updated one are the same by construction; make test still
-- compares the two and checks that data made under 0.2.0 survives.

\echo Use "ALTER EXTENSION holdcommit UPDATE TO '0.3.0'" to load this file. \quit

------------------------------------------------------------------------------
-- Trust by construction: the schema belongs to the extension's owner
------------------------------------------------------------------------------

-- Whoever owns the extension's schema may drop or invalidate its indexes,
-- drop its data with the schema, create look-alikes and rename it: the
-- guarantees would rest on that role.  So holdcommit lives only in a schema
-- that a superuser or the extension's owner owns (the control file names
-- one, holdcommit, which CREATE EXTENSION creates if it is missing).  A
-- schema that exists already is judged by its owner, not by its name.
DO $$
DECLARE
    ext_owner oid := (SELECT extowner FROM pg_catalog.pg_extension
                       WHERE extname OPERATOR(pg_catalog.=) 'holdcommit');
    owner_name name;
    creator name;
    stranger text;
BEGIN
    SELECT r.rolname INTO owner_name
      FROM pg_catalog.pg_namespace n JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) n.nspowner
     WHERE n.oid OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.regnamespace
       AND NOT r.rolsuper AND r.oid OPERATOR(pg_catalog.<>) ext_owner;
    IF owner_name IS NOT NULL THEN
        RAISE EXCEPTION 'holdcommit cannot live in schema @extschema@, which role % owns', owner_name
              USING ERRCODE = 'insufficient_privilege',
                    DETAIL = 'The owner of the extension''s schema could drop its indexes and its data, or create look-alikes of its functions.',
                    HINT = CASE WHEN '@extschema@' OPERATOR(pg_catalog.=) 'holdcommit'
                           THEN 'Drop schema holdcommit (with what its creator put there), then try again.'
                           ELSE 'Move the extension to schema holdcommit first, as doc/operations.md ("Moving out of public") shows, then update.' END;
    END IF;
    -- Nor may anyone else create in it.
    SELECT CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC' ELSE r.rolname::pg_catalog.text END INTO creator
      FROM pg_catalog.pg_namespace n, pg_catalog.aclexplode(n.nspacl) a
      LEFT JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) a.grantee
     WHERE n.oid OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.regnamespace
       AND a.privilege_type OPERATOR(pg_catalog.=) 'CREATE'
       AND a.grantee OPERATOR(pg_catalog.<>) ext_owner AND NOT COALESCE(r.rolsuper, false)
     LIMIT 1;
    IF creator IS NOT NULL THEN
        RAISE EXCEPTION 'holdcommit cannot live in schema @extschema@, where % may create objects', creator
              USING ERRCODE = 'insufficient_privilege',
                    HINT = 'REVOKE CREATE ON SCHEMA @extschema@ FROM it, or drop the schema, then try again.';
    END IF;
    -- And nothing in it, nor an hc_* function anywhere, may be someone else's.
    SELECT pg_catalog.string_agg(o.name, ', ' ORDER BY o.name) INTO stranger
      FROM (SELECT p.oid, 'pg_catalog.pg_proc'::pg_catalog.regclass AS classid,
                   p.oid::pg_catalog.regprocedure::pg_catalog.text AS name
              FROM pg_catalog.pg_proc p
             WHERE p.pronamespace OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.regnamespace
                OR p.proname OPERATOR(pg_catalog.~~) 'hc\_%'
            UNION ALL
            SELECT c.oid, 'pg_catalog.pg_class'::pg_catalog.regclass, c.oid::pg_catalog.regclass::pg_catalog.text
              FROM pg_catalog.pg_class c
             WHERE c.relnamespace OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.regnamespace
               AND c.relkind OPERATOR(pg_catalog.<>) ALL ('{i,I,c,t}'::pg_catalog."char"[])
            UNION ALL
            SELECT t.oid, 'pg_catalog.pg_type'::pg_catalog.regclass, t.oid::pg_catalog.regtype::pg_catalog.text
              FROM pg_catalog.pg_type t
             WHERE t.typnamespace OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.regnamespace
               AND t.typrelid OPERATOR(pg_catalog.=) 0 AND t.typelem OPERATOR(pg_catalog.=) 0) o
     WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_depend d
                        WHERE d.classid OPERATOR(pg_catalog.=) o.classid
                          AND d.objid OPERATOR(pg_catalog.=) o.oid
                          AND d.deptype OPERATOR(pg_catalog.=) 'e'
                          AND d.refobjid OPERATOR(pg_catalog.=)
                              (SELECT e.oid FROM pg_catalog.pg_extension e
                                WHERE e.extname OPERATOR(pg_catalog.=) 'holdcommit'));
    IF stranger IS NOT NULL THEN
        RAISE EXCEPTION 'objects that are not holdcommit''s stand in its schema or under its names: %', stranger
              USING ERRCODE = 'insufficient_privilege',
                    DETAIL = 'A function named hc_* anywhere on a caller''s search_path could stand in for one of holdcommit''s.',
                    HINT = 'Drop or rename them, then try again.';
    END IF;
END
$$;

-- The event triggers of 0.2.0 kept the owner of public out of the extension's
-- objects; in a schema only trusted roles own, nobody else can reach them, and
-- the triggers refused Citus' shard tables.  One lever is left outside the
-- schema: a function call resolves by argument types across the caller's
-- whole search_path, so an overload such as public.hc_grant_app(text) would
-- win over the extension's for an untyped literal, even with holdcommit
-- first.  So no function named hc_* may stand anywhere but in the extension.
DROP EVENT TRIGGER hc_guard_ddl;
DROP EVENT TRIGGER hc_guard_drop;
DROP FUNCTION @extschema@.hc_guard_ddl();
CREATE FUNCTION @extschema@.hc_guard_names()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'hc_guard_names' LANGUAGE C;
COMMENT ON FUNCTION @extschema@.hc_guard_names() IS
    'Event trigger: refuse a function named hc_* in any schema that is not holdcommit''s own.';
REVOKE ALL ON FUNCTION @extschema@.hc_guard_names() FROM PUBLIC;
CREATE EVENT TRIGGER hc_guard_names ON ddl_command_end
    WHEN TAG IN ('CREATE FUNCTION', 'ALTER FUNCTION', 'CREATE PROCEDURE', 'ALTER PROCEDURE',
                 'CREATE AGGREGATE', 'ALTER AGGREGATE', 'ALTER ROUTINE')
    EXECUTE FUNCTION @extschema@.hc_guard_names();

------------------------------------------------------------------------------
-- Stock in parts: a hot product's units spread over rows (escrow)
------------------------------------------------------------------------------

-- With synchronous_commit on, every reserve of a product whose stock is one
-- row waits for the WAL flush of the reserve before it under that row's
-- lock: one flush per sale.  A product's stock now lives in one or more
-- parts (hc_stock_spread sets how many), each with its own stock and
-- reserved, so that reserves on different parts commit side by side.  A
-- line is counted in the reserved of its own part.  The table of 0.2.0 is
-- the parts table (each product its part 0), and hc_inventory is a view
-- with the same columns and meaning: a product's sums.
ALTER TABLE @extschema@.hc_inventory RENAME TO hc_stock_parts;
ALTER TABLE @extschema@.hc_stock_parts
    ADD COLUMN part smallint NOT NULL DEFAULT 0,
    DROP CONSTRAINT hc_inventory_pkey,
    ADD CONSTRAINT hc_stock_parts_pkey PRIMARY KEY (product_id, part);
ALTER TABLE @extschema@.hc_stock_parts
    RENAME CONSTRAINT hc_inventory_reserved_within_stock TO hc_stock_parts_reserved_within_stock;
COMMENT ON TABLE @extschema@.hc_stock_parts IS
    'A product''s stock in parts 0..n-1; reserved is the sum of the qty of the RESERVED lines of the part.';
COMMENT ON COLUMN @extschema@.hc_stock_parts.version IS
    'The part''s version; the seq of its ledger rows is part * 2^48 + version.';

-- The grants of the table stay on it; a fresh install grants hc_inventory
-- (the view) instead, which this script cannot grant to anyone (a grant
-- made here would be an initial privilege, which pg_dump leaves out).  So
-- the roles granted the table lose it and are named, to be granted again.
DO $$
DECLARE
    grantee text;
    grantees text;
BEGIN
    FOR grantee IN
        SELECT DISTINCT a.grantee::pg_catalog.regrole::pg_catalog.text
          FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
         WHERE c.oid OPERATOR(pg_catalog.=) '@extschema@.hc_stock_parts'::pg_catalog.regclass
           AND a.grantee OPERATOR(pg_catalog.<>) 0 AND a.grantee OPERATOR(pg_catalog.<>) c.relowner
         ORDER BY 1
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON TABLE @extschema@.hc_stock_parts FROM %s', grantee);
        grantees := pg_catalog.concat_ws(', ', grantees, grantee);
    END LOOP;
    IF grantees IS NOT NULL THEN
        RAISE WARNING 'these roles cannot read hc_inventory until they are granted again: %', grantees
              USING HINT = 'For each: SELECT hc_grant_app(''role''), hc_grant_operator(''role'') or hc_grant_monitor(''role''), as it was granted.';
    END IF;
END
$$;

ALTER TABLE @extschema@.hc_stock_reservation_lines ADD COLUMN part smallint NOT NULL DEFAULT 0;
COMMENT ON COLUMN @extschema@.hc_stock_reservation_lines.part IS
    'The part of the product whose reserved counts the line.';

-- An order names its products, and each line its order's first product
-- (scope_id): on Citus an order's lines are on the nodes of their products,
-- so that a call on the order finds them from its row, and a line is known
-- to have its order's row on its own node when scope_id is its product.
ALTER TABLE @extschema@.hc_stock_reservations ADD COLUMN products text[];
UPDATE @extschema@.hc_stock_reservations r
   SET products = COALESCE(NULLIF(ARRAY(
           SELECT l.product_id FROM @extschema@.hc_stock_reservation_lines l
            WHERE l.reservation_id OPERATOR(pg_catalog.=) r.id
            ORDER BY l.product_id COLLATE "C"), '{}'), ARRAY[r.scope_id]);
ALTER TABLE @extschema@.hc_stock_reservations ALTER COLUMN products SET NOT NULL;
COMMENT ON COLUMN @extschema@.hc_stock_reservations.products IS
    'The products of the order''s lines, in lock order (bytewise); the first is scope_id.';
ALTER TABLE @extschema@.hc_stock_reservation_lines ADD COLUMN scope_id text;
UPDATE @extschema@.hc_stock_reservation_lines l
   SET scope_id = COALESCE((SELECT r.scope_id FROM @extschema@.hc_stock_reservations r
                             WHERE r.id OPERATOR(pg_catalog.=) l.reservation_id), l.product_id);
ALTER TABLE @extschema@.hc_stock_reservation_lines ALTER COLUMN scope_id SET NOT NULL;
COMMENT ON COLUMN @extschema@.hc_stock_reservation_lines.scope_id IS
    'The scope_id of the line''s reservation: its first product.';

CREATE VIEW @extschema@.hc_inventory AS
    SELECT p.product_id,
           pg_catalog.sum(p.stock)::pg_catalog.int4 AS stock,
           pg_catalog.sum(p.reserved)::pg_catalog.int4 AS reserved,
           pg_catalog.sum(p.available)::pg_catalog.int4 AS available,
           pg_catalog.sum(p.version)::pg_catalog.int4 AS version,
           pg_catalog.min(p.created_at) AS created_at,
           pg_catalog.max(p.updated_at) AS updated_at
      FROM @extschema@.hc_stock_parts p
     GROUP BY p.product_id;
COMMENT ON VIEW @extschema@.hc_inventory IS
    'Stock per product, over its parts; reserved is the sum of the qty of RESERVED lines.';

-- They returned the table's row; they return the view's (same columns).
DROP FUNCTION @extschema@.hc_stock_set(text, integer);
DROP FUNCTION @extschema@.hc_stock_adjust(text, integer, text);
CREATE FUNCTION @extschema@.hc_stock_set(product_id text, stock integer)
RETURNS @extschema@.hc_inventory
AS 'MODULE_PATHNAME', 'hc_stock_set' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_stock_set(text, integer) IS
    'Create a product or set its stock, never below what is reserved (operator).';
CREATE FUNCTION @extschema@.hc_stock_adjust(product_id text, delta integer, reason text)
RETURNS @extschema@.hc_inventory
AS 'MODULE_PATHNAME', 'hc_stock_adjust' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_stock_adjust(text, integer, text) IS
    'Restock (delta > 0) or shrink (delta < 0) a product, with the reason in the ledger (operator).';
CREATE FUNCTION @extschema@.hc_stock_spread(product_id text, parts integer)
RETURNS @extschema@.hc_inventory
AS 'MODULE_PATHNAME', 'hc_stock_spread' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_stock_spread(text, integer) IS
    'Spread a product''s stock over parts rows, so that reserves of a hot product commit side by side (operator).';
REVOKE ALL ON FUNCTION @extschema@.hc_stock_set(text, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.hc_stock_adjust(text, integer, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.hc_stock_spread(text, integer) FROM PUBLIC;

------------------------------------------------------------------------------
-- Monitoring: counts only
------------------------------------------------------------------------------

-- What a monitoring role reads: figures, never a buyer, a key or a reference.
CREATE VIEW @extschema@.hc_metrics AS
    WITH t AS (SELECT pg_catalog.clock_timestamp() AS now)
    SELECT 'assets'::text AS metric, s.status AS label,
           (SELECT pg_catalog.count(*) FROM @extschema@.hc_assets a, t
             WHERE CASE WHEN a.status OPERATOR(pg_catalog.=) 'HELD'
                         AND a.hold_expires_at OPERATOR(pg_catalog.<=) t.now
                        THEN 'HELD_EXPIRED' ELSE a.status END OPERATOR(pg_catalog.=) s.status
           )::pg_catalog.float8 AS value
      FROM (VALUES ('AVAILABLE'::text), ('HELD'), ('HELD_EXPIRED'), ('SOLD')) s (status)
    UNION ALL
    SELECT 'holds', s.status,
           (SELECT pg_catalog.count(*) FROM @extschema@.hc_reservations r
             WHERE r.status OPERATOR(pg_catalog.=) s.status)::pg_catalog.float8
      FROM (VALUES ('HELD'::text), ('COMMITTED'), ('RELEASED'), ('EXPIRED')) s (status)
    UNION ALL
    SELECT 'holds_overdue', m.label, m.value
      FROM (SELECT pg_catalog.count(*)::pg_catalog.float8 AS n,
                   COALESCE(pg_catalog.date_part('epoch', (SELECT now FROM t) OPERATOR(pg_catalog.-)
                                                 pg_catalog.min(r.expires_at)), 0) AS oldest
              FROM @extschema@.hc_reservations r
             WHERE r.status OPERATOR(pg_catalog.=) 'HELD'
               AND r.expires_at OPERATOR(pg_catalog.<=) (SELECT now FROM t)) o
     CROSS JOIN LATERAL (VALUES ('count'::text, o.n), ('oldest_seconds', o.oldest)) m (label, value)
    UNION ALL
    SELECT 'stock', m.label, m.value
      FROM (SELECT pg_catalog.count(*)::pg_catalog.float8 AS products,
                   COALESCE(pg_catalog.sum(i.stock), 0)::pg_catalog.float8 AS stock,
                   COALESCE(pg_catalog.sum(i.reserved), 0)::pg_catalog.float8 AS reserved,
                   (pg_catalog.count(*) FILTER (WHERE i.stock OPERATOR(pg_catalog.=) i.reserved))::pg_catalog.float8 AS sold_out
              FROM @extschema@.hc_inventory i) o
     CROSS JOIN LATERAL (VALUES ('products'::text, o.products), ('stock_units', o.stock),
                                ('reserved_units', o.reserved),
                                ('available_units', o.stock OPERATOR(pg_catalog.-) o.reserved),
                                ('sold_out_products', o.sold_out)) m (label, value)
    UNION ALL
    SELECT 'stock_overdue', m.label, m.value
      FROM (SELECT pg_catalog.count(*)::pg_catalog.float8 AS n,
                   COALESCE(pg_catalog.sum(l.qty), 0)::pg_catalog.float8 AS units,
                   COALESCE(pg_catalog.date_part('epoch', (SELECT now FROM t) OPERATOR(pg_catalog.-)
                                                 pg_catalog.min(l.expires_at)), 0) AS oldest
              FROM @extschema@.hc_stock_reservation_lines l
             WHERE l.status OPERATOR(pg_catalog.=) 'RESERVED'
               AND l.expires_at OPERATOR(pg_catalog.<=) (SELECT now FROM t)) o
     CROSS JOIN LATERAL (VALUES ('count'::text, o.n), ('units', o.units),
                                ('oldest_seconds', o.oldest)) m (label, value)
    UNION ALL
    SELECT 'leases', m.label, m.value
      FROM (SELECT (pg_catalog.count(*) FILTER (WHERE l.owner IS NOT NULL))::pg_catalog.float8 AS held,
                   (pg_catalog.count(*) FILTER (WHERE l.owner IS NOT NULL
                       AND l.heartbeat_at OPERATOR(pg_catalog.+) l.stale_after
                           OPERATOR(pg_catalog.<=) (SELECT now FROM t)))::pg_catalog.float8 AS stale
              FROM @extschema@.hc_locks l) o
     CROSS JOIN LATERAL (VALUES ('held'::text, o.held), ('stale', o.stale)) m (label, value)
    UNION ALL
    SELECT 'attempts', 'manual_review',
           (SELECT pg_catalog.count(*) FROM @extschema@.hc_attempts a
             WHERE a.status OPERATOR(pg_catalog.=) 'MANUAL_REVIEW')::pg_catalog.float8
    UNION ALL
    SELECT 'sweeper', m.label, m.value
      FROM (SELECT COALESCE(pg_catalog.date_part('epoch', (SELECT now FROM t) OPERATOR(pg_catalog.-)
                                                 pg_catalog.max(s.last_end)), -1) AS since,
                   COALESCE(pg_catalog.sum(s.expired_holds), 0)::pg_catalog.float8 AS holds,
                   COALESCE(pg_catalog.sum(s.expired_reservations), 0)::pg_catalog.float8 AS reservations,
                   (pg_catalog.count(*) FILTER (WHERE s.last_error_at OPERATOR(pg_catalog.>=) s.last_start))::pg_catalog.float8 AS failing
              FROM @extschema@.hc_sweeper_status s) o
     CROSS JOIN LATERAL (VALUES ('seconds_since_last_run'::text, o.since),
                                ('last_expired_holds', o.holds),
                                ('last_expired_reservations', o.reservations),
                                ('failing', o.failing)) m (label, value);
COMMENT ON VIEW @extschema@.hc_metrics IS
    'For monitoring: one figure per row (metric, label, value), counts and ages only, for postgres_exporter.';

CREATE FUNCTION @extschema@.hc_grant_monitor(role regrole)
RETURNS void
AS 'MODULE_PATHNAME', 'hc_grant_monitor' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_grant_monitor(regrole) IS
    'Grant a monitoring role read access to hc_metrics and hc_overview only: no keys, no buyers, no calls that change state.';
REVOKE ALL ON FUNCTION @extschema@.hc_grant_monitor(regrole) FROM PUBLIC;

------------------------------------------------------------------------------
-- The bounded sweeper: what it does in every database, from shared memory
------------------------------------------------------------------------------

ALTER TABLE @extschema@.hc_sweeper_status ADD COLUMN last_error_sqlstate text;
COMMENT ON COLUMN @extschema@.hc_sweeper_status.last_error_sqlstate IS
    'The SQLSTATE of last_error.';

CREATE FUNCTION @extschema@.hc_sweeper_state(
    OUT database name, OUT state text, OUT reason text, OUT installed boolean, OUT pid integer,
    OUT last_start timestamptz, OUT last_end timestamptz, OUT last_swept timestamptz,
    OUT next_run timestamptz, OUT runs bigint, OUT failures bigint,
    OUT expired_holds bigint, OUT expired_reservations bigint, OUT purged_keys bigint,
    OUT last_error_sqlstate text, OUT last_error_at timestamptz, OUT last_error text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'hc_sweeper_databases' LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION @extschema@.hc_sweeper_state() IS
    'The background sweeper in every database of the server, from shared memory: see hc_sweeper_databases.';
REVOKE ALL ON FUNCTION @extschema@.hc_sweeper_state() FROM PUBLIC;

CREATE VIEW @extschema@.hc_sweeper_databases AS
    SELECT * FROM @extschema@.hc_sweeper_state();
COMMENT ON VIEW @extschema@.hc_sweeper_databases IS
    'Every database of the server: whether the background sweeper sweeps it, and if not, why (state, reason).';

------------------------------------------------------------------------------
-- Grants kept
------------------------------------------------------------------------------

-- The update from 0.1.0 revoked column privileges inside its script, which
-- made the table ACLs of that moment -- with the roles granted then -- the
-- extension's initial privileges of hc_reservations and
-- hc_stock_reservations: pg_dump leaves out what equals them, so a dump lost
-- those roles' table grants.  A fresh install records no initial privileges
-- for any table or view; neither does an updated one from now on.
DELETE FROM pg_catalog.pg_init_privs i
 WHERE i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
   AND i.privtype OPERATOR(pg_catalog.=) 'e'
   AND i.objoid OPERATOR(pg_catalog.=) ANY (
       SELECT d.objid FROM pg_catalog.pg_depend d
        WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
          AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
          AND d.deptype OPERATOR(pg_catalog.=) 'e'
          AND d.refobjid OPERATOR(pg_catalog.=) (SELECT e.oid FROM pg_catalog.pg_extension e
                                                  WHERE e.extname OPERATOR(pg_catalog.=) 'holdcommit'));

-- The update keeps every grant.  It grants nothing itself: a grant made by an
-- extension script counts as the extension's initial privilege, which
-- pg_dump leaves out.  A role that may call the extension's functions but
-- not reach its schema (after a move without the grants of doc/operations.md)
-- must be granted again; a WARNING names it (an extension script runs with
-- client_min_messages at least WARNING: a NOTICE would not be seen).  (The
-- owner of the functions and tables has USAGE as the schema's owner or a
-- superuser.)
DO $$
DECLARE
    ungranted text;
BEGIN
    SELECT pg_catalog.string_agg(DISTINCT a.grantee::pg_catalog.regrole::pg_catalog.text, ', ') INTO ungranted
      FROM (SELECT (pg_catalog.aclexplode(p.proacl)).grantee FROM pg_catalog.pg_proc p
             WHERE p.pronamespace OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.regnamespace
            UNION ALL
            SELECT (pg_catalog.aclexplode(c.relacl)).grantee FROM pg_catalog.pg_class c
             WHERE c.relnamespace OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.regnamespace) a
     WHERE a.grantee OPERATOR(pg_catalog.<>) 0
       AND NOT pg_catalog.has_schema_privilege(a.grantee, '@extschema@'::pg_catalog.regnamespace, 'USAGE');
    IF ungranted IS NOT NULL THEN
        RAISE WARNING 'these roles must be granted again, they cannot reach schema @extschema@: %', ungranted
              USING HINT = 'For each: SELECT hc_grant_app(''role'') or hc_grant_operator(''role''), as it was granted.';
    END IF;
    -- An operator granted before (hc_asset_add is granted to operators
    -- only, since 0.1.0) has nothing of what 0.3.0 adds for operators until
    -- hc_grant_operator runs again; an application granted under 0.1.0
    -- (hc_hold, but no hc_lock_acquire of 0.2.0) has no lease or attempt
    -- call.  The roles named are the ones granted, not their members.
    SELECT pg_catalog.string_agg(DISTINCT a.grantee::pg_catalog.regrole::pg_catalog.text, ', ') INTO ungranted
      FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
     WHERE p.oid OPERATOR(pg_catalog.=) '@extschema@.hc_asset_add(text, text)'::pg_catalog.regprocedure
       AND a.grantee OPERATOR(pg_catalog.<>) 0 AND a.grantee OPERATOR(pg_catalog.<>) p.proowner;
    IF ungranted IS NOT NULL THEN
        RAISE WARNING 'these operators cannot read hc_sweeper_databases or hc_workers until they are granted again: %', ungranted
              USING HINT = 'For each: SELECT hc_grant_operator(''role'').';
    END IF;
    SELECT pg_catalog.string_agg(DISTINCT a.grantee::pg_catalog.regrole::pg_catalog.text, ', ') INTO ungranted
      FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
     WHERE p.oid OPERATOR(pg_catalog.=) '@extschema@.hc_hold(text, text, text, interval)'::pg_catalog.regprocedure
       AND a.grantee OPERATOR(pg_catalog.<>) 0 AND a.grantee OPERATOR(pg_catalog.<>) p.proowner
       AND NOT pg_catalog.has_function_privilege(a.grantee,
               '@extschema@.hc_lock_acquire(text, text, interval, integer)', 'EXECUTE');
    IF ungranted IS NOT NULL THEN
        RAISE WARNING 'these roles, granted under 0.1.0, have no lease or attempt call until they are granted again: %', ungranted
              USING HINT = 'For each: SELECT hc_grant_app(''role'') or hc_grant_operator(''role''), as it was granted.';
    END IF;
END
$$;

------------------------------------------------------------------------------
-- Scale-out on Citus (doc/scale-out.md)
------------------------------------------------------------------------------

-- On Citus a call that Citus did not send to the node of its rows sends
-- itself there in a query that also updates no row of this empty table, so
-- that Citus counts the call as a write and commits it in two phases with
-- the transaction's other writes.  Never written; applications may update
-- it (nothing to update) but not insert into it.
CREATE TABLE @extschema@.hc_routes (
    routing_id  text PRIMARY KEY
);
COMMENT ON TABLE @extschema@.hc_routes IS
    'Empty: on Citus the write that makes a call sent to another node part of two-phase commit.';

-- The calls on a hold given its asset, the routing id, which Citus sends to
-- the node of the asset's rows; on a single node the same as the calls by
-- reservation id alone, which also check that the hold is of that asset.
-- No default: hc_commit('res_...', 'true') keeps resolving to
-- hc_commit(reservation_id, late_ok).
CREATE FUNCTION @extschema@.hc_commit(asset_id text, reservation_id text, late_ok boolean)
RETURNS @extschema@.hc_reservation
AS 'MODULE_PATHNAME', 'hc_commit_asset' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_commit(text, text, boolean) IS
    'hc_commit given the hold''s asset (on Citus: sent to the asset''s node).';
CREATE FUNCTION @extschema@.hc_release(asset_id text, reservation_id text)
RETURNS @extschema@.hc_reservation
AS 'MODULE_PATHNAME', 'hc_release_asset' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_release(text, text) IS
    'hc_release given the hold''s asset (on Citus: sent to the asset''s node).';
CREATE FUNCTION @extschema@.hc_extend(asset_id text, reservation_id text, ttl interval)
RETURNS @extschema@.hc_reservation
AS 'MODULE_PATHNAME', 'hc_extend_asset' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_extend(text, text, interval) IS
    'hc_extend given the hold''s asset (on Citus: sent to the asset''s node).';

-- The same for a stock reservation, given its first product (its scope_id,
-- the routing id of the order).
CREATE FUNCTION @extschema@.hc_finalize(product_id text, reservation_id text, late_ok boolean)
RETURNS @extschema@.hc_stock_reservation
AS 'MODULE_PATHNAME', 'hc_finalize_product' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_finalize(text, text, boolean) IS
    'hc_finalize given the order''s first product (on Citus: sent to its node).';
CREATE FUNCTION @extschema@.hc_unreserve(product_id text, reservation_id text)
RETURNS @extschema@.hc_stock_reservation
AS 'MODULE_PATHNAME', 'hc_unreserve_product' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_unreserve(text, text) IS
    'hc_unreserve given the order''s first product (on Citus: sent to its node).';

-- Nothing for PUBLIC, as for every function of the extension.
REVOKE ALL ON FUNCTION @extschema@.hc_commit(text, text, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.hc_release(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.hc_extend(text, text, interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.hc_finalize(text, text, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.hc_unreserve(text, text) FROM PUBLIC;

-- On Citus a call on an order of several products runs each of its steps on
-- the node of the rows the step changes: this, sent there as the caller.
-- Refused on a single node.
CREATE FUNCTION @extschema@.hc_order_step(routing_id text, step text, args text[])
RETURNS text[]
AS 'MODULE_PATHNAME', 'hc_order_step' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_order_step(text, text, text[]) IS
    'Citus: one step of a call on an order of several products, on the node of its routing id (internal).';
REVOKE ALL ON FUNCTION @extschema@.hc_order_step(text, text, text[]) FROM PUBLIC;

-- Run once on the coordinator, after CREATE EXTENSION citus and the workers'
-- citus_add_node: drop what only a single node can keep (the lookups by
-- reservation id alone and the one key space of idempotency keys, replaced
-- by a key space per routing id), distribute the tables by their routing id,
-- colocated, and have Citus send each call that takes a routing id to the
-- node of its rows.  Running it again does what is left and returns what it
-- did; a fresh run returns every step.
CREATE FUNCTION @extschema@.hc_distribute(shard_count integer DEFAULT NULL)
RETURNS SETOF text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $distribute$
DECLARE
    s text := '@extschema@';
    t record;
    f record;
    first_table text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) 'citus') THEN
        RAISE EXCEPTION 'hc_distribute needs Citus in this database'
              USING ERRCODE = 'object_not_in_prerequisite_state',
                    HINT = 'CREATE EXTENSION citus, add the workers with citus_add_node(), then call hc_distribute().';
    END IF;
    IF NOT pg_catalog.citus_is_coordinator() THEN
        RAISE EXCEPTION 'hc_distribute runs on the coordinator'
              USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    -- Unique indexes without the routing id: Citus refuses them.  A lookup
    -- by reservation id alone keeps a plain index on each shard.
    FOR t IN SELECT * FROM (VALUES
            ('hc_reservations', 'hc_reservations_id', 'hc_reservations_by_id', 'id', 'hc_reservations_key',
             'hc_reservations_scope_key', 'asset_id', 'hc_reservations_by_key'),
            ('hc_stock_reservations', 'hc_stock_reservations_id', 'hc_stock_reservations_by_id', 'id',
             'hc_stock_reservations_key', 'hc_stock_reservations_scope_key', 'scope_id',
             'hc_stock_reservations_by_key'))
            AS v(tab, id_index, by_id, id_column, key_index, scope_key, scope_column, by_key)
    LOOP
        IF pg_catalog.to_regclass(pg_catalog.format('%I.%I', s, t.id_index)) IS NOT NULL THEN
            EXECUTE pg_catalog.format('CREATE INDEX IF NOT EXISTS %I ON %I.%I (%I)',
                                      t.by_id, s, t.tab, t.id_column);
            EXECUTE pg_catalog.format('DROP INDEX %I.%I', s, t.id_index);
            RETURN NEXT pg_catalog.format('index %s replaced by %s', t.id_index, t.by_id);
        END IF;
        -- The key's lookup, which a plan kept for every routing id reads by
        -- the key alone; the unique index keeps a key to one request per
        -- routing id.
        IF pg_catalog.to_regclass(pg_catalog.format('%I.%I', s, t.key_index)) IS NOT NULL THEN
            EXECUTE pg_catalog.format('CREATE UNIQUE INDEX IF NOT EXISTS %I ON %I.%I (%I, idempotency_key)',
                                      t.scope_key, s, t.tab, t.scope_column);
            EXECUTE pg_catalog.format('CREATE INDEX IF NOT EXISTS %I ON %I.%I (idempotency_key)',
                                      t.by_key, s, t.tab);
            EXECUTE pg_catalog.format('DROP INDEX %I.%I', s, t.key_index);
            RETURN NEXT pg_catalog.format('index %s replaced by %s and %s', t.key_index, t.scope_key, t.by_key);
        END IF;
    END LOOP;

    FOR t IN SELECT * FROM (VALUES
            (1, 'hc_assets', 'id'), (2, 'hc_reservations', 'asset_id'), (3, 'hc_ledger', 'entity_id'),
            (4, 'hc_stock_parts', 'product_id'), (5, 'hc_stock_reservations', 'scope_id'),
            (6, 'hc_stock_reservation_lines', 'product_id'), (7, 'hc_locks', 'resource'),
            (8, 'hc_attempts', 'resource'), (9, 'hc_routes', 'routing_id')) AS v(n, tab, routing) ORDER BY n
    LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition
                        WHERE logicalrelid OPERATOR(pg_catalog.=) pg_catalog.format('%I.%I', s, t.tab)::pg_catalog.regclass) THEN
            IF first_table IS NULL THEN
                PERFORM pg_catalog.create_distributed_table(pg_catalog.format('%I.%I', s, t.tab)::pg_catalog.regclass,
                        t.routing, colocate_with => 'none', shard_count => shard_count);
            ELSE
                PERFORM pg_catalog.create_distributed_table(pg_catalog.format('%I.%I', s, t.tab)::pg_catalog.regclass,
                        t.routing, colocate_with => first_table);
            END IF;
            RETURN NEXT pg_catalog.format('table %s distributed by %s', t.tab, t.routing);
        END IF;
        first_table := COALESCE(first_table, pg_catalog.format('%I.%I', s, t.tab));
    END LOOP;

    -- The calls Citus sends to the node of their first argument's rows.
    FOR f IN SELECT p.oid::pg_catalog.regprocedure AS proc, p.proname AS name
               FROM pg_catalog.pg_proc p
              WHERE p.pronamespace OPERATOR(pg_catalog.=) s::pg_catalog.regnamespace
                AND p.proname OPERATOR(pg_catalog.=) ANY (ARRAY[
                    'hc_asset_add', 'hc_hold', 'hc_commit', 'hc_release', 'hc_extend',
                    'hc_stock_set', 'hc_stock_adjust', 'hc_stock_spread', 'hc_reserve',
                    'hc_finalize', 'hc_unreserve', 'hc_lock_acquire', 'hc_lock_heartbeat',
                    'hc_lock_release', 'hc_attempt_begin', 'hc_attempt_complete', 'hc_attempt_reset'])
                AND p.proargnames[1] OPERATOR(pg_catalog.=) ANY (ARRAY['id', 'asset_id', 'product_id', 'resource'])
                AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_object o
                                 WHERE o.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
                                   AND o.objid OPERATOR(pg_catalog.=) p.oid
                                   AND o.distribution_argument_index IS NOT NULL)
              ORDER BY 1::pg_catalog.text
    LOOP
        -- A call on an order may have to reach the nodes of its other
        -- products, which Citus allows a delegated call only outside a
        -- transaction block when it is not forced.
        PERFORM pg_catalog.create_distributed_function(f.proc, '$1', colocate_with => first_table,
                force_delegation => f.name OPERATOR(pg_catalog.<>) ALL (ARRAY['hc_finalize', 'hc_unreserve']::pg_catalog.name[]));
        RETURN NEXT pg_catalog.format('function %s sent to the node of its first argument', f.proc);
    END LOOP;
END
$distribute$;
COMMENT ON FUNCTION @extschema@.hc_distribute(integer) IS
    'Citus: distribute the tables by routing id, colocated, and the calls by their routing argument.';
REVOKE ALL ON FUNCTION @extschema@.hc_distribute(integer) FROM PUBLIC;

------------------------------------------------------------------------------
-- The attempt guard: a lost answer given back only to its own request
------------------------------------------------------------------------------

-- Within the cooldown, hc_attempt_begin gives the last attempt back only to
-- a begin that presents the request key it was made with (and the same
-- owner and token); any other begin gets COOLDOWN, as in 0.2.0.
ALTER TABLE @extschema@.hc_attempts ADD COLUMN last_request_digest bytea;
COMMENT ON COLUMN @extschema@.hc_attempts.last_request_digest IS
    'The SHA-256 of the request_key the last attempt was made with: a begin presenting that key within the cooldown gets the attempt back.';

-- A new argument is a new function.  Each grant of the old one is made again
-- on it by its grantor (the owner's first, then those it allowed to grant),
-- and stays out of the extension's initial privileges (as a fresh install's
-- are), so that pg_dump keeps it.  An object that depends on the old
-- signature stops the update, named, rather than being dropped with it.
DO $$
DECLARE
    old_fn pg_catalog.regprocedure :=
        '@extschema@.hc_attempt_begin(text, text, bigint, interval, integer)'::pg_catalog.regprocedure;
    old_acl pg_catalog.aclitem[];
    old_owner pg_catalog.oid;
    dependents text;
    initial pg_catalog.aclitem[];
    new_fn pg_catalog.regprocedure;
    g record;
    missing text;
    updater text := current_user;
BEGIN
    SELECT p.proacl, p.proowner INTO old_acl, old_owner FROM pg_catalog.pg_proc p
     WHERE p.oid OPERATOR(pg_catalog.=) old_fn;
    SELECT pg_catalog.string_agg(pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid), ', ')
      INTO dependents
      FROM pg_catalog.pg_depend d
     WHERE d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
       AND d.refobjid OPERATOR(pg_catalog.=) old_fn AND d.deptype OPERATOR(pg_catalog.=) 'n';
    IF dependents IS NOT NULL THEN
        RAISE EXCEPTION 'hc_attempt_begin gains an argument in 0.3.0, and these depend on its 0.2.0 signature: %', dependents
              USING HINT = 'Drop them, run ALTER EXTENSION holdcommit UPDATE, then create them again: the old calls keep working with the new signature.';
    END IF;
    DROP FUNCTION @extschema@.hc_attempt_begin(text, text, bigint, interval, integer);
    CREATE FUNCTION @extschema@.hc_attempt_begin(resource text, owner text, token bigint,
                                                 cooldown interval DEFAULT '10 minutes',
                                                 max_attempts integer DEFAULT 5,
                                                 request_key text DEFAULT NULL)
    RETURNS @extschema@.hc_attempt
    AS 'MODULE_PATHNAME', 'hc_attempt_begin' LANGUAGE C VOLATILE;
    REVOKE ALL ON FUNCTION @extschema@.hc_attempt_begin(text, text, bigint, interval, integer, text) FROM PUBLIC;
    new_fn := '@extschema@.hc_attempt_begin(text, text, bigint, interval, integer, text)'::pg_catalog.regprocedure;
    SELECT i.initprivs INTO initial FROM pg_catalog.pg_init_privs i
     WHERE i.objoid OPERATOR(pg_catalog.=) new_fn
       AND i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass;
    FOR g IN SELECT a.grantee, a.grantor, a.is_grantable
               FROM pg_catalog.aclexplode(old_acl) a, pg_catalog.pg_proc p
              WHERE p.oid OPERATOR(pg_catalog.=) new_fn
                AND a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'
                AND a.grantee OPERATOR(pg_catalog.<>) old_owner
                AND a.grantee OPERATOR(pg_catalog.<>) p.proowner
              ORDER BY a.grantor OPERATOR(pg_catalog.<>) old_owner, a.is_grantable DESC
    LOOP
        IF g.grantor OPERATOR(pg_catalog.<>) old_owner THEN
            EXECUTE pg_catalog.format('SET LOCAL ROLE %s', g.grantor::pg_catalog.regrole);
        END IF;
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s%s', new_fn,
                                  CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                                       ELSE g.grantee::pg_catalog.regrole::pg_catalog.text END,
                                  CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
        EXECUTE pg_catalog.format('SET LOCAL ROLE %I', updater);
    END LOOP;
    UPDATE pg_catalog.pg_init_privs i SET initprivs = initial
     WHERE i.objoid OPERATOR(pg_catalog.=) new_fn
       AND i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass;
    -- A grant its grantor could not make again (a longer chain of grant
    -- options) is named, to be made by hand.
    SELECT pg_catalog.string_agg(DISTINCT a.grantee::pg_catalog.regrole::pg_catalog.text, ', ') INTO missing
      FROM pg_catalog.aclexplode(old_acl) a
     WHERE a.grantee OPERATOR(pg_catalog.<>) old_owner AND a.grantee OPERATOR(pg_catalog.<>) 0
       AND NOT pg_catalog.has_function_privilege(a.grantee, new_fn, 'EXECUTE');
    IF missing IS NOT NULL THEN
        RAISE WARNING 'these roles lost EXECUTE on hc_attempt_begin in the update: %', missing
              USING HINT = 'For each: SELECT hc_grant_app(''role'') or hc_grant_operator(''role''), as it was granted.';
    END IF;
END
$$;
COMMENT ON FUNCTION @extschema@.hc_attempt_begin(text, text, bigint, interval, integer, text) IS
    'Before an external call: PROCEED with a new permanent marker, or COOLDOWN, MANUAL_REVIEW or COMPLETED; within the cooldown the request that made the last attempt (its request_key) gets it back.';

------------------------------------------------------------------------------
-- The worker pool, from shared memory
------------------------------------------------------------------------------

CREATE FUNCTION @extschema@.hc_worker_state(
    OUT slot integer, OUT state text, OUT database name, OUT pid integer,
    OUT caller_pid integer, OUT caller_role name, OUT since timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'hc_worker_state' LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION @extschema@.hc_worker_state() IS
    'The pooled workers of the lease and attempt calls of every database, from shared memory: see hc_workers.';
REVOKE ALL ON FUNCTION @extschema@.hc_worker_state() FROM PUBLIC;

CREATE VIEW @extschema@.hc_workers AS
    SELECT * FROM @extschema@.hc_worker_state();
COMMENT ON VIEW @extschema@.hc_workers IS
    'Every slot of the worker pool in use: its state, database, worker, and the caller and role of the call it runs.';
