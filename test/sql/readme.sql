-- A tour of every function family, as the README of 0.2.0 printed it, with
-- its output checked.  The README's own snippets now run as printed in
-- test/project/snippets.sh.
\set VERBOSITY terse
CREATE EXTENSION pgtap;
SELECT no_plan();

-- pg_regress installed holdcommit as the README does: into its own schema.
SET search_path = holdcommit, public;
SELECT extnamespace::regnamespace AS installed_in FROM pg_extension WHERE extname = 'holdcommit';

SELECT id, status FROM hc_asset_add('LOCO-0042', 'Diesel locomotive BR 218');
SELECT asset_id, buyer_id, status, replayed
  FROM hc_hold('LOCO-0042', 'alice', 'order-1001', '10 minutes');
-- the client retries with the same Idempotency-Key: same row, replayed = true
SELECT status, replayed FROM hc_hold('LOCO-0042', 'alice', 'order-1001', '10 minutes');
-- another buyer: ERROR RS001, at once, without waiting
SELECT * FROM hc_hold('LOCO-0042', 'bob', 'order-2001');

SELECT product_id, stock, available FROM hc_stock_set('SNEAKER-42', 100);
SELECT product_id, stock, available FROM hc_stock_set('SOCKS-1', 50);
-- the buyer clicks "buy": reserve for 10 minutes (RS002 = sold out, HTTP 409)
SELECT buyer_id, status, items
  FROM hc_reserve_items('[{"product_id": "SNEAKER-42", "qty": 2}, {"product_id": "SOCKS-1", "qty": 1}]',
                        'frank', 'cart-77');
-- payment succeeds: hc_finalize(reservation_id)      -- webhook twice? the second replays
-- the buyer cancels:  hc_unreserve(reservation_id)   -- reserved goes down once
-- the buyer walks away: after ttl the next hc_reserve of that product reclaims the units

-- the payment webhook and the inquiry scheduler race: one gets the fencing token
SELECT hc_lock_acquire('PAY-7781', 'webhook', stale_after => '3 minutes') AS token;
SELECT hc_lock_acquire('PAY-7781', 'scheduler', max_retries => 0) AS token;  -- NULL: busy
-- right before the ERP call: PROCEED, COOLDOWN, MANUAL_REVIEW or COMPLETED
SELECT status, attempt FROM hc_attempt_begin('PAY-7781', 'webhook', 1);
-- every minute while the ERP works; RS007 = the lease was lost: stop
SELECT hc_lock_heartbeat('PAY-7781', 'webhook', 1) IS NOT NULL AS alive;
-- the ERP answered: record the invoice, then release (in a finally block)
SELECT status, external_ref FROM hc_attempt_complete('PAY-7781', 'webhook', 1, 'INV-2026-0042');
SELECT hc_lock_release('PAY-7781', 'webhook', 1) AS released;
-- operators: who holds what, what awaits manual review
SELECT resource, owner, token, stale FROM hc_lease_status WHERE resource = 'PAY-7781';
SELECT resource, status, attempts, awaiting_review, external_ref
  FROM hc_attempt_status WHERE resource = 'PAY-7781';

CREATE ROLE shop_app LOGIN;
SELECT hc_grant_app('shop_app');        -- the hc_* calls, hc_check(), SELECT on the state tables
CREATE ROLE shop_ops LOGIN;
SELECT hc_grant_operator('shop_ops');   -- plus hc_asset_add, hc_stock_set, hc_stock_adjust, the ledger

SET ROLE shop_app;
SELECT asset_id, buyer_id, status FROM hc_reservations WHERE asset_id = 'LOCO-0042';
RESET ROLE;

SELECT is_empty('SELECT * FROM hc_check()', 'holdcommit invariants hold');

-- Clean up the roles the privileges example created.
DROP OWNED BY shop_app, shop_ops;
DROP ROLE shop_app, shop_ops;
DROP EXTENSION pgtap;
RESET search_path;
