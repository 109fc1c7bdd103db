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
    updated_at              timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp()
    -- AVAILABLE, HELD or SOLD; a HELD asset names its hold and its end,
    -- nothing else has a hold.  hc_check() checks this shape, not a CHECK:
    -- PostgreSQL 15 rebuilds every CHECK for each statement that writes the
    -- table, and only the extension's functions write it.
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
    -- HELD until it ends as COMMITTED, RELEASED or EXPIRED (hc_check()).
    PRIMARY KEY (asset_id, id)
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
    -- RESERVED until it ends as FINALIZED, RELEASED or EXPIRED (hc_check()).
    PRIMARY KEY (scope_id, id)
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
-- Dual-layer locking: leases with fencing tokens (layer 1) and the
-- point-of-no-return attempt guard (layer 2)
------------------------------------------------------------------------------

-- One row per resource, kept forever: a release clears the owner but keeps
-- the token, so the next holder's token is higher than every earlier one.
CREATE TABLE @extschema@.hc_locks (
    resource        text PRIMARY KEY,
    owner           text,               -- NULL: free
    token           bigint NOT NULL,    -- the last token handed out; never decreases
    acquired_at     timestamptz,        -- when the current owner acquired
    heartbeat_at    timestamptz,        -- its last heartbeat (or acquire)
    stale_after     interval,           -- as the current owner acquired
    session_pid     integer,            -- a session-bound lease: its backend's pid
    session_started timestamptz,        -- ... and that backend's start
    released_at     timestamptz,        -- the last release
    version         bigint NOT NULL DEFAULT 1,  -- the resource's ledger seq
    updated_at      timestamptz NOT NULL
    -- A held lease has an owner, its times and its stale_after, and maybe
    -- the session it is bound to; a free one has none of them (hc_check()).
);
COMMENT ON TABLE @extschema@.hc_locks IS
    'Leases: who holds each resource, with its fencing token (never decreasing) and last heartbeat.';

-- One row per resource that ever had an attempt: the count since the last
-- reset, the last point-of-no-return marker, and the outcome.
CREATE TABLE @extschema@.hc_attempts (
    resource        text PRIMARY KEY,
    status          text NOT NULL DEFAULT 'OPEN',   -- OPEN, MANUAL_REVIEW or COMPLETED
    attempts        integer NOT NULL DEFAULT 0,     -- since the last reset
    total_attempts  integer NOT NULL DEFAULT 0,     -- markers ever recorded
    last_marker     text,
    last_attempt_at timestamptz,
    last_owner      text,               -- the lease holder of the last attempt
    last_token      bigint,
    cooldown        interval,           -- as the last begin asked
    max_attempts    integer,
    external_ref    text,
    completed_at    timestamptz,
    reset_at        timestamptz,
    reset_note      text,
    updated_at      timestamptz NOT NULL
    -- Every attempt left its marker; COMPLETED, and only COMPLETED, has its
    -- external_ref (hc_check()).
);
COMMENT ON TABLE @extschema@.hc_attempts IS
    'The point-of-no-return guard: attempts since the last reset, the last marker, the outcome.';

CREATE TYPE @extschema@.hc_attempt AS (
    resource        text,
    status          text,
    attempt         integer,
    marker          text,
    external_ref    text,
    last_attempt_at timestamptz
);

CREATE FUNCTION @extschema@.hc_lock_acquire(resource text, owner text,
                                            stale_after interval DEFAULT '3 minutes',
                                            max_retries integer DEFAULT 5)
RETURNS bigint
AS 'MODULE_PATHNAME', 'hc_lock_acquire' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_lock_acquire(text, text, interval, integer) IS
    'Take the lease of a resource (free, ours, or stale), retrying with backoff; the fencing token, or NULL if still busy.';

CREATE FUNCTION @extschema@.hc_lock_acquire_session(resource text, owner text,
                                                    stale_after interval DEFAULT '3 minutes',
                                                    max_retries integer DEFAULT 5)
RETURNS bigint
AS 'MODULE_PATHNAME', 'hc_lock_acquire_session' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_lock_acquire_session(text, text, interval, integer) IS
    'hc_lock_acquire, with the lease bound to the calling session: free for the next acquirer as soon as that session ends.';

CREATE FUNCTION @extschema@.hc_lock_heartbeat(resource text, owner text, token bigint)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'hc_lock_heartbeat' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_lock_heartbeat(text, text, bigint) IS
    'Keep a held lease fresh; RS007 if the owner and token no longer hold it.';

CREATE FUNCTION @extschema@.hc_lock_release(resource text, owner text, token bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'hc_lock_release' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_lock_release(text, text, bigint) IS
    'Free a lease if the owner and token still hold it (true); otherwise change nothing (false).';

CREATE FUNCTION @extschema@.hc_attempt_begin(resource text, owner text, token bigint,
                                             cooldown interval DEFAULT '10 minutes',
                                             max_attempts integer DEFAULT 5)
RETURNS @extschema@.hc_attempt
AS 'MODULE_PATHNAME', 'hc_attempt_begin' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_attempt_begin(text, text, bigint, interval, integer) IS
    'Before an external call: PROCEED with a new permanent marker, or COOLDOWN, MANUAL_REVIEW or COMPLETED.';

CREATE FUNCTION @extschema@.hc_attempt_complete(resource text, owner text, token bigint,
                                                external_ref text)
RETURNS @extschema@.hc_attempt
AS 'MODULE_PATHNAME', 'hc_attempt_complete' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_attempt_complete(text, text, bigint, text) IS
    'Record the outcome of the external call (its external_ref); the resource is COMPLETED for good.';

CREATE FUNCTION @extschema@.hc_attempt_reset(resource text, note text)
RETURNS @extschema@.hc_attempt
AS 'MODULE_PATHNAME', 'hc_attempt_reset' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_attempt_reset(text, text) IS
    'Operator, after checking the external system: clear MANUAL_REVIEW and the cooldown, count attempts from zero.';

-- Who holds what, and how fresh each lease is.
CREATE VIEW @extschema@.hc_lease_status AS
SELECT l.resource, l.owner, l.token, l.owner IS NOT NULL AS held,
       l.acquired_at, l.heartbeat_at, l.stale_after,
       pg_catalog.round(pg_catalog.date_part('epoch',
           pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) l.heartbeat_at)::numeric, 3)
           AS seconds_since_heartbeat,
       COALESCE(l.heartbeat_at OPERATOR(pg_catalog.+) l.stale_after
                    OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp(), false) AS stale,
       l.session_pid,
       CASE WHEN l.session_pid IS NOT NULL
            THEN EXISTS (SELECT FROM pg_catalog.pg_stat_get_activity(l.session_pid) a
                          WHERE a.pid OPERATOR(pg_catalog.=) l.session_pid) END AS session_alive,
       l.released_at
  FROM @extschema@.hc_locks l;
COMMENT ON VIEW @extschema@.hc_lease_status IS
    'Leases for operators: owner, token, seconds since the last heartbeat, stale or not.';

-- What each guarded resource is waiting for.
CREATE VIEW @extschema@.hc_attempt_status AS
SELECT a.resource, a.status, a.attempts, a.max_attempts, a.last_marker, a.last_attempt_at,
       CASE WHEN a.status OPERATOR(pg_catalog.=) 'OPEN' AND a.attempts OPERATOR(pg_catalog.>) 0
            THEN a.last_attempt_at OPERATOR(pg_catalog.+) a.cooldown END AS cooldown_until,
       a.status OPERATOR(pg_catalog.=) 'MANUAL_REVIEW' AS awaiting_review,
       a.external_ref, a.completed_at, a.total_attempts, a.reset_at, a.reset_note,
       l.owner AS lease_owner, l.token AS lease_token
  FROM @extschema@.hc_attempts a
  LEFT JOIN @extschema@.hc_locks l ON l.resource OPERATOR(pg_catalog.=) a.resource;
COMMENT ON VIEW @extschema@.hc_attempt_status IS
    'Attempt guards for operators: status, count, last marker, external_ref, and what awaits manual review.';

------------------------------------------------------------------------------
-- Sweeping: expired holds and reservations, forgotten keys
------------------------------------------------------------------------------

-- The sweeper forgets keys past holdcommit.idempotency_retention, oldest
-- first; a forgotten key leaves these indexes.
CREATE INDEX hc_reservations_key_age ON @extschema@.hc_reservations (created_at)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX hc_stock_reservations_key_age ON @extschema@.hc_stock_reservations (created_at)
    WHERE idempotency_key IS NOT NULL;

CREATE FUNCTION @extschema@.hc_sweep(batch_size integer DEFAULT 1000)
RETURNS TABLE (expired_holds bigint, expired_reservations bigint, purged_keys bigint)
AS 'MODULE_PATHNAME', 'hc_sweep' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_sweep(integer) IS
    'End expired holds and stock reservations and forget keys past retention, in batches, skipping rows live calls hold (operator).';

-- Written by the background sweeper of this database after every run; its
-- state, not data: pg_dump leaves it out.
CREATE TABLE @extschema@.hc_sweeper_status (
    database              name PRIMARY KEY,  -- this database
    pid                   integer,           -- the worker's process
    actor                 text,              -- the role it sweeps as (the extension's owner)
    last_start            timestamptz,       -- the last run
    last_end              timestamptz,
    expired_holds         bigint NOT NULL DEFAULT 0,  -- what the last run swept
    expired_reservations  bigint NOT NULL DEFAULT 0,
    purged_keys           bigint NOT NULL DEFAULT 0,
    runs                  bigint NOT NULL DEFAULT 0,  -- runs recorded so far, and what they swept
    total_expired_holds   bigint NOT NULL DEFAULT 0,
    total_expired_reservations bigint NOT NULL DEFAULT 0,
    total_purged_keys     bigint NOT NULL DEFAULT 0,
    last_error            text,              -- the last run that failed, and when
    last_error_at         timestamptz,
    next_run              timestamptz        -- NULL once the sweeper is turned off
);
COMMENT ON TABLE @extschema@.hc_sweeper_status IS
    'The background sweeper''s last run in this database: when, what it swept, its last error, its next run.';

-- One view for operators: numbers that say whether the shop is healthy.
CREATE VIEW @extschema@.hc_overview AS
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
      FROM @extschema@.hc_stock_reservations r, t
     WHERE r.status OPERATOR(pg_catalog.=) 'RESERVED' AND r.expires_at OPERATOR(pg_catalog.>) t.now
    UNION ALL
    SELECT 'stock', 'reserved units', COALESCE(pg_catalog.sum(i.reserved), 0)::pg_catalog.int8
      FROM @extschema@.hc_inventory i
    UNION ALL
    SELECT 'stock', 'expired, not yet swept', pg_catalog.count(*)
      FROM @extschema@.hc_stock_reservations r, t
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
     GROUP BY l.event;
COMMENT ON VIEW @extschema@.hc_overview IS
    'For operators: assets by status, holds and stock reservations active and expiring, leases held and stale, attempts awaiting manual review, ledger events of the last hour.';

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
    'Event trigger: refuse hc_* functions, relations and types in this schema that are not holdcommit''s, and drops of hc_* objects here by anyone but a superuser.';
CREATE EVENT TRIGGER hc_guard_ddl ON ddl_command_end
    EXECUTE FUNCTION @extschema@.hc_guard_ddl();
CREATE EVENT TRIGGER hc_guard_drop ON sql_drop
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
SELECT pg_catalog.pg_extension_config_dump('@extschema@.hc_locks', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.hc_attempts', '');
