-- pgTAP: the dual-layer locking contract (leases, attempts, ledger, errors, grants), tested
-- from outside as an application's own suite would.
--
-- Each call here is its own autocommit statement, as an application's
-- would be; an expected error is caught by psql, and the test reads psql's
-- SQLSTATE variable (00000 after a success).  Resources are named T-*, and
-- everything is cleaned up at the end.  The same calls in one rolled-back
-- transaction, as most pgTAP suites are written: rollback.sql.
\set ON_ERROR_STOP 1
\set QUIET 1
\set VERBOSITY terse
\pset format unaligned
\pset tuples_only true

SELECT plan(100);

------------------------------------------------------------------------------
-- The API as documented
------------------------------------------------------------------------------
SELECT has_function('hc_lock_acquire', ARRAY['text', 'text', 'interval', 'integer'], 'hc_lock_acquire(resource, owner, stale_after, max_retries) exists');
SELECT function_returns('hc_lock_acquire', ARRAY['text', 'text', 'interval', 'integer'], 'bigint', 'hc_lock_acquire returns the token (bigint)');
SELECT function_returns('hc_lock_heartbeat', ARRAY['text', 'text', 'bigint'], 'timestamp with time zone', 'hc_lock_heartbeat returns timestamptz');
SELECT function_returns('hc_lock_release', ARRAY['text', 'text', 'bigint'], 'boolean', 'hc_lock_release returns boolean');
SELECT function_returns('hc_attempt_begin', ARRAY['text', 'text', 'bigint', 'interval', 'integer', 'text'], 'hc_attempt', 'hc_attempt_begin returns hc_attempt');
SELECT function_returns('hc_attempt_complete', ARRAY['text', 'text', 'bigint', 'text'], 'hc_attempt', 'hc_attempt_complete returns hc_attempt');
SELECT function_returns('hc_attempt_reset', ARRAY['text', 'text'], 'hc_attempt', 'hc_attempt_reset returns hc_attempt');
SELECT columns_are('hc_locks', ARRAY['resource', 'owner', 'token', 'acquired_at', 'heartbeat_at',
                   'stale_after', 'session_pid', 'session_started', 'released_at', 'version', 'updated_at'],
                   'hc_locks has the contract''s columns');
SELECT is(ARRAY(SELECT attname::text FROM pg_attribute WHERE attrelid = 'hc_attempt'::regclass
                    AND attnum > 0 ORDER BY attnum),
          ARRAY['resource', 'status', 'attempt', 'marker', 'external_ref', 'last_attempt_at'],
                  'hc_attempt = (resource, status, attempt, marker, external_ref, last_attempt_at)');

------------------------------------------------------------------------------
-- Leases
------------------------------------------------------------------------------
SELECT is(hc_lock_acquire('T-1', 'webhook'), 1::bigint, 'acquire: a new resource gives token 1');
SELECT is(stale_after, '3 minutes'::interval, 'acquire: stale_after defaults to 3 minutes')
  FROM hc_locks WHERE resource = 'T-1';
SELECT is(hc_lock_acquire('T-1', 'webhook'), 1::bigint, 'acquire: the same owner gets its token back');
SELECT is(hc_lock_acquire('T-1', 'scheduler', '3 minutes', 0), NULL, 'acquire: another owner gets NULL (busy)');

SELECT clock_timestamp() AS t0 \gset
SELECT is(hc_lock_acquire('T-1', 'scheduler', '3 minutes', 3), NULL, 'acquire: still busy after 3 retries: NULL');
SELECT ok(clock_timestamp() - :'t0'::timestamptz >= interval '1400 ms',
          'acquire: 3 retries back off at least 200 + 400 + 800 ms');
SELECT ok(clock_timestamp() - :'t0'::timestamptz < interval '10 s',
          'acquire: each backoff is capped (200 ms * 2^(n-1) + jitter, at most 2 s)');

SET statement_timeout = '300ms';
SELECT clock_timestamp() AS t0 \gset
\set ON_ERROR_STOP 0
SELECT hc_lock_acquire('T-1', 'scheduler', '3 minutes', 20);
\set ON_ERROR_STOP 1
SELECT is(:'SQLSTATE'::text, '57014', 'acquire: statement_timeout ends the backoff sleep (57014)');
RESET statement_timeout;
SELECT ok(clock_timestamp() - :'t0'::timestamptz < interval '5 s', 'acquire: ... at once, not after 20 retries');

SELECT hc_lock_heartbeat('T-1', 'webhook', 1) AS beat \gset
SELECT is(heartbeat_at, :'beat'::timestamptz, 'heartbeat: returns the stored heartbeat time')
  FROM hc_locks WHERE resource = 'T-1';
\set ON_ERROR_STOP 0
SELECT hc_lock_heartbeat('T-1', 'scheduler', 1);
\set ON_ERROR_STOP 1
SELECT is(:'SQLSTATE'::text, 'RS007', 'heartbeat: another owner gets RS007');
\set ON_ERROR_STOP 0
SELECT hc_lock_heartbeat('T-1', 'webhook', 2);
\set ON_ERROR_STOP 1
SELECT is(:'SQLSTATE'::text, 'RS007', 'heartbeat: a wrong token gets RS007');
\set ON_ERROR_STOP 0
SELECT hc_lock_heartbeat('T-never', 'webhook', 1);
\set ON_ERROR_STOP 1
SELECT is(:'SQLSTATE'::text, 'RS007', 'heartbeat: a never-held resource gets RS007');

SELECT is(hc_lock_release('T-1', 'scheduler', 1), false, 'release: another owner changes nothing (false)');
SELECT is(hc_lock_release('T-1', 'webhook', 9), false, 'release: a wrong token changes nothing (false)');
SELECT is(hc_lock_release('T-1', 'webhook', 1), true, 'release: the holder frees the lease (true)');
SELECT results_eq($$SELECT owner, token FROM hc_locks WHERE resource = 'T-1'$$,
                  $$VALUES (NULL::text, 1::bigint)$$, 'release: the row and its token stay');
SELECT is(hc_lock_release('T-1', 'webhook', 1), false, 'release: again: false');
SELECT is(hc_lock_acquire('T-1', 'scheduler', '3 minutes', 0), 2::bigint,
          'acquire after a release: the next token');

-- Wait until a lease is stale (a state, polled every 50 ms, at most 30 s on a busy machine).
CREATE FUNCTION pg_temp.wait_until_stale(r text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1..600 LOOP
    EXIT WHEN (SELECT heartbeat_at + stale_after <= clock_timestamp() FROM hc_locks WHERE resource = r);
    PERFORM pg_sleep(0.05);
  END LOOP;
END $$;

-- Takeover of a stale lease, judged by the holder's stale_after.
SELECT is(hc_lock_acquire('T-2', 'crashing', '1 second', 0), 1::bigint, 'takeover: the first holder gets token 1');
SELECT pg_temp.wait_until_stale('T-2');
SELECT is(hc_lock_acquire('T-2', 'rescuer', '1 hour', 0), 2::bigint, 'takeover: a stale lease is taken over with token 2');
SELECT results_eq($$SELECT event, detail::jsonb ->> 'previous_owner' FROM hc_ledger
                     WHERE kind = 'resource' AND entity_id = 'T-2' ORDER BY seq$$,
                  $$VALUES ('acquire', NULL), ('takeover', 'crashing')$$,
                  'takeover: the ledger records the takeover and whom it fenced off');
\set ON_ERROR_STOP 0
SELECT hc_lock_heartbeat('T-2', 'crashing', 1);
\set ON_ERROR_STOP 1
SELECT is(:'SQLSTATE'::text, 'RS007', 'takeover: the fenced-off holder''s heartbeat gets RS007');
SELECT is(hc_lock_release('T-2', 'crashing', 1), false, 'takeover: the fenced-off holder''s release is false');
SELECT results_eq($$SELECT owner, token, stale FROM hc_lease_status WHERE resource = 'T-2'$$,
                  $$VALUES ('rescuer', 2::bigint, false)$$, 'takeover: hc_lease_status shows the new holder');

-- Bad input: class 22, nothing written.
\set ON_ERROR_STOP 0
SELECT hc_lock_acquire('', 'w');
\set ON_ERROR_STOP 1
SELECT is(:'SQLSTATE'::text, '22023', 'acquire: an empty resource is 22023');
\set ON_ERROR_STOP 0
SELECT hc_lock_acquire('T-9', 'w', '0 seconds');
\set ON_ERROR_STOP 1
SELECT is(:'SQLSTATE'::text, '22023', 'acquire: stale_after <= 0 is 22023');
\set ON_ERROR_STOP 0
SELECT hc_lock_acquire('T-9', 'w', '1 minute', -1);
\set ON_ERROR_STOP 1
SELECT is(:'SQLSTATE'::text, '22023', 'acquire: max_retries < 0 is 22023');
\set ON_ERROR_STOP 0
SELECT hc_lock_acquire('T-9', NULL);
\set ON_ERROR_STOP 1
SELECT is(:'SQLSTATE'::text, '22004', 'acquire: a null owner is 22004');
\set ON_ERROR_STOP 0
SELECT hc_lock_acquire('T-9', repeat('w', 65));
\set ON_ERROR_STOP 1
SELECT is(:'SQLSTATE'::text, '22001', 'acquire: an owner over 64 bytes is 22001');
SELECT is_empty($$SELECT FROM hc_locks WHERE resource = 'T-9'$$, 'bad input wrote nothing');

------------------------------------------------------------------------------
-- Durability: committed before the call returns, in any context
------------------------------------------------------------------------------
SELECT lives_ok($$SELECT hc_lock_acquire('T-3', 'w', '1 minute', 0)$$,
                'durability: acquire in a subtransaction (throws_ok, lives_ok) works');
SELECT is(hc_lock_acquire('T-3', 'other', '1 minute', 0), NULL::bigint,
          'durability: ... and its lease stays when the subtransaction ends');
SELECT throws_ok($$SELECT hc_lock_heartbeat('T-3', 'w', 2)$$, 'RS007', NULL,
                 'durability: RS007 can be tested with throws_ok');
SELECT throws_ok($$SELECT hc_lock_release('T-3', '', 1)$$, '22023', NULL,
                 'durability: 22023 can be tested with throws_ok');
SELECT throws_ok($t$DO $do$ BEGIN PERFORM hc_lock_release('T-3', 'w', 1); RAISE EXCEPTION 'after'; END $do$$t$,
                 'P0001', 'after', 'durability: a release in a block that fails');
SELECT is((SELECT owner FROM hc_locks WHERE resource = 'T-3'), NULL,
          'durability: ... is committed all the same');
BEGIN;
SELECT hc_lock_acquire('T-3', 'w', '1 minute', 0) AS in_block \gset
ROLLBACK;
SELECT is(:'in_block'::bigint, 2::bigint, 'durability: acquire in an explicit transaction block: token 2');
SELECT is((SELECT owner || ' ' || token FROM hc_locks WHERE resource = 'T-3'), 'w 2',
          'durability: ... and the ROLLBACK keeps the lease');
\set ON_ERROR_STOP 0
SELECT hc_lock_release('T-3', 'w', 2), 1 / (random() * 0)::int;
\set ON_ERROR_STOP 1
SELECT is((SELECT owner FROM hc_locks WHERE resource = 'T-3'), NULL,
          'durability: a statement failing after release: the lease is free');

------------------------------------------------------------------------------
-- The point-of-no-return guard
------------------------------------------------------------------------------
SELECT is(hc_lock_acquire('T-4', 'webhook', '1 hour', 0), 1::bigint, 'attempt: the webhook leases T-4');
\set ON_ERROR_STOP 0
SELECT hc_attempt_begin('T-4', 'scheduler', 1);
\set ON_ERROR_STOP 1
SELECT is(:'SQLSTATE'::text, 'RS007', 'attempt: begin without the lease is RS007');
SELECT r.* FROM hc_attempt_begin('T-4', 'webhook', 1, request_key => 'T-4-req') r \gset a1_
SELECT is(:'a1_status'::text, 'PROCEED', 'attempt: the first begin says PROCEED');
SELECT is(:'a1_attempt'::int, 1, 'attempt: ... attempt 1');
SELECT matches(:'a1_marker'::text, '^ATTEMPTED-webhook-r1-t[0-9]{13}$', 'attempt: marker ATTEMPTED-{owner}-r{n}-t{unix_ms}');
SELECT is(substring(:'a1_marker' FROM '-t([0-9]+)$')::bigint,
          floor(extract(epoch FROM :'a1_last_attempt_at'::timestamptz) * 1000)::bigint,
          'attempt: the marker''s time is last_attempt_at in unix ms');
SELECT is((hc_attempt_begin('T-4', 'webhook', 1, request_key => 'T-4-req')).marker, :'a1_marker',
          'attempt: the same request (its request_key) within the default 10 minute cooldown: the same attempt back');
SELECT is((hc_attempt_begin('T-4', 'webhook', 1)).status, 'COOLDOWN',
          'attempt: the same owner and token without that key: COOLDOWN');
SELECT is(ARRAY[status::text, attempt::text], ARRAY['PROCEED', '2'], 'attempt: with no cooldown the next attempt PROCEEDs')
  FROM hc_attempt_begin('T-4', 'webhook', 1, '0 seconds', 2);
SELECT is(ARRAY[status::text, attempt::text], ARRAY['MANUAL_REVIEW', '2'], 'attempt: at the cap: MANUAL_REVIEW')
  FROM hc_attempt_begin('T-4', 'webhook', 1, '0 seconds', 2);
SELECT is((hc_attempt_begin('T-4', 'webhook', 1, '0 seconds', 100)).status, 'MANUAL_REVIEW',
          'attempt: MANUAL_REVIEW is sticky, whatever the next caller''s cap');
SELECT results_eq($$SELECT status, attempts, awaiting_review FROM hc_attempt_status WHERE resource = 'T-4'$$,
                  $$VALUES ('MANUAL_REVIEW', 2, true)$$, 'attempt: hc_attempt_status shows it awaits review');
-- The lease moves on; the attempts stay with the resource.
SELECT is(hc_lock_release('T-4', 'webhook', 1), true, 'attempt: the webhook releases');
SELECT is(hc_lock_acquire('T-4', 'scheduler', '1 hour', 0), 2::bigint, 'attempt: the scheduler leases T-4');
SELECT is((hc_attempt_begin('T-4', 'scheduler', 2, '0 seconds', 5)).status, 'MANUAL_REVIEW',
          'attempt: the new holder also sees MANUAL_REVIEW');
SELECT is(ARRAY[status::text, attempt::text], ARRAY['PROCEED', '0'], 'reset: PROCEED, the count starts from 0')
  FROM hc_attempt_reset('T-4', 'ERP: no invoice for T-4');
SELECT is(ARRAY[status::text, attempt::text], ARRAY['PROCEED', '1'], 'reset: the cooldown is cleared too: attempt 1 PROCEEDs')
  FROM hc_attempt_begin('T-4', 'scheduler', 2);
SELECT is(ARRAY[status::text, external_ref::text], ARRAY['COMPLETED', 'INV-T4'], 'complete: COMPLETED with its external_ref')
  FROM hc_attempt_complete('T-4', 'scheduler', 2, 'INV-T4');
SELECT is(ARRAY[status::text, external_ref::text], ARRAY['COMPLETED', 'INV-T4'], 'complete: a replay returns the same row')
  FROM hc_attempt_complete('T-4', 'scheduler', 2, 'INV-T4');
\set ON_ERROR_STOP 0
SELECT hc_attempt_complete('T-4', 'scheduler', 2, 'INV-OTHER');
\set ON_ERROR_STOP 1
SELECT is(:'SQLSTATE'::text, 'RS004', 'complete: another external_ref is RS004');
SELECT is(ARRAY[status::text, external_ref::text], ARRAY['COMPLETED', 'INV-T4'], 'begin after complete: COMPLETED with the reference')
  FROM hc_attempt_begin('T-4', 'scheduler', 2, '0 seconds', 5);
\set ON_ERROR_STOP 0
SELECT hc_attempt_reset('T-4', 'again');
\set ON_ERROR_STOP 1
SELECT is(:'SQLSTATE'::text, 'RS004', 'reset: a COMPLETED resource cannot be reset (RS004)');
\set ON_ERROR_STOP 0
SELECT hc_attempt_reset('T-unknown', 'check');
\set ON_ERROR_STOP 1
SELECT is(:'SQLSTATE'::text, 'RS006', 'reset: an unknown resource is RS006');
SELECT is(ARRAY(SELECT event FROM hc_ledger WHERE kind = 'resource' AND entity_id = 'T-4' ORDER BY seq),
          ARRAY['acquire', 'attempt', 'attempt', 'review', 'release', 'acquire', 'reset', 'attempt', 'complete'],
                  'ledger: every state change of T-4, no row per heartbeat or refused call');
SELECT is_empty('SELECT * FROM hc_check()', 'hc_check() is empty after the lease and attempt scenarios');

------------------------------------------------------------------------------
-- Writes fenced by the token: hc_lock_check in the application's transaction
------------------------------------------------------------------------------
SELECT function_returns('hc_lock_check', ARRAY['text', 'text', 'bigint'], 'void', 'hc_lock_check returns void');
CREATE TABLE tap_invoices (order_id text PRIMARY KEY, fenced_by bigint NOT NULL);
SELECT is(hc_lock_acquire('T-6', 'erp-worker', '1 second', 0), 1::bigint, 'check: the ERP worker holds T-6 with token 1');
BEGIN;
SELECT lives_ok($$SELECT hc_lock_check('T-6', 'erp-worker', 1)$$, 'check: the holder''s token passes in its transaction');
INSERT INTO tap_invoices VALUES ('o-6', 1);
-- Until T-6's lease is stale (its stale_after is 1 second).
SELECT pg_temp.wait_until_stale('T-6');
SELECT ok((SELECT heartbeat_at + stale_after <= clock_timestamp() FROM hc_locks WHERE resource = 'T-6'),
          'check: the lease of T-6 is stale now');
SELECT is(hc_lock_acquire('T-6', 'other-worker', '1 minute', 0), NULL::bigint,
          'check: the lease went stale meanwhile, and is not taken over while the transaction is open');
SELECT is(hc_lock_acquire('T-6', 'erp-worker', '1 second', 0), NULL::bigint,
          'check: nor acquired again by its holder, which would hand out a new token');
COMMIT;
SELECT throws_ok($$SELECT hc_lock_check('T-6', 'erp-worker', 1)$$, 'RS007', NULL,
                 'check: a stale lease is refused, though nobody has taken it over (anyone may)');
SELECT is((SELECT 1), 1, 'check: the session is usable after the refusal');
SELECT ok(hc_lock_heartbeat('T-6', 'erp-worker', 1) IS NOT NULL, 'check: a heartbeat makes it fresh again');
SELECT lives_ok($$SELECT hc_lock_check('T-6', 'erp-worker', 1)$$, 'check: and the check passes');
-- Until T-6's lease is stale (its stale_after is 1 second).
SELECT pg_temp.wait_until_stale('T-6');
SELECT ok((SELECT heartbeat_at + stale_after <= clock_timestamp() FROM hc_locks WHERE resource = 'T-6'),
          'check: the lease of T-6 is stale now');
SELECT is(hc_lock_acquire('T-6', 'other-worker', '1 minute', 0), 2::bigint,
          'check: with no check open, the stale lease is taken over: token 2');
SELECT throws_ok($$SELECT hc_lock_check('T-6', 'erp-worker', 1)$$, 'RS007', NULL,
                 'check: the former holder''s token is refused (RS007)');
SELECT lives_ok($$SELECT hc_lock_check('T-6', 'other-worker', 2)$$, 'check: the new holder''s passes');
SELECT throws_ok($$SELECT hc_lock_check('T-never', 'erp-worker', 1)$$, 'RS007', NULL,
                 'check: a resource never leased is refused (RS007)');
SELECT is(fenced_by, 1::bigint, 'check: the invoice is the one written under token 1')
  FROM tap_invoices WHERE order_id = 'o-6';
DROP TABLE tap_invoices;

------------------------------------------------------------------------------
-- Privileges
------------------------------------------------------------------------------
SET client_min_messages = warning;
DROP ROLE IF EXISTS tap_lock_app;
DROP ROLE IF EXISTS tap_lock_ops;
RESET client_min_messages;
CREATE ROLE tap_lock_app;
CREATE ROLE tap_lock_ops;
SELECT hc_grant_app('tap_lock_app');
SELECT hc_grant_operator('tap_lock_ops');
SELECT ok(has_function_privilege('tap_lock_app', 'hc_lock_acquire(text, text, interval, integer)', 'EXECUTE')
      AND has_function_privilege('tap_lock_app', 'hc_lock_heartbeat(text, text, bigint)', 'EXECUTE')
      AND has_function_privilege('tap_lock_app', 'hc_lock_release(text, text, bigint)', 'EXECUTE')
      AND has_function_privilege('tap_lock_app', 'hc_lock_check(text, text, bigint)', 'EXECUTE')
      AND has_function_privilege('tap_lock_app', 'hc_attempt_begin(text, text, bigint, interval, integer, text)', 'EXECUTE')
      AND has_function_privilege('tap_lock_app', 'hc_attempt_complete(text, text, bigint, text)', 'EXECUTE'),
          'privileges: hc_grant_app grants the lease and attempt calls');
SELECT ok(NOT has_function_privilege('tap_lock_app', 'hc_attempt_reset(text, text)', 'EXECUTE'),
          'privileges: an app cannot reset attempts (operator only)');
SELECT ok(has_function_privilege('tap_lock_ops', 'hc_attempt_reset(text, text)', 'EXECUTE'),
          'privileges: hc_grant_operator grants hc_attempt_reset');
SELECT ok(has_table_privilege('tap_lock_app', 'hc_locks', 'SELECT')
      AND has_table_privilege('tap_lock_app', 'hc_attempts', 'SELECT')
      AND has_table_privilege('tap_lock_app', 'hc_lease_status', 'SELECT')
      AND has_table_privilege('tap_lock_app', 'hc_attempt_status', 'SELECT'),
          'privileges: the app reads hc_locks, hc_attempts and both views');
SELECT ok(NOT has_table_privilege('tap_lock_app', 'hc_locks', 'INSERT, UPDATE, DELETE')
      AND NOT has_table_privilege('tap_lock_app', 'hc_attempts', 'INSERT, UPDATE, DELETE'),
          'privileges: the app cannot write hc_locks or hc_attempts');
SELECT ok(NOT has_table_privilege('public', 'hc_lease_status', 'SELECT')
      AND NOT has_table_privilege('public', 'hc_attempt_status', 'SELECT')
      AND NOT has_function_privilege('public', 'hc_lock_acquire(text, text, interval, integer)', 'EXECUTE'),
          'privileges: PUBLIC gets nothing');
SET ROLE tap_lock_app;
SELECT is(hc_lock_acquire('T-5', 'app-worker', '1 minute', 0), 1::bigint, 'privileges: the app role acquires');
SELECT lives_ok($$SELECT hc_lock_check('T-5', 'app-worker', 1)$$, 'privileges: the app role checks its lease');
RESET ROLE;
SELECT is(actor, 'tap_lock_app', 'privileges: the ledger records the app role as the actor')
  FROM hc_ledger WHERE kind = 'resource' AND entity_id = 'T-5';
SELECT is_empty('SELECT * FROM hc_check()', 'hc_check() is empty at the end');

SELECT * FROM finish();

-- Clean up: this suite committed its work.
DROP OWNED BY tap_lock_app, tap_lock_ops;
DROP ROLE tap_lock_app, tap_lock_ops;
DELETE FROM hc_ledger WHERE kind = 'resource' AND entity_id LIKE 'T-%';
DELETE FROM hc_attempts WHERE resource LIKE 'T-%';
DELETE FROM hc_locks WHERE resource LIKE 'T-%';
