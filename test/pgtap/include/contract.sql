-- What test/pgtap/hold.sql and stock.sql share, loaded with \ir before their
-- transaction (a file here is no suite: run-tests.sh runs test/pgtap/*.sql).
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true

-- The whole state of the extension, to show that a refused call changed
-- nothing: assets, holds, stock, orders and their lines, keys and the ledger.
CREATE FUNCTION pg_temp.hc_state() RETURNS text LANGUAGE sql AS $$
    SELECT md5(concat_ws('|',
        (SELECT string_agg(a::text, ',' ORDER BY a.id) FROM hc_assets a),
        (SELECT string_agg(r::text, ',' ORDER BY r.id) FROM hc_reservations r),
        (SELECT string_agg(i::text, ',' ORDER BY i.product_id) FROM hc_inventory i),
        (SELECT string_agg(r::text, ',' ORDER BY r.id) FROM hc_stock_reservations r),
        (SELECT string_agg(l::text, ',' ORDER BY l.reservation_id, l.product_id)
           FROM hc_stock_reservation_lines l),
        (SELECT string_agg(k::text, ',' ORDER BY k.key) FROM hc_idempotency_keys k),
        (SELECT string_agg(l::text, ',' ORDER BY l.seq) FROM hc_ledger l)))
$$;
