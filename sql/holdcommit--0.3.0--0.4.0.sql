-- holdcommit 0.3.0 to 0.4.0.  Also the second half of 0.4.0's install script,
-- which make joins from sql/holdcommit--0.3.0.sql and this file: whatever is
-- written here runs on a fresh install too, on empty tables.
\echo Use "ALTER EXTENSION holdcommit UPDATE TO '0.4.0'" to load this file. \quit

------------------------------------------------------------------------------
-- A reservation of one product is one row
------------------------------------------------------------------------------

-- A reserve of one product wrote four rows with eleven index entries: its
-- part, its order, the order's one line and its ledger row.  An order of one
-- product now carries its line itself (qty and part, its product being its
-- scope_id), so such a reserve writes three rows; only an order of several
-- products has a row per product in hc_stock_order_lines.  The tables are
-- renamed to say what they hold, and hc_stock_reservations and
-- hc_stock_reservation_lines become views with 0.3.0's columns and meaning
-- (doc/architecture.md, "The stock tables and their readers").
--
-- On a database distributed with hc_distribute() (Citus), every node runs
-- this script: the coordinator first, then each worker, to which Citus sends
-- ALTER EXTENSION.  The coordinator's changes of the distributed tables reach
-- their shards and the workers' copies of the tables, as Citus sends them:
-- the text of each statement, which for a statement of the script itself is
-- the whole script (a worker refuses it: "cannot insert multiple commands
-- into a prepared statement"), so they are made in DO blocks, one statement
-- each, and a worker skips them and the conversion: done already
-- (doc/scale-out.md, "Updating").
DO $$
DECLARE
    distributed boolean := false;
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        distributed := EXISTS (SELECT FROM pg_catalog.pg_dist_partition p
                                WHERE p.logicalrelid OPERATOR(pg_catalog.=) '@extschema@.hc_stock_parts'::pg_catalog.regclass);
        IF distributed AND NOT pg_catalog.citus_is_coordinator() THEN
            RETURN;
        END IF;
    END IF;
    -- The ledger first, as a sweep takes it before the orders: a sweep under
    -- way would wait for the orders while the update waited for its ledger,
    -- a deadlock that cancels the update.  Nothing read this index (below).
    DROP INDEX @extschema@.hc_ledger_reservation;
    ALTER TABLE @extschema@.hc_stock_reservations RENAME TO hc_stock_orders;
    ALTER TABLE @extschema@.hc_stock_reservation_lines RENAME TO hc_stock_order_lines;
    ALTER TABLE @extschema@.hc_stock_orders ALTER COLUMN products DROP NOT NULL,
        ADD COLUMN qty integer, ADD COLUMN part smallint;
    -- Citus renames no constraint of a distributed table (an index, which
    -- renames its constraint, yes): this one is made again.
    IF distributed THEN
        ALTER TABLE @extschema@.hc_stock_order_lines DROP CONSTRAINT hc_stock_reservation_lines_qty_check;
        ALTER TABLE @extschema@.hc_stock_order_lines
            ADD CONSTRAINT hc_stock_order_lines_qty_check CHECK (qty > 0);
    ELSE
        ALTER TABLE @extschema@.hc_stock_order_lines
            RENAME CONSTRAINT hc_stock_reservation_lines_qty_check TO hc_stock_order_lines_qty_check;
    END IF;
END
$$;
COMMENT ON TABLE @extschema@.hc_stock_orders IS
    'Stock reservations (orders): RESERVED -> FINALIZED | RELEASED | EXPIRED; an order of one product carries its line (qty, part).';
COMMENT ON COLUMN @extschema@.hc_stock_orders.products IS
    'An order of several products: its products, in lock order (bytewise), the first its scope_id; NULL for an order of one product.';
COMMENT ON COLUMN @extschema@.hc_stock_orders.qty IS
    'An order of one product (its scope_id): the units of its one line, which has the order''s status; NULL for an order of several.';
COMMENT ON COLUMN @extschema@.hc_stock_orders.part IS
    'An order of one product: the part its units are counted in (while RESERVED), or were counted in last.';
COMMENT ON TABLE @extschema@.hc_stock_order_lines IS
    'The lines of the orders of several products, one per product.';

-- The indexes of the orders: dropped before the conversion below, made
-- after it (a sort each, faster than an entry per row).  Each one's reader:
--   the primary key, id (0.3.0's unique index on id; its primary key
--     (scope_id, id) served nothing that index did not): every call given a
--     reservation id;
--   the key: a key's lookup, one key space for holds and stock;
--   the key's age: the sweep that forgets keys past retention;
--   the live orders of one product by expiry: the reclaim of a product's
--     expired units by a call that finds too little, and the sweeper;
--   the live orders of several products by expiry: the sweeper's end of
--     those a reclaim left RESERVED.
-- The lines of orders of several products keep theirs (a line by product
-- and order, an order's lines, a product's live lines by expiry); the
-- ledger has lost its index by reservation (above).  On a
-- distributed setup (hc_distribute() replaced the unique indexes of 0.3.0)
-- the indexes it made stay, renamed.
DO $$
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        IF NOT pg_catalog.citus_is_coordinator() AND EXISTS (SELECT FROM pg_catalog.pg_dist_partition p
                WHERE p.logicalrelid OPERATOR(pg_catalog.=) '@extschema@.hc_stock_parts'::pg_catalog.regclass) THEN
            -- A Citus worker: done by the coordinator (above).  Its own
            -- copy of the orders' table (empty, the rows are in the shards)
            -- kept 0.3.0's unique indexes, which hc_distribute() replaced on
            -- the coordinator's only: they go as on a single node, and are
            -- made below as a fresh install has them.
            IF pg_catalog.to_regclass('@extschema@.hc_stock_reservations_id') IS NOT NULL THEN
                ALTER TABLE @extschema@.hc_stock_orders DROP CONSTRAINT hc_stock_orders_pkey;
                DROP INDEX @extschema@.hc_stock_reservations_id, @extschema@.hc_stock_reservations_key,
                           @extschema@.hc_stock_orders_key_age;
            END IF;
            RETURN;
        END IF;
    END IF;
    DROP INDEX @extschema@.hc_stock_reservations_expiry;
    IF pg_catalog.to_regclass('@extschema@.hc_stock_reservations_id') IS NOT NULL THEN
        ALTER TABLE @extschema@.hc_stock_orders DROP CONSTRAINT hc_stock_reservations_pkey;
        DROP INDEX @extschema@.hc_stock_reservations_id, @extschema@.hc_stock_reservations_key,
                   @extschema@.hc_stock_reservations_key_age;
    ELSE
        ALTER INDEX @extschema@.hc_stock_reservations_pkey RENAME TO hc_stock_orders_pkey;
        ALTER INDEX @extschema@.hc_stock_reservations_key_age RENAME TO hc_stock_orders_key_age;
        ALTER INDEX IF EXISTS @extschema@.hc_stock_reservations_by_id RENAME TO hc_stock_orders_by_id;
        ALTER INDEX IF EXISTS @extschema@.hc_stock_reservations_scope_key RENAME TO hc_stock_orders_scope_key;
        ALTER INDEX IF EXISTS @extschema@.hc_stock_reservations_by_key RENAME TO hc_stock_orders_by_key;
    END IF;
END
$$;

-- Each order of one product takes in its line, which goes.  In 0.3.0 a
-- reclaim could expire such a line and leave its order RESERVED (the order's
-- row was locked): one row has one status, so that order ends EXPIRED now,
-- as the sweeper would have ended it.  The two tables are written anew, in
-- one pass each (a copy of what they keep, emptied, filled), rather than
-- updated and deleted row by row: on a large history that takes a third of
-- the time under the update's locks, and leaves no dead rows
-- (doc/operations.md, "Updating").  A fresh install has nothing to convert.
DO $$
DECLARE
    ended timestamptz := pg_catalog.now();  -- Citus takes no now() in a CASE
BEGIN
    -- On Citus the same in two statements that each shard runs on its own
    -- rows (an order and its lines are on the shard of its first product),
    -- made by the coordinator: copies would gather every row there.
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        IF EXISTS (SELECT FROM pg_catalog.pg_dist_partition p
                    WHERE p.logicalrelid OPERATOR(pg_catalog.=) '@extschema@.hc_stock_parts'::pg_catalog.regclass) THEN
            IF NOT pg_catalog.citus_is_coordinator() THEN
                RETURN;  -- a Citus worker: done by the coordinator
            END IF;
            UPDATE @extschema@.hc_stock_orders o
               SET status = CASE WHEN o.status OPERATOR(pg_catalog.=) 'RESERVED' AND l.status OPERATOR(pg_catalog.=) 'EXPIRED'
                                 THEN 'EXPIRED' ELSE o.status END,
                   ended_at = CASE WHEN o.status OPERATOR(pg_catalog.=) 'RESERVED' AND l.status OPERATOR(pg_catalog.=) 'EXPIRED'
                                   THEN ended ELSE o.ended_at END,
                   products = NULL, qty = l.qty, part = l.part
              FROM @extschema@.hc_stock_order_lines l
             WHERE l.product_id OPERATOR(pg_catalog.=) o.scope_id AND l.reservation_id OPERATOR(pg_catalog.=) o.id
               AND pg_catalog.cardinality(o.products) OPERATOR(pg_catalog.=) 1;
            DELETE FROM @extschema@.hc_stock_order_lines l
             USING @extschema@.hc_stock_orders o
             WHERE o.scope_id OPERATOR(pg_catalog.=) l.product_id AND o.id OPERATOR(pg_catalog.=) l.reservation_id
               AND o.qty IS NOT NULL;
            RETURN;
        END IF;
    END IF;
    IF NOT EXISTS (SELECT FROM @extschema@.hc_stock_orders) THEN
        RETURN;
    END IF;
    CREATE UNLOGGED TABLE @extschema@.hc_convert_orders AS
    SELECT o.scope_id, o.id, o.buyer_id, o.idempotency_key,
           CASE WHEN o.status OPERATOR(pg_catalog.=) 'RESERVED' AND l.status OPERATOR(pg_catalog.=) 'EXPIRED'
                THEN 'EXPIRED' ELSE o.status END AS status,
           o.expires_at, o.created_at,
           CASE WHEN o.status OPERATOR(pg_catalog.=) 'RESERVED' AND l.status OPERATOR(pg_catalog.=) 'EXPIRED'
                THEN pg_catalog.now() ELSE o.ended_at END AS ended_at,
           o.fingerprint, CASE WHEN l.qty IS NULL THEN o.products END AS products, l.qty, l.part
      FROM @extschema@.hc_stock_orders o
      LEFT JOIN @extschema@.hc_stock_order_lines l
        ON pg_catalog.cardinality(o.products) OPERATOR(pg_catalog.=) 1
       AND l.reservation_id OPERATOR(pg_catalog.=) o.id AND l.product_id OPERATOR(pg_catalog.=) o.scope_id;
    CREATE UNLOGGED TABLE @extschema@.hc_convert_lines AS
    SELECT l.product_id, l.reservation_id, l.qty, l.status, l.expires_at, l.buyer_id, l.part, l.scope_id
      FROM @extschema@.hc_stock_order_lines l
     WHERE NOT EXISTS (SELECT FROM @extschema@.hc_convert_orders o
                        WHERE o.id OPERATOR(pg_catalog.=) l.reservation_id AND o.qty IS NOT NULL);
    TRUNCATE @extschema@.hc_stock_orders, @extschema@.hc_stock_order_lines;
    INSERT INTO @extschema@.hc_stock_orders (scope_id, id, buyer_id, idempotency_key, status, expires_at,
                                             created_at, ended_at, fingerprint, products, qty, part)
    SELECT * FROM @extschema@.hc_convert_orders;
    INSERT INTO @extschema@.hc_stock_order_lines (product_id, reservation_id, qty, status, expires_at,
                                                  buyer_id, part, scope_id)
    SELECT * FROM @extschema@.hc_convert_lines;
    DROP TABLE @extschema@.hc_convert_orders, @extschema@.hc_convert_lines;
END
$$;

DO $$
DECLARE
    worker boolean := false;
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        worker := NOT pg_catalog.citus_is_coordinator() AND EXISTS (SELECT FROM pg_catalog.pg_dist_partition p
                WHERE p.logicalrelid OPERATOR(pg_catalog.=) '@extschema@.hc_stock_parts'::pg_catalog.regclass);
    END IF;
    IF pg_catalog.to_regclass('@extschema@.hc_stock_orders_pkey') IS NULL THEN
        ALTER TABLE @extschema@.hc_stock_orders ADD CONSTRAINT hc_stock_orders_pkey PRIMARY KEY (id);
        CREATE UNIQUE INDEX hc_stock_orders_key ON @extschema@.hc_stock_orders (idempotency_key);
        CREATE INDEX hc_stock_orders_key_age ON @extschema@.hc_stock_orders (created_at)
            WHERE idempotency_key IS NOT NULL;
    END IF;
    IF worker THEN
        RETURN;  -- a Citus worker: the rest done by the coordinator (above)
    END IF;
    CREATE INDEX hc_stock_orders_expiry ON @extschema@.hc_stock_orders (scope_id, expires_at)
        WHERE status = 'RESERVED' AND qty IS NOT NULL;
    CREATE INDEX hc_stock_orders_open ON @extschema@.hc_stock_orders (expires_at)
        WHERE status = 'RESERVED' AND qty IS NULL;
    ALTER INDEX @extschema@.hc_stock_reservation_lines_pkey RENAME TO hc_stock_order_lines_pkey;
    ALTER INDEX @extschema@.hc_stock_reservation_lines_reservation RENAME TO hc_stock_order_lines_reservation;
    ALTER INDEX @extschema@.hc_stock_reservation_lines_expiry RENAME TO hc_stock_order_lines_expiry;
END
$$;

-- The documented read surfaces, with 0.3.0's columns and meaning.
CREATE VIEW @extschema@.hc_stock_reservations AS
    SELECT o.scope_id, o.id, o.buyer_id, o.idempotency_key, o.status, o.expires_at, o.created_at,
           o.ended_at, o.fingerprint, COALESCE(o.products, ARRAY[o.scope_id]) AS products
      FROM @extschema@.hc_stock_orders o;
COMMENT ON VIEW @extschema@.hc_stock_reservations IS
    'Stock reservations (orders): RESERVED -> FINALIZED | RELEASED | EXPIRED.';
CREATE VIEW @extschema@.hc_stock_reservation_lines AS
    SELECT o.scope_id AS product_id, o.id AS reservation_id, o.qty, o.status, o.expires_at,
           o.buyer_id, o.part, o.scope_id
      FROM @extschema@.hc_stock_orders o
     WHERE o.qty IS NOT NULL
    UNION ALL
    SELECT l.product_id, l.reservation_id, l.qty, l.status, l.expires_at, l.buyer_id, l.part,
           l.scope_id
      FROM @extschema@.hc_stock_order_lines l;
COMMENT ON VIEW @extschema@.hc_stock_reservation_lines IS
    'One line per product of a stock reservation.';

-- The roles granted the tables keep them (their grants stay on the renamed
-- tables) and are granted the views alike, by the same grantors, as
-- hc_grant_app and hc_grant_operator grant them in a fresh install: the
-- columns a role may read of an order it may read of the view, and of the
-- new qty and part.  Those grants stay out of the extension's initial
-- privileges, so that pg_dump keeps them.  A grant its grantor cannot make
-- again is named in a WARNING.
DO $$
DECLARE
    s text := '@extschema@';
    updater text := current_user;
    pair record;
    g record;
    missing text;
BEGIN
    FOR pair IN SELECT * FROM (VALUES
            ('hc_stock_orders', 'hc_stock_reservations'),
            ('hc_stock_order_lines', 'hc_stock_reservation_lines')) AS v(tab, view)
    LOOP
        FOR g IN SELECT * FROM (
            SELECT a.grantor, a.grantee, a.privilege_type, a.is_grantable, NULL::text AS col,
                   c.relowner AS owner
              FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
             WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.format('%I.%I', s, pair.tab)::pg_catalog.regclass
               AND a.grantee OPERATOR(pg_catalog.<>) c.relowner
            UNION ALL
            SELECT a.grantor, a.grantee, a.privilege_type, a.is_grantable, t.attname, c.relowner
              FROM pg_catalog.pg_class c
              JOIN pg_catalog.pg_attribute t ON t.attrelid OPERATOR(pg_catalog.=) c.oid
             CROSS JOIN LATERAL pg_catalog.aclexplode(t.attacl) a
             WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.format('%I.%I', s, pair.tab)::pg_catalog.regclass
               AND a.grantee OPERATOR(pg_catalog.<>) c.relowner AND t.attnum OPERATOR(pg_catalog.>) 0
               AND EXISTS (SELECT FROM pg_catalog.pg_attribute v
                            WHERE v.attrelid OPERATOR(pg_catalog.=)
                                  pg_catalog.format('%I.%I', s, pair.view)::pg_catalog.regclass
                              AND v.attname OPERATOR(pg_catalog.=) t.attname)) x
            ORDER BY x.grantor OPERATOR(pg_catalog.<>) x.owner, x.is_grantable DESC
        LOOP
            IF g.grantor OPERATOR(pg_catalog.<>) g.owner THEN
                EXECUTE pg_catalog.format('SET LOCAL ROLE %s', g.grantor::pg_catalog.regrole);
            END IF;
            EXECUTE pg_catalog.format('GRANT %s%s ON TABLE %I.%I TO %s%s', g.privilege_type,
                                      CASE WHEN g.col IS NULL THEN '' ELSE pg_catalog.format(' (%I)', g.col) END,
                                      s, pair.view,
                                      CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                                           ELSE g.grantee::pg_catalog.regrole::pg_catalog.text END,
                                      CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
            -- Of an order's columns, who may read its buyer may read its line.
            IF pair.tab OPERATOR(pg_catalog.=) 'hc_stock_orders' AND g.col OPERATOR(pg_catalog.=) 'buyer_id' THEN
                EXECUTE pg_catalog.format('GRANT %s (qty, part) ON TABLE %I.hc_stock_orders TO %s%s',
                                          g.privilege_type, s,
                                          CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                                               ELSE g.grantee::pg_catalog.regrole::pg_catalog.text END,
                                          CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
            END IF;
            EXECUTE pg_catalog.format('SET LOCAL ROLE %I', updater);
        END LOOP;
        -- A fresh install records no initial privileges for a table or view.
        DELETE FROM pg_catalog.pg_init_privs i
         WHERE i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
           AND i.objoid OPERATOR(pg_catalog.=) ANY (ARRAY[
                   pg_catalog.format('%I.%I', s, pair.tab)::pg_catalog.regclass,
                   pg_catalog.format('%I.%I', s, pair.view)::pg_catalog.regclass]::pg_catalog.oid[]);
        SELECT pg_catalog.string_agg(DISTINCT a.grantee::pg_catalog.regrole::pg_catalog.text, ', ') INTO missing
          FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
         WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.format('%I.%I', s, pair.tab)::pg_catalog.regclass
           AND a.grantee OPERATOR(pg_catalog.<>) c.relowner AND a.grantee OPERATOR(pg_catalog.<>) 0
           AND NOT pg_catalog.has_table_privilege(a.grantee,
                   pg_catalog.format('%I.%I', s, pair.view)::pg_catalog.regclass, a.privilege_type);
        IF missing IS NOT NULL THEN
            RAISE WARNING 'these roles cannot read % until they are granted again: %', pair.view, missing
                  USING HINT = 'For each: SELECT hc_grant_app(''role'') or hc_grant_operator(''role''), as it was granted.';
        END IF;
    END LOOP;
END
$$;

------------------------------------------------------------------------------
-- A hot product spreads itself (issue 36, part 4)
------------------------------------------------------------------------------

-- When reserves of a product wait for each other, holdcommit spreads its
-- stock over parts by itself, in a background worker's transaction of its
-- own, and gathers them back once the rush has been over for
-- holdcommit.stock_gather_after; never below the parts an operator set with
-- hc_stock_spread, the product's floor.  One row per product that has a
-- floor or has been spread automatically (src/stock/auto_spread.c); a
-- product without one has a floor of 1.  Only the automatic runs and
-- hc_stock_spread write it.
CREATE TABLE @extschema@.hc_stock_spreads (
    product_id      text PRIMARY KEY,
    min_parts       smallint NOT NULL DEFAULT 1 CHECK (min_parts BETWEEN 1 AND 256),
    changed_at      timestamptz NOT NULL,  -- the last change of its parts by any of them
    spreads         bigint NOT NULL DEFAULT 0,  -- automatic spreads and gathers so far
    gathers         bigint NOT NULL DEFAULT 0,
    failures        bigint NOT NULL DEFAULT 0,  -- automatic runs that changed nothing: a part held, the stall bound
    last_spread_at  timestamptz,
    last_gather_at  timestamptz,
    last_waiters    integer,           -- the reserves at once that decided the last spread
    last_parts_from smallint,          -- the last automatic change: parts before and after
    last_parts_to   smallint,
    last_stall_ms   double precision,  -- how long the last automatic run held part 0, commit included
    max_stall_ms    double precision,
    last_failure    text,              -- why the last failed run changed nothing, and when
    last_failure_at timestamptz
);
COMMENT ON TABLE @extschema@.hc_stock_spreads IS
    'Per product: the fewest parts an operator set (hc_stock_spread), and what holdcommit''s automatic spreads and gathers did: when, sized by how many waiters, how long they held part 0.';
SELECT pg_catalog.pg_extension_config_dump('@extschema@.hc_stock_spreads', '');

-- The products an operator spread under 0.3.0 keep those parts as their
-- floor.  On Citus each node has its own hc_stock_spreads and keeps the
-- floors of the products it has.  A worker runs this script within the
-- coordinator's transaction, which Citus commits in two phases: it reads
-- the shards of hc_stock_parts it has, by their names, as plain local
-- tables.  (A distributed query from there is one nested in the
-- coordinator's; let through, Citus crashed at the COMMIT PREPARED that
-- followed.)  A product's parts are all in one shard.
DO $$
DECLARE
    shard text;
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        IF NOT pg_catalog.citus_is_coordinator() AND EXISTS (SELECT FROM pg_catalog.pg_dist_partition p
                WHERE p.logicalrelid OPERATOR(pg_catalog.=) '@extschema@.hc_stock_parts'::pg_catalog.regclass) THEN
            FOR shard IN SELECT pg_catalog.shard_name('@extschema@.hc_stock_parts'::pg_catalog.regclass, sh.shardid)
                           FROM pg_catalog.pg_dist_shard sh
                           JOIN pg_catalog.pg_dist_placement pl ON pl.shardid OPERATOR(pg_catalog.=) sh.shardid
                          WHERE sh.logicalrelid OPERATOR(pg_catalog.=) '@extschema@.hc_stock_parts'::pg_catalog.regclass
                            AND pl.groupid OPERATOR(pg_catalog.=) (SELECT g.groupid FROM pg_catalog.pg_dist_local_group g)
            LOOP
                EXECUTE pg_catalog.format(
                    'INSERT INTO @extschema@.hc_stock_spreads (product_id, min_parts, changed_at)'
                    ' SELECT p.product_id, pg_catalog.count(*)::pg_catalog.int2, pg_catalog.max(p.updated_at)'
                    ' FROM %s p GROUP BY p.product_id'
                    ' HAVING pg_catalog.count(*) OPERATOR(pg_catalog.>) 1', shard);
            END LOOP;
            RETURN;
        END IF;
    END IF;
    INSERT INTO @extschema@.hc_stock_spreads (product_id, min_parts, changed_at)
    SELECT p.product_id, pg_catalog.count(*)::pg_catalog.int2, pg_catalog.max(p.updated_at)
      FROM @extschema@.hc_stock_parts p
     GROUP BY p.product_id
    HAVING pg_catalog.count(*) OPERATOR(pg_catalog.>) 1;
END
$$;

CREATE FUNCTION @extschema@.hc_stock_auto_spread(product_id text, parts integer)
RETURNS integer
AS 'MODULE_PATHNAME', 'hc_stock_auto_spread' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_stock_auto_spread(text, integer) IS
    'What an automatic spread or gather runs, in the caller''s transaction: the product''s parts to parts (never below its floor), part 0 taken waiting, the others without (55P03); counted in hc_stock_spreads; returns the parts it has (operator, tests).';
REVOKE ALL ON FUNCTION @extschema@.hc_stock_auto_spread(text, integer) FROM PUBLIC;

CREATE FUNCTION @extschema@.hc_stock_waits(
    OUT product_id text, OUT reserving integer, OUT peak integer, OUT last_overlap timestamptz,
    OUT spreading boolean, OUT parts integer)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'hc_stock_waits' LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION @extschema@.hc_stock_waits() IS
    'The products of this database whose reserves holdcommit watches, from shared memory (empty without shared_preload_libraries): transactions reserving each now, the most at once in its last rush, the last overlap, a spread under way.';
REVOKE ALL ON FUNCTION @extschema@.hc_stock_waits() FROM PUBLIC;

-- The update grants nothing (a grant made here would be an initial
-- privilege, which pg_dump leaves out): an operator granted before
-- (hc_asset_add is granted to operators only) must be granted again to see
-- what 0.4.0 adds for operators.
DO $$
DECLARE
    ungranted text;
BEGIN
    SELECT pg_catalog.string_agg(DISTINCT a.grantee::pg_catalog.regrole::pg_catalog.text, ', ') INTO ungranted
      FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
     WHERE p.oid OPERATOR(pg_catalog.=) '@extschema@.hc_asset_add(text, text)'::pg_catalog.regprocedure
       AND a.grantee OPERATOR(pg_catalog.<>) 0 AND a.grantee OPERATOR(pg_catalog.<>) p.proowner;
    IF ungranted IS NOT NULL THEN
        RAISE WARNING 'these operators cannot see the automatic spreads (hc_stock_spreads, hc_stock_waits, hc_stock_auto_spread) until they are granted again: %', ungranted
              USING HINT = 'For each: SELECT hc_grant_operator(''role'').';
    END IF;
END
$$;

-- The views operators and monitoring read: what the spreads and gathers did.
-- Their rows as in 0.3.0, then the new ones.
CREATE OR REPLACE VIEW @extschema@.hc_overview AS
    WITH t AS (SELECT pg_catalog.clock_timestamp() AS now)
    SELECT 'assets'::text AS area, s.status AS item,
           (SELECT pg_catalog.count(*) FROM @extschema@.hc_assets a
             WHERE a.status OPERATOR(pg_catalog.=) s.status) AS value
      FROM (VALUES ('AVAILABLE'::text), ('HELD'), ('SOLD')) s (status)
    UNION ALL
    SELECT 'holds', 'active', pg_catalog.count(*)
      FROM @extschema@.hc_reservations r, t
     WHERE r.status OPERATOR(pg_catalog.=) 'HELD' AND r.expires_at OPERATOR(pg_catalog.>) t.now
    UNION ALL
    SELECT 'holds', 'expiring within a minute', pg_catalog.count(*)
      FROM @extschema@.hc_reservations r, t
     WHERE r.status OPERATOR(pg_catalog.=) 'HELD' AND r.expires_at OPERATOR(pg_catalog.>) t.now
       AND r.expires_at OPERATOR(pg_catalog.<=) (t.now OPERATOR(pg_catalog.+) '1 minute'::pg_catalog.interval)
    UNION ALL
    SELECT 'holds', 'expired, not yet swept', pg_catalog.count(*)
      FROM @extschema@.hc_reservations r, t
     WHERE r.status OPERATOR(pg_catalog.=) 'HELD' AND r.expires_at OPERATOR(pg_catalog.<=) t.now
    UNION ALL
    SELECT 'stock', 'active reservations', pg_catalog.count(*)
      FROM @extschema@.hc_stock_orders r, t
     WHERE r.status OPERATOR(pg_catalog.=) 'RESERVED' AND r.expires_at OPERATOR(pg_catalog.>) t.now
    UNION ALL
    SELECT 'stock', 'reserved units', COALESCE(pg_catalog.sum(i.reserved), 0)::pg_catalog.int8
      FROM @extschema@.hc_inventory i
    UNION ALL
    SELECT 'stock', 'expired, not yet swept', pg_catalog.count(*)
      FROM @extschema@.hc_stock_orders r, t
     WHERE r.status OPERATOR(pg_catalog.=) 'RESERVED' AND r.expires_at OPERATOR(pg_catalog.<=) t.now
    UNION ALL
    SELECT 'leases', 'held', pg_catalog.count(*)
      FROM @extschema@.hc_locks l
     WHERE l.owner IS NOT NULL
    UNION ALL
    SELECT 'leases', 'stale', pg_catalog.count(*)
      FROM @extschema@.hc_locks l, t
     WHERE l.owner IS NOT NULL
       AND l.heartbeat_at OPERATOR(pg_catalog.+) l.stale_after OPERATOR(pg_catalog.<=) t.now
    UNION ALL
    SELECT 'attempts', 'MANUAL_REVIEW', pg_catalog.count(*)
      FROM @extschema@.hc_attempts a
     WHERE a.status OPERATOR(pg_catalog.=) 'MANUAL_REVIEW'
    UNION ALL
    SELECT 'ledger, last hour', l.event, pg_catalog.count(*)
      FROM @extschema@.hc_ledger l, t
     WHERE l.at OPERATOR(pg_catalog.>) (t.now OPERATOR(pg_catalog.-) '1 hour'::pg_catalog.interval)
     GROUP BY l.event
    UNION ALL
    SELECT 'stock spreads', s.item, s.value
      FROM (SELECT pg_catalog.count(*) FILTER (WHERE n.parts OPERATOR(pg_catalog.>) COALESCE(x.min_parts, 1)) AS spread,
                   COALESCE(pg_catalog.sum(x.spreads), 0)::pg_catalog.int8 AS spreads,
                   COALESCE(pg_catalog.sum(x.gathers), 0)::pg_catalog.int8 AS gathers,
                   COALESCE(pg_catalog.sum(x.failures), 0)::pg_catalog.int8 AS failures,
                   COALESCE(pg_catalog.max(x.max_stall_ms), 0)::pg_catalog.int8 AS stall
              FROM (SELECT p.product_id, pg_catalog.count(*) AS parts
                      FROM @extschema@.hc_stock_parts p GROUP BY p.product_id) n
              FULL JOIN @extschema@.hc_stock_spreads x ON x.product_id OPERATOR(pg_catalog.=) n.product_id) o
     CROSS JOIN LATERAL (VALUES ('products spread beyond their floor'::text, o.spread),
                                ('automatic spreads', o.spreads), ('automatic gathers', o.gathers),
                                ('automatic runs that changed nothing', o.failures),
                                ('longest stall of part 0 (ms)', o.stall)) s (item, value);

COMMENT ON VIEW @extschema@.hc_overview IS
    'For operators: assets by status, holds and stock reservations active and expiring, leases held and stale, attempts awaiting manual review, ledger events of the last hour, the automatic spreads of hot products.';

-- hc_distribute() knows the tables by their new names.  On Citus the
-- orders' primary key must hold their routing id: (scope_id, id), with a
-- plain index on id for the lookups by reservation id alone.
CREATE OR REPLACE FUNCTION @extschema@.hc_distribute(shard_count integer DEFAULT NULL)
RETURNS SETOF text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
-- Citus' notices of the rows it copies name a step this function takes.
SET client_min_messages = warning
AS $distribute$
DECLARE
    s text := '@extschema@';
    t record;
    f record;
    first_table text;
    assets_by text;     -- hc_assets' distribution column, if distributed
    seats boolean;      -- a pool's seats on one shard (not a database distributed by 0.3.0)
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
    SELECT pg_catalog.column_to_column_name(p.logicalrelid, p.partkey) INTO assets_by
      FROM pg_catalog.pg_dist_partition p
     WHERE p.logicalrelid OPERATOR(pg_catalog.=) pg_catalog.format('%I.hc_assets', s)::pg_catalog.regclass;
    seats := assets_by IS NULL OR assets_by OPERATOR(pg_catalog.=) 'scope_id';
    IF assets_by IS NULL THEN
        -- A single node holds seats of several pools in one group; on Citus
        -- a group is one pool's, and a live one split over the shards would
        -- be committed or released in part.
        IF EXISTS (SELECT FROM @extschema@.hc_reservations r
                     JOIN @extschema@.hc_assets a ON a.id OPERATOR(pg_catalog.=) r.asset_id
                    WHERE r.status OPERATOR(pg_catalog.=) 'HELD' AND r.seats IS NOT NULL
                    GROUP BY r.id
                   HAVING pg_catalog.count(DISTINCT COALESCE(a.pool, a.id)) OPERATOR(pg_catalog.>) 1) THEN
            RAISE EXCEPTION 'a live group hold is of several pools'
                  USING ERRCODE = 'object_not_in_prerequisite_state',
                        DETAIL = 'On Citus a group hold is of one pool''s seats, on one node.',
                        HINT = 'Commit or release the group holds of several pools, or let them expire, then call hc_distribute() again.';
        END IF;
        -- The routing id of every row (scope_id): a pool's seats, their
        -- holds and their ledger rows go to the pool's shard.  A reservation
        -- whose asset is gone (hc_check() reports it) keeps its asset's id.
        -- Each asset id is recorded once, with its routing id.  From now on
        -- the default fills it in: the routing id of the call writing the
        -- row.  The unique indexes hold it, as Citus needs.
        EXECUTE pg_catalog.format(
            'UPDATE %1$I.hc_assets SET scope_id = COALESCE(pool, id) WHERE scope_id IS NULL;'
            ' UPDATE %1$I.hc_reservations r SET scope_id = COALESCE('
            '   (SELECT a.scope_id FROM %1$I.hc_assets a WHERE a.id OPERATOR(pg_catalog.=) r.asset_id), r.asset_id)'
            '  WHERE r.scope_id IS NULL;'
            ' UPDATE %1$I.hc_ledger l SET scope_id = COALESCE('
            '   (SELECT a.scope_id FROM %1$I.hc_assets a'
            '     WHERE l.kind OPERATOR(pg_catalog.=) ''asset'' AND a.id OPERATOR(pg_catalog.=) l.entity_id), l.entity_id)'
            '  WHERE l.scope_id IS NULL;'
            ' INSERT INTO %1$I.hc_asset_routes (asset_id, scope_id) SELECT id, scope_id FROM %1$I.hc_assets;'
            ' ALTER TABLE %1$I.hc_assets ALTER scope_id SET DEFAULT %1$I.hc_scope_id(),'
            '   DROP CONSTRAINT hc_assets_pkey, ADD CONSTRAINT hc_assets_pkey PRIMARY KEY (id, scope_id);'
            ' ALTER TABLE %1$I.hc_reservations ALTER scope_id SET DEFAULT %1$I.hc_scope_id(),'
            '   DROP CONSTRAINT hc_reservations_pkey,'
            '   ADD CONSTRAINT hc_reservations_pkey PRIMARY KEY (asset_id, id, scope_id);'
            ' DROP INDEX %1$I.hc_reservations_one_committed;'
            ' CREATE UNIQUE INDEX hc_reservations_one_committed ON %1$I.hc_reservations (asset_id, scope_id)'
            '  WHERE status OPERATOR(pg_catalog.=) ''COMMITTED'';'
            ' ALTER TABLE %1$I.hc_ledger ALTER scope_id SET DEFAULT %1$I.hc_scope_id(),'
            '   DROP CONSTRAINT hc_ledger_pkey, ADD CONSTRAINT hc_ledger_pkey PRIMARY KEY (kind, entity_id, seq, scope_id);'
            ' DROP INDEX %1$I.hc_assets_pool;'
            ' CREATE UNIQUE INDEX hc_assets_pool ON %1$I.hc_assets (pool, grp, pos, scope_id) WHERE pool IS NOT NULL', s);
        RETURN NEXT 'tables hc_assets, hc_reservations and hc_ledger given their routing id (scope_id)';
    END IF;
    -- Unique indexes without the routing id: Citus refuses them.  A lookup
    -- by reservation id alone keeps a plain index on each shard.
    IF (SELECT i.indnatts FROM pg_catalog.pg_index i
         WHERE i.indexrelid OPERATOR(pg_catalog.=)
               pg_catalog.to_regclass(pg_catalog.format('%I.hc_stock_orders_pkey', s))) OPERATOR(pg_catalog.=) 1 THEN
        EXECUTE pg_catalog.format('CREATE INDEX IF NOT EXISTS hc_stock_orders_by_id ON %I.hc_stock_orders (id)', s);
        EXECUTE pg_catalog.format('ALTER TABLE %I.hc_stock_orders DROP CONSTRAINT hc_stock_orders_pkey,'
                                  ' ADD CONSTRAINT hc_stock_orders_pkey PRIMARY KEY (scope_id, id)', s);
        RETURN NEXT 'primary key hc_stock_orders_pkey made (scope_id, id), with hc_stock_orders_by_id';
    END IF;
    FOR t IN SELECT * FROM (VALUES
            ('hc_reservations', 'hc_reservations_id', 'hc_reservations_by_id', 'id', 'hc_reservations_key',
             'hc_reservations_scope_key', CASE WHEN seats THEN 'scope_id' ELSE 'asset_id' END,
             'hc_reservations_by_key'),
            ('hc_stock_orders', NULL, NULL, NULL, 'hc_stock_orders_key', 'hc_stock_orders_scope_key',
             'scope_id', 'hc_stock_orders_by_key'))
            AS v(tab, id_index, by_id, id_column, key_index, scope_key, scope_column, by_key)
    LOOP
        IF t.id_index IS NOT NULL
           AND pg_catalog.to_regclass(pg_catalog.format('%I.%I', s, t.id_index)) IS NOT NULL THEN
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
            (1, 'hc_assets', 'scope_id'), (2, 'hc_reservations', 'scope_id'), (3, 'hc_ledger', 'scope_id'),
            (4, 'hc_stock_parts', 'product_id'), (5, 'hc_stock_orders', 'scope_id'),
            (6, 'hc_stock_order_lines', 'product_id'), (7, 'hc_locks', 'resource'),
            (8, 'hc_attempts', 'resource'), (9, 'hc_routes', 'routing_id'),
            (10, 'hc_asset_routes', 'asset_id')) AS v(n, tab, routing)
            WHERE seats OR v.tab OPERATOR(pg_catalog.<>) 'hc_asset_routes' ORDER BY n
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
            -- Citus copied the rows into the shards and left them here too,
            -- where no call reads them.
            PERFORM pg_catalog.truncate_local_data_after_distributing_table(
                    pg_catalog.format('%I.%I', s, t.tab)::pg_catalog.regclass);
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
                    'hc_lock_release', 'hc_lock_check', 'hc_attempt_begin', 'hc_attempt_complete',
                    'hc_attempt_reset', 'hc_hold_best', 'hc_hold_many'])
                AND p.proargnames[1] OPERATOR(pg_catalog.=) ANY (ARRAY['id', 'asset_id', 'product_id', 'resource',
                                                                       'pool', 'scope_id'])
                -- The forms given a pool's routing id, where the seats have one.
                AND (seats OR p.proargnames[1] OPERATOR(pg_catalog.<>) 'scope_id')
                -- A seat is added where it is called: it records its id's
                -- routing id, then sends itself to the pool's node.
                AND NOT (seats AND p.oid OPERATOR(pg_catalog.=)
                         pg_catalog.to_regprocedure(pg_catalog.format('%I.hc_asset_add(text, text, text, integer, text, integer)', s)))
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

------------------------------------------------------------------------------
-- Many seats, one hold; the best seats available
------------------------------------------------------------------------------

-- What a venue needs to choose seats: the pool they are sold from, a rank
-- (lower is better), the group of adjacent seats (a row) and the position
-- in it.  A group hold (hc_hold_many, hc_hold_best) is one reservation id
-- over its seats: a row per seat in hc_reservations, the same id on each,
-- `seats` the number of them (NULL for hc_hold's); the key and the
-- request's fingerprint are on the first seat's row (bytewise by asset_id)
-- alone.  The lookup by reservation id alone becomes unique on (id,
-- asset_id), its readers finding a group's first seat.  On a distributed
-- setup (hc_distribute() replaced that index) only the columns are added,
-- by the coordinator.
DO $$
DECLARE
    distributed boolean := false;
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        distributed := EXISTS (SELECT FROM pg_catalog.pg_dist_partition p
                                WHERE p.logicalrelid OPERATOR(pg_catalog.=) '@extschema@.hc_assets'::pg_catalog.regclass);
        IF distributed AND NOT pg_catalog.citus_is_coordinator() THEN
            -- A Citus worker: the coordinator made the columns and indexes
            -- (its plain hc_assets_pool included).  Its own copies of the
            -- tables (empty, the rows are in the shards) have them as a
            -- fresh install has them there, as the orders' table (above).
            IF pg_catalog.to_regclass('@extschema@.hc_reservations_id') IS NOT NULL THEN
                DROP INDEX @extschema@.hc_reservations_id;
                CREATE UNIQUE INDEX hc_reservations_id ON @extschema@.hc_reservations (id, asset_id);
            END IF;
            DROP INDEX IF EXISTS @extschema@.hc_assets_pool;
            CREATE UNIQUE INDEX hc_assets_pool ON @extschema@.hc_assets (pool, grp, pos) WHERE pool IS NOT NULL;
            RETURN;
        END IF;
    END IF;
    ALTER TABLE @extschema@.hc_assets ADD COLUMN pool text, ADD COLUMN rank integer,
        ADD COLUMN grp text, ADD COLUMN pos integer;
    ALTER TABLE @extschema@.hc_reservations ADD COLUMN seats integer;
    ALTER TABLE @extschema@.hc_assets ADD COLUMN scope_id text;
    ALTER TABLE @extschema@.hc_reservations ADD COLUMN scope_id text;
    ALTER TABLE @extschema@.hc_ledger ADD COLUMN scope_id text;
    IF pg_catalog.to_regclass('@extschema@.hc_reservations_id') IS NOT NULL THEN
        DROP INDEX @extschema@.hc_reservations_id;
        CREATE UNIQUE INDEX hc_reservations_id ON @extschema@.hc_reservations (id, asset_id);
    END IF;
    -- Their reader: hc_hold_best, which reads a pool's free seats lowest
    -- rank first, and the seats beside a block by (grp, pos).  None of
    -- their columns changes when a seat is held or sold, so a hold stays a
    -- HOT update.  A place holds one seat; a distributed table cannot
    -- keep that unique without its routing id (hc_hold_best is refused
    -- there), nor can hc_distribute() distribute it, which makes it plain.
    CREATE INDEX hc_assets_pool_rank ON @extschema@.hc_assets (pool, rank) WHERE pool IS NOT NULL;
    IF distributed THEN
        CREATE INDEX hc_assets_pool ON @extschema@.hc_assets (pool, grp, pos) WHERE pool IS NOT NULL;
    ELSE
        CREATE UNIQUE INDEX hc_assets_pool ON @extschema@.hc_assets (pool, grp, pos) WHERE pool IS NOT NULL;
    END IF;
END
$$;
COMMENT ON COLUMN @extschema@.hc_assets.pool IS
    'The pool hc_hold_best() sells the asset from (a category of a venue), or NULL.';
COMMENT ON COLUMN @extschema@.hc_assets.rank IS
    'Within the pool, lower is better: hc_hold_best() takes the lowest.';
COMMENT ON COLUMN @extschema@.hc_assets.grp IS
    'The group of adjacent assets (a row of seats) that pos orders.';
COMMENT ON COLUMN @extschema@.hc_assets.pos IS
    'The position in grp: pos and pos + 1 are neighbours.';
COMMENT ON COLUMN @extschema@.hc_reservations.seats IS
    'A group hold (hc_hold_many, hc_hold_best): the number of its seats, each a row with the same id; NULL for hc_hold.';

-- Each row's routing id on Citus: an asset's pool, or its own id; a
-- reservation's asset's; a ledger row's entity's (its asset's for an
-- asset).  hc_distribute() fills it in and distributes the three tables by
-- it, so that a pool's seats, their holds and their ledger are on one
-- shard, and a group hold there commits in one phase.  From then on every
-- call's writes fill it in themselves: its default, set by hc_distribute(),
-- is the routing id of the call that writes the row (hc_scope_id()).  NULL
-- on a single node.  On a database distributed by 0.3.0 (by the asset's id)
-- the coordinator adds the columns, and they stay NULL.
COMMENT ON COLUMN @extschema@.hc_assets.scope_id IS
    'On Citus, the routing id: the pool, or the asset''s own id; NULL on a single node.';
COMMENT ON COLUMN @extschema@.hc_reservations.scope_id IS
    'On Citus, the routing id of the reservation''s asset; NULL on a single node.';
COMMENT ON COLUMN @extschema@.hc_ledger.scope_id IS
    'On Citus, the routing id of the row''s entity; NULL on a single node.';

-- hc_metrics read 0.3.0's lines table for the overdue stock: it reads the
-- view of every line now (the same figures); and it counts the group holds.
CREATE OR REPLACE VIEW @extschema@.hc_metrics AS
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
    SELECT 'group_holds', s.status,
           (SELECT pg_catalog.count(DISTINCT r.id) FROM @extschema@.hc_reservations r
             WHERE r.seats IS NOT NULL AND r.status OPERATOR(pg_catalog.=) s.status)::pg_catalog.float8
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
                                ('failing', o.failing)) m (label, value)
    UNION ALL
    SELECT 'stock_spread', m.label, m.value
      FROM (SELECT (pg_catalog.count(*) FILTER (WHERE n.parts OPERATOR(pg_catalog.>) COALESCE(x.min_parts, 1)))::pg_catalog.float8 AS spread,
                   COALESCE(pg_catalog.sum(n.parts OPERATOR(pg_catalog.-) COALESCE(x.min_parts, 1))
                            FILTER (WHERE n.parts OPERATOR(pg_catalog.>) COALESCE(x.min_parts, 1)), 0)::pg_catalog.float8 AS extra,
                   COALESCE(pg_catalog.sum(x.spreads), 0)::pg_catalog.float8 AS spreads,
                   COALESCE(pg_catalog.sum(x.gathers), 0)::pg_catalog.float8 AS gathers,
                   COALESCE(pg_catalog.sum(x.failures), 0)::pg_catalog.float8 AS failures,
                   COALESCE(pg_catalog.date_part('epoch', (SELECT now FROM t) OPERATOR(pg_catalog.-)
                                                 pg_catalog.max(x.last_spread_at)), -1) AS since_spread,
                   COALESCE(pg_catalog.date_part('epoch', (SELECT now FROM t) OPERATOR(pg_catalog.-)
                                                 pg_catalog.max(x.last_gather_at)), -1) AS since_gather,
                   COALESCE((SELECT y.last_waiters FROM @extschema@.hc_stock_spreads y
                              WHERE y.last_spread_at IS NOT NULL
                              ORDER BY y.last_spread_at DESC NULLS LAST LIMIT 1), 0)::pg_catalog.float8 AS waiters,
                   COALESCE((SELECT y.last_stall_ms FROM @extschema@.hc_stock_spreads y
                              WHERE y.last_stall_ms IS NOT NULL
                              ORDER BY GREATEST(y.last_spread_at, y.last_gather_at, y.last_failure_at) DESC NULLS LAST
                              LIMIT 1), 0) AS last_stall,
                   COALESCE(pg_catalog.max(x.max_stall_ms), 0) AS max_stall
              FROM (SELECT p.product_id, pg_catalog.count(*) AS parts
                      FROM @extschema@.hc_stock_parts p GROUP BY p.product_id) n
              FULL JOIN @extschema@.hc_stock_spreads x ON x.product_id OPERATOR(pg_catalog.=) n.product_id) o
     CROSS JOIN LATERAL (VALUES ('spread_products'::text, o.spread), ('extra_parts', o.extra),
                                ('automatic_spreads', o.spreads), ('automatic_gathers', o.gathers),
                                ('failed_runs', o.failures),
                                ('seconds_since_last_spread', o.since_spread),
                                ('seconds_since_last_gather', o.since_gather),
                                ('last_spread_waiters', o.waiters),
                                ('last_stall_ms', o.last_stall), ('max_stall_ms', o.max_stall)) m (label, value);
COMMENT ON VIEW @extschema@.hc_metrics IS
    'For monitoring: one figure per row (metric, label, value), counts and ages only, for postgres_exporter.';

-- hc_asset_add with the new columns: an overload that takes them after the
-- name (hc_asset_add(id, name) is as it was, for the calls and grants that
-- name it).  Who may read a reservation's buyer may read its seats; that
-- grant stays out of the extension's initial privileges, as on a fresh
-- install, so that pg_dump keeps it.
CREATE FUNCTION @extschema@.hc_asset_add(id text, name text, pool text, rank integer DEFAULT NULL,
                                         grp text DEFAULT NULL, pos integer DEFAULT NULL)
RETURNS @extschema@.hc_assets
AS 'MODULE_PATHNAME', 'hc_asset_add' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_asset_add(text, text, text, integer, text, integer) IS
    'Add an AVAILABLE asset (operator) with its place in a pool, for hc_hold_best().';
REVOKE ALL ON FUNCTION @extschema@.hc_asset_add(text, text, text, integer, text, integer) FROM PUBLIC;
DO $$
DECLARE
    updater text := current_user;
    g record;
BEGIN
    FOR g IN SELECT a.grantor, a.grantee, a.is_grantable, c.relowner AS owner
               FROM pg_catalog.pg_class c
               JOIN pg_catalog.pg_attribute t ON t.attrelid OPERATOR(pg_catalog.=) c.oid
              CROSS JOIN LATERAL pg_catalog.aclexplode(t.attacl) a
              WHERE c.oid OPERATOR(pg_catalog.=) '@extschema@.hc_reservations'::pg_catalog.regclass
                AND t.attname OPERATOR(pg_catalog.=) 'buyer_id' AND a.privilege_type OPERATOR(pg_catalog.=) 'SELECT'
              ORDER BY a.grantor OPERATOR(pg_catalog.<>) c.relowner, a.is_grantable DESC
    LOOP
        IF g.grantor OPERATOR(pg_catalog.<>) g.owner THEN
            EXECUTE pg_catalog.format('SET LOCAL ROLE %s', g.grantor::pg_catalog.regrole);
        END IF;
        EXECUTE pg_catalog.format('GRANT SELECT (seats, scope_id) ON TABLE @extschema@.hc_reservations TO %s%s',
                                  CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                                       ELSE g.grantee::pg_catalog.regrole::pg_catalog.text END,
                                  CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
        EXECUTE pg_catalog.format('SET LOCAL ROLE %I', updater);
    END LOOP;
    DELETE FROM pg_catalog.pg_init_privs i
     WHERE i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
       AND i.objoid OPERATOR(pg_catalog.=) '@extschema@.hc_reservations'::pg_catalog.regclass;
END
$$;

CREATE FUNCTION @extschema@.hc_hold_many(asset_ids text[], buyer_id text, idempotency_key text,
                                         ttl interval DEFAULT '10 minutes')
RETURNS SETOF @extschema@.hc_reservation ROWS 4
AS 'MODULE_PATHNAME', 'hc_hold_many' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_hold_many(text[], text, text, interval) IS
    'Hold every asset or none, under one reservation id and one expiry; RS001 names those not available.';
REVOKE ALL ON FUNCTION @extschema@.hc_hold_many(text[], text, text, interval) FROM PUBLIC;

CREATE FUNCTION @extschema@.hc_hold_best(pool text, n integer, buyer_id text, idempotency_key text,
                                         ttl interval DEFAULT '10 minutes')
RETURNS SETOF @extschema@.hc_reservation ROWS 4
AS 'MODULE_PATHNAME', 'hc_hold_best' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_hold_best(text, integer, text, text, interval) IS
    'Hold the n best available assets of a pool, adjacent where they can be, as one group hold; RS002 if fewer are free.';
REVOKE ALL ON FUNCTION @extschema@.hc_hold_best(text, integer, text, text, interval) FROM PUBLIC;

-- The forms Citus sends a call on a pool's seats as, to the pool's node,
-- given the routing id first (as hc_commit(asset_id, reservation_id, ...)
-- is hc_commit's): hc_asset_add(id, name, pool, ...) once it has recorded
-- the seat's id, hc_hold_many(asset_ids, ...) once it has found their pool.
-- Who may call the one may call the other (hc_grant_operator, hc_grant_app).
CREATE FUNCTION @extschema@.hc_asset_add(scope_id text, id text, name text, pool text, rank integer,
                                         grp text, pos integer)
RETURNS @extschema@.hc_assets
AS 'MODULE_PATHNAME', 'hc_asset_add_scoped' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_asset_add(text, text, text, text, integer, text, integer) IS
    'On Citus, hc_asset_add(id, name, pool, ...) as sent to the pool''s node (scope_id: the pool).';
REVOKE ALL ON FUNCTION @extschema@.hc_asset_add(text, text, text, text, integer, text, integer) FROM PUBLIC;

CREATE FUNCTION @extschema@.hc_hold_many(scope_id text, asset_ids text[], buyer_id text,
                                         idempotency_key text, ttl interval)
RETURNS SETOF @extschema@.hc_reservation ROWS 4
AS 'MODULE_PATHNAME', 'hc_hold_many_scoped' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_hold_many(text, text[], text, text, interval) IS
    'On Citus, hc_hold_many(asset_ids, ...) as sent to the node of their pool (scope_id).';
REVOKE ALL ON FUNCTION @extschema@.hc_hold_many(text, text[], text, text, interval) FROM PUBLIC;

-- In the caller's transaction: RS007 unless owner holds the lease with
-- token; otherwise no new token until that transaction ends.
CREATE FUNCTION @extschema@.hc_lock_check(resource text, owner text, token bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'hc_lock_check' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_lock_check(text, text, bigint) IS
    'Fence the application''s write by the token: RS007 unless owner holds the lease with token; otherwise no takeover until the calling transaction ends.';
REVOKE ALL ON FUNCTION @extschema@.hc_lock_check(text, text, bigint) FROM PUBLIC;

-- Who may hold an asset may hold many and the best, who may beat a lease
-- may check it (hc_grant_app), who may add an asset may add it to a pool
-- (hc_grant_operator), each with the form Citus sends it as: the grants of
-- hc_hold, hc_lock_heartbeat and hc_asset_add(id, name) are made again on
-- the new functions, as their grantors, and kept out of the extension's
-- initial privileges as on a fresh install, so that pg_dump keeps them.
DO $$
DECLARE
    updater text := current_user;
    pair record;
    g record;
    fresh pg_catalog.aclitem[];
BEGIN
    FOR pair IN SELECT pg_catalog.to_regprocedure('@extschema@.' OPERATOR(pg_catalog.||) v.old) AS old,
                       pg_catalog.to_regprocedure('@extschema@.' OPERATOR(pg_catalog.||) v.new) AS new
                  FROM (VALUES ('hc_hold(text, text, text, interval)', 'hc_hold_many(text[], text, text, interval)'),
                               ('hc_hold(text, text, text, interval)', 'hc_hold_best(text, integer, text, text, interval)'),
                               ('hc_lock_heartbeat(text, text, bigint)', 'hc_lock_check(text, text, bigint)'),
                               ('hc_asset_add(text, text)', 'hc_asset_add(text, text, text, integer, text, integer)'),
                               ('hc_hold(text, text, text, interval)', 'hc_hold_many(text, text[], text, text, interval)'),
                               ('hc_asset_add(text, text)', 'hc_asset_add(text, text, text, text, integer, text, integer)')) v(old, new)
    LOOP
        SELECT i.initprivs INTO fresh FROM pg_catalog.pg_init_privs i
         WHERE i.objoid OPERATOR(pg_catalog.=) pair.new
           AND i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass;
        FOR g IN SELECT a.grantor, a.grantee, a.is_grantable, p.proowner AS owner
                   FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
                  WHERE p.oid OPERATOR(pg_catalog.=) pair.old
                    AND a.grantee OPERATOR(pg_catalog.<>) p.proowner AND a.grantee OPERATOR(pg_catalog.<>) 0
                  ORDER BY a.grantor OPERATOR(pg_catalog.<>) p.proowner, a.is_grantable DESC
        LOOP
            IF g.grantor OPERATOR(pg_catalog.<>) g.owner THEN
                EXECUTE pg_catalog.format('SET LOCAL ROLE %s', g.grantor::pg_catalog.regrole);
            END IF;
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s%s', pair.new,
                                      g.grantee::pg_catalog.regrole,
                                      CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
            EXECUTE pg_catalog.format('SET LOCAL ROLE %I', updater);
        END LOOP;
        UPDATE pg_catalog.pg_init_privs i SET initprivs = fresh
         WHERE i.objoid OPERATOR(pg_catalog.=) pair.new
           AND i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass;
    END LOOP;
END
$$;

------------------------------------------------------------------------------
-- The operators' page (issue 38): what a sale looks like as it happens
------------------------------------------------------------------------------

-- For a monitoring role (hc_grant_monitor) and the example service's /ops
-- page: figures, and the names of products and databases; never a key, a
-- buyer or an owner.
CREATE VIEW @extschema@.hc_ops_products AS
    SELECT i.product_id, i.stock, i.reserved, i.available, i.updated_at
      FROM @extschema@.hc_inventory i;
COMMENT ON VIEW @extschema@.hc_ops_products IS
    'For the operators'' page: stock, reserved and available units of each product.';

-- The last hour's sales by minute, every minute a row (0 when none sold):
-- assets committed, units finalized.  The ledger's BRIN index on at finds
-- the hour.
CREATE VIEW @extschema@.hc_ops_sales AS
    WITH t AS (SELECT pg_catalog.date_trunc('minute', pg_catalog.now()) AS now)
    SELECT m.minute,
           COALESCE(s.assets_sold, 0)::pg_catalog.int8 AS assets_sold,
           COALESCE(s.units_sold, 0)::pg_catalog.int8 AS units_sold
      FROM t
     CROSS JOIN pg_catalog.generate_series(t.now OPERATOR(pg_catalog.-) '59 minutes'::pg_catalog.interval, t.now,
                                           '1 minute'::pg_catalog.interval) m (minute)
      LEFT JOIN (SELECT pg_catalog.date_trunc('minute', l.at) AS minute,
                        pg_catalog.count(*) FILTER (WHERE l.kind OPERATOR(pg_catalog.=) 'asset') AS assets_sold,
                        pg_catalog.sum(OPERATOR(pg_catalog.-) l.stock_delta)
                          FILTER (WHERE l.kind OPERATOR(pg_catalog.=) 'product') AS units_sold
                   FROM @extschema@.hc_ledger l, t
                  WHERE l.at OPERATOR(pg_catalog.>=) (t.now OPERATOR(pg_catalog.-) '59 minutes'::pg_catalog.interval)
                    AND ((l.kind OPERATOR(pg_catalog.=) 'asset' AND l.event OPERATOR(pg_catalog.=) 'commit')
                         OR (l.kind OPERATOR(pg_catalog.=) 'product' AND l.event OPERATOR(pg_catalog.=) 'finalize'))
                  GROUP BY 1) s ON s.minute OPERATOR(pg_catalog.=) m.minute;
-- The BRIN index summarizes each range of the ledger as it fills, so that
-- the hour's read is of the hour's blocks (without it, the ranges written
-- since the last VACUUM are read whole).  Citus sends a change of a
-- distributed table's index to the workers as its statement's text, which
-- in an extension's script is the whole script: the coordinator makes it
-- here, one statement, for every node.
DO $$
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        IF NOT pg_catalog.citus_is_coordinator() AND EXISTS (SELECT FROM pg_catalog.pg_dist_partition p
                WHERE p.logicalrelid OPERATOR(pg_catalog.=) '@extschema@.hc_ledger'::pg_catalog.regclass) THEN
            RETURN;
        END IF;
    END IF;
    ALTER INDEX @extschema@.hc_ledger_at SET (autosummarize = on);
END
$$;
COMMENT ON VIEW @extschema@.hc_ops_sales IS
    'For the operators'' page: assets sold and units finalized in each minute of the last hour.';

-- The background sweeper in every database of the server, as
-- hc_sweeper_databases shows it, without its last error's words or its
-- process.  (A view's functions are called as its reader: hc_grant_monitor
-- grants EXECUTE on hc_sweeper_state().)
CREATE VIEW @extschema@.hc_ops_sweeper AS
    SELECT s.database, s.state, s.reason, s.installed, s.last_start, s.last_end, s.last_swept,
           s.next_run, s.runs, s.failures, s.expired_holds, s.expired_reservations, s.purged_keys,
           s.last_error_sqlstate, s.last_error_at
      FROM @extschema@.hc_sweeper_state() s;
COMMENT ON VIEW @extschema@.hc_ops_sweeper IS
    'For the operators'' page: whether the background sweeper sweeps each database, and if not, why, without its errors'' words.';

-- Who may read hc_metrics (hc_grant_monitor) may read these, and call
-- hc_sweeper_state() for hc_ops_sweeper, as its grantors; PUBLIC's grant is
-- not copied: products and databases are named here, and hc_metrics holds
-- figures only.  Kept out of the extension's initial privileges as on a
-- fresh install, so that pg_dump keeps them.
DO $$
DECLARE
    updater text := current_user;
    v text;
    g record;
    fresh pg_catalog.aclitem[];
BEGIN
    -- A grant made by an extension script becomes an initial privilege,
    -- which pg_dump leaves out: the function's are put back after it.
    SELECT i.initprivs INTO fresh FROM pg_catalog.pg_init_privs i
     WHERE i.objoid OPERATOR(pg_catalog.=) '@extschema@.hc_sweeper_state()'::pg_catalog.regprocedure
       AND i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass;
    FOREACH v IN ARRAY ARRAY['hc_ops_products', 'hc_ops_sales', 'hc_ops_sweeper', 'hc_sweeper_state()'] LOOP
        FOR g IN SELECT a.grantor, a.grantee, a.is_grantable, c.relowner AS owner
                   FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
                  WHERE c.oid OPERATOR(pg_catalog.=) '@extschema@.hc_metrics'::pg_catalog.regclass
                    AND a.privilege_type OPERATOR(pg_catalog.=) 'SELECT'
                    AND a.grantee OPERATOR(pg_catalog.<>) c.relowner AND a.grantee OPERATOR(pg_catalog.<>) 0
                  ORDER BY a.grantor OPERATOR(pg_catalog.<>) c.relowner, a.is_grantable DESC
        LOOP
            IF g.grantor OPERATOR(pg_catalog.<>) g.owner THEN
                EXECUTE pg_catalog.format('SET LOCAL ROLE %s', g.grantor::pg_catalog.regrole);
            END IF;
            EXECUTE pg_catalog.format(CASE WHEN v LIKE '%()' THEN 'GRANT EXECUTE ON FUNCTION @extschema@.%s TO %s%s'
                                           ELSE 'GRANT SELECT ON TABLE @extschema@.%I TO %s%s' END, v,
                                      g.grantee::pg_catalog.regrole,
                                      CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
            EXECUTE pg_catalog.format('SET LOCAL ROLE %I', updater);
        END LOOP;
        CONTINUE WHEN v LIKE '%()';
        DELETE FROM pg_catalog.pg_init_privs i
         WHERE i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
           AND i.objoid OPERATOR(pg_catalog.=) pg_catalog.format('@extschema@.%I', v)::pg_catalog.regclass;
    END LOOP;
    UPDATE pg_catalog.pg_init_privs i SET initprivs = fresh
     WHERE i.objoid OPERATOR(pg_catalog.=) '@extschema@.hc_sweeper_state()'::pg_catalog.regprocedure
       AND i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass;
END
$$;

------------------------------------------------------------------------------
-- Bounded history (holdcommit.history_retention)
------------------------------------------------------------------------------

-- The sweep prunes finished holds and orders whose key is forgotten, oldest
-- end first (src/hold/prune.c, src/stock/prune.c).  A row enters these
-- indexes only when its key is forgotten: no call that holds, sells or
-- releases writes to them.  The key's test is num_nulls(), which only these
-- indexes serve: a plan made on statistics from before the keys were
-- forgotten cannot take the key's unique index for it instead and walk
-- every forgotten key for each batch.  On a Citus worker the coordinator
-- makes them.
DO $$
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        IF NOT pg_catalog.citus_is_coordinator() AND EXISTS (SELECT FROM pg_catalog.pg_dist_partition p
                WHERE p.logicalrelid OPERATOR(pg_catalog.=) '@extschema@.hc_stock_orders'::pg_catalog.regclass) THEN
            RETURN;
        END IF;
    END IF;
    CREATE INDEX hc_reservations_finished ON @extschema@.hc_reservations (ended_at)
        WHERE pg_catalog.num_nulls(idempotency_key) OPERATOR(pg_catalog.=) 1
          AND status OPERATOR(pg_catalog.=) ANY ('{RELEASED,EXPIRED}'::pg_catalog.text[]);
    CREATE INDEX hc_stock_orders_finished ON @extschema@.hc_stock_orders (ended_at)
        WHERE pg_catalog.num_nulls(idempotency_key) OPERATOR(pg_catalog.=) 1
          AND status OPERATOR(pg_catalog.<>) 'RESERVED';
END
$$;

-- The products whose pruned orders left ledger rows to carry forward
-- (src/stock/prune.c): marked due by the statement that prunes the orders,
-- so that a carry a sweep could not finish (its time slice, another sweep
-- carrying the product, an error) is never lost; and where the next walk of
-- each part starts (parts_from[part + 1]: the rows before it are carried or
-- kept), so that no carry walks again over what earlier ones have passed.
-- Only the sweep writes it, one sweep of a database at a time.
CREATE TABLE @extschema@.hc_stock_carries (
    product_id  text PRIMARY KEY,
    due         boolean NOT NULL DEFAULT true,
    parts_from  bigint[],
    next_part   smallint NOT NULL DEFAULT 0,  -- where a carry cut short goes on
    carried_at  timestamptz
);
COMMENT ON TABLE @extschema@.hc_stock_carries IS
    'Per product: whether its pruned orders'' ledger rows await their carry, and where each part''s next walk starts.';
CREATE INDEX hc_stock_carries_due ON @extschema@.hc_stock_carries (product_id) WHERE due;
SELECT pg_catalog.pg_extension_config_dump('@extschema@.hc_stock_carries', '');

------------------------------------------------------------------------------
-- Group holds on Citus: a pool's seats on one shard
------------------------------------------------------------------------------

-- On Citus, each asset id's routing id, on the shard of the asset id: an
-- asset id is one asset across pools (its primary key), and a call given a
-- seat's id finds the pool it is sold from.  Empty on a single node.
CREATE TABLE @extschema@.hc_asset_routes (
    asset_id    text PRIMARY KEY,
    scope_id    text NOT NULL
);
COMMENT ON TABLE @extschema@.hc_asset_routes IS
    'On Citus: the routing id (pool, or own id) of every asset id; empty on a single node.';
SELECT pg_catalog.pg_extension_config_dump('@extschema@.hc_asset_routes', '');

-- The routing id of the call writing a row: the default of scope_id on
-- Citus (hc_distribute() sets it).  An error outside a call that has one.
CREATE FUNCTION @extschema@.hc_scope_id()
RETURNS text
AS 'MODULE_PATHNAME', 'hc_scope_id' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_scope_id() IS
    'On Citus, the routing id of the holdcommit call writing a row (the default of the scope_id columns).';
REVOKE ALL ON FUNCTION @extschema@.hc_scope_id() FROM PUBLIC;
