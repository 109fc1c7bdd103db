-- A distributed deployment drops the single-node indexes, as hc_distribute()
-- does: the lookup by reservation id alone and the one key space
-- (hc_reservations_id, hc_reservations_key, hc_stock_orders_key; the orders'
-- primary key on id becomes (scope_id, id) beside a plain index on id).
-- The calls that read through them without a statement then read with one:
-- every outcome stays the same.  (In a transaction that is rolled back, so
-- that the suites after this one keep the indexes.)
BEGIN;
DROP INDEX hc_reservations_id, hc_reservations_key, hc_stock_orders_key;
CREATE INDEX hc_stock_orders_by_id ON hc_stock_orders (id);
ALTER TABLE hc_stock_orders DROP CONSTRAINT hc_stock_orders_pkey,
    ADD CONSTRAINT hc_stock_orders_pkey PRIMARY KEY (scope_id, id);
SELECT count(hc_asset_add('SN-1')), count(hc_asset_add('SN-2'));
SELECT count(hc_stock_set('SN-P', 3));

SELECT reservation_id AS sn1 FROM hc_hold('SN-1', 'b1', 'sn-key-1') \gset
SELECT status, replayed, reservation_id = :'sn1' AS same FROM hc_hold('SN-1', 'b1', 'sn-key-1');
SELECT outcome($$SELECT hc_hold('SN-1', 'b2', 'sn-key-2')$$);
SELECT outcome($$SELECT hc_hold('SN-2', 'b1', 'sn-key-1')$$);
SELECT outcome($$SELECT hc_reserve('SN-P', 1, 'b1', 'sn-key-1')$$);
SELECT status, replayed FROM hc_extend(:'sn1', '20 minutes');
SELECT status, replayed FROM hc_commit(:'sn1');
SELECT status, replayed FROM hc_commit(:'sn1');
SELECT reservation_id AS sn2 FROM hc_hold('SN-2', 'b2', 'sn-key-3') \gset
SELECT status, replayed FROM hc_release(:'sn2');
SELECT outcome($$SELECT hc_release('res_missing')$$);

SELECT reservation_id AS sp1 FROM hc_reserve('SN-P', 2, 'b3', 'sn-key-4') \gset
SELECT status, replayed FROM hc_reserve('SN-P', 2, 'b3', 'sn-key-4');
SELECT outcome($$SELECT hc_reserve('SN-P', 2, 'b4', 'sn-key-5')$$);
SELECT status, replayed FROM hc_finalize(:'sp1');
SELECT stock, reserved FROM hc_inventory WHERE product_id = 'SN-P';
SELECT * FROM hc_check();
-- Those reads ran as statements: their plans are in this backend's memory.
SELECT substring(ident FROM '^/\* holdcommit schema \d+ \*/ (.*)') AS ident FROM pg_backend_memory_contexts
 WHERE name = 'CachedPlanSource' AND ident ~ '^/\* holdcommit schema \d+ \*/ SELECT [a-z_, ]+ FROM hc_[a-z_]+ WHERE'
 ORDER BY ident;
ROLLBACK;

-- The indexes are back, and so is the read through them.
SELECT count(*) FROM pg_indexes
 WHERE indexname IN ('hc_reservations_id', 'hc_reservations_key', 'hc_stock_orders_key')
    OR indexdef LIKE '%hc_stock_orders_pkey ON holdcommit.hc_stock_orders USING btree (id)';
SELECT count(hc_asset_add('SN-3'));
SELECT reservation_id AS sn3 FROM hc_hold('SN-3', 'b1', 'sn-key-6') \gset
SELECT status, replayed FROM hc_release(:'sn3');

-- With Citus in the database, a distributed table's rows are in its shards,
-- not in the table on this node: every read is a statement, the indexes
-- notwithstanding.  (A stand-in row in pg_extension, rolled back, in a new
-- session that has found no reads yet.)
\c
BEGIN;
SET LOCAL allow_system_table_mods = on;
INSERT INTO pg_extension (oid, extname, extowner, extnamespace, extrelocatable, extversion)
VALUES (4000000000, 'citus', 10, 'pg_catalog'::regnamespace, false, 'stand-in');
SELECT count(hc_asset_add('SN-4'));
SELECT reservation_id AS sn4 FROM hc_hold('SN-4', 'b1', 'sn-key-7') \gset
SELECT status, replayed FROM hc_hold('SN-4', 'b1', 'sn-key-7');
SELECT outcome($$SELECT hc_hold('SN-4', 'b2', 'sn-key-8')$$);
SELECT status, replayed FROM hc_commit(:'sn4');
SELECT substring(ident FROM '^/\* holdcommit schema \d+ \*/ (.*)') AS ident FROM pg_backend_memory_contexts
 WHERE name = 'CachedPlanSource' AND ident ~ '^/\* holdcommit schema \d+ \*/ SELECT [a-z_, ]+ FROM hc_[a-z_]+ WHERE'
 ORDER BY ident;
ROLLBACK;

-- Without it, the same calls read through the indexes: no such plans.
\c
SELECT count(hc_asset_add('SN-5'));
SELECT reservation_id AS sn5 FROM hc_hold('SN-5', 'b1', 'sn-key-9') \gset
SELECT outcome($$SELECT hc_hold('SN-5', 'b2', 'sn-key-10')$$);
SELECT status, replayed FROM hc_commit(:'sn5');
SELECT count(*) FROM pg_backend_memory_contexts
 WHERE name = 'CachedPlanSource' AND ident ~ '^/\* holdcommit schema \d+ \*/ SELECT [a-z_, ]+ FROM hc_[a-z_]+ WHERE';
