-- holdcommit 0.2.0: hold-and-commit for unique assets and counted stock.
-- Every object is named hc_*.  The functions are C: each call runs its SQL
-- as the extension's owner in a security-restricted operation, reaching
-- these tables through the schema's OID (never its name) and pg_catalog's
-- functions and operators by qualified name.  Only they write these tables.

\echo Use "CREATE EXTENSION holdcommit" to load this file. \quit

------------------------------------------------------------------------------
-- Unique assets (quantity 1): AVAILABLE -> HELD -> SOLD
------------------------------------------------------------------------------

CREATE TABLE @extschema@.hc_assets (
    id                      text PRIMARY KEY,
    name                    text NOT NULL DEFAULT '',
    status                  text NOT NULL DEFAULT 'AVAILABLE',
    hold_expires_at         timestamptz,
    current_reservation_id  text,
    version                 integer NOT NULL DEFAULT 1,
    created_at              timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    updated_at              timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    -- AVAILABLE, HELD or SOLD; a HELD asset names its hold and its end,
    -- nothing else has a hold.  (One CHECK, not three: PostgreSQL 15 prepares
    -- every CHECK afresh for each statement that writes the table.)
    CONSTRAINT hc_assets_hold_shape CHECK (
        CASE status
            WHEN 'HELD' THEN hold_expires_at IS NOT NULL AND current_reservation_id IS NOT NULL
            WHEN 'AVAILABLE' THEN hold_expires_at IS NULL AND current_reservation_id IS NULL
            WHEN 'SOLD' THEN hold_expires_at IS NULL
            ELSE false
        END)
);
COMMENT ON TABLE @extschema@.hc_assets IS
    'Unique assets; current_reservation_id is the hold (HELD) or the sale (SOLD).';

CREATE TABLE @extschema@.hc_reservations (
    id                  text NOT NULL,
    -- No foreign key: every change locks the asset's row first, and
    -- hc_check() reports a reservation without its asset.
    asset_id            text NOT NULL,
    buyer_id            text NOT NULL,
    -- The key the hold was made with; NULL once holdcommit.idempotency_retention
    -- has passed and the key was forgotten.
    idempotency_key     text,
    status              text NOT NULL,
    expires_at          timestamptz NOT NULL,
    created_at          timestamptz NOT NULL,
    ended_at            timestamptz,
    fingerprint         bytea,              -- SHA-256 of the request that made it
    PRIMARY KEY (asset_id, id),
    -- HELD until it ends as COMMITTED, RELEASED or EXPIRED.
    CONSTRAINT hc_reservations_status_shape CHECK (
        status IN ('HELD', 'COMMITTED', 'RELEASED', 'EXPIRED')
        AND (status = 'HELD') = (ended_at IS NULL))
);
COMMENT ON TABLE @extschema@.hc_reservations IS
    'Holds of assets: HELD -> COMMITTED | RELEASED | EXPIRED.';
-- At most one sale per asset, whatever the code does.  (At most one live
-- hold is the asset row's own current_reservation_id; hc_check() checks it.)
CREATE UNIQUE INDEX hc_reservations_one_committed ON @extschema@.hc_reservations (asset_id)
    WHERE status = 'COMMITTED';
-- Lookups by reservation id and by key alone: single-node only; a distributed
-- setup may drop them (and look keys up by (asset_id, idempotency_key)).
CREATE UNIQUE INDEX hc_reservations_id ON @extschema@.hc_reservations (id);
CREATE UNIQUE INDEX hc_reservations_key ON @extschema@.hc_reservations (idempotency_key);
CREATE INDEX hc_reservations_expiry ON @extschema@.hc_reservations (expires_at)
    WHERE status = 'HELD';

------------------------------------------------------------------------------
-- The ledger: one append-only row per state change
------------------------------------------------------------------------------

CREATE TABLE @extschema@.hc_ledger (
    kind            text NOT NULL,      -- asset, product or resource
    entity_id       text NOT NULL,      -- asset_id, product_id or resource
    seq             bigint NOT NULL,    -- the entity's version after the change
    at              timestamptz NOT NULL,
    event           text NOT NULL,      -- hold, commit, release, expire, extend, add, ...
    source          text NOT NULL,      -- call, reclaim, sweep or adjustment
    function        text NOT NULL,      -- the hc_* function that made the change
    reservation_id  text,
    buyer_id        text,
    reserved_delta  integer NOT NULL DEFAULT 0,
    stock_delta     integer NOT NULL DEFAULT 0,
    actor           text NOT NULL,      -- current_user of the caller, or the sweeper
    detail          text,
    PRIMARY KEY (kind, entity_id, seq)
);
COMMENT ON TABLE @extschema@.hc_ledger IS
    'Append-only audit of every state change; only the extension''s functions write it.';
-- The ledger only grows, in time order: a BRIN index is all "since when" needs.
CREATE INDEX hc_ledger_at ON @extschema@.hc_ledger USING brin (at);
CREATE INDEX hc_ledger_reservation ON @extschema@.hc_ledger (reservation_id)
    WHERE reservation_id IS NOT NULL;

------------------------------------------------------------------------------
-- Functions for unique assets
------------------------------------------------------------------------------

CREATE TYPE @extschema@.hc_reservation AS (
    reservation_id  text,
    asset_id        text,
    buyer_id        text,
    status          text,
    expires_at      timestamptz,
    created_at      timestamptz,
    replayed        boolean
);

CREATE FUNCTION @extschema@.hc_asset_add(id text, name text DEFAULT '')
RETURNS @extschema@.hc_assets
AS 'MODULE_PATHNAME', 'hc_asset_add' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_asset_add(text, text) IS
    'Add an AVAILABLE asset (operator).';

CREATE FUNCTION @extschema@.hc_hold(asset_id text, buyer_id text, idempotency_key text,
                                    ttl interval DEFAULT '10 minutes')
RETURNS @extschema@.hc_reservation
AS 'MODULE_PATHNAME', 'hc_hold' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_hold(text, text, text, interval) IS
    'Hold an asset for a buyer for ttl, reclaiming an expired hold; RS001 at once if it is taken.';

CREATE FUNCTION @extschema@.hc_commit(reservation_id text, late_ok boolean DEFAULT false)
RETURNS @extschema@.hc_reservation
AS 'MODULE_PATHNAME', 'hc_commit' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_commit(text, boolean) IS
    'Sell the held asset after payment; a repeat replays, an expired hold is RS003.';

CREATE FUNCTION @extschema@.hc_release(reservation_id text)
RETURNS @extschema@.hc_reservation
AS 'MODULE_PATHNAME', 'hc_release' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_release(text) IS
    'Cancel a hold; the asset is AVAILABLE at once.';

CREATE FUNCTION @extschema@.hc_extend(reservation_id text, ttl interval)
RETURNS @extschema@.hc_reservation
AS 'MODULE_PATHNAME', 'hc_extend' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_extend(text, interval) IS
    'Keep a live hold until now + ttl, at most created_at + holdcommit.max_hold.';

------------------------------------------------------------------------------
-- Counted stock: reserve, finalize, unreserve
------------------------------------------------------------------------------

CREATE TABLE @extschema@.hc_inventory (
    product_id  text PRIMARY KEY,
    stock       integer NOT NULL,
    reserved    integer NOT NULL DEFAULT 0,
    available   integer GENERATED ALWAYS AS (stock - reserved) STORED,
    version     integer NOT NULL DEFAULT 1,
    created_at  timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    updated_at  timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    -- Never oversold, never negative.
    CONSTRAINT hc_inventory_reserved_within_stock CHECK (stock >= reserved AND reserved >= 0)
);
COMMENT ON TABLE @extschema@.hc_inventory IS
    'Stock per product; reserved is the sum of the qty of RESERVED lines.';

CREATE TABLE @extschema@.hc_stock_reservations (
    scope_id         text NOT NULL,     -- the order's first product_id: its distribution id
    id               text NOT NULL,
    buyer_id         text NOT NULL,
    idempotency_key  text,              -- NULL once forgotten, as for holds
    status           text NOT NULL,
    expires_at       timestamptz NOT NULL,
    created_at       timestamptz NOT NULL,
    ended_at         timestamptz,
    fingerprint      bytea,             -- SHA-256 of the request that made it
    PRIMARY KEY (scope_id, id),
    -- RESERVED until it ends as FINALIZED, RELEASED or EXPIRED.
    CONSTRAINT hc_stock_reservations_status_shape CHECK (
        status IN ('RESERVED', 'FINALIZED', 'RELEASED', 'EXPIRED')
        AND (status = 'RESERVED') = (ended_at IS NULL))
);
COMMENT ON TABLE @extschema@.hc_stock_reservations IS
    'Stock reservations (orders): RESERVED -> FINALIZED | RELEASED | EXPIRED.';
-- Lookup by reservation id alone: single-node only, a distributed setup may drop it.
CREATE UNIQUE INDEX hc_stock_reservations_id ON @extschema@.hc_stock_reservations (id);
CREATE UNIQUE INDEX hc_stock_reservations_key ON @extschema@.hc_stock_reservations (idempotency_key);
CREATE INDEX hc_stock_reservations_expiry ON @extschema@.hc_stock_reservations (expires_at)
    WHERE status = 'RESERVED';

CREATE TABLE @extschema@.hc_stock_reservation_lines (
    -- No foreign keys: a line changes only under its product's row lock, and
    -- hc_check() reports a line without its product or its reservation.
    product_id      text NOT NULL,
    reservation_id  text NOT NULL,
    qty             integer NOT NULL CHECK (qty > 0),
    -- RESERVED, FINALIZED, RELEASED or EXPIRED: a line counts in its
    -- product's reserved exactly while it is RESERVED.
    status          text NOT NULL,
    expires_at      timestamptz NOT NULL,
    buyer_id        text NOT NULL,      -- the order's, so the ledger needs no join
    PRIMARY KEY (product_id, reservation_id)
);
COMMENT ON TABLE @extschema@.hc_stock_reservation_lines IS
    'One line per product of a stock reservation.';
CREATE INDEX hc_stock_reservation_lines_reservation
    ON @extschema@.hc_stock_reservation_lines (reservation_id);
CREATE INDEX hc_stock_reservation_lines_expiry
    ON @extschema@.hc_stock_reservation_lines (product_id, expires_at) WHERE status = 'RESERVED';

CREATE TYPE @extschema@.hc_stock_reservation AS (
    reservation_id  text,
    buyer_id        text,
    status          text,
    items           jsonb,
    expires_at      timestamptz,
    created_at      timestamptz,
    replayed        boolean
);

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

CREATE FUNCTION @extschema@.hc_reserve(product_id text, qty integer, buyer_id text,
                                       idempotency_key text, ttl interval DEFAULT '10 minutes')
RETURNS @extschema@.hc_stock_reservation
AS 'MODULE_PATHNAME', 'hc_reserve' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_reserve(text, integer, text, text, interval) IS
    'Reserve qty of a product for ttl if that much is available; RS002 otherwise.';

CREATE FUNCTION @extschema@.hc_reserve_items(items jsonb, buyer_id text, idempotency_key text,
                                             ttl interval DEFAULT '10 minutes')
RETURNS @extschema@.hc_stock_reservation
AS 'MODULE_PATHNAME', 'hc_reserve_items' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_reserve_items(jsonb, text, text, interval) IS
    'Reserve every line of a multi-item order, or none (RS002).';

CREATE FUNCTION @extschema@.hc_finalize(reservation_id text, late_ok boolean DEFAULT false)
RETURNS @extschema@.hc_stock_reservation
AS 'MODULE_PATHNAME', 'hc_finalize' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_finalize(text, boolean) IS
    'Take the reserved stock for a paid order, once; a repeat replays, an expired one is RS003.';

CREATE FUNCTION @extschema@.hc_unreserve(reservation_id text)
RETURNS @extschema@.hc_stock_reservation
AS 'MODULE_PATHNAME', 'hc_unreserve' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_unreserve(text) IS
    'Cancel a stock reservation; its quantities are available again at once.';

-- The idempotency keys remembered, each kept on the reservation it made,
-- with the status that reservation was made in (what a replay returns).
CREATE VIEW @extschema@.hc_idempotency_keys AS
    SELECT asset_id AS scope_id, idempotency_key AS key, 'hold'::text AS kind,
           id AS reservation_id, 'HELD'::text AS status, created_at
      FROM @extschema@.hc_reservations WHERE idempotency_key IS NOT NULL
    UNION ALL
    SELECT scope_id, idempotency_key, 'stock', id, 'RESERVED', created_at
      FROM @extschema@.hc_stock_reservations WHERE idempotency_key IS NOT NULL;
COMMENT ON VIEW @extschema@.hc_idempotency_keys IS
    'Idempotency keys still remembered (holdcommit.idempotency_retention), one key space for holds and stock.';

------------------------------------------------------------------------------
-- Invariants
------------------------------------------------------------------------------

CREATE FUNCTION @extschema@.hc_check()
RETURNS TABLE (invariant text, subject text, detail text)
AS 'MODULE_PATHNAME', 'hc_check' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_check() IS
    'One row per violated invariant; empty when all hold.';

------------------------------------------------------------------------------
-- Privileges: nothing for PUBLIC; roles get exactly what they need
------------------------------------------------------------------------------

CREATE FUNCTION @extschema@.hc_grant_app(role regrole)
RETURNS void
AS 'MODULE_PATHNAME', 'hc_grant_app' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_grant_app(regrole) IS
    'Grant a role what an application needs: the hc_* calls and read access to the state tables, idempotency keys excepted.';

CREATE FUNCTION @extschema@.hc_grant_operator(role regrole)
RETURNS void
AS 'MODULE_PATHNAME', 'hc_grant_operator' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_grant_operator(regrole) IS
    'Grant a role what a DBA''s tooling needs on top of hc_grant_app: stock, assets, the ledger and the keys.';

------------------------------------------------------------------------------
-- The hc_* names of this schema are the extension's
------------------------------------------------------------------------------

-- Whoever owns this schema (the database owner, for public) could otherwise
-- add an overload such as hc_grant_app(text) that a caller's untyped literal
-- would reach instead of the extension's function.  Refuse to install beside
-- such objects, and refuse them afterwards.
DO $$
DECLARE
    stranger text;
BEGIN
    SELECT pg_catalog.string_agg(o.name, ', ' ORDER BY o.name) INTO stranger
      FROM (SELECT p.oid, 'pg_catalog.pg_proc'::pg_catalog.regclass AS classid,
                   p.oid::pg_catalog.regprocedure::pg_catalog.text AS name
              FROM pg_catalog.pg_proc p
             WHERE p.pronamespace OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.regnamespace
               AND p.proname OPERATOR(pg_catalog.~~) 'hc\_%'
            UNION ALL
            SELECT c.oid, 'pg_catalog.pg_class'::pg_catalog.regclass, c.relname::pg_catalog.text
              FROM pg_catalog.pg_class c
             WHERE c.relnamespace OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.regnamespace
               AND c.relname OPERATOR(pg_catalog.~~) 'hc\_%'
               AND c.relkind OPERATOR(pg_catalog.=) ANY ('{r,v,m,S,f,p}'::pg_catalog."char"[])) o
     WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_depend d
                        WHERE d.classid OPERATOR(pg_catalog.=) o.classid
                          AND d.objid OPERATOR(pg_catalog.=) o.oid
                          AND d.deptype OPERATOR(pg_catalog.=) 'e'
                          AND d.refobjid OPERATOR(pg_catalog.=)
                              (SELECT e.oid FROM pg_catalog.pg_extension e
                                WHERE e.extname OPERATOR(pg_catalog.=) 'holdcommit'));
    IF stranger IS NOT NULL THEN
        RAISE EXCEPTION 'schema @extschema@ has objects named like holdcommit''s that are not part of it: %', stranger
              USING ERRCODE = 'insufficient_privilege',
                    HINT = 'Drop or rename them, or install holdcommit into a schema only trusted roles own.';
    END IF;
END
$$;

CREATE FUNCTION @extschema@.hc_guard_ddl()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'hc_guard_ddl' LANGUAGE C;
COMMENT ON FUNCTION @extschema@.hc_guard_ddl() IS
    'Event trigger: refuse hc_* functions, relations and types in this schema that are not holdcommit''s.';
CREATE EVENT TRIGGER hc_guard_ddl ON ddl_command_end
    EXECUTE FUNCTION @extschema@.hc_guard_ddl();

-- Nothing for PUBLIC: every function of the extension is granted explicitly.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT d.objid::regprocedure
               FROM pg_catalog.pg_depend d
               JOIN pg_catalog.pg_extension e ON e.oid OPERATOR(pg_catalog.=) d.refobjid
              WHERE e.extname OPERATOR(pg_catalog.=) 'holdcommit'
                AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::regclass
                AND d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::regclass
                AND d.deptype OPERATOR(pg_catalog.=) 'e'
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
    END LOOP;
END
$$;

-- pg_dump keeps the data of these tables.
SELECT pg_catalog.pg_extension_config_dump('@extschema@.hc_assets', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.hc_reservations', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.hc_inventory', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.hc_stock_reservations', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.hc_stock_reservation_lines', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.hc_ledger', '');
