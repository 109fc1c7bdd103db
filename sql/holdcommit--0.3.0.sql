-- holdcommit 0.3.0 as released: sql/holdcommit--0.2.0.sql and sql/holdcommit--0.2.0--0.3.0.sql joined. Never edited again.
\echo Use "CREATE EXTENSION holdcommit" to load this file. \quit
-- holdcommit 0.2.0: hold-and-commit for unique assets and counted stock.
-- Every object is named hc_*.  The functions are C: each call runs its SQL
-- as the extension's owner in a security-restricted operation, reaching
-- these tables through the schema's OID (never its name) and pg_catalog's
-- functions and operators by qualified name.  Only they write these tables.


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
-- holdcommit 0.2.0 -> 0.3.0.  This file is the one source of 0.3.0: make joins
-- holdcommit--0.2.0.sql and this update into holdcommit--0.3.0.sql, so a fresh
-- install and an updated one are the same by construction; make test still
-- compares the two and checks that data made under 0.2.0 survives.


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
