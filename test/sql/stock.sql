-- Counted stock: reserve, reserve_items, finalize, unreserve.

CREATE FUNCTION stock_state() RETURNS text LANGUAGE sql AS $$
    SELECT md5(concat_ws('|',
        (SELECT string_agg(concat_ws(',', product_id, stock, reserved, version), ';' ORDER BY product_id) FROM hc_inventory),
        (SELECT string_agg(concat_ws(',', id, status), ';' ORDER BY id) FROM hc_stock_reservations),
        (SELECT string_agg(concat_ws(',', product_id, reservation_id, status), ';' ORDER BY 1) FROM hc_stock_reservation_lines),
        (SELECT count(*) FROM hc_idempotency_keys),
        (SELECT count(*) FROM hc_ledger)))
$$;

CREATE FUNCTION inv(p text) RETURNS text LANGUAGE sql AS $$
    SELECT format('stock %s, reserved %s, available %s', stock, reserved, available)
      FROM hc_inventory WHERE product_id = p
$$;

-- Stock: create, set, adjust.
SELECT product_id, stock, reserved, available FROM hc_stock_set('SKU-A', 10);
SELECT product_id, stock, reserved, available FROM hc_stock_set('SKU-B', 3);
SELECT product_id, stock FROM hc_stock_set('SKU-A', 5);
SELECT product_id, stock FROM hc_stock_adjust('SKU-A', 2, 'restock from supplier');
SELECT product_id, stock FROM hc_stock_adjust('SKU-A', -1, 'damaged in store');

-- Reserve: available goes down at once; a replay returns the stored row.
SELECT reservation_id AS r1, expires_at - created_at AS ttl
  FROM hc_reserve('SKU-A', 4, 'alice', 'skey-1', '10 minutes') \gset
SELECT :'r1' ~ '^res_[0-9A-HJKMNP-TV-Z]{26}$' AS ulid, :'ttl' AS ttl, inv('SKU-A');
SELECT reservation_id = :'r1' AS same, buyer_id, status, items, replayed
  FROM hc_reserve('SKU-A', 4, 'alice', 'skey-1', '10 minutes');
-- What a replay compares, as in hold.sql: these bytes never change.
SELECT fingerprint = sha256('10:hc_reserve;5:alice;9:600000000;5:SKU-A;1:4;') AS fingerprint_as_ever
  FROM hc_stock_orders WHERE id = :'r1';
SELECT stock_state() AS before \gset
SELECT outcome($$SELECT hc_reserve('SKU-A', 3, 'alice', 'skey-1')$$);
SELECT outcome($$SELECT hc_hold('LOT-1', 'alice', 'skey-1')$$);
-- Not enough left: RS002, nothing changes; unknown product: RS006.
SELECT outcome($$SELECT hc_reserve('SKU-A', 3, 'bob', 'skey-2')$$);
SELECT outcome($$SELECT hc_reserve('SKU-Z', 1, 'bob', 'skey-2')$$);
SELECT stock_state() = :'before' AS unchanged;
\set VERBOSITY default
SELECT hc_reserve('SKU-A', 3, 'bob', 'skey-2');
\set VERBOSITY terse
SELECT status, items, replayed FROM hc_reserve('SKU-A', 2, 'bob', 'skey-2');
SELECT inv('SKU-A');

-- Finalize: stock and reserved go down once; a repeat replays.
SELECT status, replayed FROM hc_finalize(:'r1');
SELECT inv('SKU-A');
SELECT status, replayed FROM hc_finalize(:'r1');
SELECT inv('SKU-A');
SELECT outcome(format('SELECT hc_unreserve(%L)', :'r1'));
SELECT outcome($$SELECT hc_finalize('res_unknown')$$);

-- Unreserve: reserved goes down once; a repeat replays; finalize after: RS004.
SELECT reservation_id AS r2 FROM hc_reserve('SKU-B', 2, 'carol', 'skey-3') \gset
SELECT inv('SKU-B');
SELECT status, items, replayed FROM hc_unreserve(:'r2');
SELECT status, replayed FROM hc_unreserve(:'r2');
SELECT inv('SKU-B');
SELECT outcome(format('SELECT hc_finalize(%L)', :'r2'));
SELECT outcome(format('SELECT hc_finalize(%L, true)', :'r2'));

-- Multi-item orders: lines of one product are summed, sorted, all or nothing.
SELECT hc_stock_set('SKU-C', 1) IS NOT NULL AS created;
SELECT stock FROM hc_stock_adjust('SKU-A', 3, 'restock');
SELECT reservation_id AS r3, items
  FROM hc_reserve_items('[{"product_id": "SKU-B", "qty": 1}, {"product_id": "SKU-A", "qty": 1},
                          {"product_id": "SKU-B", "qty": 1}]', 'dave', 'skey-4') \gset
SELECT :'items' AS items, inv('SKU-A') AS a, inv('SKU-B') AS b;
SELECT stock_state() AS before \gset
SELECT outcome($$SELECT hc_reserve_items('[{"product_id": "SKU-C", "qty": 1}, {"product_id": "SKU-B", "qty": 5}]', 'erin', 'skey-5')$$);
SELECT outcome($$SELECT hc_reserve_items('[{"product_id": "SKU-C", "qty": 1}, {"product_id": "SKU-Q", "qty": 1}]', 'erin', 'skey-5')$$);
SELECT stock_state() = :'before' AS unchanged, inv('SKU-C');
-- The same order with its lines in another order is the same request.
SELECT reservation_id = :'r3' AS same, replayed
  FROM hc_reserve_items('[{"product_id": "SKU-A", "qty": 1}, {"product_id": "SKU-B", "qty": 2}]', 'dave', 'skey-4');
SELECT status, items FROM hc_finalize(:'r3');
SELECT inv('SKU-A') AS a, inv('SKU-B') AS b;

-- Expiry: an expired reservation is reclaimed inline by the next reserve.
SELECT product_id, stock FROM hc_stock_set('SKU-D', 2);
SELECT reservation_id AS r4 FROM hc_reserve('SKU-D', 2, 'frank', 'skey-6', '1 minute') \gset
SELECT outcome($$SELECT hc_reserve('SKU-D', 1, 'gina', 'skey-7')$$);
SELECT age_stock(:'r4', '2 minutes');
SELECT outcome(format('SELECT hc_finalize(%L)', :'r4'));
SELECT buyer_id, status, replayed FROM hc_reserve('SKU-D', 1, 'gina', 'skey-7');
SELECT status FROM hc_stock_reservations WHERE id = :'r4';
SELECT inv('SKU-D');
-- late_ok: one unit is still there, two are not.
SELECT outcome(format('SELECT hc_finalize(%L, true)', :'r4'));
SELECT status, replayed FROM hc_unreserve(:'r4');
SELECT inv('SKU-D');
-- late_ok finalizes when the stock is still there.
SELECT reservation_id AS r5 FROM hc_reserve('SKU-D', 1, 'hugo', 'skey-8', '50 milliseconds') \gset
SELECT pg_sleep(0.1);
SELECT status, replayed FROM hc_finalize(:'r5', late_ok => true);
SELECT inv('SKU-D');
-- Reclaiming is bounded: a reserve that finds enough stock reclaims nothing
-- (the sweeper will); one that finds too little reclaims the oldest expired
-- lines, just enough of them to cover what is missing.
SELECT product_id FROM hc_stock_set('SKU-F', 5);
SELECT reservation_id AS r8 FROM hc_reserve('SKU-F', 2, 'lena', 'skey-12', '1 minute') \gset
SELECT reservation_id AS r9 FROM hc_reserve('SKU-F', 2, 'nick', 'skey-18', '1 minute') \gset
SELECT age_stock(:'r8', '3 minutes'), age_stock(:'r9', '2 minutes');
SELECT status FROM hc_reserve('SKU-F', 1, 'mona', 'skey-13');
SELECT inv('SKU-F'), (SELECT status FROM hc_stock_reservations WHERE id = :'r8') AS lena,
       (SELECT status FROM hc_stock_reservations WHERE id = :'r9') AS nick;
SELECT status FROM hc_reserve('SKU-F', 2, 'olive', 'skey-19');
SELECT inv('SKU-F'), (SELECT status FROM hc_stock_reservations WHERE id = :'r8') AS lena,
       (SELECT status FROM hc_stock_reservations WHERE id = :'r9') AS nick;
-- An expired reservation nobody reclaimed: unreserve ends it as EXPIRED.
SELECT product_id FROM hc_stock_set('SKU-E', 5);
SELECT reservation_id AS r6 FROM hc_reserve_items('[{"product_id": "SKU-E", "qty": 2}, {"product_id": "SKU-C", "qty": 1}]', 'ivan', 'skey-9', '50 milliseconds') \gset
SELECT pg_sleep(0.1);
SELECT status, replayed FROM hc_unreserve(:'r6');
SELECT inv('SKU-E') AS e, inv('SKU-C') AS c;
SELECT outcome(format('SELECT hc_finalize(%L)', :'r6'));

-- Existence is checked before stock: a missing product wins over a short one.
SELECT outcome($$SELECT hc_reserve_items('[{"product_id": "SKU-B", "qty": 99}, {"product_id": "SKU-ZZ", "qty": 1}]', 'nina', 'skey-14')$$);
-- A late finalize reclaims the product's expired reservations before giving up.
SELECT product_id FROM hc_stock_set('SKU-G', 1);
SELECT reservation_id AS g1 FROM hc_reserve('SKU-G', 1, 'olga', 'skey-15', '50 milliseconds') \gset
SELECT pg_sleep(0.1);
SELECT reservation_id AS g2 FROM hc_reserve('SKU-G', 1, 'paul', 'skey-16', '50 milliseconds') \gset
SELECT pg_sleep(0.1);
SELECT status, replayed FROM hc_finalize(:'g1', late_ok => true);
SELECT inv('SKU-G'), (SELECT status FROM hc_stock_reservations WHERE id = :'g2') AS paul;
-- Stock changes reclaim expired reservations too, so they are not blocked by them.
SELECT product_id FROM hc_stock_set('SKU-H', 3);
SELECT reservation_id AS h1 FROM hc_reserve('SKU-H', 3, 'quin', 'skey-17', '50 milliseconds') \gset
SELECT pg_sleep(0.1);
SELECT product_id, stock, reserved FROM hc_stock_set('SKU-H', 0);
SELECT status FROM hc_stock_reservations WHERE id = :'h1';
-- Stock never goes below reserved (22023, nothing changed).
SELECT reservation_id AS r7 FROM hc_reserve('SKU-E', 4, 'judy', 'skey-10') \gset
SELECT stock_state() AS before \gset
SELECT outcome($$SELECT hc_stock_set('SKU-E', 3)$$);
SELECT outcome($$SELECT hc_stock_adjust('SKU-E', -2, 'shrink')$$);
SELECT outcome($$SELECT hc_stock_adjust('SKU-E', 2147483647, 'overflow')$$);
SELECT outcome($$SELECT hc_stock_adjust('SKU-Z', 1, 'unknown')$$);
SELECT stock_state() = :'before' AS unchanged;
SELECT product_id, stock, reserved FROM hc_stock_set('SKU-E', 4);

-- Bad input: standard SQLSTATEs, nothing changed.
SELECT outcome($$SELECT hc_stock_set(NULL, 1)$$);
SELECT outcome($$SELECT hc_stock_set('SKU-E', NULL)$$);
SELECT outcome($$SELECT hc_stock_set('SKU-E', -1)$$);
SELECT outcome($$SELECT hc_stock_set('', 1)$$);
SELECT outcome($$SELECT hc_stock_set(repeat('p', 65), 1)$$);
SELECT outcome($$SELECT hc_stock_adjust('SKU-E', 0, 'nothing')$$);
SELECT outcome($$SELECT hc_stock_adjust('SKU-E', 1, NULL)$$);
SELECT outcome($$SELECT hc_stock_adjust('SKU-E', 1, '')$$);
SELECT outcome($$SELECT hc_reserve('SKU-E', 0, 'x', 'k')$$);
SELECT outcome($$SELECT hc_reserve('SKU-E', -1, 'x', 'k')$$);
SELECT outcome($$SELECT hc_reserve('SKU-E', NULL, 'x', 'k')$$);
SELECT outcome($$SELECT hc_reserve(NULL, 1, 'x', 'k')$$);
SELECT outcome($$SELECT hc_reserve('SKU-E', 1, '', 'k')$$);
SELECT outcome($$SELECT hc_reserve('SKU-E', 1, 'x', repeat('k', 256))$$);
SELECT outcome($$SELECT hc_reserve('SKU-E', 1, 'x', 'k', '0 seconds')$$);
SELECT outcome($$SELECT hc_reserve('SKU-E', 1, 'x', 'k', '2 days')$$);
-- hc_reserve_items refuses each of these orders: each call's outcome in turn.
SELECT format('SELECT outcome(%L)', format('SELECT hc_reserve_items(%L, %L, %L)', items, 'x', 'k'))
  FROM (VALUES
    (NULL::text),
    ('{"product_id": "SKU-E", "qty": 1}'),
    ('"SKU-E"'),
    ('[]'),
    ('[1]'),
    ('[{"qty": 1}]'),
    ('[{"product_id": 7, "qty": 1}]'),
    ('[{"product_id": "", "qty": 1}]'),
    (json_build_array(json_build_object('product_id', repeat('p', 65), 'qty', 1))::text),
    ('[{"product_id": "SKU-E"}]'),
    ('[{"product_id": "SKU-E", "qty": "1"}]'),
    ('[{"product_id": "SKU-E", "qty": 1.5}]'),
    ('[{"product_id": "SKU-E", "qty": 0}]'),
    ('[{"product_id": "SKU-E", "qty": -2}]'),
    ('[{"product_id": "SKU-E", "qty": 1e10}]'),
    ('[{"product_id": "SKU-E", "qty": 2147483647}, {"product_id": "SKU-E", "qty": 1}]'),
    ((SELECT jsonb_agg(jsonb_build_object('product_id', 'SKU-E', 'qty', 1)) FROM generate_series(1, 101))::text)
  ) AS c(items) \gexec
SELECT outcome($$SELECT hc_finalize(NULL)$$);
SELECT outcome($$SELECT hc_finalize('')$$);
SELECT outcome(format('SELECT hc_finalize(%L, NULL)', :'r7'));
SELECT outcome($$SELECT hc_unreserve(NULL)$$);
SELECT outcome($$SELECT hc_unreserve('res_unknown')$$);
-- 2.0 is an integer; holdcommit.max_items bounds the lines.
SELECT items FROM hc_reserve_items('[{"product_id": "SKU-C", "qty": 1.0}]', 'kim', 'skey-11');
SET holdcommit.max_items = 1;
SELECT outcome($$SELECT hc_reserve_items('[{"product_id": "SKU-C", "qty": 1}, {"product_id": "SKU-E", "qty": 1}]', 'x', 'k')$$);
RESET holdcommit.max_items;

-- The ledger: every stock change with its reservation, delta and source.
SELECT event, source, function, buyer_id, reserved_delta, stock_delta, detail
  FROM hc_ledger WHERE kind = 'product' AND entity_id = 'SKU-D' ORDER BY seq;
SELECT event, stock_delta, detail FROM hc_ledger
 WHERE kind = 'product' AND entity_id = 'SKU-A' AND source = 'adjustment' ORDER BY seq;

-- Invariants hold; broken ones are reported.
SELECT * FROM hc_check();
UPDATE hc_stock_parts SET reserved = reserved + 1 WHERE product_id = 'SKU-B';
SELECT invariant, subject, detail FROM hc_check() ORDER BY 1;
UPDATE hc_stock_parts SET reserved = reserved - 1 WHERE product_id = 'SKU-B';
-- The database itself refuses an oversold or negative row.
UPDATE hc_stock_parts SET reserved = stock + 1 WHERE product_id = 'SKU-B';
UPDATE hc_stock_parts SET reserved = -1 WHERE product_id = 'SKU-B';
SELECT * FROM hc_check();
-- A line released twice is caught even when the ledger agrees with the
-- inventory (both releases logged): each line's own ledger rows must add
-- up to what its status says.
SELECT product_id FROM hc_stock_set('SKU-L', 5);
SELECT reservation_id AS d1 FROM hc_reserve('SKU-L', 1, 'dora', 'skey-20') \gset
SELECT reservation_id AS d2 FROM hc_reserve('SKU-L', 1, 'dirk', 'skey-21') \gset
SELECT status FROM hc_unreserve(:'d1');
INSERT INTO hc_ledger (seq, at, kind, entity_id, event, source, function, reservation_id, buyer_id,
                       reserved_delta, actor)
VALUES (1000, now(), 'product', 'SKU-L', 'release', 'call', 'hc_unreserve', :'d1', 'dora', -1, 'test');
UPDATE hc_stock_parts SET reserved = reserved - 1 WHERE product_id = 'SKU-L';
SELECT invariant, subject = :'d1' AS dora, subject = :'d2' AS dirk FROM hc_check() ORDER BY 1;
DELETE FROM hc_ledger WHERE actor = 'test';
UPDATE hc_stock_parts SET reserved = reserved + 1 WHERE product_id = 'SKU-L';
SELECT * FROM hc_check();

-- Results carry the declared row type (hc_inventory), so a stored result
-- is readable in any session, also after the table dropped a column.
CREATE TABLE stored_results AS SELECT hc_stock_set('SKU-T', 4) AS r;
\c
SELECT (r).product_id, (r).stock, pg_typeof(r) FROM stored_results;
ALTER TABLE hc_stock_parts ADD COLUMN scratch integer;
ALTER TABLE hc_stock_parts DROP COLUMN scratch;
\c
SELECT product_id, stock, reserved FROM hc_stock_adjust('SKU-T', 1, 'after a dropped column');
SELECT (hc_stock_set('SKU-T', 6)).stock;
DROP TABLE stored_results;
