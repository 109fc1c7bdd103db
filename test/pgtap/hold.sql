-- pgTAP: the unique-asset contract, tested from
-- outside as an application's own suite would.  Everything runs in one
-- transaction that is rolled back, roles included.
--
-- Holds whose expiry a scenario needs are taken at the start with a 1 second
-- ttl; one pg_sleep before the expiry scenarios lets them all lapse.  Every
-- call reads clock_timestamp(), so time passes inside this transaction.
\ir include/contract.sql

BEGIN;
SELECT plan(165);

SELECT count(hc_asset_add(id, 'test asset ' || id)) AS n_assets
  FROM unnest(ARRAY['A1', 'A2', 'A-second', 'A-rel', 'A-ext', 'A-exp', 'A-late',
                    'A-late2', 'A-late3', 'A-recl', 'A-val', 'A-ttl', 'A-priv']) AS id \gset

-- Short holds that the expiry scenarios below need expired.
SELECT r.* FROM hc_hold('A-exp', 'buyer-exp', 'key-exp', '1 second') r \gset exp_
SELECT r.* FROM hc_hold('A-late', 'buyer-late', 'key-late', '1 second') r \gset late_
SELECT r.* FROM hc_hold('A-late2', 'buyer-late2', 'key-late2', '1 second') r \gset late2_
SELECT r.* FROM hc_hold('A-late3', 'buyer-late3', 'key-late3', '1 second') r \gset late3_
SELECT r.* FROM hc_hold('A-recl', 'buyer-recl-1', 'key-recl-1', '1 second') r \gset recl1_

------------------------------------------------------------------------------
-- Hold (the 201 analogue)
------------------------------------------------------------------------------
SELECT clock_timestamp() AS t0 \gset
SELECT r.* FROM hc_hold('A1', 'buyer-1', 'key-A1-1', '10 minutes') r \gset h1_
SELECT clock_timestamp() AS t1 \gset

SELECT is(:'h1_replayed'::boolean, false, 'hold: a new hold is not a replay');
SELECT is(:'h1_status'::text, 'HELD', 'hold: status HELD');
SELECT is(:'h1_asset_id'::text, 'A1', 'hold: returns the asset');
SELECT is(:'h1_buyer_id'::text, 'buyer-1', 'hold: returns the buyer');
SELECT pg_temp.new_reservation('hold', :'h1_reservation_id', :'h1_created_at', :'h1_expires_at',
                               :'t0', :'t1', '10 minutes');
SELECT results_eq(
    format('SELECT status, current_reservation_id, hold_expires_at FROM hc_assets WHERE id = %L', 'A1'),
    format('VALUES (%L, %L, %L::timestamptz)', 'HELD', :'h1_reservation_id', :'h1_expires_at'),
    'hold: asset is HELD by the reservation until expires_at');
SELECT results_eq(
    format('SELECT asset_id, buyer_id, idempotency_key, status, expires_at, created_at
              FROM hc_reservations WHERE id = %L', :'h1_reservation_id'),
    format('VALUES (%L, %L, %L, %L, %L::timestamptz, %L::timestamptz)',
           'A1', 'buyer-1', 'key-A1-1', 'HELD', :'h1_expires_at', :'h1_created_at'),
    'hold: reservation row stored as returned');
SELECT results_eq(
    format('SELECT at FROM hc_ledger WHERE reservation_id = %L AND event = %L',
           :'h1_reservation_id', 'hold'),
    format('VALUES (%L::timestamptz)', :'h1_created_at'),
    'hold: the ledger row carries the same single clock reading');
SELECT is_empty('SELECT * FROM hc_check()', 'hold: hc_check() is empty');

------------------------------------------------------------------------------
-- Replay with the same key (the 200 analogue)
------------------------------------------------------------------------------
SELECT r.* FROM hc_hold('A1', 'buyer-1', 'key-A1-1', '10 minutes') r \gset h1r_
SELECT is(:'h1r_reservation_id'::text, :'h1_reservation_id', 'replay: same reservation id');
SELECT is(:'h1r_replayed'::boolean, true, 'replay: replayed = true');
SELECT is(:'h1r_status'::text, 'HELD', 'replay: status HELD');
SELECT is(:'h1r_expires_at'::timestamptz, :'h1_expires_at'::timestamptz, 'replay: same expires_at');
SELECT is(:'h1r_created_at'::timestamptz, :'h1_created_at'::timestamptz, 'replay: same created_at');
SELECT is((SELECT count(*)::int FROM hc_reservations WHERE asset_id = 'A1'), 1,
          'replay: still one reservation for the asset');
SELECT is((SELECT count(*)::int FROM hc_ledger WHERE entity_id = 'A1' AND event = 'hold'), 1,
          'replay: no new ledger row');
SELECT is_empty('SELECT * FROM hc_check()', 'replay: hc_check() is empty');

------------------------------------------------------------------------------
-- Same key, different arguments: RS005 (idempotency is checked before existence)
------------------------------------------------------------------------------
SELECT pg_temp.hc_state() AS state \gset
SELECT throws_ok($$SELECT hc_hold('A1', 'buyer-other', 'key-A1-1', '10 minutes')$$, 'RS005',
                 NULL, 'key reuse: other buyer throws RS005');
SELECT throws_ok($$SELECT hc_hold('A1', 'buyer-1', 'key-A1-1', '11 minutes')$$, 'RS005',
                 NULL, 'key reuse: other ttl throws RS005');
SELECT throws_ok($$SELECT hc_hold('A2', 'buyer-1', 'key-A1-1', '10 minutes')$$, 'RS005',
                 NULL, 'key reuse: other (available) asset throws RS005');
SELECT throws_ok($$SELECT hc_hold('no-such-asset', 'buyer-1', 'key-A1-1', '10 minutes')$$, 'RS005',
                 NULL, 'key reuse: other, unknown asset throws RS005 (idempotency before existence)');
SELECT is(pg_temp.hc_state(), :'state', 'key reuse: state unchanged');
SELECT results_eq($$SELECT status FROM hc_assets WHERE id = 'A2'$$, $$VALUES ('AVAILABLE')$$,
                  'key reuse: the other asset is still AVAILABLE');
SELECT is_empty('SELECT * FROM hc_check()', 'key reuse: hc_check() is empty');

------------------------------------------------------------------------------
-- Second buyer: RS001, and a failed hold stores nothing
------------------------------------------------------------------------------
SELECT pg_temp.hc_state() AS state \gset
SELECT throws_ok($$SELECT hc_hold('A1', 'buyer-2', 'key-A1-2', '10 minutes')$$, 'RS001',
                 NULL, 'second buyer: throws RS001');
SELECT is(pg_temp.hc_state(), :'state', 'second buyer: state unchanged');
SELECT results_eq($$SELECT status FROM hc_assets WHERE id = 'A1'$$, $$VALUES ('HELD')$$,
                  'second buyer: the asset is still HELD');
-- Had the failed call stored its key, reusing it for another request would be RS005.
SELECT r.* FROM hc_hold('A-second', 'buyer-2', 'key-A1-2', '10 minutes') r \gset sec_
SELECT is(:'sec_replayed'::boolean, false,
          'second buyer: the failed key is free for a new request (nothing stored)');
SELECT is_empty('SELECT * FROM hc_check()', 'second buyer: hc_check() is empty');

------------------------------------------------------------------------------
-- Unknown asset: RS006
------------------------------------------------------------------------------
SELECT pg_temp.hc_state() AS state \gset
SELECT throws_ok($$SELECT hc_hold('no-such-asset', 'buyer-1', 'key-unknown')$$, 'RS006',
                 NULL, 'unknown asset: throws RS006');
SELECT is(pg_temp.hc_state(), :'state', 'unknown asset: state unchanged');
SELECT throws_ok($$SELECT hc_commit('res_00000000000000000000000000')$$, 'RS006',
                 NULL, 'unknown reservation: commit throws RS006');
SELECT throws_ok($$SELECT hc_release('res_00000000000000000000000000')$$, 'RS006',
                 NULL, 'unknown reservation: release throws RS006');
SELECT throws_ok($$SELECT hc_extend('res_00000000000000000000000000', '1 minute')$$, 'RS006',
                 NULL, 'unknown reservation: extend throws RS006');
SELECT is_empty('SELECT * FROM hc_check()', 'unknown asset: hc_check() is empty');

------------------------------------------------------------------------------
-- Commit: SOLD / COMMITTED
------------------------------------------------------------------------------
SELECT r.* FROM hc_commit(:'h1_reservation_id') r \gset c1_
SELECT is(:'c1_reservation_id'::text, :'h1_reservation_id', 'commit: same reservation');
SELECT is(:'c1_status'::text, 'COMMITTED', 'commit: status COMMITTED');
SELECT is(:'c1_replayed'::boolean, false, 'commit: first commit is not a replay');
SELECT results_eq(
    $$SELECT status, current_reservation_id, hold_expires_at FROM hc_assets WHERE id = 'A1'$$,
    format('VALUES (%L, %L, NULL::timestamptz)', 'SOLD', :'h1_reservation_id'),
    'commit: asset SOLD to the reservation, no hold expiry');
SELECT results_eq(
    format('SELECT status, ended_at IS NOT NULL FROM hc_reservations WHERE id = %L', :'h1_reservation_id'),
    $$VALUES ('COMMITTED', true)$$,
    'commit: reservation COMMITTED and ended');
SELECT throws_ok($$SELECT hc_hold('A1', 'buyer-3', 'key-A1-3')$$, 'RS001',
                 NULL, 'commit: a sold asset cannot be held (RS001)');
SELECT is_empty('SELECT * FROM hc_check()', 'commit: hc_check() is empty');

------------------------------------------------------------------------------
-- Commit twice: the payment webhook arrives again
------------------------------------------------------------------------------
SELECT r.* FROM hc_commit(:'h1_reservation_id') r \gset c2_
SELECT is(:'c2_reservation_id'::text, :'h1_reservation_id', 'commit twice: same reservation');
SELECT is(:'c2_status'::text, 'COMMITTED', 'commit twice: status COMMITTED');
SELECT is(:'c2_replayed'::boolean, true, 'commit twice: replayed = true');
SELECT is((SELECT count(*)::int FROM hc_ledger WHERE entity_id = 'A1' AND event = 'commit'), 1,
          'commit twice: one commit in the ledger');
SELECT r.* FROM hc_hold('A1', 'buyer-1', 'key-A1-1', '10 minutes') r \gset h1rr_
SELECT is(:'h1rr_reservation_id'::text, :'h1_reservation_id',
          'commit twice: the hold key still replays the same reservation after the sale');
SELECT is(:'h1rr_replayed'::boolean, true, 'commit twice: ... with replayed = true');
SELECT is_empty('SELECT * FROM hc_check()', 'commit twice: hc_check() is empty');

------------------------------------------------------------------------------
-- Release: AVAILABLE / RELEASED
------------------------------------------------------------------------------
SELECT r.* FROM hc_hold('A-rel', 'buyer-rel', 'key-rel', '10 minutes') r \gset rel_
SELECT r.* FROM hc_release(:'rel_reservation_id') r \gset rel1_
SELECT is(:'rel1_reservation_id'::text, :'rel_reservation_id', 'release: same reservation');
SELECT is(:'rel1_status'::text, 'RELEASED', 'release: status RELEASED');
SELECT is(:'rel1_replayed'::boolean, false, 'release: first release is not a replay');
SELECT results_eq(
    $$SELECT status, current_reservation_id, hold_expires_at FROM hc_assets WHERE id = 'A-rel'$$,
    $$VALUES ('AVAILABLE', NULL::text, NULL::timestamptz)$$,
    'release: asset AVAILABLE at once');
SELECT results_eq(
    format('SELECT status FROM hc_reservations WHERE id = %L', :'rel_reservation_id'),
    $$VALUES ('RELEASED')$$, 'release: reservation RELEASED');
SELECT r.* FROM hc_release(:'rel_reservation_id') r \gset rel2_
SELECT is(:'rel2_status'::text, 'RELEASED', 'release twice: status RELEASED');
SELECT is(:'rel2_replayed'::boolean, true, 'release twice: replayed = true');
SELECT throws_ok(format('SELECT hc_commit(%L)', :'rel_reservation_id'), 'RS004',
                 NULL, 'release: commit after release throws RS004');
SELECT throws_ok(format('SELECT hc_commit(%L, true)', :'rel_reservation_id'), 'RS004',
                 NULL, 'release: late_ok commit after release throws RS004');
SELECT throws_ok(format('SELECT hc_extend(%L, %L)', :'rel_reservation_id', '5 minutes'), 'RS004',
                 NULL, 'release: extend after release throws RS004');
SELECT r.* FROM hc_hold('A-rel', 'buyer-rel-2', 'key-rel-2', '10 minutes') r \gset rel3_
SELECT is(:'rel3_status'::text, 'HELD', 'release: the next buyer can hold the released asset');
SELECT is_empty('SELECT * FROM hc_check()', 'release: hc_check() is empty');

------------------------------------------------------------------------------
-- Release after commit: RS004
------------------------------------------------------------------------------
SELECT pg_temp.hc_state() AS state \gset
SELECT throws_ok(format('SELECT hc_release(%L)', :'h1_reservation_id'), 'RS004',
                 NULL, 'release after commit: throws RS004');
SELECT throws_ok(format('SELECT hc_extend(%L, %L)', :'h1_reservation_id', '5 minutes'), 'RS004',
                 NULL, 'extend after commit: throws RS004');
SELECT is(pg_temp.hc_state(), :'state', 'release after commit: state unchanged');
SELECT is_empty('SELECT * FROM hc_check()', 'release after commit: hc_check() is empty');

------------------------------------------------------------------------------
-- Extend
------------------------------------------------------------------------------
SELECT r.* FROM hc_hold('A-ext', 'buyer-ext', 'key-ext', '1 minute') r \gset ext_
SELECT clock_timestamp() AS t0 \gset
SELECT r.* FROM hc_extend(:'ext_reservation_id', '30 minutes') r \gset ext1_
SELECT clock_timestamp() AS t1 \gset
SELECT is(:'ext1_status'::text, 'HELD', 'extend: still HELD');
SELECT ok(:'ext1_expires_at'::timestamptz
              BETWEEN :'t0'::timestamptz + interval '30 minutes' AND :'t1'::timestamptz + interval '30 minutes',
          'extend: expires_at = now + ttl');
SELECT is(:'ext1_created_at'::timestamptz, :'ext_created_at'::timestamptz, 'extend: created_at unchanged');
SELECT results_eq(
    $$SELECT hold_expires_at FROM hc_assets WHERE id = 'A-ext'$$,
    format('VALUES (%L::timestamptz)', :'ext1_expires_at'),
    'extend: the asset''s hold_expires_at follows');
SELECT r.* FROM hc_extend(:'ext_reservation_id', '1 minute') r \gset ext2_
SELECT is(:'ext2_expires_at'::timestamptz, :'ext1_expires_at'::timestamptz,
          'extend: a shorter ttl never shortens the hold');
SELECT r.* FROM hc_extend(:'ext_reservation_id', '5 hours') r \gset ext3_
SELECT is(:'ext3_expires_at'::timestamptz, :'ext_created_at'::timestamptz + interval '2 hours',
          'extend: capped at created_at + holdcommit.max_hold (2 h)');
SELECT results_eq(
    format('SELECT expires_at FROM hc_reservations WHERE id = %L', :'ext_reservation_id'),
    format('VALUES (%L::timestamptz)', :'ext3_expires_at'),
    'extend: the reservation row follows');
SELECT is((SELECT count(*)::int FROM hc_ledger WHERE entity_id = 'A-ext' AND event = 'extend'), 2,
          'extend: one ledger row per actual change (the no-op extend writes none)');
SELECT is_empty('SELECT * FROM hc_check()', 'extend: hc_check() is empty');

------------------------------------------------------------------------------
-- Expiry: every 1 second hold taken at the start lapses now
------------------------------------------------------------------------------
SELECT pg_sleep(greatest(0, extract(epoch FROM
           (SELECT max(expires_at) FROM hc_reservations
             WHERE asset_id IN ('A-exp', 'A-late', 'A-late2', 'A-late3', 'A-recl'))
           - clock_timestamp())) + 0.2) AS slept \gset

SELECT throws_ok(format('SELECT hc_commit(%L)', :'exp_reservation_id'), 'RS003',
                 NULL, 'expiry: commit after expiry throws RS003');
SELECT throws_ok(format('SELECT hc_extend(%L, %L)', :'exp_reservation_id', '5 minutes'), 'RS003',
                 NULL, 'expiry: extend after expiry throws RS003');
SELECT isnt((SELECT status FROM hc_assets WHERE id = 'A-exp'), 'SOLD',
            'expiry: the asset was not sold');
SELECT r.* FROM hc_release(:'exp_reservation_id') r \gset expr_
SELECT is(:'expr_status'::text, 'EXPIRED', 'expiry: release of an expired hold returns it EXPIRED');
SELECT is(:'expr_replayed'::boolean, true, 'expiry: ... with replayed = true');
SELECT throws_ok(format('SELECT hc_commit(%L)', :'exp_reservation_id'), 'RS003',
                 NULL, 'expiry: commit of an EXPIRED reservation still throws RS003');
SELECT is_empty('SELECT * FROM hc_check()', 'expiry: hc_check() is empty');

------------------------------------------------------------------------------
-- late_ok: an expired hold still commits if nobody took the asset since
------------------------------------------------------------------------------
SELECT r.* FROM hc_commit(:'late_reservation_id', late_ok => true) r \gset latec_
SELECT is(:'latec_status'::text, 'COMMITTED', 'late_ok: nobody took the asset, commit succeeds');
SELECT is(:'latec_replayed'::boolean, false, 'late_ok: not a replay');
SELECT results_eq(
    $$SELECT status, current_reservation_id FROM hc_assets WHERE id = 'A-late'$$,
    format('VALUES (%L, %L)', 'SOLD', :'late_reservation_id'),
    'late_ok: asset SOLD to the late reservation');
SELECT is_empty('SELECT * FROM hc_check()', 'late_ok: hc_check() is empty');

-- Another buyer holds the asset now: RS003 even with late_ok.
SELECT r.* FROM hc_hold('A-late2', 'buyer-late2-b', 'key-late2-b') r \gset late2b_
SELECT throws_ok(format('SELECT hc_commit(%L, true)', :'late2_reservation_id'), 'RS003',
                 NULL, 'late_ok: the asset is held by another buyer, throws RS003');
SELECT results_eq(
    $$SELECT status, current_reservation_id FROM hc_assets WHERE id = 'A-late2'$$,
    format('VALUES (%L, %L)', 'HELD', :'late2b_reservation_id'),
    'late_ok: the other buyer keeps the asset');
SELECT is_empty('SELECT * FROM hc_check()', 'late_ok (taken): hc_check() is empty');

-- Another buyer took the asset and gave it back: it was taken since, so RS003.
SELECT r.* FROM hc_hold('A-late3', 'buyer-late3-b', 'key-late3-b') r \gset late3b_
SELECT r.* FROM hc_release(:'late3b_reservation_id') r \gset late3br_
SELECT throws_ok(format('SELECT hc_commit(%L, true)', :'late3_reservation_id'), 'RS003',
                 NULL, 'late_ok: the asset was taken since (then released), throws RS003');
SELECT isnt((SELECT status FROM hc_reservations WHERE id = :'late3_reservation_id'), 'COMMITTED',
            'late_ok: the reservation whose asset was taken since is not COMMITTED');
SELECT is_empty('SELECT * FROM hc_check()', 'late_ok (taken, released): hc_check() is empty');

------------------------------------------------------------------------------
-- Reclaim: the next buyer takes an expired hold (passive reclamation)
------------------------------------------------------------------------------
SELECT r.* FROM hc_hold('A-recl', 'buyer-recl-2', 'key-recl-2', '10 minutes') r \gset recl2_
SELECT is(:'recl2_status'::text, 'HELD', 'reclaim: the next buyer holds the asset');
SELECT is(:'recl2_replayed'::boolean, false, 'reclaim: not a replay');
SELECT isnt(:'recl2_reservation_id'::text, :'recl1_reservation_id', 'reclaim: a new reservation');
SELECT results_eq(
    format('SELECT status, ended_at IS NOT NULL FROM hc_reservations WHERE id = %L', :'recl1_reservation_id'),
    $$VALUES ('EXPIRED', true)$$,
    'reclaim: the old reservation is EXPIRED');
SELECT results_eq(
    $$SELECT status, current_reservation_id FROM hc_assets WHERE id = 'A-recl'$$,
    format('VALUES (%L, %L)', 'HELD', :'recl2_reservation_id'),
    'reclaim: the asset is HELD by the new reservation');
SELECT pg_temp.reclaimed_ends(:'recl1_reservation_id', 'commit', 'release', 'releasing', '');
SELECT results_eq(
    $$SELECT status, current_reservation_id FROM hc_assets WHERE id = 'A-recl'$$,
    format('VALUES (%L, %L)', 'HELD', :'recl2_reservation_id'),
    'reclaim: releasing the old reservation does not free the new buyer''s asset');
SELECT is_empty('SELECT * FROM hc_check()', 'reclaim: hc_check() is empty');

------------------------------------------------------------------------------
-- Validation: class 22, before idempotency and state, nothing changes
------------------------------------------------------------------------------
SELECT pg_temp.hc_state() AS state \gset
SELECT throws_ok($$SELECT hc_hold(NULL, 'b', 'k-val')$$, '22004', NULL, 'validation: null asset_id 22004');
SELECT throws_ok($$SELECT hc_hold('A-val', NULL, 'k-val')$$, '22004', NULL, 'validation: null buyer_id 22004');
SELECT throws_ok($$SELECT hc_hold('A-val', 'b', NULL)$$, '22004', NULL, 'validation: null key 22004');
SELECT throws_ok($$SELECT hc_hold('A-val', 'b', 'k-val', NULL)$$, '22004', NULL, 'validation: null ttl 22004');
SELECT throws_ok($$SELECT hc_hold('', 'b', 'k-val')$$, '22023', NULL, 'validation: empty asset_id 22023');
SELECT throws_ok($$SELECT hc_hold('A-val', '', 'k-val')$$, '22023', NULL, 'validation: empty buyer_id 22023');
SELECT throws_ok($$SELECT hc_hold('A-val', 'b', '')$$, '22023', NULL, 'validation: empty key 22023');
SELECT throws_ok($$SELECT hc_hold('A-val', 'b', 'k-val', '0')$$, '22023', NULL, 'validation: ttl 0 22023');
SELECT throws_ok($$SELECT hc_hold('A-val', 'b', 'k-val', '-1 minute')$$, '22023', NULL, 'validation: negative ttl 22023');
SELECT throws_ok($$SELECT hc_hold('A-val', 'b', 'k-val', '1 day 1 second')$$, '22023', NULL,
                 'validation: ttl over the default max_ttl (24 h) 22023');
SELECT throws_ok($$SELECT hc_hold('A-val', 'b', 'k-val', '1 month')$$, '22023', NULL,
                 'validation: ttl of a month 22023');
SELECT throws_ok(format('SELECT hc_hold(%L, %L, %L)', repeat('a', 65), 'b', 'k-val'), '22001', NULL,
                 'validation: 65-byte asset_id 22001 (before existence)');
SELECT throws_ok(format('SELECT hc_hold(%L, %L, %L)', 'A-val', repeat('b', 65), 'k-val'), '22001', NULL,
                 'validation: 65-byte buyer_id 22001');
SELECT throws_ok(format('SELECT hc_hold(%L, %L, %L)', 'A-val', 'b', repeat('k', 256)), '22001', NULL,
                 'validation: 256-byte key 22001');
SELECT throws_ok(format('SELECT hc_hold(%L, %L, %L)', 'A-val', repeat('é', 33), 'k-val'), '22001', NULL,
                 'validation: the limit is in bytes (33 x 2-byte character) 22001');
SELECT throws_ok($$SELECT hc_hold('A1', 'buyer-1', 'key-A1-1', '0')$$, '22023', NULL,
                 'validation: before idempotency (a bad ttl on a replayable key) 22023');
SELECT is(pg_temp.hc_state(), :'state', 'validation: hc_hold errors changed nothing');

SELECT throws_ok($$SELECT hc_commit(NULL)$$, '22004', NULL, 'validation: commit null id 22004');
SELECT throws_ok($$SELECT hc_commit('')$$, '22023', NULL, 'validation: commit empty id 22023');
SELECT throws_ok(format('SELECT hc_commit(%L, NULL)', :'rel3_reservation_id'), '22004', NULL,
                 'validation: commit null late_ok 22004');
SELECT throws_ok(format('SELECT hc_commit(%L)', repeat('r', 65)), '22001', NULL,
                 'validation: commit 65-byte id 22001');
SELECT throws_ok($$SELECT hc_release(NULL)$$, '22004', NULL, 'validation: release null id 22004');
SELECT throws_ok($$SELECT hc_release('')$$, '22023', NULL, 'validation: release empty id 22023');
SELECT throws_ok(format('SELECT hc_extend(%L, NULL)', :'rel3_reservation_id'), '22004', NULL,
                 'validation: extend null ttl 22004');
SELECT throws_ok(format('SELECT hc_extend(%L, %L)', :'rel3_reservation_id', '0'), '22023', NULL,
                 'validation: extend ttl 0 22023');
SELECT throws_ok(format('SELECT hc_extend(%L, %L)', :'rel3_reservation_id', '2 days'), '22023', NULL,
                 'validation: extend ttl over max_ttl 22023');
SELECT throws_ok(format('SELECT hc_extend(%L, %L)', :'h1_reservation_id', '-1 minute'), '22023', NULL,
                 'validation: extend checks the ttl before the state (committed reservation) 22023');
SELECT is(pg_temp.hc_state(), :'state', 'validation: commit/release/extend errors changed nothing');

-- holdcommit.max_ttl is a setting: lower it for this transaction.
SET LOCAL holdcommit.max_ttl = '1h';
SELECT throws_ok($$SELECT hc_hold('A-val', 'b', 'k-val', '1 hour 1 second')$$, '22023', NULL,
                 'validation: ttl over a lowered holdcommit.max_ttl 22023');
SELECT is(pg_temp.hc_state(), :'state', 'validation: max_ttl refusal changed nothing');
SELECT r.* FROM hc_hold('A-ttl', 'buyer-ttl', 'key-ttl', '1 hour') r \gset ttl_
SELECT is(:'ttl_expires_at'::timestamptz - :'ttl_created_at'::timestamptz, '1 hour'::interval,
          'validation: ttl equal to holdcommit.max_ttl is accepted');
RESET holdcommit.max_ttl;
SELECT results_eq($$SELECT status FROM hc_assets WHERE id = 'A-val'$$, $$VALUES ('AVAILABLE')$$,
                  'validation: A-val is still AVAILABLE');
SELECT is_empty($$SELECT 1 FROM hc_reservations WHERE asset_id = 'A-val'$$,
                'validation: no reservation for A-val');
SELECT is_empty('SELECT * FROM hc_check()', 'validation: hc_check() is empty');

------------------------------------------------------------------------------
-- Ledger: one row per state change, none for replays and refusals
------------------------------------------------------------------------------
SELECT results_eq(
    $$SELECT event, source, function, reservation_id, buyer_id, actor
        FROM hc_ledger WHERE entity_id = 'A1' AND event <> 'add' ORDER BY seq$$,
    format($$VALUES ('hold', 'call', 'hc_hold', %1$L, 'buyer-1', %2$L),
                    ('commit', 'call', 'hc_commit', %1$L, 'buyer-1', %2$L)$$,
           :'h1_reservation_id', current_user),
    'ledger: A1 has hold, commit (replays and refused calls add nothing)');
SELECT results_eq(
    $$SELECT event, function, reservation_id FROM hc_ledger
       WHERE entity_id = 'A-rel' AND event <> 'add' ORDER BY seq$$,
    format($$VALUES ('hold', 'hc_hold', %1$L), ('release', 'hc_release', %1$L), ('hold', 'hc_hold', %2$L)$$,
           :'rel_reservation_id', :'rel3_reservation_id'),
    'ledger: A-rel has hold, release, hold');
SELECT results_eq(
    $$SELECT event, function, reservation_id FROM hc_ledger
       WHERE entity_id = 'A-ext' AND event <> 'add' ORDER BY seq$$,
    format($$VALUES ('hold', 'hc_hold', %1$L), ('extend', 'hc_extend', %1$L), ('extend', 'hc_extend', %1$L)$$,
           :'ext_reservation_id'),
    'ledger: A-ext has hold, extend, extend');
SELECT results_eq(
    $$SELECT event, source, reservation_id, buyer_id, reserved_delta FROM hc_ledger
       WHERE entity_id = 'A-recl' AND event <> 'add' ORDER BY seq$$,
    format($$VALUES ('hold', 'call', %1$L, 'buyer-recl-1', 1), ('reclaim', 'reclaim', %1$L, 'buyer-recl-1', -1),
                    ('hold', 'call', %2$L, 'buyer-recl-2', 1)$$,
           :'recl1_reservation_id', :'recl2_reservation_id'),
    'ledger: A-recl has hold, reclaim (ends the old hold), hold');
SELECT results_eq(
    $$SELECT event, function FROM hc_ledger
       WHERE entity_id = 'A-late' AND event <> 'add' ORDER BY seq$$,
    $$VALUES ('hold', 'hc_hold'), ('commit', 'hc_commit')$$,
    'ledger: A-late has hold, commit');
SELECT is_empty($$SELECT 1 FROM hc_ledger WHERE entity_id IN ('A-val', 'A2', 'no-such-asset') AND event <> 'add'$$,
                'ledger: nothing for refused calls');
SELECT is_empty(
    $$SELECT r.id FROM hc_reservations r
       WHERE NOT EXISTS (SELECT 1 FROM hc_ledger l WHERE l.reservation_id = r.id AND l.event = 'hold'
                            AND l.at = r.created_at AND l.entity_id = r.asset_id)$$,
    'ledger: every reservation has its hold row at its created_at');
SELECT is_empty('SELECT * FROM hc_check()', 'ledger: hc_check() is empty');

------------------------------------------------------------------------------
-- Privileges
------------------------------------------------------------------------------
CREATE ROLE hc_test_app NOLOGIN;
CREATE ROLE hc_test_nobody NOLOGIN;
SELECT hc_grant_app('hc_test_app') AS granted \gset

SELECT ok(NOT has_function_privilege('public', 'hc_hold(text, text, text, interval)', 'EXECUTE'),
          'privileges: PUBLIC has no EXECUTE on hc_hold');
SELECT is_empty(
    $$SELECT p.oid::regprocedure FROM pg_proc p
       WHERE p.pronamespace = 'holdcommit'::regnamespace AND p.proname LIKE 'hc\_%'
         AND has_function_privilege('hc_test_nobody', p.oid, 'EXECUTE')$$,
    'privileges: a role with no grants may execute no hc_* function');
SELECT is_empty(
    $$SELECT c.oid::regclass FROM pg_class c
       WHERE c.relnamespace = 'holdcommit'::regnamespace AND c.relname LIKE 'hc\_%' AND c.relkind = 'r'
         AND has_table_privilege('hc_test_nobody', c.oid, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE')$$,
    'privileges: a role with no grants has no access to any hc_* table');
SELECT function_privs_are('holdcommit', 'hc_hold', ARRAY['text', 'text', 'text', 'interval'],
                          'hc_test_app', ARRAY['EXECUTE'],
                          'privileges: hc_grant_app gives EXECUTE on hc_hold');
SELECT ok(NOT has_function_privilege('hc_test_app', 'hc_asset_add(text, text)', 'EXECUTE'),
          'privileges: an app role cannot add assets (operator only)');

SET LOCAL ROLE hc_test_nobody;
SELECT throws_ok($$SELECT holdcommit.hc_hold('A-priv', 'buyer-nobody', 'key-priv-nobody')$$, '42501', NULL,
                 'privileges: a role with no grants cannot call hc_hold');
RESET ROLE;

SET LOCAL ROLE hc_test_app;
SELECT lives_ok($$SELECT hc_hold('A-priv', 'buyer-app', 'key-priv-app')$$,
                'privileges: the app role can call hc_hold');
SELECT lives_ok($$SELECT * FROM hc_assets$$, 'privileges: the app role can read hc_assets');
SELECT throws_ok($$INSERT INTO hc_assets (id) VALUES ('A-forged')$$, '42501', NULL,
                 'privileges: app cannot INSERT into hc_assets');
SELECT throws_ok($$UPDATE hc_assets SET status = 'AVAILABLE', hold_expires_at = NULL, current_reservation_id = NULL
                    WHERE id = 'A-priv'$$, '42501', NULL,
                 'privileges: app cannot UPDATE hc_assets');
SELECT throws_ok($$DELETE FROM hc_assets WHERE id = 'A2'$$, '42501', NULL,
                 'privileges: app cannot DELETE from hc_assets');
SELECT throws_ok($$INSERT INTO hc_ledger (kind, entity_id, at, event, source, function, actor)
                   VALUES ('asset', 'A-priv', now(), 'hold', 'call', 'hc_hold', 'me')$$, '42501', NULL,
                 'privileges: app cannot INSERT into hc_ledger');
SELECT throws_ok($$UPDATE hc_ledger SET actor = 'someone else'$$, '42501', NULL,
                 'privileges: app cannot UPDATE hc_ledger');
SELECT throws_ok($$DELETE FROM hc_ledger$$, '42501', NULL,
                 'privileges: app cannot DELETE from hc_ledger');
SELECT throws_ok($$UPDATE hc_reservations SET status = 'RELEASED' WHERE asset_id = 'A-priv'$$, '42501', NULL,
                 'privileges: app cannot UPDATE hc_reservations');
SELECT throws_ok($$SELECT hc_asset_add('A-app-added')$$, '42501', NULL,
                 'privileges: app cannot call hc_asset_add');
SELECT is_empty('SELECT * FROM hc_check()', 'privileges: the app role can run hc_check(), and it is empty');
RESET ROLE;

SELECT results_eq(
    $$SELECT r.buyer_id, r.status, l.actor FROM hc_reservations r
        JOIN hc_ledger l ON l.reservation_id = r.id AND l.event = 'hold'
       WHERE r.asset_id = 'A-priv'$$,
    $$VALUES ('buyer-app', 'HELD', 'hc_test_app')$$,
    'privileges: the app''s hold is recorded, the ledger actor is the app role');
SELECT results_eq($$SELECT status FROM hc_assets WHERE id = 'A2'$$, $$VALUES ('AVAILABLE')$$,
                  'privileges: the refused DELETE left A2 in place');
SELECT is_empty('SELECT * FROM hc_check()', 'privileges: hc_check() is empty');

SELECT * FROM finish();
ROLLBACK;
