-- Dual-layer locking, layer 1: leases with fencing tokens.
-- Tokens are deterministic; times move, so the output shows durations,
-- flags and comparisons with values read back from the database.  Errors
-- are shown as the application sees them, then their SQLSTATE.
\set VERBOSITY default

-- The ledger rows of one resource, without times.
CREATE FUNCTION lease_ledger(p_resource text)
RETURNS TABLE (event text, function text, detail text) LANGUAGE sql AS $$
    SELECT event, function, detail FROM hc_ledger
     WHERE kind = 'resource' AND entity_id = p_resource ORDER BY seq
$$;

------------------------------------------------------------------------------
-- Acquire a free resource: token 1; the same owner again: the same token.
------------------------------------------------------------------------------
SELECT hc_lock_acquire('L-1', 'webhook', '1 hour', 0) AS token;
SELECT resource, owner, token, heartbeat_at = acquired_at AS fresh, stale_after, released_at
  FROM hc_locks WHERE resource = 'L-1';
SELECT heartbeat_at AS beat0 FROM hc_locks WHERE resource = 'L-1' \gset
SELECT hc_lock_acquire('L-1', 'webhook', '1 hour', 0) AS token;
SELECT token, heartbeat_at > :'beat0' AS heartbeat_refreshed, acquired_at < heartbeat_at AS acquired_kept
  FROM hc_locks WHERE resource = 'L-1';

-- Another owner: busy.  With max_retries 0 it tries once and returns NULL at
-- once; with retries it backs off (200 ms, then 400 ms, plus jitter each)
-- before giving up.
SELECT lock_digest() AS before \gset
SELECT hc_lock_acquire('L-1', 'scheduler', '1 hour', 0) IS NULL AS busy;
-- Staleness is judged by the holder's stale_after, not the acquirer's.
SELECT hc_lock_acquire('L-1', 'scheduler', '1 second', 0) IS NULL AS busy;
SELECT clock_timestamp() AS t0 \gset
SELECT hc_lock_acquire('L-1', 'scheduler', '1 hour', 2) IS NULL AS busy_after_2_retries;
SELECT clock_timestamp() - :'t0'::timestamptz >= interval '600 ms' AS backed_off;
SELECT lock_digest() = :'before' AS unchanged;

-- A cancel or statement_timeout ends the backoff sleep at once.
SET statement_timeout = '300ms';
SELECT hc_lock_acquire('L-1', 'scheduler', '1 hour', 50);
\echo :LAST_ERROR_SQLSTATE
RESET statement_timeout;

------------------------------------------------------------------------------
-- Heartbeat: only with the owner and token that hold the lease.
------------------------------------------------------------------------------
SELECT hc_lock_heartbeat('L-1', 'webhook', 1) AS beat \gset
SELECT heartbeat_at = :'beat' AS heartbeat_stored, heartbeat_at > :'beat0' AS later
  FROM hc_locks WHERE resource = 'L-1';
SELECT lock_digest() AS before \gset
SELECT hc_lock_heartbeat('L-1', 'scheduler', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT hc_lock_heartbeat('L-1', 'webhook', 2);
\echo :LAST_ERROR_SQLSTATE
SELECT hc_lock_heartbeat('L-never', 'webhook', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT lock_digest() = :'before' AS unchanged;

------------------------------------------------------------------------------
-- Release: only the owner with its token; otherwise false, nothing changes.
------------------------------------------------------------------------------
SELECT hc_lock_release('L-1', 'scheduler', 1) AS released;
SELECT hc_lock_release('L-1', 'webhook', 7) AS released;
SELECT hc_lock_release('L-never', 'webhook', 1) AS released;
SELECT lock_digest() = :'before' AS unchanged;
SELECT hc_lock_release('L-1', 'webhook', 1) AS released;
SELECT resource, owner, token, acquired_at, heartbeat_at, stale_after, released_at IS NOT NULL AS released
  FROM hc_locks WHERE resource = 'L-1';
-- Releasing again: false (it is no longer held); a heartbeat now: RS007.
SELECT hc_lock_release('L-1', 'webhook', 1) AS released;
SELECT hc_lock_heartbeat('L-1', 'webhook', 1);
\echo :LAST_ERROR_SQLSTATE

-- After a release the next holder, even the same owner, gets a new token:
-- the row and its token stay, tokens only grow.
SELECT hc_lock_acquire('L-1', 'webhook', '1 hour', 0) AS token;
SELECT hc_lock_heartbeat('L-1', 'webhook', 1);
\echo :LAST_ERROR_SQLSTATE

------------------------------------------------------------------------------
-- Takeover: a lease whose heartbeat is older than its holder's stale_after.
------------------------------------------------------------------------------
SELECT hc_lock_acquire('L-2', 'worker-a', '1 second', 0) AS token;
SELECT pg_sleep(1.5);
SELECT stale FROM hc_lease_status WHERE resource = 'L-2';
SELECT hc_lock_acquire('L-2', 'worker-b', '1 hour', 0) AS token;
SELECT owner, token, stale_after, acquired_at = heartbeat_at AS fresh FROM hc_locks WHERE resource = 'L-2';
-- The former holder is fenced off: its heartbeat raises RS007, its release is false.
SELECT hc_lock_heartbeat('L-2', 'worker-a', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT hc_lock_release('L-2', 'worker-a', 1) AS released;
SELECT owner, token FROM hc_locks WHERE resource = 'L-2';

-- A stale lease that nobody took over is still its holder's: a heartbeat
-- revives it.  The same owner acquiring its own stale lease gets a new token.
SELECT hc_lock_acquire('L-3', 'worker-c', '1 second', 0) AS token;
SELECT pg_sleep(1.5);
SELECT stale FROM hc_lease_status WHERE resource = 'L-3';
SELECT hc_lock_heartbeat('L-3', 'worker-c', 1) AS beat \gset
SELECT owner, token, heartbeat_at = :'beat' AS revived FROM hc_locks WHERE resource = 'L-3';
SELECT pg_sleep(1.5);
SELECT hc_lock_acquire('L-3', 'worker-c', '1 second', 0) AS token;

------------------------------------------------------------------------------
-- Durability: a lease never depends on the caller committing later (every
-- caller context: autonomous.sql).  The statement fails after the call: the
-- lease is taken all the same, and the same owner gets the token it never saw.
------------------------------------------------------------------------------
SELECT hc_lock_acquire('L-4', 'worker-d', '1 hour', 0) AS token, 1 / (random() * 0)::int AS boom;
\echo :LAST_ERROR_SQLSTATE
SELECT owner, token FROM hc_locks WHERE resource = 'L-4';
SELECT hc_lock_acquire('L-4', 'worker-d', '1 hour', 0) AS token;

------------------------------------------------------------------------------
-- Bad input (class 22): checked first, nothing changes.
------------------------------------------------------------------------------
SELECT lock_digest() AS before \gset
SELECT hc_lock_acquire(NULL, 'w');
\echo :LAST_ERROR_SQLSTATE
SELECT hc_lock_acquire('L-9', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT hc_lock_acquire('', 'w');
\echo :LAST_ERROR_SQLSTATE
SELECT hc_lock_acquire('L-9', '');
\echo :LAST_ERROR_SQLSTATE
SELECT hc_lock_acquire(repeat('r', 65), 'w');
\echo :LAST_ERROR_SQLSTATE
SELECT hc_lock_acquire('L-9', repeat('w', 65));
\echo :LAST_ERROR_SQLSTATE
SELECT hc_lock_acquire('L-9', 'w', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT hc_lock_acquire('L-9', 'w', '0 seconds');
\echo :LAST_ERROR_SQLSTATE
SELECT hc_lock_acquire('L-9', 'w', '-1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT hc_lock_acquire('L-9', 'w', '2 days');
\echo :LAST_ERROR_SQLSTATE
SELECT hc_lock_acquire('L-9', 'w', '1 minute', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT hc_lock_acquire('L-9', 'w', '1 minute', -1);
\echo :LAST_ERROR_SQLSTATE
SELECT hc_lock_heartbeat('L-1', 'webhook', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT hc_lock_heartbeat('L-1', 'webhook', 0);
\echo :LAST_ERROR_SQLSTATE
SELECT hc_lock_heartbeat(NULL, 'webhook', 2);
\echo :LAST_ERROR_SQLSTATE
SELECT hc_lock_release('L-1', '', 2);
\echo :LAST_ERROR_SQLSTATE
SELECT hc_lock_release('L-1', 'webhook', -2);
\echo :LAST_ERROR_SQLSTATE
-- Bad input inside a transaction block is still class 22: arguments first.
BEGIN;
SELECT hc_lock_acquire('', 'w');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT lock_digest() = :'before' AS unchanged;

------------------------------------------------------------------------------
-- What operators and auditors see.
------------------------------------------------------------------------------
SELECT resource, owner, token, held, stale_after, seconds_since_heartbeat < 3600 AS recent_beat, stale,
       released_at IS NOT NULL AS ever_released
  FROM hc_lease_status WHERE resource LIKE 'L-%' ORDER BY resource;
SELECT * FROM lease_ledger('L-1');
SELECT * FROM lease_ledger('L-2');
SELECT * FROM lease_ledger('L-3');
SELECT * FROM lease_ledger('L-4');
SELECT DISTINCT actor, source FROM hc_ledger WHERE kind = 'resource' AND entity_id LIKE 'L-%';
SELECT * FROM hc_check();

------------------------------------------------------------------------------
-- A session-bound lease: free for the next acquirer as soon as its session
-- ends, without waiting for stale_after.
------------------------------------------------------------------------------
SELECT hc_lock_acquire_session('L-5', 'worker-e', '1 hour', 0) AS token;
SELECT owner, token, session_pid = pg_backend_pid() AS bound_to_me FROM hc_locks WHERE resource = 'L-5';
SELECT owner, session_alive, stale FROM hc_lease_status WHERE resource = 'L-5';
-- While the session lives, the lease is held like any other.
SELECT hc_lock_acquire('L-5', 'worker-f', '1 hour', 0) IS NULL AS busy;
SELECT hc_lock_heartbeat('L-5', 'worker-e', 1) IS NOT NULL AS beat;
-- The same owner again from the same session: its token back, still bound.
SELECT hc_lock_acquire_session('L-5', 'worker-e', '1 hour', 0) AS token;
SELECT pg_backend_pid() AS old_pid \gset
-- The session ends (a new connection: the old backend exits; the new session
-- has pg_regress's settings, so this section shows no intervals or times).
\c -
SELECT owner, session_pid = :old_pid AS bound_to_old FROM hc_lease_status WHERE resource = 'L-5';
-- The next acquirer takes it over at once (a retry covers the old backend's exit).
SELECT hc_lock_acquire('L-5', 'worker-f', '1 hour', 10) AS token;
SELECT owner, token, session_pid FROM hc_locks WHERE resource = 'L-5';
SELECT event, detail FROM hc_ledger WHERE kind = 'resource' AND entity_id = 'L-5' ORDER BY seq;
-- A released session-bound lease is unbound.
SELECT hc_lock_acquire_session('L-6', 'worker-g', '1 hour', 0) AS token;
SELECT hc_lock_release('L-6', 'worker-g', 1) AS released;
SELECT owner, token, session_pid, session_started FROM hc_locks WHERE resource = 'L-6';
-- Bound in a block that rolls back: bound all the same, and its session's
-- lock keeps it (the caller takes that lock before the lease is committed).
BEGIN;
SELECT hc_lock_acquire_session('L-6', 'worker-g', '1 hour', 0) AS token;
ROLLBACK;
SELECT owner, token, session_pid = pg_backend_pid() AS bound_to_me FROM hc_locks WHERE resource = 'L-6';
SELECT owner, session_alive FROM hc_lease_status WHERE resource = 'L-6';
SELECT hc_lock_acquire('L-6', 'worker-h', '1 hour', 0) IS NULL AS busy;
-- A release with a wrong token frees nothing and keeps the binding alive.
SELECT hc_lock_release('L-6', 'worker-g', 1) AS released;
SELECT owner, session_alive FROM hc_lease_status WHERE resource = 'L-6';
-- Bound under REPEATABLE READ, twice: both bindings stay alive.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT hc_lock_acquire_session('L-7', 'worker-i', '1 hour', 0) AS token;
SELECT hc_lock_acquire_session('L-8', 'worker-i', '1 hour', 0) AS token;
COMMIT;
SELECT resource, owner, session_alive FROM hc_lease_status WHERE resource IN ('L-6', 'L-7', 'L-8') ORDER BY resource;
SELECT hc_lock_acquire('L-7', 'worker-j', '1 hour', 0) IS NULL AS busy;

-- hc_lock_check (0.4.0): the contexts it refuses.  A transaction that ran it
-- cannot be prepared (0A000; the next one can try again), nor run it under
-- REPEATABLE READ (25000), read-only (25006); nulls and an empty owner are 22xxx.
SELECT hc_lock_acquire('L-9', 'worker-k', '1 hour', 0) AS token;
BEGIN;
SELECT hc_lock_check('L-9', 'worker-k', 1);
\set VERBOSITY sqlstate
PREPARE TRANSACTION 'hc-fenced';
\set VERBOSITY default
SELECT count(*) AS prepared FROM pg_prepared_xacts WHERE gid = 'hc-fenced';
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT hc_lock_check('L-9', 'worker-k', 1);
ROLLBACK;
BEGIN READ ONLY;
SELECT hc_lock_check('L-9', 'worker-k', 1);
ROLLBACK;
SELECT hc_lock_check('L-9', 'worker-k', NULL);
SELECT hc_lock_check('L-9', '', 1);
SELECT 1 AS usable;

SELECT * FROM hc_check();

DROP FUNCTION lease_ledger(text);
