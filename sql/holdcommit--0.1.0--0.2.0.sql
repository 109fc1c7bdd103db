-- holdcommit 0.1.0 -> 0.2.0.  Installing 0.2.0 directly (holdcommit--0.2.0.sql)
-- and updating from 0.1.0 with this script give the same schema; make test
-- compares the two and checks that data made under 0.1.0 survives.

\echo Use "ALTER EXTENSION holdcommit UPDATE TO '0.2.0'" to load this file. \quit

------------------------------------------------------------------------------
-- Hardening: no function body names a schema that its owner could rename
------------------------------------------------------------------------------

-- hc_check() becomes C on the same protected path as every other call; it is
-- no longer SECURITY DEFINER.  CREATE OR REPLACE keeps its grants.
CREATE OR REPLACE FUNCTION @extschema@.hc_check()
RETURNS TABLE (invariant text, subject text, detail text)
AS 'MODULE_PATHNAME', 'hc_check' LANGUAGE C VOLATILE;

-- The grant functions become C and find the extension's members by OID.
CREATE OR REPLACE FUNCTION @extschema@.hc_grant_app(role regrole)
RETURNS void
AS 'MODULE_PATHNAME', 'hc_grant_app' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_grant_app(regrole) IS
    'Grant a role what an application needs: the hc_* calls and read access to the state tables, idempotency keys excepted.';

CREATE OR REPLACE FUNCTION @extschema@.hc_grant_operator(role regrole)
RETURNS void
AS 'MODULE_PATHNAME', 'hc_grant_operator' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_grant_operator(regrole) IS
    'Grant a role what a DBA''s tooling needs on top of hc_grant_app: stock, assets, the ledger and the keys.';

DROP FUNCTION @extschema@.hc_grant(regrole, text[], text[]);

-- A line's reservation is checked by hc_check(), not by a foreign key that
-- needs the single-node index on the reservation id alone.
ALTER TABLE @extschema@.hc_stock_reservation_lines
    DROP CONSTRAINT hc_stock_reservation_lines_reservation_id_fkey;

-- Application roles no longer read idempotency keys: a role granted SELECT
-- on the reservation tables by 0.1.0's hc_grant_app (it can read them but not
-- the ledger) loses it here; run hc_grant_app for it again after the update,
-- which grants every other column.  (A GRANT made by this script would count
-- as the extension's own initial privilege, and pg_dump would leave it out.)
DO $$
DECLARE
    t regclass;
    grantee regrole;
BEGIN
    FOREACH t IN ARRAY ARRAY['@extschema@.hc_reservations'::regclass,
                             '@extschema@.hc_stock_reservations'::regclass]
    LOOP
        FOR grantee IN
            SELECT DISTINCT acl.grantee::regrole
              FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) acl
             WHERE c.oid OPERATOR(pg_catalog.=) t
               AND acl.privilege_type OPERATOR(pg_catalog.=) 'SELECT'
               AND acl.grantee OPERATOR(pg_catalog.<>) c.relowner
               AND acl.grantee OPERATOR(pg_catalog.<>) 0
               AND NOT pg_catalog.has_table_privilege(acl.grantee,
                       '@extschema@.hc_ledger'::regclass, 'SELECT')
        LOOP
            EXECUTE pg_catalog.format('REVOKE SELECT ON TABLE %s FROM %s', t, grantee);
        END LOOP;
    END LOOP;
END
$$;

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
REVOKE ALL ON FUNCTION @extschema@.hc_guard_ddl() FROM PUBLIC;

------------------------------------------------------------------------------
-- Fewer writes per call: idempotency keys live on the reservations they
-- made, the ledger's order comes from each entity's version, and no foreign
-- key costs a lookup per row
------------------------------------------------------------------------------

ALTER TABLE @extschema@.hc_reservations ADD COLUMN fingerprint bytea;
ALTER TABLE @extschema@.hc_reservations ALTER COLUMN idempotency_key DROP NOT NULL;
ALTER TABLE @extschema@.hc_stock_reservations ADD COLUMN fingerprint bytea;
ALTER TABLE @extschema@.hc_stock_reservations ALTER COLUMN idempotency_key DROP NOT NULL;
UPDATE @extschema@.hc_reservations r SET fingerprint = k.fingerprint
  FROM @extschema@.hc_idempotency_keys k
 WHERE k.reservation_id OPERATOR(pg_catalog.=) r.id
   AND k.function OPERATOR(pg_catalog.=) 'hc_hold';
UPDATE @extschema@.hc_stock_reservations r SET fingerprint = k.fingerprint
  FROM @extschema@.hc_idempotency_keys k
 WHERE k.reservation_id OPERATOR(pg_catalog.=) r.id
   AND k.function OPERATOR(pg_catalog.<>) 'hc_hold';
-- A key 0.1.0 had already forgotten stays forgotten.
UPDATE @extschema@.hc_reservations SET idempotency_key = NULL WHERE fingerprint IS NULL;
UPDATE @extschema@.hc_stock_reservations SET idempotency_key = NULL WHERE fingerprint IS NULL;
ALTER EXTENSION holdcommit DROP TABLE @extschema@.hc_idempotency_keys;
DROP TABLE @extschema@.hc_idempotency_keys;
CREATE UNIQUE INDEX hc_reservations_key ON @extschema@.hc_reservations (idempotency_key);
CREATE UNIQUE INDEX hc_stock_reservations_key ON @extschema@.hc_stock_reservations (idempotency_key);

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


-- At most one live hold per asset is the asset row's current_reservation_id.
DROP INDEX @extschema@.hc_reservations_one_held;

ALTER TABLE @extschema@.hc_reservations DROP CONSTRAINT hc_reservations_asset_id_fkey;
ALTER TABLE @extschema@.hc_stock_reservation_lines
    DROP CONSTRAINT hc_stock_reservation_lines_product_id_fkey;

-- A line carries its order's buyer, so that reclaiming needs no join.
ALTER TABLE @extschema@.hc_stock_reservation_lines ADD COLUMN buyer_id text;
UPDATE @extschema@.hc_stock_reservation_lines l SET buyer_id = r.buyer_id
  FROM @extschema@.hc_stock_reservations r WHERE r.id OPERATOR(pg_catalog.=) l.reservation_id;
ALTER TABLE @extschema@.hc_stock_reservation_lines ALTER COLUMN buyer_id SET NOT NULL;

-- The ledger's seq becomes the entity's version after the change: versions
-- move past every seq the global sequence gave, so seqs stay unique.
UPDATE @extschema@.hc_assets a SET version = g.seq::pg_catalog.int4
  FROM (SELECT entity_id, pg_catalog.max(seq) AS seq FROM @extschema@.hc_ledger
         WHERE kind OPERATOR(pg_catalog.=) 'asset' GROUP BY entity_id) g
 WHERE g.entity_id OPERATOR(pg_catalog.=) a.id AND a.version OPERATOR(pg_catalog.<) g.seq;
UPDATE @extschema@.hc_inventory i SET version = g.seq::pg_catalog.int4
  FROM (SELECT entity_id, pg_catalog.max(seq) AS seq FROM @extschema@.hc_ledger
         WHERE kind OPERATOR(pg_catalog.=) 'product' GROUP BY entity_id) g
 WHERE g.entity_id OPERATOR(pg_catalog.=) i.product_id AND i.version OPERATOR(pg_catalog.<) g.seq;
ALTER TABLE @extschema@.hc_ledger ALTER COLUMN seq DROP DEFAULT;
ALTER EXTENSION holdcommit DROP SEQUENCE @extschema@.hc_ledger_seq;
DROP SEQUENCE @extschema@.hc_ledger_seq;
DROP INDEX @extschema@.hc_ledger_at;
CREATE INDEX hc_ledger_at ON @extschema@.hc_ledger USING brin (at);

-- No CHECK where a call writes, but the inventory's (never oversold):
-- PostgreSQL 15 rebuilds every CHECK for each statement that writes the
-- table.  Ids and enumerations are the C code's to validate and the shapes
-- hc_check()'s to verify (only the extension's functions write these tables).
ALTER TABLE @extschema@.hc_assets
    DROP CONSTRAINT hc_assets_id_check,
    DROP CONSTRAINT hc_assets_status_check,
    DROP CONSTRAINT hc_assets_hold_shape;
ALTER TABLE @extschema@.hc_reservations
    DROP CONSTRAINT hc_reservations_buyer_id_check,
    DROP CONSTRAINT hc_reservations_status_check,
    DROP CONSTRAINT hc_reservations_check;
ALTER TABLE @extschema@.hc_ledger
    DROP CONSTRAINT hc_ledger_kind_check,
    DROP CONSTRAINT hc_ledger_source_check;
ALTER TABLE @extschema@.hc_inventory
    DROP CONSTRAINT hc_inventory_product_id_check;
ALTER TABLE @extschema@.hc_stock_reservations
    DROP CONSTRAINT hc_stock_reservations_buyer_id_check,
    DROP CONSTRAINT hc_stock_reservations_status_check,
    DROP CONSTRAINT hc_stock_reservations_check;
ALTER TABLE @extschema@.hc_stock_reservation_lines
    DROP CONSTRAINT hc_stock_reservation_lines_status_check;

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

-- Nothing for PUBLIC.
REVOKE ALL ON FUNCTION @extschema@.hc_lock_acquire(text, text, interval, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.hc_lock_acquire_session(text, text, interval, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.hc_lock_heartbeat(text, text, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.hc_lock_release(text, text, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.hc_attempt_begin(text, text, bigint, interval, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.hc_attempt_complete(text, text, bigint, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.hc_attempt_reset(text, text) FROM PUBLIC;

-- pg_dump keeps the data of these tables.
SELECT pg_catalog.pg_extension_config_dump('@extschema@.hc_locks', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.hc_attempts', '');

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

REVOKE ALL ON FUNCTION @extschema@.hc_sweep(integer) FROM PUBLIC;
