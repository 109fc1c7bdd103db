-- A hot product spreads itself: what an automatic spread or gather does to a
-- product (hc_stock_auto_spread runs it in the session, as the spreader
-- worker does in a transaction of its own), the floor an operator sets
-- with hc_stock_spread, their record in hc_stock_spreads, hc_overview and
-- hc_metrics, and hc_check().  How a rush is seen and who starts the worker
-- needs the preload: test/load/spread.sh.
\set VERBOSITY terse
SET client_min_messages = warning;

-- What is shown of the parts does not depend on which backend reserved.
CREATE FUNCTION pg_temp.parts(p text)
RETURNS TABLE (parts bigint, stock bigint, reserved bigint, least_available int, most_available int)
LANGUAGE sql AS $$ SELECT count(*), sum(stock), sum(reserved), min(stock - reserved), max(stock - reserved)
                     FROM hc_stock_parts WHERE product_id = p $$;
CREATE FUNCTION pg_temp.spreads(p text)
RETURNS TABLE (min_parts smallint, spreads bigint, gathers bigint, failures bigint,
               last_waiters int, last_parts_from smallint, last_parts_to smallint, spread boolean,
               gathered boolean)
LANGUAGE sql AS $$ SELECT min_parts, spreads, gathers, failures, last_waiters, last_parts_from,
                          last_parts_to, last_spread_at IS NOT NULL, last_gather_at IS NOT NULL
                     FROM hc_stock_spreads WHERE product_id = p $$;

-- A product made by hc_stock_set alone has no row: its floor is 1.
SELECT product_id, stock FROM hc_stock_set('AS-1', 100);
SELECT count(*) FROM hc_stock_spreads WHERE product_id = 'AS-1';
SELECT status FROM hc_reserve('AS-1', 7, 'alice', 'as-1');

-- A spread: 8 parts, the available units shared by them, the 7 reserved
-- units where they were; the product's numbers unchanged, no ledger row.
SELECT count(*) AS ledger_rows FROM hc_ledger WHERE entity_id = 'AS-1';
SELECT hc_stock_auto_spread('AS-1', 8);
SELECT * FROM pg_temp.parts('AS-1');
SELECT stock, reserved, available FROM hc_inventory WHERE product_id = 'AS-1';
SELECT count(*) AS ledger_rows FROM hc_ledger WHERE entity_id = 'AS-1';
SELECT * FROM pg_temp.spreads('AS-1');
-- Asked for parts it has: nothing changes, nothing is counted.
SELECT hc_stock_auto_spread('AS-1', 8);
SELECT spreads, gathers FROM pg_temp.spreads('AS-1');

-- Reserves over the parts, then a gather to its floor: part 0 takes the
-- reserved units and the lines of the parts that go; they finalize and
-- unreserve there.
SELECT status FROM hc_reserve('AS-1', 3, 'bob', 'as-2');
SELECT status FROM hc_reserve('AS-1', 2, 'carol', 'as-3');
SELECT hc_stock_auto_spread('AS-1', 1);
SELECT * FROM pg_temp.parts('AS-1');
SELECT count(*) AS lines_elsewhere FROM hc_stock_reservation_lines WHERE product_id = 'AS-1' AND part <> 0;
SELECT * FROM pg_temp.spreads('AS-1');
SELECT status FROM hc_finalize((SELECT id FROM hc_stock_reservations WHERE idempotency_key = 'as-2'));
SELECT status FROM hc_unreserve((SELECT id FROM hc_stock_reservations WHERE idempotency_key = 'as-3'));
SELECT stock, reserved, available FROM hc_inventory WHERE product_id = 'AS-1';
SELECT count(*) FROM hc_check();

-- The floor: hc_stock_spread sets it; a gather goes down to it, not below;
-- a spread goes above it; the operator may lower it again.
SELECT product_id, stock, reserved FROM hc_stock_spread('AS-1', 3);
SELECT * FROM pg_temp.spreads('AS-1');
SELECT hc_stock_auto_spread('AS-1', 16);
SELECT hc_stock_auto_spread('AS-1', 1);
SELECT * FROM pg_temp.parts('AS-1');
SELECT min_parts, spreads, gathers, last_parts_from, last_parts_to FROM pg_temp.spreads('AS-1');
SELECT product_id, stock FROM hc_stock_spread('AS-1', 1);
SELECT hc_stock_auto_spread('AS-1', 1);
SELECT min_parts FROM pg_temp.spreads('AS-1');
SELECT count(*) FROM hc_check();

-- The end of the stock over spread parts: every unit is sold, one part
-- after the other, then RS002 with the product's numbers.
SELECT product_id, stock FROM hc_stock_set('AS-2', 5);
SELECT hc_stock_auto_spread('AS-2', 4);
SELECT count(*) FILTER (WHERE r.status = 'RESERVED') AS reserved
  FROM generate_series(1, 5) i, hc_reserve('AS-2', 1, 'dave', 'as-2-' || i) r;
SELECT hc_reserve('AS-2', 1, 'dave', 'as-2-6');
SELECT * FROM pg_temp.parts('AS-2');
-- Gathered while every unit is reserved: the product still has none.
SELECT hc_stock_auto_spread('AS-2', 2);
SELECT * FROM pg_temp.parts('AS-2');
SELECT hc_reserve('AS-2', 1, 'dave', 'as-2-7');
SELECT count(*) FROM hc_check();

-- A product deleted by hand and made again by hc_stock_set has a floor of 1.
SELECT product_id, stock FROM hc_stock_set('AS-4', 10);
SELECT product_id, stock FROM hc_stock_spread('AS-4', 4);
SELECT min_parts FROM pg_temp.spreads('AS-4');
DELETE FROM hc_stock_parts WHERE product_id = 'AS-4';
DELETE FROM hc_ledger WHERE entity_id = 'AS-4';
SELECT product_id, stock FROM hc_stock_set('AS-4', 10);
SELECT count(*) AS floor_rows FROM hc_stock_spreads WHERE product_id = 'AS-4';
SELECT count(*) FROM hc_check();

-- What it refuses.
SELECT hc_stock_auto_spread('AS-1', 0);
SELECT hc_stock_auto_spread('AS-1', 257);
SELECT hc_stock_auto_spread('AS-NONE', 4);
SELECT hc_stock_auto_spread(NULL, 4);

-- hc_check() sees a product with fewer parts than its floor.
SELECT product_id, stock FROM hc_stock_set('AS-3', 10);
UPDATE hc_stock_spreads SET min_parts = 2 WHERE product_id = 'AS-1';
SELECT invariant, subject, detail FROM hc_check();
UPDATE hc_stock_spreads SET min_parts = 1 WHERE product_id = 'AS-1';

-- What operators and monitoring see.
SELECT item, value FROM hc_overview WHERE area = 'stock spreads';
SELECT label, value FROM hc_metrics
 WHERE metric = 'stock_spread' AND label NOT LIKE 'seconds_since_%' AND label NOT LIKE '%stall_ms';
SELECT label, value >= 0 AS recent FROM hc_metrics
 WHERE metric = 'stock_spread' AND label LIKE 'seconds_since_%';

-- Without the preload (or before any reserve) the watch shows nothing of
-- these products, which no reserve overlapped.
SELECT count(*) FROM hc_stock_waits() WHERE peak > 0;
