-- Helpers for the regression suites, which run after this one in the same
-- database (the Makefile runs setup first).

-- Run a statement, show its SQLSTATE and message instead of failing
-- (with reservation ids masked).
CREATE FUNCTION outcome(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM, 'res_[0-9A-Z]{26}', 'res_*', 'g');
END $$;

-- Time passes for one reservation: its clock moves back by an interval, as
-- if it had been made that much earlier.  Tests make a reservation with a
-- long ttl and age it, instead of a short ttl and a hope that the next
-- statement runs before it ends.  Superuser only: it writes the tables.
CREATE FUNCTION age_hold(rid text, by interval) RETURNS void LANGUAGE sql AS $$
    UPDATE hc_assets SET hold_expires_at = hold_expires_at - by
     WHERE current_reservation_id = rid AND status = 'HELD';
    UPDATE hc_reservations SET expires_at = expires_at - by, created_at = created_at - by
     WHERE id = rid;
$$;

CREATE FUNCTION age_stock(rid text, by interval) RETURNS void LANGUAGE sql AS $$
    UPDATE hc_stock_order_lines SET expires_at = expires_at - by WHERE reservation_id = rid;
    UPDATE hc_stock_orders SET expires_at = expires_at - by, created_at = created_at - by
     WHERE id = rid;
$$;

-- A digest of the leases, the attempts and the ledger, to prove that a
-- refused lease or attempt call changed nothing.
CREATE FUNCTION lock_digest() RETURNS text LANGUAGE sql AS $$
    SELECT md5(concat_ws('|',
        (SELECT string_agg(l::text, ';' ORDER BY l.resource) FROM hc_locks l),
        (SELECT string_agg(a::text, ';' ORDER BY a.resource) FROM hc_attempts a),
        (SELECT count(*) FROM hc_ledger)))
$$;
