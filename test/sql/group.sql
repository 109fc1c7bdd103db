-- Group holds: hc_hold_many (these seats, every one or none) and
-- hc_hold_best (the n best of a pool), one reservation id over many assets;
-- hc_commit, hc_release and hc_extend of that id act on all of them.

-- A digest of the seats' state, to prove that a refused call changed nothing.
CREATE FUNCTION seats_state() RETURNS text LANGUAGE sql AS $$
    SELECT md5(concat_ws('|',
        (SELECT string_agg(concat_ws(',', id, status, current_reservation_id, version), ';' ORDER BY id)
           FROM hc_assets WHERE id LIKE 'S-%' OR pool IS NOT NULL),
        (SELECT count(*) FROM hc_reservations),
        (SELECT count(*) FROM hc_ledger)))
$$;
-- A pool's row as a picture: x taken, . free, H held by the given hold.
CREATE FUNCTION seat_map(p_pool text, p_hold text DEFAULT NULL) RETURNS TABLE (grp text, seats text)
LANGUAGE sql AS $$
    SELECT grp, string_agg(CASE WHEN current_reservation_id = p_hold AND status = 'HELD' THEN 'H'
                                WHEN status = 'AVAILABLE' THEN '.' ELSE 'x' END, '' ORDER BY pos)
      FROM hc_assets WHERE pool = p_pool GROUP BY grp ORDER BY grp
$$;

SELECT id, pool, rank, grp, pos FROM hc_asset_add('S-1', 'Seat 1', pool => 'test', rank => 1, grp => 'T', pos => 1);
SELECT count(*) FROM (SELECT hc_asset_add('S-' || i) FROM generate_series(2, 8) i) s;

-- Arguments first (class 22): none, null, twice, too many, too long.
SELECT outcome($$SELECT hc_hold_many(ARRAY[]::text[], 'ann', 'g-0')$$);
SELECT outcome($$SELECT hc_hold_many(NULL, 'ann', 'g-0')$$);
SELECT outcome($$SELECT hc_hold_many(ARRAY['S-1', NULL], 'ann', 'g-0')$$);
SELECT outcome($$SELECT hc_hold_many(ARRAY['S-1', 'S-2', 'S-1'], 'ann', 'g-0')$$);
SELECT outcome($$SELECT hc_hold_many(ARRAY(SELECT 'S-' || i FROM generate_series(1, 101) i), 'ann', 'g-0')$$);
SELECT outcome($$SELECT hc_hold_many(ARRAY[repeat('x', 65)], 'ann', 'g-0')$$);
SELECT outcome($$SELECT hc_hold_many(ARRAY[['S-1'], ['S-2']], 'ann', 'g-0')$$);
SELECT outcome($$SELECT hc_hold_best('test', 0, 'ann', 'g-0')$$);
SELECT outcome($$SELECT hc_hold_best('test', 101, 'ann', 'g-0')$$);
SELECT outcome($$SELECT hc_hold_best(NULL, 2, 'ann', 'g-0')$$);

-- One hold over three seats: a row per seat, one id, one expiry.
SELECT reservation_id AS g1 FROM hc_hold_many(ARRAY['S-3', 'S-1', 'S-2'], 'ann', 'g-1', '10 minutes') LIMIT 1 \gset
SELECT reservation_id = :'g1' AS same_id, asset_id, buyer_id, status, replayed,
       expires_at - created_at AS ttl
  FROM hc_hold_many(ARRAY['S-2', 'S-3', 'S-1'], 'ann', 'g-1', '10 minutes');
SELECT id, status, current_reservation_id = :'g1' AS held_by_g1 FROM hc_assets WHERE id LIKE 'S-%' ORDER BY id;
-- hc_reservations: a row per seat with the id and the number of seats; the
-- key on the first seat's row alone.
SELECT asset_id, status, seats, idempotency_key IS NOT NULL AS has_key
  FROM hc_reservations WHERE id = :'g1' ORDER BY asset_id;
-- The key is the request's, whatever the order of its seats; with other
-- seats, or from hc_hold, it is RS005.
SELECT seats_state() AS before \gset
SELECT outcome($$SELECT hc_hold_many(ARRAY['S-1', 'S-2'], 'ann', 'g-1')$$);
SELECT outcome($$SELECT hc_hold('S-4', 'ann', 'g-1')$$);
SELECT outcome($$SELECT hc_hold_best('test', 3, 'ann', 'g-1')$$);
-- Overlapping seats: RS001 names each seat not available; nothing is held.
SELECT outcome($$SELECT hc_hold_many(ARRAY['S-4', 'S-3', 'S-1'], 'bob', 'g-2')$$);
SELECT outcome($$SELECT hc_hold_many(ARRAY['S-4', 'S-9'], 'bob', 'g-2')$$);
SELECT seats_state() = :'before' AS unchanged, status FROM hc_assets WHERE id = 'S-4';
SELECT 1 AS usable;
-- Nor does a seat of the group go to hc_hold.
SELECT outcome($$SELECT hc_hold('S-2', 'bob', 'g-3')$$);

-- Extend moves every seat's end, never past created_at + holdcommit.max_hold.
SELECT status, replayed, date_trunc('minute', expires_at - created_at) AS ttl FROM hc_extend(:'g1', '30 minutes');
SELECT count(DISTINCT expires_at) AS one_expiry, date_trunc('minute', min(expires_at - created_at)) AS ttl
  FROM hc_reservations WHERE id = :'g1';
SET holdcommit.max_hold = '1h';
SELECT expires_at - created_at AS capped FROM hc_extend(:'g1', '24 hours');
RESET holdcommit.max_hold;
-- Commit sells every seat; again, a replay; release is then RS004.
SELECT asset_id, status, replayed FROM hc_commit(:'g1');
SELECT asset_id, status, replayed FROM hc_commit(:'g1');
SELECT outcome(format('SELECT hc_release(%L)', :'g1'));
SELECT id, status, current_reservation_id = :'g1' AS sold_to_g1 FROM hc_assets WHERE id IN ('S-1', 'S-2', 'S-3') ORDER BY id;
SELECT event, count(*) FROM hc_ledger WHERE reservation_id = :'g1' GROUP BY event ORDER BY event;

-- Release gives every seat back at once; again, a replay; commit is RS004.
SELECT reservation_id AS g2 FROM hc_hold_many(ARRAY['S-4', 'S-5'], 'bob', 'g-4') LIMIT 1 \gset
-- The forms given an asset (the routing forms): it must be one of the
-- group's, else RS006 and nothing changes.
SELECT outcome(format('SELECT hc_release(%L, %L)', 'S-6', :'g2'));
SELECT outcome(format('SELECT hc_commit(%L, %L, false)', 'nope', :'g2'));
SELECT outcome(format('SELECT hc_extend(%L, %L, %L)', 'S-1', :'g2', '1 minute'));
SELECT status FROM hc_extend('S-5', :'g2', '20 minutes');
SELECT status, replayed FROM hc_release(:'g2');
SELECT status, replayed FROM hc_release(:'g2');
SELECT outcome(format('SELECT hc_commit(%L)', :'g2'));
SELECT id, status FROM hc_assets WHERE id IN ('S-4', 'S-5') ORDER BY id;

-- An expired group ends as a whole, exactly once, through any one seat:
-- hc_hold of S-5 takes S-5 and frees S-4 and S-6.
SELECT reservation_id AS g3 FROM hc_hold_many(ARRAY['S-4', 'S-5', 'S-6'], 'cy', 'g-5') LIMIT 1 \gset
SELECT age_hold(:'g3', '1 hour');
SELECT outcome(format('SELECT hc_commit(%L)', :'g3'));
SELECT reservation_id AS h1 FROM hc_hold('S-5', 'dee', 'g-6') \gset
SELECT asset_id, status, ended_at IS NOT NULL AS ended FROM hc_reservations WHERE id = :'g3' ORDER BY asset_id;
SELECT id, status, current_reservation_id = :'h1' AS held_by_dee FROM hc_assets WHERE id IN ('S-4', 'S-5', 'S-6') ORDER BY id;
SELECT entity_id, event, source, reserved_delta FROM hc_ledger
 WHERE reservation_id IN (:'g3', :'h1') AND event <> 'hold' ORDER BY entity_id, seq;
-- The group's release and late commit see it ended: a replay, RS003.
SELECT status, replayed FROM hc_release(:'g3');
SELECT outcome(format('SELECT hc_commit(%L, true)', :'g3'));
SELECT hc_release(:'h1') IS NOT NULL AS released;

-- A late commit sells an expired group whose seats nobody took since,
-- also after the sweeper ended them one by one.
SELECT reservation_id AS g4 FROM hc_hold_many(ARRAY['S-7', 'S-8'], 'eve', 'g-7') LIMIT 1 \gset
SELECT age_hold(:'g4', '1 hour');
SELECT expired_holds FROM hc_sweep();
SELECT asset_id, status FROM hc_reservations WHERE id = :'g4' ORDER BY asset_id;
SELECT asset_id, status, replayed FROM hc_commit(:'g4', late_ok => true);
SELECT id, status FROM hc_assets WHERE id IN ('S-7', 'S-8') ORDER BY id;
-- A late commit of a group one of whose seats another buyer took: RS003,
-- and nothing sold.
SELECT reservation_id AS g5 FROM hc_hold_many(ARRAY['S-5'], 'fay', 'g-8') LIMIT 1 \gset
SELECT age_hold(:'g5', '1 hour');
SELECT hc_hold('S-5', 'gus', 'g-9') IS NOT NULL AS taken;
SELECT outcome(format('SELECT hc_commit(%L, true)', :'g5'));
SELECT * FROM hc_check();

-- In a transaction block, a refusal inside a savepoint leaves the session
-- and the block usable.
BEGIN;
SAVEPOINT s;
SELECT hc_hold_many(ARRAY['S-1', 'S-5'], 'hal', 'g-10');
ROLLBACK TO SAVEPOINT s;
SELECT count(*) AS held FROM hc_hold_many(ARRAY['S-4'], 'hal', 'g-10');
ROLLBACK;
SELECT 1 AS usable;

------------------------------------------------------------------------------
-- The best seats
------------------------------------------------------------------------------

-- A hall: rows A (rank 1, the best) and B (rank 2), six seats each.
SELECT count(*) FROM (
    SELECT hc_asset_add(r || i, '', pool => 'hall', rank => CASE r WHEN 'A' THEN 1 ELSE 2 END,
                        grp => r, pos => i)
      FROM unnest(ARRAY['A', 'B']) r, generate_series(1, 6) i) s;
-- Taken already: A1 and A3 (sold through a group hold).
SELECT count(*) FROM hc_commit((SELECT reservation_id FROM hc_hold_many(ARRAY['A1', 'A3'], 'zed', 'b-0') LIMIT 1));
SELECT * FROM seat_map('hall');
-- Two seats: A4 and A5.  Every block of two in row A has the same ranks;
-- A5-A6 would leave A4 alone between A3 and A5, A4-A5 leaves none.
-- What the plain query takes instead: the two lowest ranks, A2 and A4, not
-- adjacent (A2 left between two taken seats).
SELECT string_agg(id, ',' ORDER BY id) AS plain_sql
  FROM (SELECT id FROM hc_assets WHERE pool = 'hall' AND status = 'AVAILABLE'
         ORDER BY rank, id LIMIT 2 FOR UPDATE SKIP LOCKED) s;
SELECT reservation_id AS b1, string_agg(asset_id, ',' ORDER BY asset_id) AS seats, count(*)
  FROM hc_hold_best('hall', 2, 'ann', 'b-1') GROUP BY 1 \gset
SELECT :'seats' AS seats, :'count' AS n;
SELECT * FROM seat_map('hall', :'b1');
-- Four: no block of four in row A any more, so row B's B1-B4.
SELECT string_agg(asset_id, ',' ORDER BY asset_id) AS seats FROM hc_hold_best('hall', 4, 'bob', 'b-2');
-- The same request again is a replay of the same seats.
SELECT string_agg(asset_id, ',' ORDER BY asset_id) AS seats, bool_and(replayed) AS replayed
  FROM hc_hold_best('hall', 4, 'bob', 'b-2');
-- Three: no block of three anywhere (A2, A6, B5, B6 are free): the three
-- lowest ranks, A2, A6 and B5.
SELECT string_agg(asset_id, ',' ORDER BY asset_id) AS seats FROM hc_hold_best('hall', 3, 'cy', 'b-3');
-- One left; two asked for: RS002 with the number left, nothing held.
SELECT seats_state() AS before \gset
SELECT outcome($$SELECT hc_hold_best('hall', 2, 'dee', 'b-4')$$);
SELECT seats_state() = :'before' AS unchanged;
SELECT outcome($$SELECT hc_hold_best('no-such-pool', 2, 'dee', 'b-4')$$);
\set VERBOSITY default
SELECT hc_hold_best('hall', 2, 'dee', 'b-4');
\set VERBOSITY terse
-- Released seats come back: the hold of B1-B4 released, two seats are B1-B2
-- (B2-B3 would leave B4 alone between B3 and the taken B5; B3-B4 ranks the
-- same as B1-B2, which comes first).
SELECT count(*) FROM hc_release((SELECT reservation_id FROM hc_hold_best('hall', 4, 'bob', 'b-2') LIMIT 1));
SELECT string_agg(asset_id, ',' ORDER BY asset_id) AS seats FROM hc_hold_best('hall', 2, 'eve', 'b-5');
SELECT * FROM seat_map('hall');
SELECT * FROM hc_check();

-- A seat that an expired group holds is free to the best-seat hold, which
-- ends that group as a whole: fay's B4 and B6 expire; one seat is B6 (B3
-- or B4 would leave the other alone between two taken seats), and B4 is
-- free again.
SELECT reservation_id AS b6 FROM hc_hold_many(ARRAY['B4', 'B6'], 'fay', 'b-6') LIMIT 1 \gset
SELECT age_hold(:'b6', '1 hour');
SELECT string_agg(asset_id, ',' ORDER BY asset_id) AS seats FROM hc_hold_best('hall', 1, 'gus', 'b-7');
SELECT asset_id, status FROM hc_reservations WHERE id = :'b6' ORDER BY asset_id;
SELECT * FROM seat_map('hall');
SELECT * FROM hc_check();

-- hc_check() sees a group hold whose seats disagree.
BEGIN;
UPDATE hc_reservations SET buyer_id = 'mallory' WHERE id = :'b6' AND asset_id = 'B4';
UPDATE hc_reservations SET seats = 3 WHERE id = :'g4';
SELECT invariant, detail FROM hc_check() WHERE invariant = 'group hold has its seats' ORDER BY detail;
ROLLBACK;

-- The forms Citus sends hc_asset_add and hc_hold_many of a pool's seats as,
-- given the routing id first: on a single node they answer as the others,
-- and the routing id of a seat must be its pool.  scope_id stays null.
SELECT id, pool, scope_id FROM hc_asset_add('hall', 'C1', 'C1', 'hall', 20, 'C', 1);
SELECT outcome($$SELECT hc_asset_add('elsewhere', 'C2', 'C2', 'hall', 21, 'C', 2)$$);
SELECT asset_id, status, replayed FROM hc_hold_many('hall', ARRAY['C1'], 'hal', 'c-1', '10 minutes');
SELECT asset_id, status, replayed FROM hc_hold_many(ARRAY['C1'], 'hal', 'c-1', '10 minutes');
SELECT count(*) FILTER (WHERE scope_id IS NOT NULL) AS scoped FROM hc_reservations;
SELECT count(*) AS routes FROM hc_asset_routes;
-- hc_scope_id() is the default of scope_id on Citus alone; outside a call it refuses.
SELECT outcome($$SELECT hc_scope_id()$$);
SELECT 1;
