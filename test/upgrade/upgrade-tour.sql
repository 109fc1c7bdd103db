-- Every function and view of holdcommit, called once with valid arguments on
-- entities of its own (TOUR-*), printing only what does not depend on the
-- database it runs in: run by test/upgrade/upgrade.sh, test/upgrade/upgrade-0.2.0.sh and
-- test/upgrade/move.sh in an updated database and in a fresh install, whose outputs
-- must be equal.  test/upgrade/upgrade-lib.bash checks that it names every function
-- and view of the extension, so a new one must be added here.
-- Run as a superuser with the extension's schema first on the search_path.
\set ON_ERROR_STOP on
\set QUIET on
\pset format unaligned
\pset tuples_only on

-- Assets: hold, extend, commit; hold, release; an expired hold swept.
SELECT id, name, status FROM hc_asset_add('TOUR-A1', 'first');
SELECT id FROM hc_asset_add('TOUR-A2');
SELECT id FROM hc_asset_add('TOUR-A3');
CREATE TEMP TABLE tour_ids (what text PRIMARY KEY, id text);
INSERT INTO tour_ids SELECT 'hold1', reservation_id FROM hc_hold('TOUR-A1', 'alice', 'tour-hold-1', '5 minutes');
SELECT status, replayed, buyer_id FROM hc_hold('TOUR-A1', 'alice', 'tour-hold-1', '5 minutes');
SELECT status, expires_at > now() + interval '9 minutes'
  FROM hc_extend((SELECT id FROM tour_ids WHERE what = 'hold1'), '10 minutes');
SELECT status, replayed FROM hc_commit((SELECT id FROM tour_ids WHERE what = 'hold1'));
SELECT status, replayed FROM hc_commit((SELECT id FROM tour_ids WHERE what = 'hold1'), true);
SELECT status FROM hc_release((SELECT reservation_id FROM hc_hold('TOUR-A2', 'bob', 'tour-hold-2')));
SELECT status FROM hc_hold('TOUR-A3', 'carol', 'tour-hold-3', '1 millisecond');
-- The forms given the asset (the routing id on Citus).
SELECT id FROM hc_asset_add('TOUR-A4');
INSERT INTO tour_ids SELECT 'hold4', reservation_id FROM hc_hold('TOUR-A4', 'alice', 'tour-hold-5');
SELECT status FROM hc_extend('TOUR-A4', (SELECT id FROM tour_ids WHERE what = 'hold4'), '10 minutes');
SELECT status FROM hc_release('TOUR-A4', (SELECT id FROM tour_ids WHERE what = 'hold4'));
SELECT status FROM hc_commit('TOUR-A4', (SELECT reservation_id FROM hc_hold('TOUR-A4', 'bob', 'tour-hold-6')), false);
-- Group holds (0.4.0): these seats, the best seats of a pool.
SELECT count(*) FROM (SELECT hc_asset_add('TOUR-S' || i, '', pool => 'TOUR-POOL', rank => i,
                                          grp => 'R', pos => i) FROM generate_series(1, 4) i) s;
SELECT asset_id, status, replayed FROM hc_hold_many(ARRAY['TOUR-S4', 'TOUR-S3'], 'dave', 'tour-hold-7');
SELECT asset_id, status FROM hc_hold_best('TOUR-POOL', 2, 'erin', 'tour-hold-8');
SELECT asset_id, status, replayed
  FROM hc_commit((SELECT reservation_id FROM hc_hold_best('TOUR-POOL', 2, 'erin', 'tour-hold-8') LIMIT 1));
SELECT id, pool, rank, grp, pos, status FROM hc_assets WHERE pool = 'TOUR-POOL' ORDER BY id;
-- The forms Citus sends seats' calls as, which a single node runs as they are.
SELECT id, pool, scope_id FROM hc_asset_add('TOUR-POOL', 'TOUR-S5', '', 'TOUR-POOL', 5, 'R', 5);
SELECT asset_id, status FROM hc_hold_many('TOUR-POOL', ARRAY['TOUR-S5'], 'fay', 'tour-hold-9', '10 minutes');
SELECT count(*) FROM hc_asset_routes;

-- Stock: set, adjust, reserve, a multi-item order, finalize, unreserve.
SELECT product_id, stock, reserved FROM hc_stock_set('TOUR-P1', 10);
SELECT product_id, stock, reserved FROM hc_stock_set('TOUR-P2', 5);
SELECT product_id, stock, reserved FROM hc_stock_adjust('TOUR-P2', 3, 'tour restock');
INSERT INTO tour_ids SELECT 'order1', reservation_id FROM hc_reserve('TOUR-P1', 2, 'dave', 'tour-order-1');
SELECT status, replayed, items FROM hc_reserve('TOUR-P1', 2, 'dave', 'tour-order-1');
INSERT INTO tour_ids SELECT 'order2', reservation_id
  FROM hc_reserve_items('[{"product_id": "TOUR-P2", "qty": 1}, {"product_id": "TOUR-P1", "qty": 3}]',
                        'erin', 'tour-order-2', '5 minutes');
SELECT status, items FROM hc_finalize((SELECT id FROM tour_ids WHERE what = 'order1'));
SELECT status, items FROM hc_unreserve((SELECT id FROM tour_ids WHERE what = 'order2'));
SELECT status FROM hc_reserve('TOUR-P2', 1, 'frank', 'tour-order-3', '1 millisecond');
-- The forms given the order's first product (the routing id on Citus).
SELECT status, items FROM hc_finalize('TOUR-P1', (SELECT reservation_id FROM hc_reserve('TOUR-P1', 1, 'dave', 'tour-order-4')), false);
SELECT status, items FROM hc_unreserve('TOUR-P1', (SELECT reservation_id FROM hc_reserve('TOUR-P1', 1, 'dave', 'tour-order-5')));
SELECT product_id, stock, reserved, available FROM hc_inventory WHERE product_id LIKE 'TOUR-%' ORDER BY 1;
SELECT product_id, stock, reserved, available FROM hc_stock_spread('TOUR-P1', 3);
SELECT part, stock, reserved FROM hc_stock_parts WHERE product_id = 'TOUR-P1' ORDER BY part;
-- An automatic spread and gather as a worker runs them: the floor, 3, stays.
SELECT hc_stock_auto_spread('TOUR-P1', 8), hc_stock_auto_spread('TOUR-P1', 1);
SELECT product_id, min_parts, spreads, gathers, last_parts_from, last_parts_to
  FROM hc_stock_spreads WHERE product_id LIKE 'TOUR-%' ORDER BY 1;
-- The reserves the server watches (how many depends on the moment).
SELECT count(*) >= 0 FROM hc_stock_waits();
-- Citus' routing table: always empty.
SELECT count(*) FROM hc_routes;

-- Leases and attempts: acquire, heartbeat, a session-bound one, an attempt
-- begun and completed, a reset, release.
SELECT hc_lock_acquire('TOUR-L1', 'worker-1', '1 minute', 0);
SELECT hc_lock_heartbeat('TOUR-L1', 'worker-1', 1) IS NOT NULL;
-- A write fenced by the token (0.4.0), in a transaction of its own.
BEGIN;
SELECT hc_lock_check('TOUR-L1', 'worker-1', 1);
COMMIT;
SELECT resource, status, attempt, marker LIKE 'ATTEMPTED-worker-1-r1-t%'
  FROM hc_attempt_begin('TOUR-L1', 'worker-1', 1, '0', 3);
SELECT resource, status, attempt, external_ref FROM hc_attempt_complete('TOUR-L1', 'worker-1', 1, 'INV-1');
SELECT hc_lock_release('TOUR-L1', 'worker-1', 1);
SELECT hc_lock_acquire('TOUR-L1', 'worker-2', '1 minute', 0);
SELECT hc_lock_acquire_session('TOUR-L2', 'worker-3', '1 minute', 0);
SELECT status, attempt FROM hc_attempt_begin('TOUR-L2', 'worker-3', 1, '0', 1);
SELECT status, attempt FROM hc_attempt_begin('TOUR-L2', 'worker-3', 1, '0', 1);
SELECT status, attempt FROM hc_attempt_reset('TOUR-L2', 'tour: checked by hand');
SELECT hc_lock_release('TOUR-L2', 'worker-3', 1);

-- The sweep: the two 1 ms reservations, and nothing else of the tour.
SELECT pg_sleep(0.01) IS NULL;
SELECT expired_holds, expired_reservations FROM hc_sweep();
SELECT status FROM hc_assets WHERE id = 'TOUR-A3';
SELECT stock, reserved FROM hc_inventory WHERE product_id = 'TOUR-P2';
SELECT count(*) FROM hc_check();

-- The grants, to a role of the tour's own.
CREATE ROLE hc_tour_role;
SELECT hc_grant_app('hc_tour_role'), hc_grant_operator('hc_tour_role'), hc_grant_monitor('hc_tour_role');
SET ROLE hc_tour_role;
SELECT status FROM hc_hold('TOUR-A2', 'grace', 'tour-hold-4');
RESET ROLE;
DROP OWNED BY hc_tour_role;
DROP ROLE hc_tour_role;

-- The name guard: a look-alike function is refused.
\set ON_ERROR_STOP off
\set VERBOSITY sqlstate
CREATE FUNCTION public.hc_hold(varchar) RETURNS int LANGUAGE sql AS 'SELECT 1';
-- Scale-out needs Citus: without it, a refusal; and so does a step of an
-- order of several products there.
SELECT hc_distribute();
SELECT hc_order_step('TOUR-P1', 'header', '{res_x,read}');
SELECT hc_scope_id();
\set ON_ERROR_STOP on

-- The sweeper's state for this database, and every view.
SELECT state, reason FROM hc_sweeper_state() WHERE database = current_database();
SELECT state, reason FROM hc_sweeper_databases WHERE database = current_database();
-- The pool's slots (how many run depends on the moment).
SELECT count(*) >= 0 FROM hc_worker_state();
SELECT count(*) >= 0 FROM hc_workers;
SELECT count(*) >= 0 FROM hc_sweeper_status;
SELECT count(*) > 0 FROM hc_overview;
SELECT count(*) > 0 FROM hc_metrics;
-- The operators' page (0.4.0).
SELECT product_id, stock, reserved, available FROM hc_ops_products WHERE product_id LIKE 'TOUR-%' ORDER BY 1;
SELECT count(*), sum(assets_sold) > 0 FROM hc_ops_sales;
SELECT count(*) >= 0 FROM hc_ops_sweeper;
SELECT resource, owner, token FROM hc_lease_status WHERE resource LIKE 'TOUR-%' ORDER BY 1;
SELECT resource, status, attempts, total_attempts, external_ref FROM hc_attempt_status WHERE resource LIKE 'TOUR-%' ORDER BY 1;
SELECT kind, status FROM hc_idempotency_keys WHERE key LIKE 'tour-%' ORDER BY key;
SELECT kind, entity_id, event, function FROM hc_ledger WHERE entity_id LIKE 'TOUR-%' ORDER BY entity_id, seq;
SELECT asset_id, buyer_id, status FROM hc_reservations WHERE asset_id LIKE 'TOUR-%' ORDER BY created_at, asset_id;
SELECT buyer_id, status FROM hc_stock_reservations WHERE scope_id LIKE 'TOUR-%' ORDER BY created_at, buyer_id;
SELECT product_id, qty, status FROM hc_stock_reservation_lines WHERE product_id LIKE 'TOUR-%' ORDER BY 1, 2, 3;
SELECT scope_id, qty, products, status FROM hc_stock_orders WHERE scope_id LIKE 'TOUR-%' ORDER BY created_at, buyer_id;
SELECT product_id, qty, status FROM hc_stock_order_lines WHERE product_id LIKE 'TOUR-%' ORDER BY 1, 2, 3;
SELECT resource, owner, token, session_pid IS NULL FROM hc_locks WHERE resource LIKE 'TOUR-%' ORDER BY 1;
SELECT resource, status, attempts, external_ref FROM hc_attempts WHERE resource LIKE 'TOUR-%' ORDER BY 1;
-- Bounded history (0.4.0): forty days pass for the tour's finished holds and
-- orders; the sweep prunes them and carries the products' ledger rows.
UPDATE hc_stock_orders SET created_at = created_at - interval '40 days', ended_at = ended_at - interval '40 days'
 WHERE scope_id LIKE 'TOUR-%' AND status <> 'RESERVED';
UPDATE hc_reservations SET created_at = created_at - interval '40 days', ended_at = ended_at - interval '40 days'
 WHERE asset_id LIKE 'TOUR-%' AND status IN ('RELEASED', 'EXPIRED');
SELECT count(*) FROM hc_sweep();
SELECT product_id, due FROM hc_stock_carries WHERE product_id LIKE 'TOUR-%' ORDER BY 1;
SELECT kind, entity_id, event, function, reserved_delta, stock_delta FROM hc_ledger
 WHERE entity_id LIKE 'TOUR-%' ORDER BY entity_id, seq;
SELECT asset_id, status FROM hc_reservations WHERE asset_id LIKE 'TOUR-%' ORDER BY created_at, asset_id;
SELECT scope_id, status FROM hc_stock_orders WHERE scope_id LIKE 'TOUR-%' ORDER BY created_at, buyer_id;
SELECT count(*) FROM hc_check();
