-- The rows of 0.4.0's model: an order of one product is one row of
-- hc_stock_orders that is its own line (qty, part; its product its
-- scope_id); an order of several products has a row naming its products and
-- a line per product in hc_stock_order_lines.  Through every transition and
-- the sweep the tables stay in that shape, the views hc_stock_reservations
-- and hc_stock_reservation_lines show what 0.3.0's tables showed, and
-- hc_check() stays empty.

SELECT count(hc_stock_set('RW-P', 100)), count(hc_stock_set('RW-Q', 100));

-- An order's rows: its row in hc_stock_orders, its rows in
-- hc_stock_order_lines, and what the two views show of it.
CREATE FUNCTION order_rows(rid text)
RETURNS TABLE (source text, product_id text, qty integer, status text, part smallint, products text[])
LANGUAGE sql AS $$
    SELECT * FROM (
        SELECT 'hc_stock_orders' AS source, o.scope_id, o.qty, o.status, o.part, o.products
          FROM hc_stock_orders o WHERE o.id = rid
        UNION ALL
        SELECT 'hc_stock_order_lines', l.product_id, l.qty, l.status, l.part, NULL
          FROM hc_stock_order_lines l WHERE l.reservation_id = rid
        UNION ALL
        SELECT 'view hc_stock_reservations', r.scope_id, NULL, r.status, NULL, r.products
          FROM hc_stock_reservations r WHERE r.id = rid
        UNION ALL
        SELECT 'view hc_stock_reservation_lines', v.product_id, v.qty, v.status, v.part, NULL
          FROM hc_stock_reservation_lines v WHERE v.reservation_id = rid) x
     ORDER BY 1, 2
$$;

------------------------------------------------------------------------------
-- What a reserve writes
------------------------------------------------------------------------------
CREATE FUNCTION row_counts(OUT o bigint, OUT l bigint, OUT g bigint) LANGUAGE sql AS $$
    SELECT (SELECT count(*) FROM hc_stock_orders), (SELECT count(*) FROM hc_stock_order_lines),
           (SELECT count(*) FROM hc_ledger)
$$;
-- A reserve of one product: its part, the order, the ledger row; no line.
SELECT * FROM row_counts() \gset before_
SELECT reservation_id AS a FROM hc_reserve('RW-P', 2, 'ann', 'rw-a', '1 hour') \gset
SELECT o - :before_o AS orders, l - :before_l AS order_lines, g - :before_g AS ledger_rows FROM row_counts();
SELECT * FROM order_rows(:'a');
-- An order of several products: its parts, the order, a line and a ledger row per product.
SELECT * FROM row_counts() \gset before_
SELECT reservation_id AS m FROM hc_reserve_items(
    '[{"product_id": "RW-Q", "qty": 1}, {"product_id": "RW-P", "qty": 3}]', 'max', 'rw-m', '1 hour') \gset
SELECT o - :before_o AS orders, l - :before_l AS order_lines, g - :before_g AS ledger_rows FROM row_counts();
SELECT * FROM order_rows(:'m');
-- The indexes those rows enter (doc/architecture.md names each one's reader).
SELECT tablename, indexname, regexp_replace(indexdef, '^.* USING ', '') AS definition
  FROM pg_indexes WHERE schemaname = 'holdcommit'
   AND tablename IN ('hc_stock_orders', 'hc_stock_order_lines', 'hc_ledger')
 ORDER BY 1, 2;

------------------------------------------------------------------------------
-- Every transition
------------------------------------------------------------------------------
-- Finalized, once.
SELECT status, replayed, items FROM hc_finalize(:'a');
SELECT status, replayed FROM hc_finalize(:'a');
SELECT * FROM order_rows(:'a');
SELECT status, replayed, items FROM hc_finalize(:'m');
SELECT * FROM order_rows(:'m');
-- Released, once.
SELECT reservation_id AS b FROM hc_reserve('RW-P', 1, 'bob', 'rw-b', '1 hour') \gset
SELECT reservation_id AS n FROM hc_reserve_items(
    '[{"product_id": "RW-P", "qty": 1}, {"product_id": "RW-Q", "qty": 1}]', 'nia', 'rw-n', '1 hour') \gset
SELECT status, replayed FROM hc_unreserve(:'b');
SELECT status, replayed FROM hc_unreserve(:'b');
SELECT status, replayed FROM hc_unreserve(:'n');
SELECT * FROM order_rows(:'b');
SELECT * FROM order_rows(:'n');
-- Expired by the sweep: the order of one product ends with its line.
SELECT reservation_id AS c FROM hc_reserve('RW-P', 1, 'cat', 'rw-c', '1 hour') \gset
SELECT reservation_id AS o FROM hc_reserve_items(
    '[{"product_id": "RW-P", "qty": 1}, {"product_id": "RW-Q", "qty": 1}]', 'oto', 'rw-o', '1 hour') \gset
SELECT age_stock(r, '2 hours') FROM unnest(ARRAY[:'c', :'o']) r;
SELECT * FROM hc_sweep();
SELECT * FROM order_rows(:'c');
SELECT * FROM order_rows(:'o');
SELECT entity_id, event, source, reserved_delta FROM hc_ledger
 WHERE reservation_id IN (:'c', :'o') AND event = 'expire' ORDER BY 1;
-- Expired by a reserve that finds too little (a reclaim), then finalized late.
SELECT count(hc_stock_set('RW-R', 2));
SELECT reservation_id AS d FROM hc_reserve('RW-R', 2, 'dan', 'rw-d', '1 hour') \gset
SELECT age_stock(:'d', '2 hours');
SELECT reservation_id AS e FROM hc_reserve('RW-R', 1, 'eve', 'rw-e', '1 hour') \gset
SELECT * FROM order_rows(:'d');
SELECT outcome(format('SELECT hc_finalize(%L)', :'d'));
SELECT outcome(format('SELECT hc_finalize(%L, true)', :'d'));
SELECT status FROM hc_unreserve(:'e');
SELECT status, replayed FROM hc_finalize(:'d', true);
SELECT * FROM order_rows(:'d');
SELECT stock, reserved FROM hc_inventory WHERE product_id = 'RW-R';

------------------------------------------------------------------------------
-- Parts merged away under lines that no longer count
------------------------------------------------------------------------------
-- Three parts of one unit each: three orders, one in each part.  One is
-- finalized, one expires; the gather to one part reclaims the expired one,
-- hands the live lines and the units to part 0, and leaves the ended ones
-- their part.  Calls on them lock part 0 instead.
SELECT count(hc_stock_set('RW-S', 3)), count(hc_stock_spread('RW-S', 3));
SELECT count(hc_reserve('RW-S', 1, 'sam', 'rw-s' || k, '1 hour')) FROM generate_series(1, 3) k;
SELECT string_agg(part::text, ' ' ORDER BY part) AS parts FROM hc_stock_orders WHERE scope_id = 'RW-S';
SELECT id AS s1 FROM hc_stock_orders WHERE scope_id = 'RW-S' AND part = 1 \gset
SELECT id AS s2 FROM hc_stock_orders WHERE scope_id = 'RW-S' AND part = 2 \gset
SELECT status FROM hc_finalize(:'s1');
SELECT age_stock(:'s2', '2 hours');
SELECT count(hc_stock_spread('RW-S', 1));
SELECT status, part FROM hc_stock_orders WHERE scope_id = 'RW-S' ORDER BY part;
SELECT * FROM hc_check();
SELECT status, replayed FROM hc_unreserve(:'s2');
SELECT status, replayed FROM hc_finalize(:'s1');
SELECT status, replayed FROM hc_finalize(:'s2', true);
SELECT status, part FROM hc_stock_orders WHERE id = :'s2';
SELECT stock, reserved FROM hc_inventory WHERE product_id = 'RW-S';

SELECT * FROM hc_check();
DROP FUNCTION order_rows(text);
-- The keys of the orders aged here are past retention: forgotten now, so
-- that the suites after this one count only their own.
UPDATE hc_stock_orders SET idempotency_key = NULL WHERE scope_id LIKE 'RW-%';
DROP FUNCTION row_counts();
