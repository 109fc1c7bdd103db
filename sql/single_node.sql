-- A distributed deployment may drop the single-node indexes: the lookup by
-- reservation id alone and the one key space (hc_reservations_id,
-- hc_reservations_key, hc_stock_reservations_id, hc_stock_reservations_key).
-- The calls that read through them without a statement then read with one:
-- every outcome stays the same.  (In a transaction that is rolled back, so
-- that the suites after this one keep the indexes.)
BEGIN;
DROP INDEX hc_reservations_id, hc_reservations_key,
           hc_stock_reservations_id, hc_stock_reservations_key;
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
ROLLBACK;

-- The indexes are back, and so is the read through them.
SELECT count(*) FROM pg_indexes
 WHERE indexname IN ('hc_reservations_id', 'hc_reservations_key',
                     'hc_stock_reservations_id', 'hc_stock_reservations_key');
SELECT count(hc_asset_add('SN-3'));
SELECT reservation_id AS sn3 FROM hc_hold('SN-3', 'b1', 'sn-key-6') \gset
SELECT status, replayed FROM hc_release(:'sn3');
