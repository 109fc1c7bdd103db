-- holdcommit 0.2.0: hold-and-commit for unique assets and counted stock.
-- Every object is named hc_*; every function reaches its tables by their
-- schema and runs with search_path pinned to pg_catalog, pg_temp.

\echo Use "CREATE EXTENSION holdcommit" to load this file. \quit

------------------------------------------------------------------------------
-- Unique assets (quantity 1): AVAILABLE -> HELD -> SOLD
------------------------------------------------------------------------------

CREATE TABLE @extschema@.hc_assets (
    id                      text PRIMARY KEY
                            CHECK (octet_length(id) BETWEEN 1 AND 64),
    name                    text NOT NULL DEFAULT '',
    status                  text NOT NULL DEFAULT 'AVAILABLE'
                            CHECK (status IN ('AVAILABLE', 'HELD', 'SOLD')),
    hold_expires_at         timestamptz,
    current_reservation_id  text,
    version                 integer NOT NULL DEFAULT 1,
    created_at              timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    updated_at              timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    -- A HELD asset names its hold and its end; nothing else has a hold.
    CONSTRAINT hc_assets_hold_shape CHECK (
        CASE status
            WHEN 'HELD' THEN hold_expires_at IS NOT NULL AND current_reservation_id IS NOT NULL
            WHEN 'AVAILABLE' THEN hold_expires_at IS NULL AND current_reservation_id IS NULL
            ELSE hold_expires_at IS NULL
        END)
);
COMMENT ON TABLE @extschema@.hc_assets IS
    'Unique assets; current_reservation_id is the hold (HELD) or the sale (SOLD).';

CREATE TABLE @extschema@.hc_reservations (
    id                  text NOT NULL,
    asset_id            text NOT NULL REFERENCES @extschema@.hc_assets (id),
    buyer_id            text NOT NULL CHECK (octet_length(buyer_id) BETWEEN 1 AND 64),
    idempotency_key     text NOT NULL,
    status              text NOT NULL
                        CHECK (status IN ('HELD', 'COMMITTED', 'RELEASED', 'EXPIRED')),
    expires_at          timestamptz NOT NULL,
    created_at          timestamptz NOT NULL,
    ended_at            timestamptz,
    PRIMARY KEY (asset_id, id),
    CHECK ((status = 'HELD') = (ended_at IS NULL))
);
COMMENT ON TABLE @extschema@.hc_reservations IS
    'Holds of assets: HELD -> COMMITTED | RELEASED | EXPIRED.';
-- At most one live hold and one sale per asset, whatever the code does.
CREATE UNIQUE INDEX hc_reservations_one_held ON @extschema@.hc_reservations (asset_id)
    WHERE status = 'HELD';
CREATE UNIQUE INDEX hc_reservations_one_committed ON @extschema@.hc_reservations (asset_id)
    WHERE status = 'COMMITTED';
-- Lookup by reservation id alone: single-node only, a distributed setup may drop it.
CREATE UNIQUE INDEX hc_reservations_id ON @extschema@.hc_reservations (id);
CREATE INDEX hc_reservations_expiry ON @extschema@.hc_reservations (expires_at)
    WHERE status = 'HELD';

------------------------------------------------------------------------------
-- Idempotency keys: one key space for every function that takes one
------------------------------------------------------------------------------

CREATE TABLE @extschema@.hc_idempotency_keys (
    scope_id        text NOT NULL,      -- the asset or product the call wrote
    key             text NOT NULL CHECK (octet_length(key) BETWEEN 1 AND 255),
    function        text NOT NULL,
    fingerprint     bytea NOT NULL,     -- SHA-256 of the function and its arguments
    reservation_id  text NOT NULL,      -- the stored response ...
    status          text NOT NULL,
    expires_at      timestamptz NOT NULL,
    created_at      timestamptz NOT NULL,
    PRIMARY KEY (scope_id, key)
);
COMMENT ON TABLE @extschema@.hc_idempotency_keys IS
    'Idempotency keys with the response they replay, kept for holdcommit.idempotency_retention.';
-- The one key space: single-node only, a distributed setup may drop it.
CREATE UNIQUE INDEX hc_idempotency_keys_key ON @extschema@.hc_idempotency_keys (key);
CREATE INDEX hc_idempotency_keys_age ON @extschema@.hc_idempotency_keys (created_at);

------------------------------------------------------------------------------
-- The ledger: one append-only row per state change
------------------------------------------------------------------------------

CREATE SEQUENCE @extschema@.hc_ledger_seq;

CREATE TABLE @extschema@.hc_ledger (
    kind            text NOT NULL CHECK (kind IN ('asset', 'product', 'resource')),
    entity_id       text NOT NULL,      -- asset_id, product_id or resource
    seq             bigint NOT NULL DEFAULT pg_catalog.nextval('@extschema@.hc_ledger_seq'),
    at              timestamptz NOT NULL,
    event           text NOT NULL,      -- hold, commit, release, expire, extend, add, ...
    source          text NOT NULL CHECK (source IN ('call', 'reclaim', 'sweep', 'adjustment')),
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
CREATE INDEX hc_ledger_at ON @extschema@.hc_ledger (at);
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
    product_id  text PRIMARY KEY CHECK (octet_length(product_id) BETWEEN 1 AND 64),
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
    buyer_id         text NOT NULL CHECK (octet_length(buyer_id) BETWEEN 1 AND 64),
    idempotency_key  text NOT NULL,
    status           text NOT NULL
                     CHECK (status IN ('RESERVED', 'FINALIZED', 'RELEASED', 'EXPIRED')),
    expires_at       timestamptz NOT NULL,
    created_at       timestamptz NOT NULL,
    ended_at         timestamptz,
    PRIMARY KEY (scope_id, id),
    CHECK ((status = 'RESERVED') = (ended_at IS NULL))
);
COMMENT ON TABLE @extschema@.hc_stock_reservations IS
    'Stock reservations (orders): RESERVED -> FINALIZED | RELEASED | EXPIRED.';
-- Lookup by reservation id alone: single-node only, a distributed setup may drop it.
CREATE UNIQUE INDEX hc_stock_reservations_id ON @extschema@.hc_stock_reservations (id);
CREATE INDEX hc_stock_reservations_expiry ON @extschema@.hc_stock_reservations (expires_at)
    WHERE status = 'RESERVED';

CREATE TABLE @extschema@.hc_stock_reservation_lines (
    product_id      text NOT NULL REFERENCES @extschema@.hc_inventory (product_id),
    reservation_id  text NOT NULL REFERENCES @extschema@.hc_stock_reservations (id),
    qty             integer NOT NULL CHECK (qty > 0),
    -- A line counts in its product's reserved exactly while it is RESERVED.
    status          text NOT NULL
                    CHECK (status IN ('RESERVED', 'FINALIZED', 'RELEASED', 'EXPIRED')),
    expires_at      timestamptz NOT NULL,
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

------------------------------------------------------------------------------
-- Invariants
------------------------------------------------------------------------------

CREATE FUNCTION @extschema@.hc_check()
RETURNS TABLE (invariant text, subject text, detail text)
LANGUAGE sql VOLATILE    -- reads clock_timestamp()
SECURITY DEFINER         -- reads the ledger, which applications cannot
SET search_path = pg_catalog, pg_temp
AS $$
    -- A HELD asset is held by exactly its one HELD reservation.
    SELECT 'held asset has its one held reservation', a.id,
           pg_catalog.format('current_reservation_id %s, %s held reservation(s)',
                             a.current_reservation_id, pg_catalog.count(r.id))
      FROM @extschema@.hc_assets a
      LEFT JOIN @extschema@.hc_reservations r
             ON r.asset_id = a.id AND r.status = 'HELD'
     WHERE a.status = 'HELD'
     GROUP BY a.id, a.current_reservation_id
    HAVING pg_catalog.count(r.id) <> 1
        OR pg_catalog.bool_or(r.id IS DISTINCT FROM a.current_reservation_id)
    UNION ALL
    -- A SOLD asset has exactly one COMMITTED reservation.
    SELECT 'sold asset has one committed reservation', a.id,
           pg_catalog.format('%s committed reservation(s)', pg_catalog.count(r.id))
      FROM @extschema@.hc_assets a
      LEFT JOIN @extschema@.hc_reservations r
             ON r.asset_id = a.id AND r.status = 'COMMITTED'
     WHERE a.status = 'SOLD'
     GROUP BY a.id
    HAVING pg_catalog.count(r.id) <> 1
    UNION ALL
    -- A HELD or COMMITTED reservation is what its asset says it is.
    SELECT 'reservation matches its asset', r.id,
           pg_catalog.format('reservation %s, asset %s is %s with %s',
                             r.status, a.id, a.status, a.current_reservation_id)
      FROM @extschema@.hc_reservations r
      JOIN @extschema@.hc_assets a ON a.id = r.asset_id
     WHERE (r.status = 'HELD' AND (a.status <> 'HELD'
                OR a.current_reservation_id IS DISTINCT FROM r.id
                OR a.hold_expires_at IS DISTINCT FROM r.expires_at))
        OR (r.status = 'COMMITTED' AND (a.status <> 'SOLD'
                OR a.current_reservation_id IS DISTINCT FROM r.id))
    UNION ALL
    -- reserved is the sum of the RESERVED lines of the product.
    SELECT 'reserved is the sum of reserved lines', i.product_id,
           pg_catalog.format('reserved %s, reserved lines %s', i.reserved,
                             COALESCE(l.total, 0))
      FROM @extschema@.hc_inventory i
      LEFT JOIN (SELECT product_id, pg_catalog.sum(qty) AS total
                   FROM @extschema@.hc_stock_reservation_lines
                  WHERE status = 'RESERVED' GROUP BY product_id) l
             ON l.product_id = i.product_id
     WHERE i.reserved <> COALESCE(l.total, 0)
    UNION ALL
    -- Each change was counted once: the ledger adds up to stock and reserved.
    SELECT 'ledger adds up to the inventory', i.product_id,
           pg_catalog.format('stock %s, reserved %s; ledger says %s, %s', i.stock, i.reserved,
                             COALESCE(g.stock, 0), COALESCE(g.reserved, 0))
      FROM @extschema@.hc_inventory i
      LEFT JOIN (SELECT entity_id, pg_catalog.sum(stock_delta) AS stock,
                        pg_catalog.sum(reserved_delta) AS reserved
                   FROM @extschema@.hc_ledger WHERE kind = 'product' GROUP BY entity_id) g
             ON g.entity_id = i.product_id
     WHERE i.stock <> COALESCE(g.stock, 0)
        OR i.reserved <> COALESCE(g.reserved, 0)
    UNION ALL
    -- A reservation's lines agree with it: an ended one has no counted line.
    SELECT 'reservation lines match their reservation', r.id,
           pg_catalog.format('reservation %s, line of %s is %s', r.status, l.product_id, l.status)
      FROM @extschema@.hc_stock_reservations r
      JOIN @extschema@.hc_stock_reservation_lines l ON l.reservation_id = r.id
     WHERE (r.status IN ('FINALIZED', 'RELEASED') AND l.status <> r.status)
        OR (r.status = 'EXPIRED' AND l.status NOT IN ('EXPIRED', 'RESERVED'))
        OR (r.status = 'RESERVED' AND l.status <> 'RESERVED' AND r.expires_at > pg_catalog.clock_timestamp())
        OR l.expires_at <> r.expires_at
$$;
COMMENT ON FUNCTION @extschema@.hc_check() IS
    'One row per violated invariant; empty when all hold.';

------------------------------------------------------------------------------
-- Privileges: nothing for PUBLIC; roles get exactly what they need
------------------------------------------------------------------------------

-- Grant EXECUTE on the named functions and SELECT on the named tables of
-- this extension: only its own members, never a look-alike someone else put
-- into the schema.
CREATE FUNCTION @extschema@.hc_grant(role regrole, functions text[], tables text[])
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ext oid;
    schema regnamespace;
    member text;
BEGIN
    SELECT e.oid, e.extnamespace INTO ext, schema
      FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'holdcommit';
    EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA %s TO %s', schema, role);
    FOR member IN
        SELECT pg_catalog.format('FUNCTION %s', p.oid::regprocedure)
          FROM pg_catalog.pg_proc p
          JOIN pg_catalog.pg_depend d
            ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::regclass
           AND d.objid OPERATOR(pg_catalog.=) p.oid
         WHERE d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::regclass
           AND d.refobjid OPERATOR(pg_catalog.=) ext AND d.deptype OPERATOR(pg_catalog.=) 'e'
           AND p.proname OPERATOR(pg_catalog.=) ANY (functions)
        UNION ALL
        SELECT pg_catalog.format('TABLE %s', c.oid::regclass)
          FROM pg_catalog.pg_class c
          JOIN pg_catalog.pg_depend d
            ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::regclass
           AND d.objid OPERATOR(pg_catalog.=) c.oid
         WHERE d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::regclass
           AND d.refobjid OPERATOR(pg_catalog.=) ext AND d.deptype OPERATOR(pg_catalog.=) 'e'
           AND c.relname OPERATOR(pg_catalog.=) ANY (tables)
    LOOP
        EXECUTE pg_catalog.format('GRANT %s ON %s TO %s',
            CASE WHEN member OPERATOR(pg_catalog.~~) 'FUNCTION %' THEN 'EXECUTE' ELSE 'SELECT' END,
            member, role);
    END LOOP;
END
$$;
COMMENT ON FUNCTION @extschema@.hc_grant(regrole, text[], text[]) IS
    'The grants behind hc_grant_app and hc_grant_operator.';

CREATE FUNCTION @extschema@.hc_grant_app(role regrole)
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@.hc_grant(role,
        ARRAY['hc_hold', 'hc_commit', 'hc_release', 'hc_extend',
              'hc_reserve', 'hc_reserve_items', 'hc_finalize', 'hc_unreserve',
              'hc_lock_acquire', 'hc_lock_heartbeat', 'hc_lock_release',
              'hc_attempt_begin', 'hc_attempt_complete', 'hc_check'],
        ARRAY['hc_assets', 'hc_reservations', 'hc_inventory',
              'hc_stock_reservations', 'hc_stock_reservation_lines',
              'hc_locks', 'hc_attempts'])
$$;
COMMENT ON FUNCTION @extschema@.hc_grant_app(regrole) IS
    'Grant a role what an application needs: the hc_* calls and read access to the state tables.';

CREATE FUNCTION @extschema@.hc_grant_operator(role regrole)
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@.hc_grant_app(role);
    SELECT @extschema@.hc_grant(role,
        ARRAY['hc_asset_add', 'hc_stock_set', 'hc_stock_adjust', 'hc_attempt_reset', 'hc_sweep'],
        ARRAY['hc_ledger', 'hc_sweeper_status']);
$$;
COMMENT ON FUNCTION @extschema@.hc_grant_operator(regrole) IS
    'Grant a role what a DBA''s tooling needs on top of hc_grant_app: stock, assets, resets, sweeps, the ledger.';

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
SELECT pg_catalog.pg_extension_config_dump('@extschema@.hc_idempotency_keys', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.hc_inventory', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.hc_stock_reservations', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.hc_stock_reservation_lines', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.hc_ledger', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.hc_ledger_seq', '');
