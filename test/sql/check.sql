-- hc_check() reports a row that has lost the shape of its status.  No CHECK
-- constraint guards these shapes (PostgreSQL 15 rebuilds every CHECK for
-- each statement that writes the table; only the extension writes them), so
-- each one is planted here as a superuser and must be reported, and only
-- the planted rows are.

SELECT count(hc_asset_add('SHAPE-A'));
SELECT (hc_hold('SHAPE-A', 'b', 'shape-1')).reservation_id AS hold_id \gset
SELECT count(hc_stock_set('SHAPE-P', 5)), count(hc_stock_set('SHAPE-Q', 5));
-- An order of one product, which is its own line, and one of several.
SELECT (hc_reserve('SHAPE-P', 1, 'b', 'shape-2')).reservation_id AS order_id \gset
SELECT (hc_reserve_items('[{"product_id": "SHAPE-P", "qty": 1}, {"product_id": "SHAPE-Q", "qty": 2}]',
                         'b', 'shape-3')).reservation_id AS multi_id \gset
SELECT hc_lock_acquire('SHAPE-L', 'w', '1 hour', 0) AS token;
SELECT status FROM hc_attempt_begin('SHAPE-L', 'w', 1);

-- Names the planted subjects, so the output does not carry random ids.
CREATE FUNCTION shape_findings(hold_id text, order_id text)
RETURNS TABLE (invariant text, subject text) LANGUAGE sql AS $$
    SELECT invariant, CASE subject WHEN hold_id THEN 'the hold' WHEN order_id THEN 'the order'
                                   ELSE subject END
      FROM hc_check()
     WHERE subject IN (hold_id, order_id, 'SHAPE-A', 'SHAPE-P', 'SHAPE-L')
     ORDER BY 1, 2
$$;

SELECT * FROM shape_findings(:'hold_id', :'order_id');

-- A planted defect: the statements run ($1 names the hold, $2 the order),
-- then what shape_findings reports; an error the function catches takes it
-- all back, as a ROLLBACK would.
CREATE FUNCTION planted(hold_id text, order_id text, VARIADIC plant text[])
RETURNS TABLE (invariant text, subject text) LANGUAGE plpgsql AS $$
DECLARE
    s text;
BEGIN
    BEGIN
        FOREACH s IN ARRAY plant LOOP
            EXECUTE s USING hold_id, order_id;
        END LOOP;
        RETURN QUERY SELECT * FROM shape_findings(hold_id, order_id);
        RAISE SQLSTATE 'UNDO1';
    EXCEPTION WHEN SQLSTATE 'UNDO1' THEN
    END;
END $$;

-- A HELD asset without its end; a hold that ended but is still HELD.
SELECT * FROM planted(:'hold_id', :'order_id',
    $$UPDATE hc_assets SET hold_expires_at = NULL WHERE id = 'SHAPE-A'$$,
    $$UPDATE hc_reservations SET ended_at = now() WHERE id = $1$$);

-- Unknown statuses (an order of one product: its line's too).
SELECT * FROM planted(:'hold_id', :'order_id',
    $$UPDATE hc_assets SET status = 'LOST' WHERE id = 'SHAPE-A'$$,
    $$UPDATE hc_reservations SET status = 'LOST' WHERE id = $1$$,
    $$UPDATE hc_stock_orders SET status = 'LOST' WHERE id = $2$$,
    $$UPDATE hc_attempts SET status = 'LOST' WHERE resource = 'SHAPE-L'$$);
SELECT * FROM planted(:'hold_id', :'multi_id',
    $$UPDATE hc_stock_order_lines SET status = 'LOST' WHERE reservation_id = $2 AND product_id = 'SHAPE-Q'$$);

-- An AVAILABLE asset that names a hold; an order of several products that
-- ended without ending, while its lines still count.
SELECT * FROM planted(:'hold_id', :'multi_id',
    $$UPDATE hc_assets SET status = 'AVAILABLE', hold_expires_at = NULL WHERE id = 'SHAPE-A'$$,
    $$UPDATE hc_stock_orders SET status = 'FINALIZED' WHERE id = $2$$);
-- An order of one product finalized by hand: its line with it, which
-- neither the ledger nor the product's reserved say.
SELECT * FROM planted(:'hold_id', :'order_id',
    $$UPDATE hc_stock_orders SET status = 'FINALIZED', ended_at = now() WHERE id = $2$$);

-- A free lease with a heartbeat; a held one beaten before it was acquired,
-- or bound to half a session; a token of 0.
SELECT * FROM planted(:'hold_id', :'order_id', $$UPDATE hc_locks SET owner = NULL WHERE resource = 'SHAPE-L'$$);
SELECT * FROM planted(:'hold_id', :'order_id',
    $$UPDATE hc_locks SET heartbeat_at = acquired_at - interval '1 second' WHERE resource = 'SHAPE-L'$$);
SELECT * FROM planted(:'hold_id', :'order_id', $$UPDATE hc_locks SET session_pid = 1 WHERE resource = 'SHAPE-L'$$);
SELECT * FROM planted(:'hold_id', :'order_id', $$UPDATE hc_locks SET token = 0 WHERE resource = 'SHAPE-L'$$);

-- An attempt without its marker; a COMPLETED one without its external_ref;
-- an external_ref on an OPEN one; more attempts than in all.
SELECT * FROM planted(:'hold_id', :'order_id', $$UPDATE hc_attempts SET last_marker = NULL WHERE resource = 'SHAPE-L'$$);
SELECT * FROM planted(:'hold_id', :'order_id', $$UPDATE hc_attempts SET status = 'COMPLETED' WHERE resource = 'SHAPE-L'$$);
SELECT * FROM planted(:'hold_id', :'order_id',
    $$UPDATE hc_attempts SET external_ref = 'INV-1', completed_at = now() WHERE resource = 'SHAPE-L'$$);
SELECT * FROM planted(:'hold_id', :'order_id', $$UPDATE hc_attempts SET attempts = total_attempts + 1 WHERE resource = 'SHAPE-L'$$);

-- A hold whose asset row, an order whose product row was deleted by hand:
-- their calls stop with an internal error naming both rows, change nothing,
-- and hc_check() reports the orphans.
BEGIN;
DELETE FROM hc_assets WHERE id = 'SHAPE-A';
DELETE FROM hc_stock_parts WHERE product_id = 'SHAPE-P';
SELECT outcome(format('SELECT hc_commit(%L)', :'hold_id'));
SELECT outcome(format('SELECT hc_release(%L)', :'hold_id'));
SELECT outcome(format('SELECT hc_extend(%L, ''1 hour'')', :'hold_id'));
SELECT outcome(format('SELECT hc_finalize(%L)', :'order_id'));
SELECT outcome(format('SELECT hc_unreserve(%L)', :'order_id'));
SELECT r.status, o.status FROM hc_reservations r, hc_stock_reservations o
 WHERE r.id = :'hold_id' AND o.id = :'order_id';
SELECT * FROM shape_findings(:'hold_id', :'order_id');
ROLLBACK;

-- An order of several products that names a product it has no line of, or
-- lacks one it has, or names another first; a line that names another
-- order's scope.
SELECT * FROM planted(:'hold_id', :'multi_id', $$UPDATE hc_stock_orders SET products = '{SHAPE-P,SHAPE-Q,SHAPE-R}' WHERE id = $2$$);
SELECT * FROM planted(:'hold_id', :'multi_id', $$UPDATE hc_stock_orders SET products = '{SHAPE-P}' WHERE id = $2$$);
SELECT * FROM planted(:'hold_id', :'multi_id', $$UPDATE hc_stock_orders SET products = '{SHAPE-O,SHAPE-Q}' WHERE id = $2$$);
SELECT * FROM planted(:'hold_id', :'multi_id', $$UPDATE hc_stock_order_lines SET scope_id = 'SHAPE-O' WHERE reservation_id = $2$$);
-- An order of one product with a list of products, with no units, without
-- its part, or with a line of its own beside it.
SELECT * FROM planted(:'hold_id', :'order_id', $$UPDATE hc_stock_orders SET products = '{SHAPE-P}' WHERE id = $2$$);
SELECT * FROM planted(:'hold_id', :'order_id', $$UPDATE hc_stock_orders SET qty = 0 WHERE id = $2$$);
SELECT * FROM planted(:'hold_id', :'order_id', $$UPDATE hc_stock_orders SET part = NULL WHERE id = $2$$);
SELECT * FROM planted(:'hold_id', :'order_id',
    $$INSERT INTO hc_stock_order_lines (product_id, reservation_id, qty, status, expires_at, buyer_id, part, scope_id)
      SELECT scope_id, id, qty, status, expires_at, buyer_id, part, scope_id FROM hc_stock_orders WHERE id = $2$$);
-- A line that counts in a part the product does not have.
SELECT * FROM planted(:'hold_id', :'order_id', $$UPDATE hc_stock_orders SET part = 5 WHERE id = $2$$);

-- A line finalized without its order (by hand): finalize and unreserve stop
-- (XX001) rather than count it twice.
BEGIN;
UPDATE hc_stock_order_lines SET status = 'FINALIZED' WHERE reservation_id = :'multi_id' AND product_id = 'SHAPE-Q';
SELECT outcome(format('SELECT hc_finalize(%L, true)', :'multi_id'));
SELECT outcome(format('SELECT hc_unreserve(%L)', :'multi_id'));
ROLLBACK;

-- Rolled back: nothing to report.
SELECT * FROM shape_findings(:'hold_id', :'order_id');
DROP FUNCTION planted(text, text, text[]);
DROP FUNCTION shape_findings(text, text);
