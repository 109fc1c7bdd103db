-- Dual-layer locking, layer 2: the point-of-no-return guard.
-- Markers carry the time, so the output checks their shape and compares them
-- with what the database stored.  Errors are shown as the application sees
-- them, then their SQLSTATE.
\set VERBOSITY default

-- A marker with its time replaced by whether it is the call's own time.
CREATE FUNCTION attempt_marker(p_marker text, p_at timestamptz) RETURNS text LANGUAGE sql AS $$
    SELECT regexp_replace(p_marker, '-t([0-9]+)$', '') ||
           CASE WHEN substring(p_marker FROM '-t([0-9]+)$')::bigint
                     = floor(extract(epoch FROM p_at) * 1000)::bigint
                THEN '-t<unix ms of last_attempt_at>' ELSE '-t<wrong time>' END
$$;
-- The ledger rows of one resource, markers shown as above.
CREATE FUNCTION attempt_ledger(p_resource text)
RETURNS TABLE (event text, function text, detail text) LANGUAGE sql AS $$
    SELECT event, function, regexp_replace(detail, '-t[0-9]{13}"', '-t<ms>"')
      FROM hc_ledger WHERE kind = 'resource' AND entity_id = p_resource ORDER BY seq
$$;

SELECT hc_lock_acquire('A-1', 'w1', '1 hour', 0) AS token;

------------------------------------------------------------------------------
-- begin requires the lease with its current token.
------------------------------------------------------------------------------
SELECT lock_digest() AS before \gset
SELECT * FROM hc_attempt_begin('A-1', 'w2', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM hc_attempt_begin('A-1', 'w1', 2);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM hc_attempt_begin('A-never', 'w1', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT lock_digest() = :'before' AS unchanged;

------------------------------------------------------------------------------
-- PROCEED records attempt n with a permanent marker and its request key.
-- Within the cooldown only the request that made it (the same owner and
-- token presenting its request_key) gets that attempt back, recording
-- nothing; the same owner and token without the key, or with another, is
-- COOLDOWN: an owner name proves nothing (two deliveries of one webhook).
------------------------------------------------------------------------------
SELECT resource, status, attempt, attempt_marker(marker, last_attempt_at) AS marker, external_ref
  FROM hc_attempt_begin('A-1', 'w1', 1, '1 hour', 3, request_key => 'req-1');
SELECT status, attempts, total_attempts, last_marker ~ '^ATTEMPTED-w1-r1-t[0-9]{13}$' AS marker_shape,
       last_owner, last_token, cooldown, max_attempts,
       last_request_digest = sha256('req-1') AS key_digest
  FROM hc_attempts WHERE resource = 'A-1';
SELECT lock_digest() AS before \gset
SELECT resource, status, attempt, attempt_marker(marker, last_attempt_at) AS marker
  FROM hc_attempt_begin('A-1', 'w1', 1, '1 hour', 3, request_key => 'req-1');
SELECT status, attempt FROM hc_attempt_begin('A-1', 'w1', 1, '1 hour', 3);
SELECT status, attempt FROM hc_attempt_begin('A-1', 'w1', 1, '1 hour', 3, request_key => 'req-2');
SELECT status, attempt FROM hc_attempt_begin('A-1', 'w1', 1, '1 hour', 3, request_key => NULL);
SELECT lock_digest() = :'before' AS unchanged;
-- A request key is checked like an idempotency key.
SELECT * FROM hc_attempt_begin('A-1', 'w1', 1, '1 hour', 3, request_key => '');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM hc_attempt_begin('A-1', 'w1', 1, '1 hour', 3, request_key => repeat('k', 300));
\echo :LAST_ERROR_SQLSTATE
SELECT lock_digest() = :'before' AS unchanged;
-- The cooldown is the caller's: with none, the next attempt may go.
SELECT status, attempt, attempt_marker(marker, last_attempt_at) AS marker
  FROM hc_attempt_begin('A-1', 'w1', 1, '0 seconds', 3);

------------------------------------------------------------------------------
-- The markers outlive the lease: released and taken by another worker, the
-- resource still counts its attempts and keeps its cooldown.
------------------------------------------------------------------------------
SELECT hc_lock_release('A-1', 'w1', 1) AS released;
SELECT status, attempts, last_marker ~ '^ATTEMPTED-w1-r2-' AS marker_kept FROM hc_attempts WHERE resource = 'A-1';
SELECT hc_lock_acquire('A-1', 'w2', '1 hour', 0) AS token;
SELECT status, attempt FROM hc_attempt_begin('A-1', 'w2', 2, '1 hour', 3);
SELECT status, attempt, attempt_marker(marker, last_attempt_at) AS marker
  FROM hc_attempt_begin('A-1', 'w2', 2, '0 seconds', 3);
-- The former holder is fenced off by its token.
SELECT * FROM hc_attempt_begin('A-1', 'w1', 1, '0 seconds', 3);
\echo :LAST_ERROR_SQLSTATE

------------------------------------------------------------------------------
-- The cap: MANUAL_REVIEW, sticky whatever later callers ask, until a reset.
------------------------------------------------------------------------------
SELECT status, attempt, attempt_marker(marker, last_attempt_at) AS marker
  FROM hc_attempt_begin('A-1', 'w2', 2, '0 seconds', 3);
SELECT status, attempt FROM hc_attempt_begin('A-1', 'w2', 2, '0 seconds', 10);
SELECT resource, status, attempts, awaiting_review, cooldown_until, lease_owner, lease_token
  FROM hc_attempt_status WHERE resource = 'A-1';

-- An operator checked the ERP: no invoice.  The count starts again from
-- zero, the cooldown is gone, the markers stay in the ledger.
SELECT resource, status, attempt, attempt_marker(marker, last_attempt_at) AS marker, external_ref
  FROM hc_attempt_reset('A-1', 'ERP has no invoice for A-1');
SELECT status, attempts, total_attempts, reset_note FROM hc_attempts WHERE resource = 'A-1';
SELECT status, attempt, attempt_marker(marker, last_attempt_at) AS marker
  FROM hc_attempt_begin('A-1', 'w2', 2, '1 hour', 3);

------------------------------------------------------------------------------
-- complete: the outcome, for good.
------------------------------------------------------------------------------
SELECT lock_digest() AS before \gset
SELECT * FROM hc_attempt_complete('A-1', 'w1', 1, 'INV-0001');
\echo :LAST_ERROR_SQLSTATE
SELECT lock_digest() = :'before' AS unchanged;
SELECT resource, status, attempt, external_ref
  FROM hc_attempt_complete('A-1', 'w2', 2, 'INV-0001');
-- A replay with the same external_ref returns the row; it needs no lease.
SELECT lock_digest() AS before \gset
SELECT resource, status, attempt, external_ref
  FROM hc_attempt_complete('A-1', 'w2', 2, 'INV-0001');
SELECT resource, status, attempt, external_ref
  FROM hc_attempt_complete('A-1', 'w1', 1, 'INV-0001');
-- Another external_ref: RS004 (one of the two is a duplicate).
SELECT * FROM hc_attempt_complete('A-1', 'w2', 2, 'INV-0002');
\echo :LAST_ERROR_SQLSTATE
-- begin now says COMPLETED with the reference: never call out again.
SELECT resource, status, attempt, external_ref FROM hc_attempt_begin('A-1', 'w2', 2, '0 seconds', 3);
-- A completed resource cannot be reset: that would allow a second call.
SELECT * FROM hc_attempt_reset('A-1', 'try again');
\echo :LAST_ERROR_SQLSTATE
SELECT lock_digest() = :'before' AS unchanged;

-- The outcome can be recorded without any attempt (found by an inquiry).
SELECT hc_lock_acquire('A-2', 'scheduler', '1 hour', 0) AS token;
SELECT resource, status, attempt, marker, external_ref, last_attempt_at
  FROM hc_attempt_complete('A-2', 'scheduler', 1, 'INV-0002');

------------------------------------------------------------------------------
-- A takeover after a marker counts that attempt as made.
------------------------------------------------------------------------------
SELECT hc_lock_acquire('A-3', 'crashing', '1 second', 0) AS token;
SELECT status, attempt FROM hc_attempt_begin('A-3', 'crashing', 1, '1 hour', 2);
SELECT pg_sleep(1.5);
SELECT hc_lock_acquire('A-3', 'rescuer', '1 hour', 0) AS token;
SELECT status, attempt, attempt_marker(marker, last_attempt_at) AS marker
  FROM hc_attempt_begin('A-3', 'rescuer', 2, '1 hour', 2);
SELECT status, attempt, attempt_marker(marker, last_attempt_at) AS marker
  FROM hc_attempt_begin('A-3', 'rescuer', 2, '0 seconds', 2);
SELECT status, attempt FROM hc_attempt_begin('A-3', 'rescuer', 2, '0 seconds', 2);

------------------------------------------------------------------------------
-- Durability: a marker never depends on the caller committing later (every
-- caller context: autonomous.sql).  The statement fails after begin: the
-- caller never saw PROCEED, yet the marker is recorded.  An answer the
-- caller lost is not a new attempt: its retry with the same request key
-- within the cooldown gets that attempt back (nothing written); the same
-- holder without the key, and another holder after a takeover, see the
-- cooldown.
------------------------------------------------------------------------------
SELECT hc_lock_acquire('A-5', 'w5', '1 second', 0) AS token;
SELECT (hc_attempt_begin('A-5', 'w5', 1, '1 hour', 3, 'invoice-5-try-1')).status, 1 / (random() * 0)::int AS boom;
\echo :LAST_ERROR_SQLSTATE
SELECT status, attempts, last_marker ~ '^ATTEMPTED-w5-r1-t' AS marker_kept FROM hc_attempts WHERE resource = 'A-5';
SELECT lock_digest() AS before \gset
SELECT status, attempt, attempt_marker(marker, last_attempt_at) AS marker
  FROM hc_attempt_begin('A-5', 'w5', 1, '1 hour', 3, 'invoice-5-try-1');
SELECT status, attempt FROM hc_attempt_begin('A-5', 'w5', 1, '1 hour', 3);
SELECT lock_digest() = :'before' AS unchanged;
SELECT pg_sleep(1.5);
SELECT hc_lock_acquire('A-5', 'w6', '1 hour', 0) AS token;
SELECT status, attempt FROM hc_attempt_begin('A-5', 'w6', 2, '1 hour', 3);
-- The key of the last attempt is no pass for another holder.
SELECT status, attempt FROM hc_attempt_begin('A-5', 'w6', 2, '1 hour', 3, 'invoice-5-try-1');
-- The request of the last attempt the cap allows asks again: the same
-- attempt, not MANUAL_REVIEW (nothing written); anyone else finds the cap.
SELECT hc_lock_acquire('A-6', 'w7', '1 hour', 0) AS token;
SELECT status, attempt FROM hc_attempt_begin('A-6', 'w7', 1, '1 hour', 1, 'invoice-6-try-1');
SELECT lock_digest() AS before \gset
SELECT status, attempt FROM hc_attempt_begin('A-6', 'w7', 1, '1 hour', 1, 'invoice-6-try-1');
SELECT lock_digest() = :'before' AS unchanged;
SELECT status, attempt FROM hc_attempt_begin('A-6', 'w7', 1, '1 hour', 1);

------------------------------------------------------------------------------
-- Bad input (class 22) and unknown resources: nothing changes.
------------------------------------------------------------------------------
SELECT lock_digest() AS before \gset
SELECT * FROM hc_attempt_begin(NULL, 'w4', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM hc_attempt_begin('A-4', '', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM hc_attempt_begin('A-4', 'w4', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM hc_attempt_begin('A-4', 'w4', 0);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM hc_attempt_begin('A-4', 'w4', 1, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM hc_attempt_begin('A-4', 'w4', 1, '-1 second');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM hc_attempt_begin('A-4', 'w4', 1, '1 minute', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM hc_attempt_begin('A-4', 'w4', 1, '1 minute', 0);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM hc_attempt_complete('A-4', 'w4', 1, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM hc_attempt_complete('A-4', 'w4', 1, '');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM hc_attempt_complete('A-4', 'w4', 1, repeat('x', 256));
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM hc_attempt_complete(repeat('r', 65), 'w4', 1, 'INV-4');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM hc_attempt_reset('A-1', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM hc_attempt_reset('A-1', '');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM hc_attempt_reset('', 'note');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM hc_attempt_reset('A-4', 'nothing was ever attempted');
\echo :LAST_ERROR_SQLSTATE
SELECT lock_digest() = :'before' AS unchanged;

------------------------------------------------------------------------------
-- What operators and auditors see.
------------------------------------------------------------------------------
SELECT resource, status, attempts, max_attempts, attempt_marker(last_marker, last_attempt_at) AS last_marker,
       cooldown_until IS NOT NULL AS cooling, awaiting_review, external_ref, total_attempts,
       reset_note, lease_owner, lease_token
  FROM hc_attempt_status WHERE resource LIKE 'A-%' ORDER BY resource;
SELECT * FROM attempt_ledger('A-1');
SELECT * FROM attempt_ledger('A-3');
SELECT * FROM hc_check();

DROP FUNCTION attempt_marker(text, timestamptz);
DROP FUNCTION attempt_ledger(text);
