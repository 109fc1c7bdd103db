-- pgTAP in the usual style: one transaction, rolled back at the end.  Every
-- lease and attempt function works inside it, throws_ok and lives_ok (each a
-- subtransaction) test their errors, and what they change is committed by
-- holdcommit at once: the ROLLBACK does not take it back.  So the resources
-- are named after this run (a fresh suffix each time).
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
SELECT 'tap-' || md5(random()::text) AS run \gset

BEGIN;
SELECT plan(30);

SELECT is(hc_lock_acquire(:'run' || '-pay', 'webhook', '1 hour', 0), 1::bigint,
          'acquire: token 1, in a transaction block');
SELECT is(hc_lock_acquire(:'run' || '-pay', 'webhook', '1 hour', 0), 1::bigint,
          'acquire: the same owner gets its token back');
SELECT is(hc_lock_acquire(:'run' || '-pay', 'scheduler', '1 hour', 0), NULL::bigint,
          'acquire: another owner gets NULL while it is held');
SELECT is(hc_lock_acquire_session(:'run' || '-report', 'nightly', '1 hour', 0), 1::bigint,
          'acquire_session: token 1, bound to this session');
SELECT isnt(hc_lock_heartbeat(:'run' || '-pay', 'webhook', 1), NULL, 'heartbeat: the holder keeps its lease');
SELECT throws_ok(format('SELECT hc_lock_heartbeat(%L, %L, 2)', :'run' || '-pay', 'webhook'),
                 'RS007', NULL, 'heartbeat: a wrong token is RS007');
SELECT throws_ok(format('SELECT hc_lock_heartbeat(%L, %L, 1)', :'run' || '-pay', 'scheduler'),
                 'RS007', NULL, 'heartbeat: another owner is RS007');
SELECT throws_ok(format('SELECT hc_lock_acquire(%L, %L)', '', 'webhook'),
                 '22023', 'resource must not be empty', 'acquire: an empty resource is 22023');
SELECT throws_ok(format('SELECT hc_lock_acquire(%L, %L, %L)', :'run' || '-pay', 'webhook', '0 seconds'),
                 '22023', NULL, 'acquire: stale_after <= 0 is 22023');
SELECT throws_ok(format('SELECT hc_attempt_begin(%L, %L, 1, %L, 0)', :'run' || '-pay', 'webhook', '1 hour'),
                 '22023', NULL, 'begin: max_attempts < 1 is 22023');
SELECT throws_ok(format('SELECT hc_attempt_begin(%L, %L, 1)', :'run' || '-pay', 'scheduler'),
                 'RS007', NULL, 'begin: without the lease is RS007');

SELECT is((hc_attempt_begin(:'run' || '-pay', 'webhook', 1, '1 hour', 2, 'req-1')).status, 'PROCEED',
          'begin: PROCEED, attempt 1');
SELECT is(ARRAY[(a).status, (a).attempt::text], ARRAY['PROCEED', '1'],
          'begin: the same request (its request_key) asks again within the cooldown: the same attempt back')
  FROM (SELECT hc_attempt_begin(:'run' || '-pay', 'webhook', 1, '1 hour', 2, 'req-1') AS a) s;
SELECT is((hc_attempt_begin(:'run' || '-pay', 'webhook', 1, '1 hour', 2)).status, 'COOLDOWN',
          'begin: the same owner and token without the key: COOLDOWN');
SELECT ok(hc_lock_release(:'run' || '-pay', 'webhook', 1), 'release: the holder frees the lease');
SELECT is(hc_lock_acquire(:'run' || '-pay', 'scheduler', '1 hour', 0), 2::bigint,
          'acquire: the next holder gets token 2');
SELECT is((hc_attempt_begin(:'run' || '-pay', 'scheduler', 2, '1 hour', 2)).status, 'COOLDOWN',
          'begin: the next holder sees the attempt: COOLDOWN');
SELECT is((hc_attempt_begin(:'run' || '-pay', 'scheduler', 2, '0 seconds', 2)).attempt, 2,
          'begin: without a cooldown: attempt 2');
SELECT is((hc_attempt_begin(:'run' || '-pay', 'scheduler', 2, '0 seconds', 2)).status, 'MANUAL_REVIEW',
          'begin: at the cap: MANUAL_REVIEW');
SELECT throws_ok(format('SELECT hc_attempt_reset(%L, %L)', :'run' || '-pay', ''),
                 '22023', NULL, 'reset: an empty note is 22023');
SELECT is((hc_attempt_reset(:'run' || '-pay', 'ERP checked: no invoice')).status, 'PROCEED',
          'reset: PROCEED, attempts counted from 0');
SELECT throws_ok(format('SELECT hc_attempt_reset(%L, %L)', :'run' || '-never', 'checked'),
                 'RS006', NULL, 'reset: a resource never guarded is RS006');
SELECT is((hc_attempt_complete(:'run' || '-pay', 'scheduler', 2, 'INV-1')).status, 'COMPLETED',
          'complete: COMPLETED');
SELECT throws_ok(format('SELECT hc_attempt_complete(%L, %L, 2, %L)', :'run' || '-pay', 'scheduler', 'INV-2'),
                 'RS004', NULL, 'complete: another external_ref is RS004');
SELECT lives_ok(format('SELECT hc_attempt_complete(%L, %L, 2, %L)', :'run' || '-pay', 'scheduler', 'INV-1'),
                'complete: a replay lives');
SELECT is((hc_attempt_begin(:'run' || '-pay', 'scheduler', 2)).status, 'COMPLETED',
          'begin: after complete: COMPLETED, never again');
SELECT ok(hc_lock_release(:'run' || '-report', 'nightly', 1), 'release: the session-bound lease');
-- A subtransaction that takes a lease, then fails: the lease stays taken.
SELECT throws_ok(format('DO $do$ BEGIN PERFORM hc_lock_acquire(%L, %L, %L, 0); RAISE EXCEPTION %L; END $do$',
                        :'run' || '-sub', 'worker-a', '1 hour', 'the ERP call failed'),
                 'P0001', 'the ERP call failed', 'a subtransaction acquires, then fails');
SELECT is(hc_lock_acquire(:'run' || '-sub', 'worker-b', '1 hour', 0), NULL::bigint,
          'the lease it took is still held: another owner gets NULL');
SELECT is_empty('SELECT * FROM hc_check()', 'hc_check() is empty');
SELECT * FROM finish();
ROLLBACK;
