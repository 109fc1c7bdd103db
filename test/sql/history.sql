-- Bounded history: finished holds and orders, with their ledger rows, leave
-- the tables once ended holdcommit.history_retention ago and their key is
-- forgotten (src/hold/prune.c, src/stock/prune.c).  Instead of waiting 30
-- days, the test moves a finished reservation's clock back (age_finished).
\set VERBOSITY terse

CREATE FUNCTION age_finished(rid text, by interval) RETURNS void LANGUAGE sql AS $$
    UPDATE hc_reservations
       SET created_at = created_at - by, expires_at = expires_at - by, ended_at = ended_at - by
     WHERE id = rid;
    UPDATE hc_stock_order_lines SET expires_at = expires_at - by WHERE reservation_id = rid;
    UPDATE hc_stock_orders
       SET created_at = created_at - by, expires_at = expires_at - by, ended_at = ended_at - by
     WHERE id = rid;
$$;

-- What earlier suites left to sweep goes first.
SELECT count(*) AS one_row FROM hc_sweep();

------------------------------------------------------------------------------
-- The setting: 0 (keep everything) or at least idempotency_retention
------------------------------------------------------------------------------
SHOW holdcommit.history_retention;
SELECT outcome($$SET holdcommit.history_retention = '1h'$$);
SELECT outcome($$SET holdcommit.history_retention = '1d'$$);
SELECT outcome($$SET holdcommit.history_retention = 0$$);
RESET holdcommit.history_retention;
-- From a role's or a database's settings, which may come in either order, it
-- is taken: the sweep waits for the longer of the two retentions anyway.
CREATE ROLE hi_role;
ALTER ROLE hi_role SET holdcommit.history_retention = '1h';
SELECT setconfig FROM pg_db_role_setting WHERE setrole = 'hi_role'::regrole;
DROP ROLE hi_role;
-- Raising idempotency_retention above it is allowed: keys still outlive
-- their reservations (the prune waits for them, below).
SET holdcommit.idempotency_retention = '60d';
SHOW holdcommit.history_retention;
RESET holdcommit.idempotency_retention;

------------------------------------------------------------------------------
-- Holds
------------------------------------------------------------------------------
SELECT count(hc_asset_add('HI-' || i)) FROM generate_series(1, 10) i;
SELECT reservation_id AS released FROM hc_hold('HI-1', 'ana', 'hi-k1', '1 hour') \gset
SELECT status FROM hc_release(:'released');
SELECT reservation_id AS sold FROM hc_hold('HI-2', 'ben', 'hi-k2', '1 hour') \gset
SELECT status FROM hc_commit(:'sold');
SELECT reservation_id AS expired FROM hc_hold('HI-3', 'cem', 'hi-k3', '1 hour') \gset
SELECT age_hold(:'expired', '2 hours');
SELECT reservation_id AS live FROM hc_hold('HI-4', 'dan', 'hi-k4', '1 hour') \gset
SELECT reservation_id AS recent FROM hc_hold('HI-5', 'eva', 'hi-k5', '1 hour') \gset
SELECT status FROM hc_release(:'recent');
SELECT DISTINCT reservation_id AS group_released FROM hc_hold_many(ARRAY['HI-6', 'HI-7', 'HI-8'], 'fay', 'hi-k6') \gset
SELECT DISTINCT status FROM hc_release(:'group_released');
SELECT DISTINCT reservation_id AS group_sold FROM hc_hold_many(ARRAY['HI-9', 'HI-10'], 'gil', 'hi-k7') \gset
SELECT DISTINCT status FROM hc_commit(:'group_sold');
SELECT expired_holds FROM hc_sweep();

------------------------------------------------------------------------------
-- Stock: orders of one product and of several
------------------------------------------------------------------------------
SELECT stock FROM hc_stock_set('HI-P', 100);
SELECT stock FROM hc_stock_set('HI-Q', 100);
SELECT reservation_id AS finalized FROM hc_reserve('HI-P', 3, 'ana', 'hi-s1') \gset
SELECT status FROM hc_finalize(:'finalized');
SELECT reservation_id AS unreserved FROM hc_reserve('HI-P', 2, 'ben', 'hi-s2') \gset
SELECT status FROM hc_unreserve(:'unreserved');
SELECT reservation_id AS open FROM hc_reserve('HI-P', 1, 'cem', 'hi-s3') \gset
SELECT reservation_id AS both FROM hc_reserve_items('[{"product_id": "HI-P", "qty": 4}, {"product_id": "HI-Q", "qty": 5}]', 'dan', 'hi-s4') \gset
SELECT status FROM hc_finalize(:'both');
SELECT reservation_id AS recent_order FROM hc_reserve('HI-P', 6, 'eva', 'hi-s5') \gset
SELECT status FROM hc_finalize(:'recent_order');

-- Forty days pass for the finished ones (not for recent and recent_order).
SELECT count(*) FROM (SELECT age_finished(r, '40 days')
  FROM unnest(ARRAY[:'released', :'sold', :'expired', :'group_released', :'group_sold',
                    :'finalized', :'unreserved', :'both']) r) aged;
SELECT count(*) AS ledger_before FROM hc_ledger WHERE entity_id LIKE 'HI-%' \gset

------------------------------------------------------------------------------
-- The sweep forgets their keys, then prunes them
------------------------------------------------------------------------------
SELECT purged_keys >= 7 AS keys_forgotten FROM hc_sweep();
-- Released and expired holds are gone, a whole group with them; sold and
-- live holds stay, and so does the hold released just now.
SELECT r.name, (SELECT string_agg(DISTINCT status, ',') FROM hc_reservations WHERE id = r.id) AS status
  FROM (VALUES ('released', :'released'), ('sold', :'sold'), ('expired', :'expired'),
               ('live', :'live'), ('recent', :'recent'), ('group_released', :'group_released'),
               ('group_sold', :'group_sold')) r(name, id);
-- Orders: finished and old ones are gone with their lines; the others stay.
SELECT r.name, (SELECT status FROM hc_stock_reservations WHERE id = r.id) AS status,
       (SELECT count(*) FROM hc_stock_reservation_lines WHERE reservation_id = r.id) AS lines
  FROM (VALUES ('finalized', :'finalized'), ('unreserved', :'unreserved'), ('open', :'open'),
               ('both', :'both'), ('recent_order', :'recent_order')) r(name, id);
-- No ledger row names a pruned reservation; the assets keep their other rows.
SELECT count(*) AS rows_of_pruned FROM hc_ledger
 WHERE reservation_id IN (:'released', :'expired', :'group_released', :'finalized',
                          :'unreserved', :'both');
SELECT entity_id, string_agg(event, ',' ORDER BY seq) AS events FROM hc_ledger
 WHERE kind = 'asset' AND entity_id IN ('HI-1', 'HI-2', 'HI-3', 'HI-6')
 GROUP BY entity_id ORDER BY entity_id;
-- The products' rows of pruned orders are carried forward, one row per
-- part at the highest seq it replaces, with their sums: the ledger still
-- adds up to stock and reserved.
SELECT entity_id, event, seq, reserved_delta, stock_delta, CASE WHEN event = 'carry' THEN detail::jsonb -> 'rows' END AS carried_rows
  FROM hc_ledger WHERE kind = 'product' AND entity_id IN ('HI-P', 'HI-Q') ORDER BY entity_id, seq;
SELECT product_id, stock, reserved, version FROM hc_stock_parts
 WHERE product_id IN ('HI-P', 'HI-Q') ORDER BY product_id;
SELECT * FROM hc_check();

------------------------------------------------------------------------------
-- What stays answers as before; what is gone is unknown
------------------------------------------------------------------------------
-- A key within retention replays.
SELECT status, replayed FROM hc_hold('HI-5', 'eva', 'hi-k5', '1 hour');
SELECT status, replayed FROM hc_reserve('HI-P', 6, 'eva', 'hi-s5');
SELECT status, replayed FROM hc_commit(:'sold');
-- A pruned reservation does not exist any more; the session goes on.
SELECT outcome(format('SELECT hc_release(%L)', :'released'));
SELECT outcome(format('SELECT hc_finalize(%L)', :'finalized'));
SELECT 1 AS usable;
-- Its forgotten key makes a new request.
SELECT reservation_id <> :'released' AS new_hold, status, replayed FROM hc_hold('HI-1', 'ana', 'hi-k1', '1 hour');
-- A sweep with nothing more to prune carries nothing again.
SELECT count(*) AS ledger_now FROM hc_ledger WHERE entity_id LIKE 'HI-%' \gset
SELECT count(*) AS one_row FROM hc_sweep();
SELECT count(*) - :ledger_now AS ledger_change FROM hc_ledger WHERE entity_id LIKE 'HI-%';

------------------------------------------------------------------------------
-- A later carry merges the earlier one
------------------------------------------------------------------------------
SELECT reservation_id AS later FROM hc_reserve('HI-P', 2, 'fay', 'hi-s6') \gset
SELECT status FROM hc_finalize(:'later');
SELECT age_finished(:'later', '40 days');
SELECT age_finished(:'recent_order', '40 days');
SELECT count(*) AS one_row FROM hc_sweep();
SELECT entity_id, event, seq, stock_delta, CASE WHEN event = 'carry' THEN detail::jsonb -> 'rows' END AS carried_rows
  FROM hc_ledger WHERE kind = 'product' AND entity_id = 'HI-P' ORDER BY seq;
SELECT * FROM hc_check();

------------------------------------------------------------------------------
-- Each part carries its own rows; a part merged away and spread again goes
-- on from its carried seq
------------------------------------------------------------------------------
SELECT stock FROM hc_stock_set('HI-R', 2);
SELECT stock FROM hc_stock_spread('HI-R', 2);
-- One unit in each part: the second reserve takes the other part's.
SELECT reservation_id AS r1 FROM hc_reserve('HI-R', 1, 'ana', 'hi-r1') \gset
SELECT reservation_id AS r2 FROM hc_reserve('HI-R', 1, 'ben', 'hi-r2') \gset
SELECT status FROM hc_finalize(:'r1');
SELECT status FROM hc_finalize(:'r2');
SELECT stock FROM hc_stock_spread('HI-R', 1);
SELECT age_finished(r, '40 days') FROM unnest(ARRAY[:'r1', :'r2']) r;
SELECT count(*) AS one_row FROM hc_sweep();
SELECT seq / 281474976710656 AS part, seq % 281474976710656 AS version, event, stock_delta
  FROM hc_ledger WHERE kind = 'product' AND entity_id = 'HI-R' ORDER BY seq;
SELECT stock FROM hc_stock_set('HI-R', 10);
SELECT stock FROM hc_stock_spread('HI-R', 2);
SELECT part, stock, version FROM hc_stock_parts WHERE product_id = 'HI-R' ORDER BY part;
SELECT * FROM hc_check();

------------------------------------------------------------------------------
-- Carries never leave int4, however much a part has sold: a row of 2^30
-- units or more stands alone, and a carry that large is never merged again
------------------------------------------------------------------------------
SELECT stock FROM hc_stock_set('HI-BIG', 2000000000);
SELECT reservation_id AS big1 FROM hc_reserve('HI-BIG', 2000000000, 'ana', 'hi-b1') \gset
SELECT status FROM hc_finalize(:'big1');
SELECT stock FROM hc_stock_set('HI-BIG', 2000000005);
SELECT reservation_id AS big2 FROM hc_reserve('HI-BIG', 2000000000, 'ben', 'hi-b2') \gset
SELECT status FROM hc_finalize(:'big2');
SELECT count(*) FROM (SELECT age_finished(r, '40 days') FROM unnest(ARRAY[:'big1', :'big2']) r) aged;
SELECT count(*) AS one_row FROM hc_sweep();
SELECT event, seq, reserved_delta, stock_delta FROM hc_ledger
 WHERE kind = 'product' AND entity_id = 'HI-BIG' ORDER BY seq;
SELECT reservation_id AS big3 FROM hc_reserve('HI-BIG', 5, 'cem', 'hi-b3') \gset
SELECT status FROM hc_finalize(:'big3');
SELECT age_finished(:'big3', '40 days');
SELECT count(*) AS one_row FROM hc_sweep();
SELECT event, seq, reserved_delta, stock_delta FROM hc_ledger
 WHERE kind = 'product' AND entity_id = 'HI-BIG' ORDER BY seq;
SELECT * FROM hc_check();
SELECT 1 AS usable;

-- A merge of parts moves reserved units to part 0 without a ledger row: a
-- part keeps reserve rows whose release is in another part.  Their sums are
-- banded too (by |stock| + |reserved|).
SELECT stock FROM hc_stock_set('HI-OV', 2147483646);
CREATE TEMP TABLE hi_ov (id text);
DO $$
BEGIN
    FOR round IN 1..3 LOOP
        PERFORM hc_stock_spread('HI-OV', 2);
        INSERT INTO hi_ov SELECT reservation_id FROM hc_reserve('HI-OV', 1073741823, 'ana', 'hi-ov-' || round || '-1');
        INSERT INTO hi_ov SELECT reservation_id FROM hc_reserve('HI-OV', 1073741823, 'ben', 'hi-ov-' || round || '-2');
        PERFORM hc_stock_spread('HI-OV', 1);
        PERFORM hc_unreserve(id) FROM hi_ov;
        DELETE FROM hi_ov;
    END LOOP;
END $$;
SELECT count(*) FROM (SELECT age_finished(id, '40 days') FROM hc_stock_reservations WHERE scope_id = 'HI-OV') aged;
SELECT count(*) AS one_row FROM hc_sweep();
SELECT count(*) AS orders_left FROM hc_stock_reservations WHERE scope_id = 'HI-OV';
SELECT count(*) FILTER (WHERE reservation_id IS NOT NULL) AS order_rows,
       bool_and(abs(reserved_delta::bigint) + abs(stock_delta::bigint) < 2147483648) AS within_int4
  FROM hc_ledger WHERE kind = 'product' AND entity_id = 'HI-OV';
SELECT * FROM hc_check();

-- A sweep of one row a batch carries every row (a walk reads at least 100).
SELECT stock FROM hc_stock_set('HI-ONE', 100);
SELECT count(*) FROM (SELECT hc_finalize((hc_reserve('HI-ONE', 1, 'ana', 'hi-one-' || i)).reservation_id)
                        FROM generate_series(1, 4) i) f;
SELECT count(*) FROM (SELECT age_finished(id, '40 days') FROM hc_stock_reservations WHERE scope_id = 'HI-ONE') aged;
SELECT count(*) AS one_row FROM hc_sweep(1);
SELECT event, count(*), sum(stock_delta) FROM hc_ledger
 WHERE kind = 'product' AND entity_id = 'HI-ONE' GROUP BY event ORDER BY event;
SELECT due FROM hc_stock_carries WHERE product_id = 'HI-ONE';

------------------------------------------------------------------------------
-- What is never pruned
------------------------------------------------------------------------------
-- A key remembered longer than history_retention keeps its reservation.
SET holdcommit.idempotency_retention = '60d';
SELECT reservation_id AS kept FROM hc_reserve('HI-P', 1, 'gil', 'hi-s7') \gset
SELECT status FROM hc_unreserve(:'kept');
SELECT age_finished(:'kept', '40 days');
SELECT count(*) AS one_row FROM hc_sweep();
SELECT status, idempotency_key FROM hc_stock_reservations WHERE id = :'kept';
RESET holdcommit.idempotency_retention;
-- history_retention 0 keeps everything.
SET holdcommit.history_retention = 0;
SELECT count(*) AS one_row FROM hc_sweep();
SELECT status, idempotency_key IS NULL AS forgotten FROM hc_stock_reservations WHERE id = :'kept';
RESET holdcommit.history_retention;
SELECT count(*) AS one_row FROM hc_sweep();
SELECT count(*) AS kept_left FROM hc_stock_reservations WHERE id = :'kept';
SELECT * FROM hc_check();

DROP TABLE hi_ov;
DROP FUNCTION age_finished(text, interval);
