-- Stock in parts (hc_stock_spread): a product's units in several rows,
-- reserves that take from one part, the product's sums in hc_inventory,
-- refusals decided over every part, and the ledger and hc_check() over them.
\set VERBOSITY terse
SET client_min_messages = warning;

-- Which part a reserve takes from depends on its backend: what is shown of
-- the parts after a reserve does not.
CREATE FUNCTION pg_temp.parts(p text)
RETURNS TABLE (parts bigint, stock bigint, reserved bigint, least_available int, most_available int)
LANGUAGE sql AS $$ SELECT count(*), sum(stock), sum(reserved), min(stock - reserved), max(stock - reserved)
                     FROM hc_stock_parts WHERE product_id = p $$;

-- Spreading: parts between 1 and 256, the available units as even as they go.
SELECT product_id, stock, reserved, available FROM hc_stock_set('SP-1', 10);
SELECT hc_stock_spread('SP-1', 0);
SELECT hc_stock_spread('SP-1', 257);
SELECT hc_stock_spread(NULL, 2);
SELECT hc_stock_spread('SP-NONE', 2);
SELECT product_id, stock, reserved, available FROM hc_stock_spread('SP-1', 4);
SELECT * FROM pg_temp.parts('SP-1');
SELECT product_id, stock, reserved, available FROM hc_inventory WHERE product_id = 'SP-1';
SELECT 1;

-- A reserve takes from one part; the line says which.
SELECT status, items FROM hc_reserve('SP-1', 2, 'alice', 'sp-1');
SELECT l.qty, l.part = p.part AS counted_there
  FROM hc_stock_reservation_lines l
  JOIN hc_stock_parts p ON p.product_id = l.product_id AND p.part = l.part AND p.reserved = 2
 WHERE l.product_id = 'SP-1';
SELECT stock, reserved, available FROM hc_inventory WHERE product_id = 'SP-1';

-- More than any one part has, but not more than the product has: the
-- parts are spread anew and the reserve takes them from one part.
SELECT max(stock - reserved) FROM hc_stock_parts WHERE product_id = 'SP-1';
SELECT status FROM hc_reserve('SP-1', 6, 'bob', 'sp-2');
SELECT sum(stock) AS stock, sum(reserved) AS reserved, count(*) AS parts FROM hc_stock_parts WHERE product_id = 'SP-1';
SELECT count(*) FROM hc_check();

-- Two units left in the product: three are refused (RS002, the product's
-- numbers), two are not, however the parts hold them.
SELECT hc_reserve('SP-1', 3, 'carol', 'sp-3');
SELECT status FROM hc_reserve('SP-1', 2, 'carol', 'sp-4');
SELECT hc_reserve('SP-1', 1, 'dave', 'sp-5');
SELECT stock, reserved, available FROM hc_inventory WHERE product_id = 'SP-1';

-- Unreserve and finalize change the line's own part.
SELECT status FROM hc_unreserve((SELECT id FROM hc_stock_reservations WHERE idempotency_key = 'sp-2'));
SELECT status FROM hc_finalize((SELECT id FROM hc_stock_reservations WHERE idempotency_key = 'sp-1'));
SELECT stock, reserved, available FROM hc_inventory WHERE product_id = 'SP-1';
SELECT count(*) FROM hc_check();

-- A multi-item order over a spread product and a product of one part.
SELECT product_id, stock FROM hc_stock_set('SP-2', 5);
SELECT status, items FROM hc_reserve_items('[{"product_id": "SP-2", "qty": 2}, {"product_id": "SP-1", "qty": 3}]',
                                           'erin', 'sp-6');
SELECT status FROM hc_finalize((SELECT id FROM hc_stock_reservations WHERE idempotency_key = 'sp-6'));
SELECT product_id, stock, reserved, available FROM hc_inventory WHERE product_id LIKE 'SP-%' ORDER BY 1;

-- Stock changes spread over the parts; never below what is reserved.
SELECT product_id, stock, reserved, available FROM hc_stock_adjust('SP-1', 13, 'restock');
SELECT * FROM pg_temp.parts('SP-1');
SELECT product_id, stock, reserved FROM hc_stock_set('SP-1', 20);
SELECT hc_stock_set('SP-1', 1);
SELECT count(*) FROM hc_check();

-- Expired lines are reclaimed from their parts, inline and by the sweep.
SELECT status FROM hc_reserve('SP-1', 4, 'frank', 'sp-7', '1 millisecond');
SELECT status FROM hc_reserve('SP-1', 4, 'grace', 'sp-8', '1 millisecond');
SELECT pg_sleep(0.01);
SELECT count(*) FROM hc_sweep();
SELECT idempotency_key, status FROM hc_stock_reservations WHERE idempotency_key IN ('sp-7', 'sp-8') ORDER BY 1;
SELECT stock, reserved FROM hc_inventory WHERE product_id = 'SP-1';
SELECT status FROM hc_reserve('SP-1', 9, 'heidi', 'sp-9', '1 millisecond');
SELECT pg_sleep(0.01);
-- 20 in stock, 2 reserved and 9 expired: 18 can be had, by reclaiming
-- the expired line wherever it is counted; 19 cannot.
SELECT hc_reserve('SP-1', 19, 'ivan', 'sp-10');
SELECT status FROM hc_reserve('SP-1', 18, 'ivan', 'sp-10');
SELECT l.status, count(*) FROM hc_stock_reservation_lines l WHERE l.product_id = 'SP-1' GROUP BY 1 ORDER BY 1;
SELECT count(*) FROM hc_check();

-- Fewer parts: the lines and units of the parts that go count in part 0.
SELECT status FROM hc_unreserve((SELECT id FROM hc_stock_reservations WHERE idempotency_key = 'sp-10'));
SELECT status FROM hc_reserve('SP-1', 5, 'judy', 'sp-11');
SELECT product_id, stock, reserved FROM hc_stock_spread('SP-1', 2);
SELECT * FROM pg_temp.parts('SP-1');
SELECT count(*) FROM hc_stock_reservation_lines WHERE product_id = 'SP-1' AND status = 'RESERVED' AND part > 1;
SELECT product_id, stock, reserved FROM hc_stock_spread('SP-1', 8);
SELECT count(*) FROM hc_stock_parts WHERE product_id = 'SP-1';
SELECT status FROM hc_unreserve((SELECT id FROM hc_stock_reservations WHERE idempotency_key = 'sp-11'));
SELECT product_id, stock, reserved FROM hc_stock_spread('SP-1', 1);
SELECT count(*) FROM hc_check();

-- A backend takes from its home part, the part its last reserve of the
-- product took from, while that part has the units; then from another,
-- which becomes its home part.  A home part that is gone is only a hint.
SELECT product_id, stock FROM hc_stock_set('SP-H', 40);
SELECT count(*) FROM hc_stock_spread('SP-H', 4);
SELECT status FROM hc_reserve('SP-H', 1, 'hana', 'sp-h1');
SELECT status FROM hc_reserve('SP-H', 1, 'hana', 'sp-h2');
SELECT status FROM hc_reserve('SP-H', 8, 'hana', 'sp-h3');
SELECT count(DISTINCT part) AS parts_taken_from FROM hc_stock_reservation_lines WHERE product_id = 'SP-H';
SELECT status FROM hc_reserve('SP-H', 1, 'hana', 'sp-h4');
SELECT status FROM hc_reserve('SP-H', 2, 'hana', 'sp-h5');
SELECT reserved FROM hc_stock_parts WHERE product_id = 'SP-H' ORDER BY reserved DESC, part;
-- The first part has units again; the backend stays with its new one.
SELECT status FROM hc_unreserve((SELECT id FROM hc_stock_reservations WHERE idempotency_key = 'sp-h3'));
SELECT status FROM hc_reserve('SP-H', 1, 'hana', 'sp-h6');
SELECT count(DISTINCT l.part) AS parts_taken_from
  FROM hc_stock_reservation_lines l JOIN hc_stock_reservations r ON r.id = l.reservation_id
 WHERE r.idempotency_key IN ('sp-h4', 'sp-h5', 'sp-h6');
SELECT reserved FROM hc_stock_parts WHERE product_id = 'SP-H' ORDER BY reserved DESC, part;
-- In a transaction block: a reserve rolled back to its savepoint gives its
-- part back, and PL code's reserves in one transaction take from the part
-- the transaction already holds.  Then a refusal, and the session goes on.
BEGIN;
SAVEPOINT before_reserve;
SELECT status FROM hc_reserve('SP-H', 1, 'hana', 'sp-h-savepoint');
ROLLBACK TO SAVEPOINT before_reserve;
DO $$
BEGIN
    FOR i IN 1..3 LOOP
        PERFORM hc_reserve('SP-H', 1, 'hana', 'sp-h-pl' || i);
    END LOOP;
END
$$;
COMMIT;
SELECT count(DISTINCT l.part) AS parts_taken_from, count(*) AS lines
  FROM hc_stock_reservation_lines l JOIN hc_stock_reservations r ON r.id = l.reservation_id
 WHERE r.idempotency_key IN ('sp-h4', 'sp-h5', 'sp-h6', 'sp-h-savepoint', 'sp-h-pl1', 'sp-h-pl2',
                             'sp-h-pl3');
SELECT hc_reserve('SP-H', 100, 'hana', 'sp-h-toomany');
SELECT 1;
SELECT count(*) FROM hc_stock_spread('SP-H', 2);
SELECT status FROM hc_reserve('SP-H', 1, 'hana', 'sp-h7');
SELECT count(*) FROM hc_stock_spread('SP-H', 1);
SELECT status FROM hc_reserve('SP-H', 1, 'hana', 'sp-h8');
SELECT stock, reserved, available FROM hc_inventory WHERE product_id = 'SP-H';
SELECT count(*) FROM hc_check();

-- Each part's ledger rows have seqs of their own, and no seq repeats.
SELECT count(*) = count(DISTINCT seq) AS unique_seqs,
       count(DISTINCT seq / 281474976710656) > 1 AS several_parts
  FROM hc_ledger WHERE kind = 'product' AND entity_id = 'SP-1';
SELECT sum(stock_delta) AS stock, sum(reserved_delta) AS reserved
  FROM hc_ledger WHERE kind = 'product' AND entity_id = 'SP-1';
SELECT stock, reserved, version > 0 AS versioned FROM hc_inventory WHERE product_id = 'SP-1';

-- A planted part out of numbering is reported.
UPDATE hc_stock_parts SET part = 3 WHERE product_id = 'SP-2';
SELECT invariant, CASE WHEN subject LIKE 'res_%' THEN 'res_*' ELSE subject END AS subject
  FROM hc_check() ORDER BY 1;
UPDATE hc_stock_parts SET part = 0 WHERE product_id = 'SP-2';
SELECT count(*) FROM hc_check();
SELECT 1;
