-- pgTAP: the counted-stock contract, tested from
-- outside as an application's own suite would.  Everything runs in one
-- transaction that is rolled back, roles included.
--
-- Reservations whose expiry a scenario needs are taken at the start with a
-- 1 second ttl; one pg_sleep before the expiry scenarios lets them all lapse.
-- Every call reads clock_timestamp(), so time passes inside this transaction.
\ir include/contract.sql

BEGIN;
SELECT plan(274);

-- One product's counters as text, for short comparisons.
CREATE FUNCTION pg_temp.inv(p text) RETURNS text LANGUAGE sql AS $$
    SELECT format('stock %s reserved %s available %s', stock, reserved, available)
      FROM hc_inventory WHERE product_id = p
$$;

-- The products the scenarios use.
SELECT count(hc_stock_set(p, s)) AS n_products
  FROM (VALUES ('P1', 10), ('P-rs2', 3), ('P-fin', 5), ('P-unr', 4),
               ('I-A', 10), ('I-B', 10), ('I-C', 10), ('I-low', 2),
               ('P-exp', 5), ('P-late', 1), ('P-late2', 1), ('P-gone', 1),
               ('P-recl', 2), ('P-unexp', 3), ('M-X', 1), ('M-Y', 1),
               ('P-val', 7), ('P-priv', 10)) AS v(p, s) \gset

-- Short reservations that the expiry scenarios below need expired.
SELECT r.* FROM hc_reserve('P-exp', 2, 'buyer-exp', 'key-exp', '1 second') r \gset exp_
SELECT r.* FROM hc_reserve('P-late', 1, 'buyer-late', 'key-late', '1 second') r \gset late_
SELECT r.* FROM hc_reserve('P-late2', 1, 'buyer-late2', 'key-late2', '1 second') r \gset late2_
SELECT r.* FROM hc_reserve('P-gone', 1, 'buyer-gone', 'key-gone', '1 second') r \gset gone_
SELECT r.* FROM hc_reserve('P-recl', 2, 'buyer-recl-1', 'key-recl-1', '1 second') r \gset recl1_
SELECT r.* FROM hc_reserve('P-unexp', 1, 'buyer-unexp', 'key-unexp', '1 second') r \gset unexp_
SELECT r.* FROM hc_reserve_items('[{"product_id": "M-X", "qty": 1}, {"product_id": "M-Y", "qty": 1}]',
                                 'buyer-mexp', 'key-mexp', '1 second') r \gset mexp_

------------------------------------------------------------------------------
-- hc_stock_set: create a product, set its stock
------------------------------------------------------------------------------
SELECT r.* FROM hc_stock_set('P-set', 10) r \gset set1_
SELECT is(:'set1_product_id'::text, 'P-set', 'stock_set: returns the product');
SELECT is(:'set1_stock'::int, 10, 'stock_set: creates the product with the stock');
SELECT is(:'set1_reserved'::int, 0, 'stock_set: a new product has nothing reserved');
SELECT is(:'set1_available'::int, 10, 'stock_set: available = stock - reserved');
SELECT r.* FROM hc_stock_set('P-set', 15) r \gset set2_
SELECT is(:'set2_stock'::int, 15, 'stock_set: sets the stock of an existing product');
SELECT is(pg_temp.inv('P-set'), 'stock 15 reserved 0 available 15', 'stock_set: the row follows');
SELECT r.* FROM hc_stock_set('P-set', 4) r \gset set3_
SELECT is(:'set3_stock'::int, 4, 'stock_set: can lower the stock');
SELECT is((SELECT count(*)::int FROM hc_inventory WHERE product_id = 'P-set'), 1,
          'stock_set: still one row for the product');
SELECT results_eq(
    $$SELECT stock_delta, reserved_delta, source, function FROM hc_ledger
       WHERE kind = 'product' AND entity_id = 'P-set' ORDER BY seq$$,
    $$VALUES (10, 0, 'adjustment', 'hc_stock_set'), (5, 0, 'adjustment', 'hc_stock_set'),
             (-11, 0, 'adjustment', 'hc_stock_set')$$,
    'stock_set: one ledger row per change with its stock_delta');
SELECT r.* FROM hc_stock_set('P-set', 4) r \gset set4_
SELECT is((SELECT count(*)::int FROM hc_ledger WHERE entity_id = 'P-set'), 3,
          'stock_set: setting the same stock again writes no ledger row');
SELECT is_empty('SELECT * FROM hc_check()', 'stock_set: hc_check() is empty');

------------------------------------------------------------------------------
-- hc_stock_adjust: restock and shrink, the reason in the ledger
------------------------------------------------------------------------------
SELECT r.* FROM hc_stock_adjust('P-set', 6, 'restock from supplier') r \gset adj1_
SELECT is(:'adj1_stock'::int, 10, 'stock_adjust: +6 restocks');
SELECT r.* FROM hc_stock_adjust('P-set', -3, 'damaged in store') r \gset adj2_
SELECT is(:'adj2_stock'::int, 7, 'stock_adjust: -3 shrinks');
SELECT is(pg_temp.inv('P-set'), 'stock 7 reserved 0 available 7', 'stock_adjust: the row follows');
SELECT results_eq(
    $$SELECT stock_delta, reserved_delta, source, function, detail FROM hc_ledger
       WHERE entity_id = 'P-set' AND function = 'hc_stock_adjust' ORDER BY seq$$,
    $$VALUES (6, 0, 'adjustment', 'hc_stock_adjust', 'restock from supplier'),
             (-3, 0, 'adjustment', 'hc_stock_adjust', 'damaged in store')$$,
    'stock_adjust: the ledger has each delta with its reason');
SELECT is((SELECT actor FROM hc_ledger WHERE entity_id = 'P-set' ORDER BY seq DESC LIMIT 1),
          current_user::text, 'stock_adjust: the ledger actor is the caller');
SELECT throws_ok($$SELECT hc_stock_adjust('no-such-product', 5, 'restock')$$, 'RS006', NULL,
                 'stock_adjust: unknown product throws RS006');
SELECT is_empty($$SELECT 1 FROM hc_inventory WHERE product_id = 'no-such-product'$$,
                'stock_adjust: does not create an unknown product');
SELECT is_empty('SELECT * FROM hc_check()', 'stock_adjust: hc_check() is empty');

------------------------------------------------------------------------------
-- Reserve (the 201 analogue)
------------------------------------------------------------------------------
SELECT clock_timestamp() AS t0 \gset
SELECT r.* FROM hc_reserve('P1', 3, 'buyer-1', 'key-P1-1', '10 minutes') r \gset r1_
SELECT clock_timestamp() AS t1 \gset
SELECT is(:'r1_replayed'::boolean, false, 'reserve: a new reservation is not a replay');
SELECT is(:'r1_status'::text, 'RESERVED', 'reserve: status RESERVED');
SELECT is(:'r1_buyer_id'::text, 'buyer-1', 'reserve: returns the buyer');
SELECT is(:'r1_items'::jsonb, '[{"product_id": "P1", "qty": 3}]'::jsonb, 'reserve: returns the items');
SELECT pg_temp.new_reservation('reserve', :'r1_reservation_id', :'r1_created_at', :'r1_expires_at',
                               :'t0', :'t1', '10 minutes');
SELECT is(pg_temp.inv('P1'), 'stock 10 reserved 3 available 7', 'reserve: reserved goes up at once');
SELECT results_eq(
    format('SELECT buyer_id, idempotency_key, status, expires_at, created_at
              FROM hc_stock_reservations WHERE id = %L', :'r1_reservation_id'),
    format('VALUES (%L, %L, %L, %L::timestamptz, %L::timestamptz)',
           'buyer-1', 'key-P1-1', 'RESERVED', :'r1_expires_at', :'r1_created_at'),
    'reserve: reservation row stored as returned');
SELECT results_eq(
    format('SELECT product_id, qty, status FROM hc_stock_reservation_lines WHERE reservation_id = %L',
           :'r1_reservation_id'),
    $$VALUES ('P1', 3, 'RESERVED')$$,
    'reserve: one RESERVED line');
SELECT results_eq(
    format('SELECT event, reserved_delta, stock_delta, source, function, buyer_id, at
              FROM hc_ledger WHERE reservation_id = %L', :'r1_reservation_id'),
    format('VALUES (%L, 3, 0, %L, %L, %L, %L::timestamptz)',
           'reserve', 'call', 'hc_reserve', 'buyer-1', :'r1_created_at'),
    'reserve: one ledger row, reserved_delta +3, at the call''s clock reading');
SELECT is_empty('SELECT * FROM hc_check()', 'reserve: hc_check() is empty');

------------------------------------------------------------------------------
-- Replay with the same key (the 200 analogue)
------------------------------------------------------------------------------
SELECT r.* FROM hc_reserve('P1', 3, 'buyer-1', 'key-P1-1', '10 minutes') r \gset r1r_
SELECT is(:'r1r_reservation_id'::text, :'r1_reservation_id', 'replay: same reservation id');
SELECT is(:'r1r_replayed'::boolean, true, 'replay: replayed = true');
SELECT is(:'r1r_status'::text, 'RESERVED', 'replay: status RESERVED');
SELECT is(:'r1r_items'::jsonb, :'r1_items'::jsonb, 'replay: same items');
SELECT is(:'r1r_expires_at'::timestamptz, :'r1_expires_at'::timestamptz, 'replay: same expires_at');
SELECT is(:'r1r_created_at'::timestamptz, :'r1_created_at'::timestamptz, 'replay: same created_at');
SELECT is(pg_temp.inv('P1'), 'stock 10 reserved 3 available 7', 'replay: nothing reserved twice');
SELECT is((SELECT count(*)::int FROM hc_stock_reservations WHERE idempotency_key = 'key-P1-1'), 1,
          'replay: still one reservation');
SELECT is((SELECT count(*)::int FROM hc_ledger WHERE entity_id = 'P1' AND event = 'reserve'), 1,
          'replay: no new ledger row');
SELECT is_empty('SELECT * FROM hc_check()', 'replay: hc_check() is empty');

------------------------------------------------------------------------------
-- Same key, other arguments: RS005, one key space across hc_hold and hc_reserve
------------------------------------------------------------------------------
SELECT count(hc_asset_add('A-key')) AS n_assets \gset
SELECT r.* FROM hc_hold('A-key', 'buyer-1', 'key-hold-1', '10 minutes') r \gset hk_
SELECT pg_temp.hc_state() AS state \gset
SELECT throws_ok($$SELECT hc_reserve('P1', 2, 'buyer-1', 'key-P1-1', '10 minutes')$$, 'RS005',
                 NULL, 'key reuse: other qty throws RS005');
SELECT throws_ok($$SELECT hc_reserve('P1', 3, 'buyer-other', 'key-P1-1', '10 minutes')$$, 'RS005',
                 NULL, 'key reuse: other buyer throws RS005');
SELECT throws_ok($$SELECT hc_reserve('P1', 3, 'buyer-1', 'key-P1-1', '11 minutes')$$, 'RS005',
                 NULL, 'key reuse: other ttl throws RS005');
SELECT throws_ok($$SELECT hc_reserve('P-fin', 3, 'buyer-1', 'key-P1-1', '10 minutes')$$, 'RS005',
                 NULL, 'key reuse: other product throws RS005');
SELECT throws_ok($$SELECT hc_reserve('no-such-product', 3, 'buyer-1', 'key-P1-1', '10 minutes')$$, 'RS005',
                 NULL, 'key reuse: other, unknown product throws RS005 (idempotency before existence)');
SELECT throws_ok($$SELECT hc_reserve_items('[{"product_id": "P1", "qty": 3}]', 'buyer-1', 'key-P1-1', '10 minutes')$$,
                 'RS005', NULL, 'key reuse: the same order through hc_reserve_items throws RS005 (the function counts)');
SELECT throws_ok($$SELECT hc_hold('A-key', 'buyer-1', 'key-P1-1', '10 minutes')$$, 'RS005',
                 NULL, 'key reuse: a reserve key used for hc_hold throws RS005 (one key space)');
SELECT throws_ok($$SELECT hc_reserve('P1', 1, 'buyer-1', 'key-hold-1', '10 minutes')$$, 'RS005',
                 NULL, 'key reuse: a hold key used for hc_reserve throws RS005 (one key space)');
SELECT is(pg_temp.hc_state(), :'state', 'key reuse: state unchanged');
SELECT is(pg_temp.inv('P1'), 'stock 10 reserved 3 available 7', 'key reuse: P1 unchanged');
SELECT is_empty('SELECT * FROM hc_check()', 'key reuse: hc_check() is empty');

------------------------------------------------------------------------------
-- Not enough stock: RS002, and a failed reserve stores nothing
------------------------------------------------------------------------------
SELECT r.* FROM hc_reserve('P-rs2', 2, 'buyer-rs2-a', 'key-rs2-a') r \gset rs2a_
SELECT pg_temp.hc_state() AS state \gset
SELECT throws_ok($$SELECT hc_reserve('P-rs2', 2, 'buyer-rs2-b', 'key-rs2-b')$$, 'RS002',
                 NULL, 'insufficient: 2 of 1 available throws RS002');
SELECT throws_ok($$SELECT hc_reserve('P-rs2', 4, 'buyer-rs2-b', 'key-rs2-b')$$, 'RS002',
                 NULL, 'insufficient: more than the whole stock throws RS002');
SELECT is(pg_temp.hc_state(), :'state', 'insufficient: state unchanged');
SELECT is(pg_temp.inv('P-rs2'), 'stock 3 reserved 2 available 1', 'insufficient: P-rs2 unchanged');
SELECT r.* FROM hc_reserve('P-rs2', 1, 'buyer-rs2-b', 'key-rs2-b') r \gset rs2b_
SELECT is(:'rs2b_replayed'::boolean, false,
          'insufficient: the failed key is free for a new request (nothing stored)');
SELECT is(pg_temp.inv('P-rs2'), 'stock 3 reserved 3 available 0', 'insufficient: the last unit can be reserved');
SELECT throws_ok($$SELECT hc_reserve('P-rs2', 1, 'buyer-rs2-c', 'key-rs2-c')$$, 'RS002',
                 NULL, 'insufficient: sold out throws RS002');
SELECT is_empty('SELECT * FROM hc_check()', 'insufficient: hc_check() is empty');

------------------------------------------------------------------------------
-- Unknown product or reservation: RS006
------------------------------------------------------------------------------
SELECT pg_temp.hc_state() AS state \gset
SELECT throws_ok($$SELECT hc_reserve('no-such-product', 1, 'buyer-1', 'key-unknown')$$, 'RS006',
                 NULL, 'unknown product: reserve throws RS006');
SELECT throws_ok($$SELECT hc_reserve_items('[{"product_id": "I-A", "qty": 1}, {"product_id": "no-such-product", "qty": 1}]',
                                           'buyer-1', 'key-unknown')$$, 'RS006',
                 NULL, 'unknown product: reserve_items with one unknown line throws RS006');
SELECT throws_ok($$SELECT hc_finalize('res_00000000000000000000000000')$$, 'RS006',
                 NULL, 'unknown reservation: finalize throws RS006');
SELECT throws_ok($$SELECT hc_unreserve('res_00000000000000000000000000')$$, 'RS006',
                 NULL, 'unknown reservation: unreserve throws RS006');
SELECT throws_ok(format('SELECT hc_finalize(%L)', :'hk_reservation_id'), 'RS006',
                 NULL, 'unknown reservation: finalize of a hold (not a stock reservation) throws RS006');
SELECT is(pg_temp.hc_state(), :'state', 'unknown: state unchanged (I-A not reserved either)');
SELECT is_empty($$SELECT 1 FROM hc_inventory WHERE product_id = 'no-such-product'$$,
                'unknown: no product created');
SELECT is_empty('SELECT * FROM hc_check()', 'unknown: hc_check() is empty');

------------------------------------------------------------------------------
-- Stock changes never take stock below reserved: 22023, nothing changed
------------------------------------------------------------------------------
SELECT pg_temp.hc_state() AS state \gset
SELECT throws_ok($$SELECT hc_stock_set('P1', 2)$$, '22023', NULL,
                 'below reserved: stock_set to 2 with 3 reserved throws 22023');
SELECT throws_ok($$SELECT hc_stock_set('P1', 0)$$, '22023', NULL,
                 'below reserved: stock_set to 0 with 3 reserved throws 22023');
SELECT throws_ok($$SELECT hc_stock_adjust('P1', -8, 'shrinkage')$$, '22023', NULL,
                 'below reserved: stock_adjust -8 (10 - 8 < 3) throws 22023');
SELECT is(pg_temp.hc_state(), :'state', 'below reserved: state unchanged');
SELECT is(pg_temp.inv('P1'), 'stock 10 reserved 3 available 7', 'below reserved: P1 unchanged');
SELECT r.* FROM hc_stock_adjust('P1', -7, 'shrinkage to exactly reserved') r \gset adj3_
SELECT is(pg_temp.inv('P1'), 'stock 3 reserved 3 available 0',
          'below reserved: shrinking to exactly reserved is allowed');
SELECT throws_ok($$SELECT hc_reserve('P1', 1, 'buyer-2', 'key-P1-2')$$, 'RS002',
                 NULL, 'below reserved: nothing left to reserve (RS002)');
SELECT r.* FROM hc_stock_set('P1', 10) r \gset set5_
SELECT is(pg_temp.inv('P1'), 'stock 10 reserved 3 available 7', 'below reserved: stock_set restores');
SELECT is_empty('SELECT * FROM hc_check()', 'below reserved: hc_check() is empty');

------------------------------------------------------------------------------
-- reserve_items: duplicates summed, items sorted, all or nothing
------------------------------------------------------------------------------
SELECT r.* FROM hc_reserve_items(
    '[{"product_id": "I-C", "qty": 1}, {"product_id": "I-A", "qty": 2}, {"product_id": "I-C", "qty": 3}]',
    'buyer-items', 'key-items-1', '10 minutes') r \gset it1_
SELECT is(:'it1_status'::text, 'RESERVED', 'reserve_items: status RESERVED');
SELECT is(:'it1_replayed'::boolean, false, 'reserve_items: not a replay');
SELECT is(:'it1_items'::jsonb,
          '[{"product_id": "I-A", "qty": 2}, {"product_id": "I-C", "qty": 4}]'::jsonb,
          'reserve_items: lines of one product summed, items sorted by product_id');
SELECT is(pg_temp.inv('I-A'), 'stock 10 reserved 2 available 8', 'reserve_items: I-A reserved 2');
SELECT is(pg_temp.inv('I-C'), 'stock 10 reserved 4 available 6', 'reserve_items: I-C reserved 1 + 3');
SELECT is(pg_temp.inv('I-B'), 'stock 10 reserved 0 available 10', 'reserve_items: I-B untouched');
SELECT results_eq(
    format('SELECT product_id, qty, status FROM hc_stock_reservation_lines
             WHERE reservation_id = %L ORDER BY product_id', :'it1_reservation_id'),
    $$VALUES ('I-A', 2, 'RESERVED'), ('I-C', 4, 'RESERVED')$$,
    'reserve_items: one line per product');
SELECT results_eq(
    format('SELECT entity_id, event, reserved_delta, stock_delta, source FROM hc_ledger
             WHERE reservation_id = %L ORDER BY entity_id', :'it1_reservation_id'),
    $$VALUES ('I-A', 'reserve', 2, 0, 'call'), ('I-C', 'reserve', 4, 0, 'call')$$,
    'reserve_items: one ledger row per product');
SELECT r.* FROM hc_reserve_items(
    '[{"product_id": "I-C", "qty": 1}, {"product_id": "I-A", "qty": 2}, {"product_id": "I-C", "qty": 3}]',
    'buyer-items', 'key-items-1', '10 minutes') r \gset it1r_
SELECT is(:'it1r_reservation_id'::text, :'it1_reservation_id', 'reserve_items replay: same reservation');
SELECT is(:'it1r_replayed'::boolean, true, 'reserve_items replay: replayed = true');
SELECT is(:'it1r_items'::jsonb, :'it1_items'::jsonb, 'reserve_items replay: same items');
SELECT is(pg_temp.inv('I-C'), 'stock 10 reserved 4 available 6', 'reserve_items replay: nothing reserved twice');
SELECT throws_ok($$SELECT hc_reserve_items('[{"product_id": "I-A", "qty": 2}, {"product_id": "I-C", "qty": 5}]',
                                           'buyer-items', 'key-items-1', '10 minutes')$$, 'RS005', NULL,
                 'reserve_items: same key, other items throws RS005');
SELECT is_empty('SELECT * FROM hc_check()', 'reserve_items: hc_check() is empty');

-- All or nothing: a line that cannot be served leaves every product untouched,
-- whether it is locked after the lines that fit (I-A, I-B < I-low) or first.
SELECT pg_temp.hc_state() AS state \gset
SELECT throws_ok($$SELECT hc_reserve_items('[{"product_id": "I-A", "qty": 1}, {"product_id": "I-B", "qty": 1},
                                             {"product_id": "I-low", "qty": 3}]', 'buyer-aon', 'key-aon-1')$$,
                 'RS002', NULL, 'all or nothing: the last line short throws RS002');
SELECT throws_ok($$SELECT hc_reserve_items('[{"product_id": "I-low", "qty": 1}, {"product_id": "I-B", "qty": 11}]',
                                           'buyer-aon', 'key-aon-2')$$,
                 'RS002', NULL, 'all or nothing: the first line short (I-B < I-low) throws RS002');
SELECT throws_ok($$SELECT hc_reserve_items('[{"product_id": "I-low", "qty": 1}, {"product_id": "I-low", "qty": 2}]',
                                           'buyer-aon', 'key-aon-3')$$,
                 'RS002', NULL, 'all or nothing: duplicate lines summed beyond the stock throw RS002');
SELECT is(pg_temp.hc_state(), :'state', 'all or nothing: state unchanged');
SELECT is(pg_temp.inv('I-A'), 'stock 10 reserved 2 available 8', 'all or nothing: I-A untouched');
SELECT is(pg_temp.inv('I-B'), 'stock 10 reserved 0 available 10', 'all or nothing: I-B untouched');
SELECT is(pg_temp.inv('I-low'), 'stock 2 reserved 0 available 2', 'all or nothing: I-low untouched');
SELECT is_empty('SELECT * FROM hc_check()', 'all or nothing: hc_check() is empty');

------------------------------------------------------------------------------
-- Finalize: stock and reserved go down once; the webhook arrives twice
------------------------------------------------------------------------------
SELECT r.* FROM hc_reserve('P-fin', 2, 'buyer-fin', 'key-fin') r \gset fin_
SELECT r.* FROM hc_finalize(:'fin_reservation_id') r \gset fin1_
SELECT is(:'fin1_reservation_id'::text, :'fin_reservation_id', 'finalize: same reservation');
SELECT is(:'fin1_status'::text, 'FINALIZED', 'finalize: status FINALIZED');
SELECT is(:'fin1_replayed'::boolean, false, 'finalize: first finalize is not a replay');
SELECT is(:'fin1_items'::jsonb, '[{"product_id": "P-fin", "qty": 2}]'::jsonb, 'finalize: returns the items');
SELECT is(pg_temp.inv('P-fin'), 'stock 3 reserved 0 available 3', 'finalize: stock and reserved down by 2');
SELECT results_eq(
    format('SELECT r.status, r.ended_at IS NOT NULL, l.status FROM hc_stock_reservations r
              JOIN hc_stock_reservation_lines l ON l.reservation_id = r.id WHERE r.id = %L',
           :'fin_reservation_id'),
    $$VALUES ('FINALIZED', true, 'FINALIZED')$$,
    'finalize: reservation and line FINALIZED, reservation ended');
SELECT r.* FROM hc_finalize(:'fin_reservation_id') r \gset fin2_
SELECT is(:'fin2_status'::text, 'FINALIZED', 'finalize twice: status FINALIZED');
SELECT is(:'fin2_replayed'::boolean, true, 'finalize twice: replayed = true');
SELECT is(pg_temp.inv('P-fin'), 'stock 3 reserved 0 available 3', 'finalize twice: stock taken once');
SELECT r.* FROM hc_finalize(:'fin_reservation_id', true) r \gset fin3_
SELECT is(:'fin3_replayed'::boolean, true, 'finalize twice: with late_ok also a replay');
SELECT results_eq(
    $$SELECT event, reserved_delta, stock_delta, source FROM hc_ledger
       WHERE entity_id = 'P-fin' ORDER BY seq$$,
    $$VALUES ('stock_set', 0, 5, 'adjustment'), ('reserve', 2, 0, 'call'), ('finalize', -2, -2, 'call')$$,
    'finalize: ledger stock_set, reserve, finalize (one finalize row)');
SELECT pg_temp.hc_state() AS state \gset
SELECT throws_ok(format('SELECT hc_unreserve(%L)', :'fin_reservation_id'), 'RS004',
                 NULL, 'finalize: unreserve after finalize throws RS004');
SELECT is(pg_temp.hc_state(), :'state', 'finalize: refused unreserve changed nothing');
SELECT r.* FROM hc_reserve('P-fin', 2, 'buyer-fin', 'key-fin') r \gset finr_
SELECT is(:'finr_reservation_id'::text, :'fin_reservation_id',
          'finalize: the reserve key still replays the same reservation afterwards');
SELECT is(:'finr_replayed'::boolean, true, 'finalize: ... with replayed = true');
SELECT is(pg_temp.inv('P-fin'), 'stock 3 reserved 0 available 3', 'finalize: ... and reserves nothing');
SELECT is_empty('SELECT * FROM hc_check()', 'finalize: hc_check() is empty');

-- A multi-item order finalizes every line.
SELECT r.* FROM hc_finalize(:'it1_reservation_id') r \gset it1f_
SELECT is(:'it1f_status'::text, 'FINALIZED', 'finalize items: status FINALIZED');
SELECT is(pg_temp.inv('I-A'), 'stock 8 reserved 0 available 8', 'finalize items: I-A down by 2');
SELECT is(pg_temp.inv('I-C'), 'stock 6 reserved 0 available 6', 'finalize items: I-C down by 4');
SELECT is_empty('SELECT * FROM hc_check()', 'finalize items: hc_check() is empty');

------------------------------------------------------------------------------
-- Unreserve: the buyer cancels; reserved goes down once
------------------------------------------------------------------------------
SELECT r.* FROM hc_reserve('P-unr', 3, 'buyer-unr', 'key-unr') r \gset unr_
SELECT is(pg_temp.inv('P-unr'), 'stock 4 reserved 3 available 1', 'unreserve: reserved first');
SELECT r.* FROM hc_unreserve(:'unr_reservation_id') r \gset unr1_
SELECT is(:'unr1_reservation_id'::text, :'unr_reservation_id', 'unreserve: same reservation');
SELECT is(:'unr1_status'::text, 'RELEASED', 'unreserve: status RELEASED');
SELECT is(:'unr1_replayed'::boolean, false, 'unreserve: first unreserve is not a replay');
SELECT is(pg_temp.inv('P-unr'), 'stock 4 reserved 0 available 4', 'unreserve: available again at once');
SELECT results_eq(
    format('SELECT r.status, r.ended_at IS NOT NULL, l.status FROM hc_stock_reservations r
              JOIN hc_stock_reservation_lines l ON l.reservation_id = r.id WHERE r.id = %L',
           :'unr_reservation_id'),
    $$VALUES ('RELEASED', true, 'RELEASED')$$,
    'unreserve: reservation and line RELEASED');
SELECT r.* FROM hc_unreserve(:'unr_reservation_id') r \gset unr2_
SELECT is(:'unr2_status'::text, 'RELEASED', 'unreserve twice: status RELEASED');
SELECT is(:'unr2_replayed'::boolean, true, 'unreserve twice: replayed = true');
SELECT is(pg_temp.inv('P-unr'), 'stock 4 reserved 0 available 4', 'unreserve twice: released once');
SELECT pg_temp.hc_state() AS state \gset
SELECT throws_ok(format('SELECT hc_finalize(%L)', :'unr_reservation_id'), 'RS004',
                 NULL, 'unreserve: finalize after unreserve throws RS004');
SELECT throws_ok(format('SELECT hc_finalize(%L, true)', :'unr_reservation_id'), 'RS004',
                 NULL, 'unreserve: late_ok finalize after unreserve throws RS004');
SELECT is(pg_temp.hc_state(), :'state', 'unreserve: refused finalize changed nothing');
SELECT results_eq(
    $$SELECT event, reserved_delta, stock_delta, source FROM hc_ledger
       WHERE entity_id = 'P-unr' ORDER BY seq$$,
    $$VALUES ('stock_set', 0, 4, 'adjustment'), ('reserve', 3, 0, 'call'), ('release', -3, 0, 'call')$$,
    'unreserve: ledger stock_set, reserve, release (one release row)');
SELECT r.* FROM hc_reserve('P-unr', 4, 'buyer-unr-2', 'key-unr-2') r \gset unr3_
SELECT is(:'unr3_status'::text, 'RESERVED', 'unreserve: the released units can be reserved again');
SELECT is_empty('SELECT * FROM hc_check()', 'unreserve: hc_check() is empty');

------------------------------------------------------------------------------
-- Expiry: every 1 second reservation taken at the start lapses now
------------------------------------------------------------------------------
SELECT pg_sleep(greatest(0, extract(epoch FROM
           (SELECT max(expires_at) FROM hc_stock_reservations WHERE expires_at - created_at = '1 second')
           - clock_timestamp())) + 0.2) AS slept \gset

SELECT pg_temp.hc_state() AS state \gset
SELECT throws_ok(format('SELECT hc_finalize(%L)', :'exp_reservation_id'), 'RS003',
                 NULL, 'expiry: finalize after expiry throws RS003');
SELECT is(pg_temp.hc_state(), :'state', 'expiry: the refused finalize changed nothing');
SELECT is(pg_temp.inv('P-exp'), 'stock 5 reserved 2 available 3',
          'expiry: stock was not taken (the expired line still counts until reclaimed)');
SELECT is_empty('SELECT * FROM hc_check()', 'expiry: hc_check() is empty with an expired RESERVED line');

-- Unreserve of an expired reservation: returned EXPIRED, replayed, released once.
SELECT r.* FROM hc_unreserve(:'unexp_reservation_id') r \gset unexp1_
SELECT is(:'unexp1_status'::text, 'EXPIRED', 'unreserve expired: returns status EXPIRED');
SELECT is(:'unexp1_replayed'::boolean, true, 'unreserve expired: replayed = true');
SELECT is(pg_temp.inv('P-unexp'), 'stock 3 reserved 0 available 3', 'unreserve expired: its units are free');
SELECT results_eq(
    format('SELECT r.status, r.ended_at IS NOT NULL, l.status FROM hc_stock_reservations r
              JOIN hc_stock_reservation_lines l ON l.reservation_id = r.id WHERE r.id = %L',
           :'unexp_reservation_id'),
    $$VALUES ('EXPIRED', true, 'EXPIRED')$$,
    'unreserve expired: reservation and line EXPIRED');
SELECT r.* FROM hc_unreserve(:'unexp_reservation_id') r \gset unexp2_
SELECT is(:'unexp2_status'::text, 'EXPIRED', 'unreserve expired twice: status EXPIRED');
SELECT is(:'unexp2_replayed'::boolean, true, 'unreserve expired twice: replayed = true');
SELECT is(pg_temp.inv('P-unexp'), 'stock 3 reserved 0 available 3', 'unreserve expired twice: released once');
SELECT results_eq(
    $$SELECT event, reserved_delta, stock_delta, source FROM hc_ledger
       WHERE entity_id = 'P-unexp' AND event <> 'stock_set' ORDER BY seq$$,
    $$VALUES ('reserve', 1, 0, 'call'), ('expire', -1, 0, 'reclaim')$$,
    'unreserve expired: ledger reserve, expire (once)');
SELECT throws_ok(format('SELECT hc_finalize(%L)', :'unexp_reservation_id'), 'RS003',
                 NULL, 'unreserve expired: finalize afterwards throws RS003');
SELECT is_empty('SELECT * FROM hc_check()', 'unreserve expired: hc_check() is empty');

SELECT r.* FROM hc_unreserve(:'exp_reservation_id') r \gset expu_
SELECT is(:'expu_status'::text, 'EXPIRED', 'expiry: unreserving the expired P-exp returns EXPIRED');
SELECT throws_ok(format('SELECT hc_finalize(%L)', :'exp_reservation_id'), 'RS003',
                 NULL, 'expiry: finalize of an EXPIRED reservation still throws RS003');
SELECT is(pg_temp.inv('P-exp'), 'stock 5 reserved 0 available 5', 'expiry: P-exp fully available');
SELECT is_empty('SELECT * FROM hc_check()', 'expiry (P-exp): hc_check() is empty');

------------------------------------------------------------------------------
-- Inline reclaim: the next hc_reserve takes back expired reservations
------------------------------------------------------------------------------
SELECT is(pg_temp.inv('P-recl'), 'stock 2 reserved 2 available 0',
          'reclaim: before, the expired reservation still counts');
SELECT r.* FROM hc_reserve('P-recl', 2, 'buyer-recl-2', 'key-recl-2') r \gset recl2_
SELECT is(:'recl2_status'::text, 'RESERVED', 'reclaim: the next buyer reserves the expired units');
SELECT is(:'recl2_replayed'::boolean, false, 'reclaim: not a replay');
SELECT isnt(:'recl2_reservation_id'::text, :'recl1_reservation_id', 'reclaim: a new reservation');
SELECT is(pg_temp.inv('P-recl'), 'stock 2 reserved 2 available 0', 'reclaim: reserved counts only the new one');
SELECT results_eq(
    format('SELECT r.status, r.ended_at IS NOT NULL, l.status FROM hc_stock_reservations r
              JOIN hc_stock_reservation_lines l ON l.reservation_id = r.id WHERE r.id = %L',
           :'recl1_reservation_id'),
    $$VALUES ('EXPIRED', true, 'EXPIRED')$$,
    'reclaim: the old reservation and its line are EXPIRED');
SELECT results_eq(
    $$SELECT event, reserved_delta, stock_delta, source, reservation_id, buyer_id FROM hc_ledger
       WHERE entity_id = 'P-recl' AND event <> 'stock_set' ORDER BY seq$$,
    format($$VALUES ('reserve', 2, 0, 'call', %1$L, 'buyer-recl-1'),
                    ('reclaim', -2, 0, 'reclaim', %1$L, 'buyer-recl-1'),
                    ('reserve', 2, 0, 'call', %2$L, 'buyer-recl-2')$$,
           :'recl1_reservation_id', :'recl2_reservation_id'),
    'reclaim: ledger reserve, reclaim (source reclaim), reserve');
SELECT pg_temp.reclaimed_ends(:'recl1_reservation_id', 'finalize', 'unreserve', 'unreserving',
                              ' (the stock is gone)');
SELECT is(pg_temp.inv('P-recl'), 'stock 2 reserved 2 available 0',
          'reclaim: unreserving the old reservation does not free the new buyer''s units');
SELECT is_empty('SELECT * FROM hc_check()', 'reclaim: hc_check() is empty');

-- A multi-item reservation reclaimed on one product only.
SELECT r.* FROM hc_reserve('M-X', 1, 'buyer-mx', 'key-mx') r \gset mx_
SELECT is(:'mx_status'::text, 'RESERVED', 'partial reclaim: M-X reclaimed from the expired order');
SELECT is(pg_temp.inv('M-X'), 'stock 1 reserved 1 available 0', 'partial reclaim: M-X counts the new one');
SELECT is_empty('SELECT * FROM hc_check()', 'partial reclaim: hc_check() is empty');
SELECT r.* FROM hc_unreserve(:'mexp_reservation_id') r \gset mexpu_
SELECT is(:'mexpu_status'::text, 'EXPIRED', 'partial reclaim: unreserving the old order returns EXPIRED');
SELECT is(:'mexpu_replayed'::boolean, true, 'partial reclaim: ... replayed = true');
SELECT is(pg_temp.inv('M-Y'), 'stock 1 reserved 0 available 1', 'partial reclaim: M-Y released');
SELECT is(pg_temp.inv('M-X'), 'stock 1 reserved 1 available 0', 'partial reclaim: M-X still the new buyer''s');
SELECT is((SELECT sum(reserved_delta)::int FROM hc_ledger
            WHERE reservation_id = :'mexp_reservation_id'), 0,
          'partial reclaim: the old order''s ledger rows net to zero (each line given back once)');
SELECT is_empty('SELECT * FROM hc_check()', 'partial reclaim (unreserved): hc_check() is empty');

------------------------------------------------------------------------------
-- late_ok: an expired reservation still finalizes if its stock is still there
------------------------------------------------------------------------------
SELECT r.* FROM hc_finalize(:'late_reservation_id', late_ok => true) r \gset latef_
SELECT is(:'latef_status'::text, 'FINALIZED', 'late_ok: nobody took the stock, finalize succeeds');
SELECT is(:'latef_replayed'::boolean, false, 'late_ok: not a replay');
SELECT is(pg_temp.inv('P-late'), 'stock 0 reserved 0 available 0', 'late_ok: stock taken, nothing reserved');
SELECT is_empty('SELECT * FROM hc_check()', 'late_ok: hc_check() is empty');

-- Reclaimed by another buyer who then cancelled: the unit is there again.
SELECT r.* FROM hc_reserve('P-late2', 1, 'buyer-late2-b', 'key-late2-b') r \gset late2b_
SELECT r.* FROM hc_unreserve(:'late2b_reservation_id') r \gset late2bu_
SELECT throws_ok(format('SELECT hc_finalize(%L)', :'late2_reservation_id'), 'RS003',
                 NULL, 'late_ok (reclaimed, free again): without late_ok RS003');
SELECT r.* FROM hc_finalize(:'late2_reservation_id', true) r \gset late2f_
SELECT is(:'late2f_status'::text, 'FINALIZED', 'late_ok (reclaimed, free again): finalize succeeds');
SELECT is(pg_temp.inv('P-late2'), 'stock 0 reserved 0 available 0', 'late_ok (reclaimed, free again): stock taken');
SELECT is((SELECT sum(stock_delta)::int FROM hc_ledger WHERE entity_id = 'P-late2'), 0,
          'late_ok (reclaimed, free again): the ledger adds up to stock 0');
SELECT is_empty('SELECT * FROM hc_check()', 'late_ok (reclaimed, free again): hc_check() is empty');

-- Reclaimed and taken by another buyer: RS003 even with late_ok.
SELECT r.* FROM hc_reserve('P-gone', 1, 'buyer-gone-b', 'key-gone-b') r \gset goneb_
SELECT pg_temp.hc_state() AS state \gset
SELECT throws_ok(format('SELECT hc_finalize(%L, true)', :'gone_reservation_id'), 'RS003',
                 NULL, 'late_ok (stock gone): throws RS003');
SELECT is(pg_temp.hc_state(), :'state', 'late_ok (stock gone): nothing changed');
SELECT is(pg_temp.inv('P-gone'), 'stock 1 reserved 1 available 0', 'late_ok (stock gone): the other buyer keeps it');
SELECT isnt((SELECT status FROM hc_stock_reservations WHERE id = :'gone_reservation_id'), 'FINALIZED',
            'late_ok (stock gone): the late reservation is not FINALIZED');
SELECT is_empty('SELECT * FROM hc_check()', 'late_ok (stock gone): hc_check() is empty');

------------------------------------------------------------------------------
-- Validation: class 22, before idempotency and state, nothing changes
------------------------------------------------------------------------------
SELECT pg_temp.hc_state() AS state \gset
SELECT throws_ok($$SELECT hc_reserve(NULL, 1, 'b', 'k-val')$$, '22004', NULL, 'validation: reserve null product_id 22004');
SELECT throws_ok($$SELECT hc_reserve('P-val', NULL, 'b', 'k-val')$$, '22004', NULL, 'validation: reserve null qty 22004');
SELECT throws_ok($$SELECT hc_reserve('P-val', 1, NULL, 'k-val')$$, '22004', NULL, 'validation: reserve null buyer_id 22004');
SELECT throws_ok($$SELECT hc_reserve('P-val', 1, 'b', NULL)$$, '22004', NULL, 'validation: reserve null key 22004');
SELECT throws_ok($$SELECT hc_reserve('P-val', 1, 'b', 'k-val', NULL)$$, '22004', NULL, 'validation: reserve null ttl 22004');
SELECT throws_ok($$SELECT hc_reserve('', 1, 'b', 'k-val')$$, '22023', NULL, 'validation: reserve empty product_id 22023');
SELECT throws_ok($$SELECT hc_reserve('P-val', 0, 'b', 'k-val')$$, '22023', NULL, 'validation: reserve qty 0 22023');
SELECT throws_ok($$SELECT hc_reserve('P-val', -1, 'b', 'k-val')$$, '22023', NULL, 'validation: reserve qty -1 22023');
SELECT throws_ok($$SELECT hc_reserve('P-val', 1, 'b', 'k-val', '0')$$, '22023', NULL, 'validation: reserve ttl 0 22023');
SELECT throws_ok($$SELECT hc_reserve('P-val', 1, 'b', 'k-val', '1 day 1 second')$$, '22023', NULL,
                 'validation: reserve ttl over max_ttl 22023');
SELECT throws_ok(format('SELECT hc_reserve(%L, 1, %L, %L)', repeat('p', 65), 'b', 'k-val'), '22001', NULL,
                 'validation: reserve 65-byte product_id 22001');
SELECT throws_ok($$SELECT hc_reserve('P1', 0, 'buyer-1', 'key-P1-1', '10 minutes')$$, '22023', NULL,
                 'validation: before idempotency (qty 0 on a replayable key) 22023');
SELECT throws_ok($$SELECT hc_reserve('no-such-product', 0, 'b', 'k-val')$$, '22023', NULL,
                 'validation: before existence (qty 0 on an unknown product) 22023');
SELECT is(pg_temp.hc_state(), :'state', 'validation: hc_reserve errors changed nothing');

SELECT throws_ok($$SELECT hc_reserve_items(NULL, 'b', 'k-val')$$, '22004', NULL, 'validation: items null 22004');
SELECT throws_ok($$SELECT hc_reserve_items('null', 'b', 'k-val')$$, '22023', NULL, 'validation: items JSON null 22023');
SELECT throws_ok($$SELECT hc_reserve_items('{"product_id": "P-val", "qty": 1}', 'b', 'k-val')$$, '22023', NULL,
                 'validation: items an object, not an array 22023');
SELECT throws_ok($$SELECT hc_reserve_items('"P-val"', 'b', 'k-val')$$, '22023', NULL, 'validation: items a string 22023');
SELECT throws_ok($$SELECT hc_reserve_items('3', 'b', 'k-val')$$, '22023', NULL, 'validation: items a number 22023');
SELECT throws_ok($$SELECT hc_reserve_items('[]', 'b', 'k-val')$$, '22023', NULL, 'validation: items empty array 22023');
SELECT throws_ok($$SELECT hc_reserve_items('[1]', 'b', 'k-val')$$, '22023', NULL, 'validation: item a number 22023');
SELECT throws_ok($$SELECT hc_reserve_items('["P-val"]', 'b', 'k-val')$$, '22023', NULL, 'validation: item a string 22023');
SELECT throws_ok($$SELECT hc_reserve_items('[[{"product_id": "P-val", "qty": 1}]]', 'b', 'k-val')$$, '22023', NULL,
                 'validation: item an array 22023');
SELECT throws_ok($$SELECT hc_reserve_items('[{"product_id": "P-val", "qty": 1}, null]', 'b', 'k-val')$$, '22023', NULL,
                 'validation: a null item after a good one 22023');
SELECT throws_ok($$SELECT hc_reserve_items('[{"qty": 1}]', 'b', 'k-val')$$, '22023', NULL,
                 'validation: item without product_id 22023');
SELECT throws_ok($$SELECT hc_reserve_items('[{"product_id": 7, "qty": 1}]', 'b', 'k-val')$$, '22023', NULL,
                 'validation: numeric product_id 22023');
SELECT throws_ok($$SELECT hc_reserve_items('[{"product_id": null, "qty": 1}]', 'b', 'k-val')$$, '22023', NULL,
                 'validation: null product_id 22023');
SELECT throws_ok($$SELECT hc_reserve_items('[{"product_id": "", "qty": 1}]', 'b', 'k-val')$$, '22023', NULL,
                 'validation: empty product_id 22023');
SELECT throws_ok($$SELECT hc_reserve_items('[{"product_id": "P-val"}]', 'b', 'k-val')$$, '22023', NULL,
                 'validation: item without qty 22023');
SELECT throws_ok($$SELECT hc_reserve_items('[{"product_id": "P-val", "qty": "1"}]', 'b', 'k-val')$$, '22023', NULL,
                 'validation: qty a string 22023');
SELECT throws_ok($$SELECT hc_reserve_items('[{"product_id": "P-val", "qty": 1.5}]', 'b', 'k-val')$$, '22023', NULL,
                 'validation: qty 1.5 (not an integer) 22023');
SELECT throws_ok($$SELECT hc_reserve_items('[{"product_id": "P-val", "qty": 0}]', 'b', 'k-val')$$, '22023', NULL,
                 'validation: qty 0 22023');
SELECT throws_ok($$SELECT hc_reserve_items('[{"product_id": "P-val", "qty": -2}]', 'b', 'k-val')$$, '22023', NULL,
                 'validation: qty -2 22023');
SELECT throws_ok($$SELECT hc_reserve_items('[{"product_id": "P-val", "qty": 1}, {"product_id": "P1", "qty": 0}]',
                                           'b', 'k-val')$$, '22023', NULL,
                 'validation: one bad qty among good lines 22023');
SELECT throws_ok($$SELECT hc_reserve_items('[{"product_id": "no-such-product", "qty": 0}]', 'b', 'k-val')$$, '22023', NULL,
                 'validation: before existence (qty 0 on an unknown product) 22023');
SELECT throws_ok($$SELECT hc_reserve_items('[{"product_id": "I-A", "qty": 0}]', 'buyer-items', 'key-items-1')$$,
                 '22023', NULL, 'validation: before idempotency (bad items on a used key) 22023');
SELECT throws_ok(format('SELECT hc_reserve_items(%L, %L, %L)',
                        jsonb_build_array(jsonb_build_object('product_id', repeat('p', 65), 'qty', 1)), 'b', 'k-val'),
                 '22001', NULL, 'validation: 65-byte product_id in items 22001');
SELECT throws_ok($$SELECT hc_reserve_items('[{"product_id": "P-val", "qty": 1}]', NULL, 'k-val')$$, '22004', NULL,
                 'validation: reserve_items null buyer_id 22004');
SELECT throws_ok($$SELECT hc_reserve_items('[{"product_id": "P-val", "qty": 1}]', 'b', '')$$, '22023', NULL,
                 'validation: reserve_items empty key 22023');
SELECT throws_ok($$SELECT hc_reserve_items('[{"product_id": "P-val", "qty": 1}]', 'b', 'k-val', '-1 second')$$,
                 '22023', NULL, 'validation: reserve_items negative ttl 22023');
-- holdcommit.max_items is a setting: lower it for this transaction.
SET LOCAL holdcommit.max_items = 2;
SELECT throws_ok($$SELECT hc_reserve_items('[{"product_id": "I-A", "qty": 1}, {"product_id": "I-B", "qty": 1},
                                             {"product_id": "I-C", "qty": 1}]', 'b', 'k-val')$$, '22023', NULL,
                 'validation: more lines than holdcommit.max_items 22023');
SELECT is(pg_temp.hc_state(), :'state', 'validation: hc_reserve_items errors changed nothing');
SELECT r.* FROM hc_reserve_items('[{"product_id": "I-A", "qty": 1}, {"product_id": "I-B", "qty": 1}]',
                                 'buyer-max', 'key-max') r \gset max_
SELECT is(:'max_status'::text, 'RESERVED', 'validation: exactly holdcommit.max_items lines are accepted');
RESET holdcommit.max_items;
SELECT r.* FROM hc_unreserve(:'max_reservation_id') r \gset maxu_

SELECT pg_temp.hc_state() AS state \gset
SELECT throws_ok($$SELECT hc_finalize(NULL)$$, '22004', NULL, 'validation: finalize null id 22004');
SELECT throws_ok($$SELECT hc_finalize('')$$, '22023', NULL, 'validation: finalize empty id 22023');
SELECT throws_ok(format('SELECT hc_finalize(%L, NULL)', :'unr3_reservation_id'), '22004', NULL,
                 'validation: finalize null late_ok 22004');
SELECT throws_ok($$SELECT hc_unreserve(NULL)$$, '22004', NULL, 'validation: unreserve null id 22004');
SELECT throws_ok($$SELECT hc_unreserve('')$$, '22023', NULL, 'validation: unreserve empty id 22023');
SELECT throws_ok($$SELECT hc_stock_set(NULL, 1)$$, '22004', NULL, 'validation: stock_set null product_id 22004');
SELECT throws_ok($$SELECT hc_stock_set('P-val', NULL)$$, '22004', NULL, 'validation: stock_set null stock 22004');
SELECT throws_ok($$SELECT hc_stock_set('', 1)$$, '22023', NULL, 'validation: stock_set empty product_id 22023');
SELECT throws_ok($$SELECT hc_stock_set('P-val', -1)$$, '22023', NULL, 'validation: stock_set negative stock 22023');
SELECT throws_ok($$SELECT hc_stock_set('P-new-neg', -1)$$, '22023', NULL,
                 'validation: stock_set of a new product with negative stock 22023');
SELECT throws_ok(format('SELECT hc_stock_set(%L, 1)', repeat('p', 65)), '22001', NULL,
                 'validation: stock_set 65-byte product_id 22001');
SELECT throws_ok($$SELECT hc_stock_adjust(NULL, 1, 'r')$$, '22004', NULL, 'validation: stock_adjust null product_id 22004');
SELECT throws_ok($$SELECT hc_stock_adjust('P-val', NULL, 'r')$$, '22004', NULL, 'validation: stock_adjust null delta 22004');
SELECT throws_ok($$SELECT hc_stock_adjust('P-val', 1, NULL)$$, '22004', NULL, 'validation: stock_adjust null reason 22004');
SELECT throws_ok($$SELECT hc_stock_adjust('P-val', -8, 'too much')$$, '22023', NULL,
                 'validation: stock_adjust below zero 22023');
SELECT is(pg_temp.hc_state(), :'state', 'validation: finalize/unreserve/stock errors changed nothing');
SELECT is(pg_temp.inv('P-val'), 'stock 7 reserved 0 available 7', 'validation: P-val untouched');
SELECT is_empty('SELECT * FROM hc_check()', 'validation: hc_check() is empty');

------------------------------------------------------------------------------
-- Ledger: per product, one row per change, summing to the inventory
------------------------------------------------------------------------------
SELECT results_eq(
    $$SELECT event, reserved_delta, stock_delta, source, function FROM hc_ledger
       WHERE kind = 'product' AND entity_id = 'P1' ORDER BY seq$$,
    $$VALUES ('stock_set', 0, 10, 'adjustment', 'hc_stock_set'),
             ('reserve', 3, 0, 'call', 'hc_reserve'),
             ('stock_adjust', 0, -7, 'adjustment', 'hc_stock_adjust'),
             ('stock_set', 0, 7, 'adjustment', 'hc_stock_set')$$,
    'ledger: P1 has stock_set, reserve, stock_adjust, stock_set (replays and refusals add nothing)');
SELECT results_eq(
    $$SELECT event, reserved_delta, stock_delta, source FROM hc_ledger
       WHERE entity_id = 'P-late' ORDER BY seq$$,
    $$VALUES ('stock_set', 0, 1, 'adjustment'), ('reserve', 1, 0, 'call'), ('finalize', -1, -1, 'call')$$,
    'ledger: P-late has stock_set, reserve, finalize');
SELECT is_empty(
    $$SELECT i.product_id FROM hc_inventory i
        LEFT JOIN (SELECT entity_id, sum(stock_delta) AS stock, sum(reserved_delta) AS reserved
                     FROM hc_ledger WHERE kind = 'product' GROUP BY entity_id) g
               ON g.entity_id = i.product_id
       WHERE i.stock <> coalesce(g.stock, 0) OR i.reserved <> coalesce(g.reserved, 0)$$,
    'ledger: every product''s deltas add up to its stock and reserved');
SELECT is_empty(
    $$SELECT r.id FROM hc_stock_reservations r
        JOIN hc_stock_reservation_lines l ON l.reservation_id = r.id
       WHERE NOT EXISTS (SELECT 1 FROM hc_ledger g WHERE g.reservation_id = r.id AND g.event = 'reserve'
                            AND g.entity_id = l.product_id AND g.reserved_delta = l.qty AND g.at = r.created_at)$$,
    'ledger: every reservation line has its reserve row at the reservation''s created_at');
SELECT is_empty($$SELECT 1 FROM hc_ledger WHERE entity_id IN ('P-val', 'no-such-product') AND event <> 'stock_set'$$,
                'ledger: nothing for refused calls');
SELECT is_empty('SELECT * FROM hc_check()', 'ledger: hc_check() is empty');

------------------------------------------------------------------------------
-- Privileges
------------------------------------------------------------------------------
CREATE ROLE hc_test_stock_app NOLOGIN;
CREATE ROLE hc_test_stock_op NOLOGIN;
SELECT hc_grant_app('hc_test_stock_app') AS granted \gset
SELECT hc_grant_operator('hc_test_stock_op') AS granted \gset

SELECT ok(NOT has_function_privilege('public', 'hc_reserve(text, integer, text, text, interval)', 'EXECUTE'),
          'privileges: PUBLIC has no EXECUTE on hc_reserve');
SELECT ok(NOT has_function_privilege('hc_test_stock_app', 'hc_stock_set(text, integer)', 'EXECUTE'),
          'privileges: an app role has no EXECUTE on hc_stock_set');

SET LOCAL ROLE hc_test_stock_app;
SELECT r.* FROM hc_reserve('P-priv', 2, 'buyer-app', 'key-priv-app') r \gset priv_
SELECT is(:'priv_status'::text, 'RESERVED', 'privileges: the app role can call hc_reserve');
SELECT lives_ok(format('SELECT hc_finalize(%L)', :'priv_reservation_id'),
                'privileges: the app role can call hc_finalize');
SELECT lives_ok($$SELECT hc_unreserve(r.reservation_id)
                    FROM hc_reserve_items('[{"product_id": "P-priv", "qty": 1}]', 'buyer-app', 'key-priv-app-2') r$$,
                'privileges: the app role can call hc_reserve_items and hc_unreserve');
SELECT lives_ok($$SELECT * FROM hc_inventory$$, 'privileges: the app role can read hc_inventory');
SELECT throws_ok($$SELECT hc_stock_set('P-priv', 1000)$$, '42501', NULL,
                 'privileges: app cannot call hc_stock_set');
SELECT throws_ok($$SELECT hc_stock_adjust('P-priv', 1000, 'free stock')$$, '42501', NULL,
                 'privileges: app cannot call hc_stock_adjust');
SELECT throws_ok($$UPDATE hc_stock_parts SET stock = 1000 WHERE product_id = 'P-priv'$$, '42501', NULL,
                 'privileges: app cannot UPDATE hc_stock_parts');
SELECT throws_ok($$INSERT INTO hc_stock_parts (product_id, stock) VALUES ('P-forged', 5)$$, '42501', NULL,
                 'privileges: app cannot INSERT into hc_stock_parts');
SELECT throws_ok($$UPDATE hc_stock_orders SET status = 'RELEASED', ended_at = now()
                    WHERE buyer_id = 'buyer-app'$$, '42501', NULL,
                 'privileges: app cannot UPDATE hc_stock_orders');
SELECT throws_ok($$DELETE FROM hc_stock_order_lines$$, '42501', NULL,
                 'privileges: app cannot DELETE hc_stock_reservation_lines');
SELECT is_empty('SELECT * FROM hc_check()', 'privileges: the app role can run hc_check(), and it is empty');
RESET ROLE;

SET LOCAL ROLE hc_test_stock_op;
SELECT r.* FROM hc_stock_set('P-priv', 20) r \gset opset_
SELECT is(:'opset_stock'::int, 20, 'privileges: the operator role can call hc_stock_set');
SELECT r.* FROM hc_stock_adjust('P-priv', 5, 'operator restock') r \gset opadj_
SELECT is(:'opadj_stock'::int, 25, 'privileges: the operator role can call hc_stock_adjust');
SELECT throws_ok($$UPDATE hc_stock_parts SET stock = 1000 WHERE product_id = 'P-priv'$$, '42501', NULL,
                 'privileges: the operator cannot UPDATE hc_stock_parts directly either');
RESET ROLE;

SELECT results_eq(
    $$SELECT event, reserved_delta, stock_delta, actor FROM hc_ledger
       WHERE entity_id = 'P-priv' AND event <> 'stock_set' OR (entity_id = 'P-priv' AND actor <> current_user)
       ORDER BY seq$$,
    $$VALUES ('reserve', 2, 0, 'hc_test_stock_app'), ('finalize', -2, -2, 'hc_test_stock_app'),
             ('reserve', 1, 0, 'hc_test_stock_app'), ('release', -1, 0, 'hc_test_stock_app'),
             ('stock_set', 0, 12, 'hc_test_stock_op'), ('stock_adjust', 0, 5, 'hc_test_stock_op')$$,
    'privileges: the ledger actor is the calling role');
SELECT is(pg_temp.inv('P-priv'), 'stock 25 reserved 0 available 25', 'privileges: refused writes changed nothing');
SELECT is_empty('SELECT * FROM hc_check()', 'privileges: hc_check() is empty');

SELECT * FROM finish();
ROLLBACK;
