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

-- A new reservation (a hold or a stock reservation alike): its id is res_ + a
-- ULID, created_at the clock between t0 and t1 read around the call, and
-- expires_at created_at + ttl.  Three assertions, described "what: ...".
CREATE FUNCTION pg_temp.new_reservation(what text, id text, created timestamptz, expires timestamptz,
                                        t0 timestamptz, t1 timestamptz, ttl interval)
RETURNS SETOF text LANGUAGE plpgsql AS $$
BEGIN
    RETURN NEXT matches(id, '^res_[0-9A-HJKMNP-TV-Z]{26}$',
                        what || ': reservation id is res_ + a 26-character Crockford ULID');
    RETURN NEXT ok(created BETWEEN t0 AND t1, what || ': created_at is the clock during the call');
    RETURN NEXT is(expires - created, ttl, what || ': expires_at = created_at + ttl');
END
$$;

-- A reservation reclaimed by another buyer's call: its settle (hc_commit,
-- hc_finalize) throws RS003, even with late_ok, and its cancel (hc_release,
-- hc_unreserve) returns it EXPIRED.  Three assertions; late_note ends the
-- late_ok one's description.
CREATE FUNCTION pg_temp.reclaimed_ends(id text, settle text, cancel text, cancelling text, late_note text)
RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    status text;
BEGIN
    RETURN NEXT throws_ok(format('SELECT hc_%s(%L)', settle, id), 'RS003',
                          NULL, format('reclaim: the old buyer''s %s throws RS003', settle));
    RETURN NEXT throws_ok(format('SELECT hc_%s(%L, true)', settle, id), 'RS003',
                          NULL, 'reclaim: ... even with late_ok' || late_note);
    EXECUTE format('SELECT status FROM hc_%s(%L)', cancel, id) INTO status;
    RETURN NEXT is(status, 'EXPIRED', format('reclaim: %s the old reservation returns it EXPIRED', cancelling));
END
$$;
