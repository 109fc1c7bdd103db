-- Leases and attempt markers are committed before the call returns, from any
-- context: whatever the caller does afterwards (roll back, fail, disconnect),
-- the lease stays taken and the marker stays counted, so the next worker gets
-- token + 1 and sees the attempt.  Each context below takes a lease of its
-- own (X-...), begins an attempt where it can, then fails or rolls back.
\set VERBOSITY default

-- What a resource looks like now: its lease and its attempts.
CREATE FUNCTION lease_state(p_resource text) RETURNS text LANGUAGE sql AS $$
    SELECT coalesce((SELECT coalesce(owner, 'free') || ' token ' || token FROM hc_locks
                      WHERE resource = p_resource), 'never leased')
        || coalesce((SELECT ', ' || status || ' after ' || attempts || ' attempt(s)' FROM hc_attempts
                      WHERE resource = p_resource), '')
$$;

------------------------------------------------------------------------------
-- A transaction block that rolls back.
------------------------------------------------------------------------------
BEGIN;
SELECT hc_lock_acquire('X-block', 'w1', '1 hour', 0) AS token;
SELECT status, attempt FROM hc_attempt_begin('X-block', 'w1', 1, '1 hour', 3);
SELECT hc_lock_heartbeat('X-block', 'w1', 1) IS NOT NULL AS beat;
ROLLBACK;
SELECT lease_state('X-block');
-- A release inside a block that fails is committed too; the next worker
-- gets token 2, and the attempt w1 made still counts: COOLDOWN.
BEGIN;
SELECT hc_lock_release('X-block', 'w1', 1) AS released;
SELECT 1 / (random() * 0)::int;
ROLLBACK;
SELECT lease_state('X-block');
SELECT hc_lock_acquire('X-block', 'w2', '1 hour', 0) AS token;
SELECT status, attempt FROM hc_attempt_begin('X-block', 'w2', 2, '1 hour', 3);

------------------------------------------------------------------------------
-- A savepoint rolled back, and a transaction that commits around it.
------------------------------------------------------------------------------
BEGIN;
SAVEPOINT before_call;
SELECT hc_lock_acquire('X-savepoint', 'w1', '1 hour', 0) AS token;
SELECT status, attempt FROM hc_attempt_begin('X-savepoint', 'w1', 1, '1 hour', 3);
ROLLBACK TO SAVEPOINT before_call;
COMMIT;
SELECT lease_state('X-savepoint');

------------------------------------------------------------------------------
-- Several statements in one query (one implicit transaction), the last fails.
------------------------------------------------------------------------------
SELECT hc_lock_acquire('X-implicit', 'w1', '1 hour', 0) AS token \; SELECT 1 / (random() * 0)::int;
SELECT lease_state('X-implicit');

------------------------------------------------------------------------------
-- The statement fails after the call, in the same row.
------------------------------------------------------------------------------
SELECT hc_lock_acquire('X-statement', 'w1', '1 hour', 0) AS token, 1 / (random() * 0)::int AS boom;
SELECT lease_state('X-statement');
-- The same owner asks again: it gets the token it never saw.
SELECT hc_lock_acquire('X-statement', 'w1', '1 hour', 0) AS token;

------------------------------------------------------------------------------
-- PL code: a DO block that raises after its calls, a subtransaction (an
-- EXCEPTION block) that is rolled back, a SQL function in a failing statement.
------------------------------------------------------------------------------
DO $$
DECLARE
    t bigint := hc_lock_acquire('X-do', 'w1', '1 hour', 0);
BEGIN
    PERFORM hc_attempt_begin('X-do', 'w1', t, '1 hour', 3);
    RAISE EXCEPTION 'the caller fails after token % and PROCEED', t;
END $$;
SELECT lease_state('X-do');
DO $$
BEGIN
    BEGIN
        PERFORM hc_attempt_begin('X-do', 'w1', 1, '1 hour', 3);
        PERFORM hc_lock_release('X-do', 'w1', 1);
        RAISE division_by_zero;
    EXCEPTION WHEN division_by_zero THEN
        RAISE NOTICE 'the subtransaction is rolled back';
    END;
END $$;
SELECT lease_state('X-do');
CREATE FUNCTION take_lease(p_resource text) RETURNS bigint LANGUAGE sql AS $$
    SELECT hc_lock_acquire(p_resource, 'w1', '1 hour', 0)
$$;
SELECT take_lease('X-sql-function') AS token, 1 / (random() * 0)::int AS boom;
SELECT lease_state('X-sql-function');

------------------------------------------------------------------------------
-- A trigger that takes a lease for each job row, in an INSERT that fails.
------------------------------------------------------------------------------
CREATE TABLE jobs (resource text PRIMARY KEY, token bigint, CHECK (token > 1));
CREATE FUNCTION jobs_take_lease() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.token := hc_lock_acquire(NEW.resource, 'trigger', '1 hour', 0);
    RETURN NEW;
END $$;
CREATE TRIGGER jobs_take_lease BEFORE INSERT ON jobs
    FOR EACH ROW EXECUTE FUNCTION jobs_take_lease();
INSERT INTO jobs (resource) VALUES ('X-trigger');
SELECT count(*) AS jobs, lease_state('X-trigger') FROM jobs;

------------------------------------------------------------------------------
-- A procedure that commits half its work, then fails.
------------------------------------------------------------------------------
CREATE PROCEDURE run_payment(p_resource text) LANGUAGE plpgsql AS $$
DECLARE
    t bigint := hc_lock_acquire(p_resource, 'procedure', '1 hour', 0);
BEGIN
    COMMIT;
    PERFORM hc_attempt_begin(p_resource, 'procedure', t, '1 hour', 3);
    RAISE EXCEPTION 'the ERP call failed';
END $$;
CALL run_payment('X-procedure');
SELECT lease_state('X-procedure');

------------------------------------------------------------------------------
-- A cursor, fetched inside a block that rolls back.
------------------------------------------------------------------------------
BEGIN;
DECLARE leases CURSOR FOR
    SELECT r, hc_lock_acquire(r, 'cursor', '1 hour', 0) AS token
      FROM unnest(ARRAY['X-cursor-1', 'X-cursor-2', 'X-cursor-3']) AS r;
FETCH 2 FROM leases;
ROLLBACK;
SELECT lease_state('X-cursor-1') AS first, lease_state('X-cursor-2') AS second,
       lease_state('X-cursor-3') AS never_fetched;

------------------------------------------------------------------------------
-- Every lease and attempt function in a block that rolls back: each call
-- returns what it returns in autocommit, and each change stays.
------------------------------------------------------------------------------
BEGIN;
SELECT hc_lock_acquire('X-all', 'w1', '1 hour', 0) AS token;
SELECT hc_lock_heartbeat('X-all', 'w1', 1) > now() - interval '1 minute' AS beat;
SELECT status, attempt FROM hc_attempt_begin('X-all', 'w1', 1, '0 seconds', 1);
SELECT status, attempt FROM hc_attempt_begin('X-all', 'w1', 1, '0 seconds', 1);
SELECT status, attempt FROM hc_attempt_reset('X-all', 'checked the ERP: no invoice');
SELECT status, attempt FROM hc_attempt_begin('X-all', 'w1', 1, '0 seconds', 1);
SELECT status, external_ref FROM hc_attempt_complete('X-all', 'w1', 1, 'INV-77');
SELECT hc_lock_release('X-all', 'w1', 1) AS released;
ROLLBACK;
SELECT lease_state('X-all');
SELECT event, detail::jsonb - 'marker' AS detail FROM hc_ledger
 WHERE kind = 'resource' AND entity_id = 'X-all' ORDER BY seq;
-- Errors are the same as in autocommit, with their SQLSTATE, and the
-- caller's block goes on after a savepoint.
BEGIN;
SAVEPOINT s;
SELECT hc_lock_heartbeat('X-all', 'w1', 1);
ROLLBACK TO SAVEPOINT s;
SELECT hc_lock_acquire('X-all', '', '1 hour', 0);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT 1 AS usable;

------------------------------------------------------------------------------
-- Any isolation level: the call's own transaction is READ COMMITTED.  A
-- REPEATABLE READ caller does not see the new row in its own snapshot.
------------------------------------------------------------------------------
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) AS rows_before FROM hc_locks WHERE resource = 'X-repeatable';
SELECT hc_lock_acquire('X-repeatable', 'w1', '1 hour', 0) AS token;
SELECT count(*) AS rows_in_snapshot FROM hc_locks WHERE resource = 'X-repeatable';
COMMIT;
SELECT lease_state('X-repeatable');
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT hc_lock_release('X-repeatable', 'w1', 1) AS released;
COMMIT;

------------------------------------------------------------------------------
-- The caller's own transaction holds a lock the call needs: it fails with a
-- clear error after about deadlock_timeout, changes nothing, and the block
-- rolls back normally.
------------------------------------------------------------------------------
SET deadlock_timeout = '100ms';
SELECT hc_lock_acquire('X-own-lock', 'w1', '1 hour', 0) AS token;
-- A test that changes the lease row in its block, then heartbeats.
BEGIN;
UPDATE hc_locks SET heartbeat_at = heartbeat_at - interval '1 minute' WHERE resource = 'X-own-lock';
SELECT hc_lock_heartbeat('X-own-lock', 'w1', 1);
ROLLBACK;
SELECT 1 AS usable;
-- LOCK TABLE, then an acquire of a new resource and an attempt.
BEGIN;
LOCK TABLE hc_locks IN SHARE MODE;
SELECT hc_lock_acquire('X-own-lock-2', 'w1', '1 hour', 0);
ROLLBACK;
BEGIN;
LOCK TABLE hc_attempts;
SELECT hc_attempt_begin('X-own-lock', 'w1', 1, '1 hour', 3);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT lease_state('X-own-lock') AS unchanged, lease_state('X-own-lock-2') AS not_taken;
RESET deadlock_timeout;

------------------------------------------------------------------------------
-- A read-only transaction is refused: the call would write.  An operator's
-- note is bounded, as every argument is.
------------------------------------------------------------------------------
BEGIN READ ONLY;
SELECT hc_lock_acquire('X-read-only', 'w1', '1 hour', 0);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT hc_attempt_reset('X-all', repeat('n', 1001));
\echo :LAST_ERROR_SQLSTATE
SELECT lease_state('X-read-only');

SELECT * FROM hc_check();
