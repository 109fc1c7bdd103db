-- The story of a sale, played by make run.
\set VERBOSITY default
\pset footer off

\echo '== A small catalogue: four unique assets and a flash-sale product'
SELECT id, name, status FROM hc_asset_add('LOCO-0042', 'Diesel locomotive BR 218');
SELECT id, name, status FROM hc_asset_add('PLATE-B1HC', 'Licence plate B 1 HC');
SELECT id, name, status FROM hc_asset_add('LOT-17', 'Surplus signal box');
SELECT id, name, status FROM hc_asset_add('LAMP-3', 'Semaphore signal lamp');
SELECT product_id, stock, reserved, available FROM hc_stock_set('SNEAKER-42', 3);

\echo
\echo '== 201 Created: alice holds the locomotive for 10 minutes'
SELECT reservation_id, asset_id, buyer_id, status, replayed
  FROM hc_hold('LOCO-0042', 'alice', 'order-1001', '10 minutes') \gset alice_
SELECT :'alice_reservation_id' AS reservation_id, :'alice_status' AS status, :'alice_replayed' AS replayed;

\echo
\echo '== 200 OK: her browser retries with the same Idempotency-Key: the same hold, replayed'
SELECT reservation_id, status, replayed FROM hc_hold('LOCO-0042', 'alice', 'order-1001', '10 minutes');

\echo
\echo '== 409 Conflict: bob wants it too (SQLSTATE RS001, at once, no waiting)'
SELECT * FROM hc_hold('LOCO-0042', 'bob', 'order-2001');

\echo
\echo '== The payment webhook arrives (twice): commit, then a replay'
SELECT reservation_id, status, replayed FROM hc_commit(:'alice_reservation_id');
SELECT reservation_id, status, replayed FROM hc_commit(:'alice_reservation_id');
SELECT id, status FROM hc_assets WHERE id = 'LOCO-0042';

\echo
\echo '== carol holds the plate, then cancels: it is AVAILABLE again at once'
SELECT reservation_id AS carol_id FROM hc_hold('PLATE-B1HC', 'carol', 'order-3001') \gset
SELECT reservation_id, status FROM hc_release(:'carol_id');
SELECT id, status FROM hc_assets WHERE id = 'PLATE-B1HC';

\echo
\echo '== dave holds the signal box for 1 second and walks away ...'
SELECT reservation_id AS dave_id FROM hc_hold('LOT-17', 'dave', 'order-4001', '1 second') \gset
SELECT pg_sleep(1.2);
\echo '== ... erin takes it: the expired hold is reclaimed inline (unless the sweeper got there first)'
-- A sweep that is ending dave's hold at this very moment has the lot's row
-- locked, and a hold never waits: RS001 "being held right now".  The demo
-- waits for that row first, so that erin comes after any such sweep.
BEGIN;
SELECT id AS lot_locked FROM hc_assets WHERE id = 'LOT-17' FOR NO KEY UPDATE \gset
SELECT asset_id, buyer_id, status FROM hc_hold('LOT-17', 'erin', 'order-5001');
COMMIT;
SELECT buyer_id, status FROM hc_reservations WHERE id = :'dave_id';
\echo '== 410 Gone: dave pays too late (SQLSTATE RS003): refund him'
SELECT * FROM hc_commit(:'dave_id');

\echo
\echo '== Flash sale: 3 sneakers; a two-pair order, then a one-pair order, then one too many'
SELECT reservation_id AS frank_id, items FROM hc_reserve('SNEAKER-42', 2, 'frank', 'order-6001') \gset
SELECT :'items' AS items;
SELECT status, items FROM hc_reserve('SNEAKER-42', 1, 'gina', 'order-7001');
SELECT * FROM hc_reserve('SNEAKER-42', 1, 'hugo', 'order-8001');
SELECT status FROM hc_finalize(:'frank_id');
SELECT product_id, stock, reserved, available FROM hc_inventory;

\echo
\echo '== ivan holds the signal lamp for 1 second, then closes his browser; nobody calls anything ...'
SELECT reservation_id AS ivan_id FROM hc_hold('LAMP-3', 'ivan', 'order-9001', '1 second') \gset
SELECT id, status FROM hc_assets WHERE id = 'LAMP-3';
-- Wait for the sweeper's next run: within 2 s here, on a busy machine later (60 s at most).
DO $$
BEGIN
    FOR i IN 1 .. 600 LOOP
        EXIT WHEN (SELECT status FROM hc_assets WHERE id = 'LAMP-3') = 'AVAILABLE';
        PERFORM pg_sleep(0.1);
    END LOOP;
END $$;
\echo '== ... and the background sweeper (every 2 s in this demo) has put it back on sale'
SELECT id, status FROM hc_assets WHERE id = 'LAMP-3';
SELECT buyer_id, status FROM hc_reservations WHERE id = :'ivan_id';
SELECT event, source, function, actor FROM hc_ledger WHERE entity_id = 'LAMP-3' ORDER BY seq;
\echo '== What operators see: the sweeper''s last run, and the overview'
SELECT database, last_end::time(0) AS last_end, runs > 0 AS has_run, total_expired_holds,
       next_run::time(0) AS next_run, last_error
  FROM hc_sweeper_status;
SELECT * FROM hc_overview;

\echo
\echo '== The ledger, and the invariants (no rows = all hold)'
SELECT at::time(0) AS at, kind, entity_id, event, buyer_id, reserved_delta, stock_delta, actor
  FROM hc_ledger ORDER BY seq;
SELECT * FROM hc_check();
