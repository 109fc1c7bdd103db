-- hc_hold_best against its definition: a reference query that reads the
-- whole pool (best_ref) says which seats each call must take, in pools
-- large enough that the call reads only part of their free seats, lowest
-- rank first, and reads again, more of them, where that part does not
-- settle the choice.  All in one transaction, rolled back.
BEGIN;

-- The definition, over every seat of the pool: of the blocks of n free
-- seats consecutive in pos within one grp, the lowest sum of ranks, then
-- one that leaves no single free seat between two taken ones, then the
-- first in (grp, pos) order, bytewise; with no block, the n lowest ranks.
-- The seats' ids, sorted, or RS002.
CREATE FUNCTION best_ref(p text, n integer) RETURNS text LANGUAGE sql AS $$
WITH s AS MATERIALIZED (
    SELECT id, coalesce(rank::bigint, 2147483648) AS r, CASE WHEN pos IS NOT NULL THEN grp END AS g,
           coalesce(pos, 0)::bigint AS pos,
           status = 'AVAILABLE' OR (status = 'HELD' AND hold_expires_at <= clock_timestamp()) AS free
      FROM hc_assets WHERE pool = p),
f AS (
    SELECT g, pos, sum(r) OVER w AS ranks, lead(pos, n - 1) OVER (PARTITION BY g ORDER BY pos) AS last,
           array_agg(id) OVER w AS ids
      FROM s WHERE free AND g IS NOT NULL
    WINDOW w AS (PARTITION BY g ORDER BY pos ROWS BETWEEN CURRENT ROW AND n - 1 FOLLOWING)),
b AS (
    SELECT f.*, coalesce(l1.free AND NOT l2.free, false) OR coalesce(r1.free AND NOT r2.free, false) AS orphan
      FROM f
      LEFT JOIN s l1 ON l1.g = f.g AND l1.pos = f.pos - 1
      LEFT JOIN s l2 ON l2.g = f.g AND l2.pos = f.pos - 2
      LEFT JOIN s r1 ON r1.g = f.g AND r1.pos = f.last + 1
      LEFT JOIN s r2 ON r2.g = f.g AND r2.pos = f.last + 2
     WHERE f.last = f.pos + n - 1),
chosen AS (
    SELECT coalesce(
        (SELECT ids FROM b ORDER BY ranks, orphan, g COLLATE "C", pos LIMIT 1),
        (SELECT array_agg(id) FROM (SELECT id FROM s WHERE free
                                     ORDER BY r, g COLLATE "C" NULLS LAST, pos, id COLLATE "C"
                                     LIMIT n) l)) AS ids)
SELECT CASE WHEN coalesce(cardinality(ids), 0) < n THEN 'RS002'
            ELSE (SELECT string_agg(x, ',' ORDER BY x COLLATE "C") FROM unnest(ids) x) END
  FROM chosen
$$;

-- Calls of hc_hold_best, each checked against best_ref just before it; a
-- hold released now and then.  What differs is printed.
CREATE FUNCTION best_calls(p text, calls integer, most integer, seed float8) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    n integer;
    want text;
    got text;
    rid text;
    held text[] := '{}';
    wrong integer := 0;
    refused integer := 0;
BEGIN
    PERFORM setseed(seed);
    FOR i IN 1 .. calls LOOP
        n := 1 + floor(random() * most)::integer;
        want := best_ref(p, n);
        BEGIN
            SELECT string_agg(asset_id, ',' ORDER BY asset_id COLLATE "C"), min(reservation_id)
              INTO got, rid FROM hc_hold_best(p, n, 'buyer-' || i, p || '-' || i);
            held := held || rid;
        EXCEPTION WHEN SQLSTATE 'RS002' THEN
            got := 'RS002';
            refused := refused + 1;
        END;
        IF got IS DISTINCT FROM want THEN
            wrong := wrong + 1;
            RAISE NOTICE 'call % of %, n %: took %, the definition says %', i, p, n, got, want;
        END IF;
        IF i % 7 = 0 AND cardinality(held) > 0 THEN
            PERFORM hc_release(held[1 + floor(random() * cardinality(held))::integer]);
        END IF;
    END LOOP;
    RETURN format('%s calls, %s RS002, %s not as defined', calls, refused, wrong);
END
$$;

-- A venue: 50 rows of 40 seats, ranked by row and by the distance from the
-- middle of the row, so that ranks tie within and across rows; row names
-- that sort bytewise otherwise than by number; a seat without a rank at
-- each row's end in every tenth row, and ten seats in no row.  A third of
-- the seats sold, one in ten held, half of those expired.
SELECT count(*) FROM (
    SELECT hc_asset_add('V-' || r || '-' || p, 'seat', pool => 'venue',
                        rank => CASE WHEN r % 10 = 0 AND p = 40 THEN NULL ELSE r * 3 + abs(2 * p - 41) / 14 END,
                        grp => 'row-' || r, pos => p)
      FROM generate_series(1, 50) r, generate_series(1, 40) p) a;
SELECT count(*) FROM (SELECT hc_asset_add('V-free-' || i, 'seat', pool => 'venue', rank => 100 + i)
                        FROM generate_series(1, 10) i) a;
SELECT setseed(0.25);
CREATE FUNCTION sell(ids text[]) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    id text;
BEGIN
    FOREACH id IN ARRAY ids LOOP
        PERFORM hc_commit(h.reservation_id) FROM hc_hold(id, 'sold', 'sold-' || id) h;
    END LOOP;
    RETURN cardinality(ids);
END
$$;
SELECT sell(ARRAY(SELECT id FROM hc_assets WHERE pool = 'venue' AND random() < 0.33 ORDER BY id));
SELECT count(*) FROM (SELECT hc_hold(id, 'early', 'early-' || id) FROM hc_assets
                       WHERE pool = 'venue' AND status = 'AVAILABLE' AND random() < 0.1) h;
SELECT count(*) FROM (SELECT age_hold(current_reservation_id, '1 hour') FROM hc_assets
                       WHERE pool = 'venue' AND status = 'HELD' AND random() < 0.5) a;

SELECT best_calls('venue', 150, 6, 0.5);

-- A flat venue: every row ranked alike, the rows added last first, so
-- that the seats of a rank are read in another order than the one that
-- breaks a tie, and the block a tie chooses may be past those read first.
SELECT count(*) FROM (
    SELECT hc_asset_add('F-' || r || '-' || p, 'seat', pool => 'flat', rank => abs(2 * p - 41) / 10,
                        grp => 'row-' || r, pos => p)
      FROM generate_series(30, 1, -1) r, generate_series(1, 40) p) a;
SELECT sell(ARRAY(SELECT id FROM hc_assets WHERE pool = 'flat' AND random() < 0.2 ORDER BY id));
SELECT best_calls('flat', 150, 4, 0.125);

-- A ring of 600 seats in one row, every other one sold, and its two seats
-- of the highest ranks free side by side: the one block of two, found
-- only once every free seat is read; then no block is left, and the calls
-- take the lowest ranks, down to RS002.
SELECT count(*) FROM (
    SELECT hc_asset_add('R-' || p, 'seat', pool => 'ring', rank => (p * 7919) % 1000, grp => 'ring', pos => p)
      FROM generate_series(1, 600) p) a;
UPDATE hc_assets SET rank = 5000 + pos WHERE pool = 'ring' AND pos IN (599, 600);
SELECT sell(ARRAY(SELECT id FROM hc_assets WHERE pool = 'ring' AND (pos % 2 = 1 AND pos < 599 OR pos = 598)));
SELECT best_ref('ring', 2) AS only_block;
SELECT best_calls('ring', 200, 3, 0.75);

-- The edges: a null rank ranks after the highest rank, a negative rank
-- before every other; a place holds one seat (23505 for a second).
SELECT count(*) FROM (VALUES
    (hc_asset_add('E-null', 'seat', pool => 'edge', rank => NULL, grp => 'A', pos => 1)),
    (hc_asset_add('E-max', 'seat', pool => 'edge', rank => 2147483647, grp => 'B', pos => 1)),
    (hc_asset_add('E-far', 'seat', pool => 'edge', rank => -5, grp => 'C', pos => 2147483647))) a;
SELECT outcome($$SELECT hc_asset_add('E-twice', 'seat', pool => 'edge', rank => 1, grp => 'A', pos => 1)$$);
SELECT best_ref('edge', 1) AS defined, (SELECT asset_id FROM hc_hold_best('edge', 1, 'ed', 'edge-1')) AS took;
SELECT best_ref('edge', 1) AS defined, (SELECT asset_id FROM hc_hold_best('edge', 1, 'ed', 'edge-2')) AS took;
SELECT best_ref('edge', 1) AS defined, (SELECT asset_id FROM hc_hold_best('edge', 1, 'ed', 'edge-3')) AS took;

-- The pool's index, gone or made again in another order: the call is
-- refused (55000) rather than read in that order, and nothing is held.
SAVEPOINT index_gone;
DROP INDEX hc_assets_pool_rank;
SELECT outcome($$SELECT hc_hold_best('venue', 2, 'ivy', 'index-1')$$);
CREATE INDEX hc_assets_pool_rank ON hc_assets (pool, rank DESC) WHERE pool IS NOT NULL;
SELECT outcome($$SELECT hc_hold_best('venue', 2, 'ivy', 'index-1')$$);
SELECT count(*) AS held FROM hc_reservations WHERE buyer_id = 'ivy';
ROLLBACK TO SAVEPOINT index_gone;
SELECT count(*) AS seats FROM hc_hold_best('venue', 2, 'ivy', 'index-1');

SELECT * FROM hc_check();
SELECT 1;
ROLLBACK;
