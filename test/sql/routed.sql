-- The calls on a reservation given its routing id (the asset, or the
-- order's first product), which Citus sends to the node of its rows: on a
-- single node they answer as the calls by reservation id alone, and refuse a
-- reservation of another asset or order with RS006.  The forms by
-- reservation id alone keep resolving for untyped literals.
SELECT count(hc_asset_add('RT-1')), count(hc_asset_add('RT-2'));
SELECT count(hc_stock_set('RT-P', 5)), count(hc_stock_set('RT-Q', 5));

SELECT reservation_id AS r1 FROM hc_hold('RT-1', 'b1', 'rt-key-1') \gset
SELECT status, replayed FROM hc_extend('RT-1', :'r1', '20 minutes');
SELECT outcome(format($$SELECT hc_commit('RT-2', %L, false)$$, :'r1'));
SELECT outcome(format($$SELECT hc_release('RT-2', %L)$$, :'r1'));
SELECT outcome(format($$SELECT hc_extend('RT-2', %L, '1 minute')$$, :'r1'));
SELECT 1 AS usable;
SELECT status, replayed FROM hc_commit('RT-1', :'r1', false);
SELECT status, replayed FROM hc_commit('RT-1', :'r1', false);
SELECT reservation_id AS r2 FROM hc_hold('RT-2', 'b1', 'rt-key-2') \gset
SELECT status, replayed FROM hc_release('RT-2', :'r2');
SELECT status, replayed FROM hc_release('RT-2', :'r2');
SELECT outcome($$SELECT hc_release('RT-2', 'res_missing')$$);

-- Untyped literals: hc_commit(reservation_id, late_ok), not the form given the asset.
SELECT outcome($$SELECT hc_commit('res_missing', 'true')$$);
SELECT outcome($$SELECT hc_extend('res_missing', '1 minute')$$);

SELECT reservation_id AS s1 FROM hc_reserve_items('[{"product_id": "RT-Q", "qty": 1}, {"product_id": "RT-P", "qty": 2}]',
                                                  'b1', 'rt-key-3') \gset
SELECT scope_id FROM hc_stock_reservations WHERE id = :'s1';
SELECT outcome(format($$SELECT hc_finalize('RT-Q', %L, false)$$, :'s1'));
SELECT outcome(format($$SELECT hc_unreserve('RT-Q', %L)$$, :'s1'));
SELECT status, replayed FROM hc_finalize('RT-P', :'s1', false);
SELECT status, replayed FROM hc_finalize('RT-P', :'s1', false);
SELECT reservation_id AS s2 FROM hc_reserve('RT-Q', 2, 'b1', 'rt-key-4') \gset
SELECT status, replayed FROM hc_unreserve('RT-Q', :'s2');
SELECT outcome($$SELECT hc_finalize('RT-Q', 'res_missing', false)$$);
SELECT product_id, stock, reserved FROM hc_inventory WHERE product_id LIKE 'RT-%' ORDER BY 1;
SELECT * FROM hc_check();
