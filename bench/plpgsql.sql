-- bench/plpgsql.sql: holdcommit's contract (SPEC sections 2-4, 7) in PL/pgSQL,
-- as a good application team would write it without the extension: the
-- yardstick of make bench.  Everything lives in the schema bench_plpgsql,
-- with its own tables; it never touches the extension's.
--
-- Design, as such a team would choose it:
--   * The idempotency key is a column of the reservation row, with a unique
--     index: no separate key table.  Keys are one key space for holds and
--     stock reservations: every call that takes a key first takes a
--     transaction-level advisory lock on the key's hash and then looks the
--     key up in both tables, so a second call with the same key waits for
--     the first to end and then replays (or proceeds if the first rolled
--     back), and no key can be stored twice.  A key older than the
--     retention window (24 h) is forgotten when reused.
--   * A hold is one conditional UPDATE of the asset whose target row is
--     picked FOR NO KEY UPDATE SKIP LOCKED: it never waits on an in-flight
--     hold of another buyer.  An expired hold is reclaimed inline.
--   * A reserve is the atomic `reserved += qty WHERE stock - reserved >= qty`;
--     only when that finds too little does it lock the product, reclaim
--     expired reservations of that product and try once more.
--   * Commit, release, finalize, unreserve lock the asset or product row first,
--     then read the reservation under that lock (the lock order of every path:
--     asset or product, then reservation).
--   * One ledger row per state change; leases keep their row forever so the
--     fencing token only grows.
--   * Times come from clock_timestamp(), read once per call.
-- Like the extension, these functions decide on the latest committed state,
-- so they are meant for READ COMMITTED (each statement takes a new snapshot).
-- Unlike the extension, the lease and attempt functions here are not
-- autonomous: they write in the caller's transaction, which the application
-- must commit (in autocommit) before it acts on a token or a PROCEED.

DROP SCHEMA IF EXISTS bench_plpgsql CASCADE;
CREATE SCHEMA bench_plpgsql;
SET search_path = bench_plpgsql, pg_catalog;

CREATE TABLE assets (
    id                      text PRIMARY KEY CHECK (octet_length(id) BETWEEN 1 AND 64),
    name                    text NOT NULL DEFAULT '',
    status                  text NOT NULL DEFAULT 'AVAILABLE'
                            CHECK (status IN ('AVAILABLE', 'HELD', 'SOLD')),
    hold_expires_at         timestamptz,
    current_reservation_id  text,
    version                 integer NOT NULL DEFAULT 1,
    updated_at              timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TABLE reservations (
    id               text PRIMARY KEY,
    asset_id         text NOT NULL,
    buyer_id         text NOT NULL,
    idempotency_key  text UNIQUE,       -- NULL once forgotten after the retention window
    ttl              interval NOT NULL, -- with asset_id and buyer_id: the request
    status           text NOT NULL CHECK (status IN ('HELD', 'COMMITTED', 'RELEASED', 'EXPIRED')),
    expires_at       timestamptz NOT NULL,
    created_at       timestamptz NOT NULL,
    ended_at         timestamptz
);

CREATE TABLE inventory (
    product_id  text PRIMARY KEY CHECK (octet_length(product_id) BETWEEN 1 AND 64),
    stock       integer NOT NULL,
    reserved    integer NOT NULL DEFAULT 0,
    version     integer NOT NULL DEFAULT 1,
    updated_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    CHECK (stock >= reserved AND reserved >= 0)
);

-- One product per reservation: the functions ported are the single-product ones.
CREATE TABLE stock_reservations (
    id               text PRIMARY KEY,
    product_id       text NOT NULL,
    qty              integer NOT NULL CHECK (qty > 0),
    buyer_id         text NOT NULL,
    idempotency_key  text UNIQUE,
    ttl              interval NOT NULL,
    status           text NOT NULL CHECK (status IN ('RESERVED', 'FINALIZED', 'RELEASED', 'EXPIRED')),
    expires_at       timestamptz NOT NULL,
    created_at       timestamptz NOT NULL,
    ended_at         timestamptz
);
-- What a reserve reclaims when stock looks short.
CREATE INDEX stock_reservations_expiry ON stock_reservations (product_id, expires_at)
    WHERE status = 'RESERVED';

CREATE TABLE locks (
    resource      text PRIMARY KEY CHECK (octet_length(resource) BETWEEN 1 AND 64),
    owner         text,             -- NULL: free
    token         bigint NOT NULL,
    acquired_at   timestamptz NOT NULL,
    heartbeat_at  timestamptz NOT NULL,
    stale_after   interval NOT NULL
);

CREATE TABLE attempts (
    resource        text PRIMARY KEY,
    status          text NOT NULL DEFAULT 'OPEN',
    attempts        integer NOT NULL DEFAULT 0,
    last_marker     text,
    last_attempt_at timestamptz,
    last_owner      text,
    last_token      bigint
);

CREATE TABLE ledger (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at              timestamptz NOT NULL,
    kind            text NOT NULL,  -- asset, product, resource
    entity_id       text NOT NULL,
    event           text NOT NULL,
    source          text NOT NULL,  -- call, reclaim
    reservation_id  text,
    buyer_id        text,
    reserved_delta  integer NOT NULL DEFAULT 0,
    stock_delta     integer NOT NULL DEFAULT 0,
    actor           text NOT NULL DEFAULT current_user,
    detail          text
);

CREATE TYPE reservation AS (
    reservation_id  text,
    asset_id        text,
    buyer_id        text,
    status          text,
    expires_at      timestamptz,
    created_at      timestamptz,
    replayed        boolean
);

CREATE TYPE stock_reservation AS (
    reservation_id  text,
    buyer_id        text,
    status          text,
    items           jsonb,
    expires_at      timestamptz,
    created_at      timestamptz,
    replayed        boolean
);

------------------------------------------------------------------------------
-- Shared pieces
------------------------------------------------------------------------------

-- Check an id or key argument: 22004 null, 22023 empty, 22001 too long.
CREATE FUNCTION check_text(value text, name text, max_bytes integer) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF value IS NULL THEN
        RAISE EXCEPTION '% must not be null', name USING ERRCODE = '22004';
    ELSIF value = '' THEN
        RAISE EXCEPTION '% must not be empty', name USING ERRCODE = '22023';
    ELSIF octet_length(value) > max_bytes THEN
        RAISE EXCEPTION '% is too long', name USING ERRCODE = '22001',
            DETAIL = format('It is %s bytes long; the limit is %s bytes.', octet_length(value), max_bytes);
    END IF;
END
$$;

CREATE FUNCTION check_ttl(ttl interval) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF ttl IS NULL THEN
        RAISE EXCEPTION 'ttl must not be null' USING ERRCODE = '22004';
    ELSIF ttl <= interval '0' OR ttl > interval '24 hours' THEN
        RAISE EXCEPTION 'ttl must be positive and at most 24 hours' USING ERRCODE = '22023';
    END IF;
END
$$;

-- res_ and a ULID: 10 characters of milliseconds, then 16 random ones (64 random
-- bits from a UUID, in the hex subset of Crockford base32).
CREATE FUNCTION new_reservation_id(at timestamptz) RETURNS text
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    ms bigint := (extract(epoch FROM at) * 1000)::bigint;
BEGIN
    RETURN 'res_' || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((ms >> 45) & 31)::integer + 1, 1)
           || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((ms >> 40) & 31)::integer + 1, 1)
           || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((ms >> 35) & 31)::integer + 1, 1)
           || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((ms >> 30) & 31)::integer + 1, 1)
           || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((ms >> 25) & 31)::integer + 1, 1)
           || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((ms >> 20) & 31)::integer + 1, 1)
           || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((ms >> 15) & 31)::integer + 1, 1)
           || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((ms >> 10) & 31)::integer + 1, 1)
           || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((ms >> 5) & 31)::integer + 1, 1)
           || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((ms >> 0) & 31)::integer + 1, 1)
           || upper(substr(replace(gen_random_uuid()::text, '-', ''), 1, 16));
END
$$;

-- The key's rendezvous: calls with the same key run one after the other.
CREATE FUNCTION lock_key(key text) RETURNS void
LANGUAGE sql VOLATILE AS $$
    SELECT pg_advisory_xact_lock(hashtextextended(key, 0))
$$;

-- RS005 for a key that another kind of call stored within the retention window.
CREATE FUNCTION refuse_foreign_key(key text, now timestamptz, own_table text) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF (own_table <> 'reservations' AND EXISTS (
            SELECT 1 FROM bench_plpgsql.reservations
             WHERE idempotency_key = key AND created_at > now - interval '24 hours'))
       OR (own_table <> 'stock_reservations' AND EXISTS (
            SELECT 1 FROM bench_plpgsql.stock_reservations
             WHERE idempotency_key = key AND created_at > now - interval '24 hours')) THEN
        RAISE EXCEPTION 'idempotency key "%" was already used for a different request', key
            USING ERRCODE = 'RS005', HINT = 'Send a new idempotency key for a new request.';
    END IF;
END
$$;

------------------------------------------------------------------------------
-- Unique assets
------------------------------------------------------------------------------

CREATE FUNCTION hold(asset_id text, buyer_id text, idempotency_key text,
                     ttl interval DEFAULT '10 minutes')
RETURNS reservation
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    now timestamptz := clock_timestamp();
    stored bench_plpgsql.reservations;
    rid text;
    old_status text;
    old_rid text;
    peek bench_plpgsql.assets;
BEGIN
    PERFORM bench_plpgsql.check_text(asset_id, 'asset_id', 64);
    PERFORM bench_plpgsql.check_text(buyer_id, 'buyer_id', 64);
    PERFORM bench_plpgsql.check_text(idempotency_key, 'idempotency_key', 255);
    PERFORM bench_plpgsql.check_ttl(ttl);

    -- Idempotency: a replay, a reused key, or a key past retention.
    PERFORM bench_plpgsql.lock_key(idempotency_key);
    SELECT * INTO stored FROM bench_plpgsql.reservations r
     WHERE r.idempotency_key = hold.idempotency_key;
    IF FOUND THEN
        IF stored.created_at <= now - interval '24 hours' THEN
            UPDATE bench_plpgsql.reservations SET idempotency_key = NULL WHERE id = stored.id;
        ELSIF stored.asset_id = hold.asset_id AND stored.buyer_id = hold.buyer_id
              AND stored.ttl = hold.ttl THEN
            RETURN (stored.id, stored.asset_id, stored.buyer_id, 'HELD'::text,
                    stored.created_at + stored.ttl, stored.created_at, true);
        ELSE
            RAISE EXCEPTION 'idempotency key "%" was already used for a different request',
                idempotency_key USING ERRCODE = 'RS005',
                HINT = 'Send a new idempotency key for a new request.';
        END IF;
    END IF;
    PERFORM bench_plpgsql.refuse_foreign_key(idempotency_key, now, 'reservations');

    -- The hold: one conditional step that skips a row another hold has locked.
    rid := bench_plpgsql.new_reservation_id(now);
    UPDATE bench_plpgsql.assets a
       SET status = 'HELD', hold_expires_at = now + ttl, current_reservation_id = rid,
           version = a.version + 1, updated_at = now
      FROM (SELECT t.id, t.status, t.current_reservation_id FROM bench_plpgsql.assets t
             WHERE t.id = hold.asset_id
               AND (t.status = 'AVAILABLE' OR (t.status = 'HELD' AND t.hold_expires_at <= now))
               FOR NO KEY UPDATE SKIP LOCKED) target
     WHERE a.id = target.id
    RETURNING target.status, target.current_reservation_id INTO old_status, old_rid;
    IF NOT FOUND THEN
        SELECT * INTO peek FROM bench_plpgsql.assets a WHERE a.id = hold.asset_id;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'asset "%" does not exist', asset_id USING ERRCODE = 'RS006';
        END IF;
        RAISE EXCEPTION 'asset "%" is not available', asset_id USING ERRCODE = 'RS001',
            DETAIL = format('Asset "%s" is %s.', asset_id, lower(peek.status)),
            HINT = 'Offer the buyer another asset.';
    END IF;

    -- Passive reclamation of the expired hold just taken over.
    IF old_status = 'HELD' THEN
        UPDATE bench_plpgsql.reservations SET status = 'EXPIRED', ended_at = now
         WHERE id = old_rid AND status = 'HELD';
        INSERT INTO bench_plpgsql.ledger (at, kind, entity_id, event, source, reservation_id, reserved_delta)
        VALUES (now, 'asset', asset_id, 'reclaim', 'reclaim', old_rid, -1);
    END IF;

    INSERT INTO bench_plpgsql.reservations
        (id, asset_id, buyer_id, idempotency_key, ttl, status, expires_at, created_at)
    VALUES (rid, asset_id, buyer_id, idempotency_key, ttl, 'HELD', now + ttl, now);
    INSERT INTO bench_plpgsql.ledger (at, kind, entity_id, event, source, reservation_id, buyer_id, reserved_delta)
    VALUES (now, 'asset', asset_id, 'hold', 'call', rid, buyer_id, 1);
    RETURN (rid, asset_id, buyer_id, 'HELD'::text, now + ttl, now, false);
END
$$;

-- Find a hold, lock its asset, read the hold again under that lock.
CREATE FUNCTION lock_hold(reservation_id text, OUT r bench_plpgsql.reservations,
                          OUT asset bench_plpgsql.assets)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    aid text;
BEGIN
    PERFORM bench_plpgsql.check_text(reservation_id, 'reservation_id', 64);
    SELECT x.asset_id INTO aid FROM bench_plpgsql.reservations x WHERE x.id = reservation_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'reservation "%" does not exist', reservation_id USING ERRCODE = 'RS006';
    END IF;
    SELECT * INTO asset FROM bench_plpgsql.assets a WHERE a.id = aid FOR NO KEY UPDATE;
    SELECT * INTO r FROM bench_plpgsql.reservations x WHERE x.id = reservation_id;
END
$$;

CREATE FUNCTION commit(reservation_id text, late_ok boolean DEFAULT false)
RETURNS reservation
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    now timestamptz := clock_timestamp();
    r bench_plpgsql.reservations;
    asset bench_plpgsql.assets;
    expired boolean;
    current boolean;
    locked record;
BEGIN
    SELECT * INTO locked FROM bench_plpgsql.lock_hold(reservation_id);
    r := locked.r;
    asset := locked.asset;
    IF r.status = 'COMMITTED' THEN
        RETURN (r.id, r.asset_id, r.buyer_id, r.status, r.expires_at, r.created_at, true);
    ELSIF r.status = 'RELEASED' THEN
        RAISE EXCEPTION 'reservation "%" is not active', r.id USING ERRCODE = 'RS004',
            HINT = 'The buyer cancelled this hold: refund the payment.';
    END IF;
    expired := r.status = 'EXPIRED' OR r.expires_at <= now;
    current := asset.status = 'HELD' AND asset.current_reservation_id = r.id;
    IF expired AND NOT late_ok THEN
        RAISE EXCEPTION 'reservation "%" has expired', r.id USING ERRCODE = 'RS003',
            HINT = 'Refund the payment, or commit with late_ok => true.';
    END IF;
    IF expired AND NOT current AND (asset.status <> 'AVAILABLE' OR EXISTS (
            SELECT 1 FROM bench_plpgsql.reservations x
             WHERE x.asset_id = r.asset_id AND x.id <> r.id AND x.created_at >= r.created_at)) THEN
        RAISE EXCEPTION 'reservation "%" has expired', r.id USING ERRCODE = 'RS003',
            HINT = 'Another buyer has taken the asset since: refund the payment.';
    END IF;
    UPDATE bench_plpgsql.assets
       SET status = 'SOLD', hold_expires_at = NULL, current_reservation_id = r.id,
           version = version + 1, updated_at = now
     WHERE id = r.asset_id;
    UPDATE bench_plpgsql.reservations SET status = 'COMMITTED', ended_at = now WHERE id = r.id;
    INSERT INTO bench_plpgsql.ledger (at, kind, entity_id, event, source, reservation_id, buyer_id,
                                      reserved_delta, stock_delta)
    VALUES (now, 'asset', r.asset_id, 'commit', 'call', r.id, r.buyer_id,
            CASE WHEN r.status = 'HELD' THEN -1 ELSE 0 END, -1);
    RETURN (r.id, r.asset_id, r.buyer_id, 'COMMITTED'::text, r.expires_at, r.created_at, false);
END
$$;

CREATE FUNCTION release(reservation_id text)
RETURNS reservation
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    now timestamptz := clock_timestamp();
    r bench_plpgsql.reservations;
    asset bench_plpgsql.assets;
    ending text;
    locked record;
BEGIN
    SELECT * INTO locked FROM bench_plpgsql.lock_hold(reservation_id);
    r := locked.r;
    asset := locked.asset;
    IF r.status = 'COMMITTED' THEN
        RAISE EXCEPTION 'reservation "%" is not active', r.id USING ERRCODE = 'RS004',
            HINT = 'A sold asset cannot be released; refund through your payment flow.';
    ELSIF r.status <> 'HELD' THEN
        RETURN (r.id, r.asset_id, r.buyer_id, r.status, r.expires_at, r.created_at, true);
    END IF;
    -- A hold past its end that nobody swept yet expires now and is returned as a replay.
    ending := CASE WHEN r.expires_at <= now THEN 'EXPIRED' ELSE 'RELEASED' END;
    UPDATE bench_plpgsql.assets
       SET status = 'AVAILABLE', hold_expires_at = NULL, current_reservation_id = NULL,
           version = version + 1, updated_at = now
     WHERE id = r.asset_id AND status = 'HELD' AND current_reservation_id = r.id;
    UPDATE bench_plpgsql.reservations SET status = ending, ended_at = now WHERE id = r.id;
    INSERT INTO bench_plpgsql.ledger (at, kind, entity_id, event, source, reservation_id, buyer_id, reserved_delta)
    VALUES (now, 'asset', r.asset_id, CASE ending WHEN 'EXPIRED' THEN 'expire' ELSE 'release' END,
            CASE ending WHEN 'EXPIRED' THEN 'reclaim' ELSE 'call' END, r.id, r.buyer_id, -1);
    RETURN (r.id, r.asset_id, r.buyer_id, ending, r.expires_at, r.created_at, ending = 'EXPIRED');
END
$$;

------------------------------------------------------------------------------
-- Counted stock
------------------------------------------------------------------------------

CREATE FUNCTION stock_result(r bench_plpgsql.stock_reservations, status text, replayed boolean)
RETURNS stock_reservation
LANGUAGE sql IMMUTABLE AS $$
    SELECT (r.id, r.buyer_id, status,
            jsonb_build_array(jsonb_build_object('product_id', r.product_id, 'qty', r.qty)),
            r.expires_at, r.created_at, replayed)::bench_plpgsql.stock_reservation
$$;

-- Reclaim the oldest expired reservations of a locked product, enough to
-- free `needed` units (at most 1000 of them); returns the units freed.
CREATE FUNCTION reclaim(product_id text, needed bigint, now timestamptz) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    freed bigint;
BEGIN
    WITH doomed AS (
        SELECT id FROM (
            SELECT s.id, s.qty, sum(s.qty) OVER (ORDER BY s.expires_at, s.id) AS running
              FROM (SELECT x.id, x.qty, x.expires_at FROM bench_plpgsql.stock_reservations x
                     WHERE x.product_id = reclaim.product_id AND x.status = 'RESERVED'
                       AND x.expires_at <= now
                     ORDER BY x.expires_at, x.id LIMIT 1000) s) o
         WHERE running - qty < needed),
    expired AS (
        UPDATE bench_plpgsql.stock_reservations x SET status = 'EXPIRED', ended_at = now
          FROM doomed d WHERE x.id = d.id AND x.status = 'RESERVED'
        RETURNING x.id, x.buyer_id, x.qty),
    logged AS (
        INSERT INTO bench_plpgsql.ledger (at, kind, entity_id, event, source, reservation_id, buyer_id, reserved_delta)
        SELECT now, 'product', reclaim.product_id, 'reclaim', 'reclaim', e.id, e.buyer_id, -e.qty
          FROM expired e)
    SELECT coalesce(sum(qty), 0) INTO freed FROM expired;
    IF freed > 0 THEN
        UPDATE bench_plpgsql.inventory SET reserved = reserved - freed, version = version + 1,
               updated_at = now
         WHERE inventory.product_id = reclaim.product_id;
    END IF;
    RETURN freed;
END
$$;

CREATE FUNCTION reserve(product_id text, qty integer, buyer_id text, idempotency_key text,
                        ttl interval DEFAULT '10 minutes')
RETURNS stock_reservation
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    now timestamptz := clock_timestamp();
    stored bench_plpgsql.stock_reservations;
    inv bench_plpgsql.inventory;
    r bench_plpgsql.stock_reservations;
BEGIN
    PERFORM bench_plpgsql.check_text(product_id, 'product_id', 64);
    IF qty IS NULL THEN
        RAISE EXCEPTION 'qty must not be null' USING ERRCODE = '22004';
    ELSIF qty <= 0 THEN
        RAISE EXCEPTION 'qty must be positive' USING ERRCODE = '22023';
    END IF;
    PERFORM bench_plpgsql.check_text(buyer_id, 'buyer_id', 64);
    PERFORM bench_plpgsql.check_text(idempotency_key, 'idempotency_key', 255);
    PERFORM bench_plpgsql.check_ttl(ttl);

    PERFORM bench_plpgsql.lock_key(idempotency_key);
    SELECT * INTO stored FROM bench_plpgsql.stock_reservations x
     WHERE x.idempotency_key = reserve.idempotency_key;
    IF FOUND THEN
        IF stored.created_at <= now - interval '24 hours' THEN
            UPDATE bench_plpgsql.stock_reservations SET idempotency_key = NULL WHERE id = stored.id;
        ELSIF stored.product_id = reserve.product_id AND stored.qty = reserve.qty
              AND stored.buyer_id = reserve.buyer_id AND stored.ttl = reserve.ttl THEN
            RETURN bench_plpgsql.stock_result(stored, 'RESERVED', true);
        ELSE
            RAISE EXCEPTION 'idempotency key "%" was already used for a different request',
                idempotency_key USING ERRCODE = 'RS005',
                HINT = 'Send a new idempotency key for a new request.';
        END IF;
    END IF;
    PERFORM bench_plpgsql.refuse_foreign_key(idempotency_key, now, 'stock_reservations');

    -- The atomic conditional update; reclaim and retry only when stock looks short.
    UPDATE bench_plpgsql.inventory i
       SET reserved = i.reserved + qty, version = i.version + 1, updated_at = now
     WHERE i.product_id = reserve.product_id AND i.stock - i.reserved >= qty;
    IF NOT FOUND THEN
        SELECT * INTO inv FROM bench_plpgsql.inventory i
         WHERE i.product_id = reserve.product_id FOR NO KEY UPDATE;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'product "%" does not exist', product_id USING ERRCODE = 'RS006';
        END IF;
        IF bench_plpgsql.reclaim(product_id, qty - (inv.stock - inv.reserved), now)
               < qty - (inv.stock - inv.reserved) THEN
            RAISE EXCEPTION 'insufficient stock for product "%"', product_id USING ERRCODE = 'RS002',
                DETAIL = format('%s requested, %s available.', qty, inv.stock - inv.reserved),
                HINT = 'Offer a smaller quantity, or try again when reservations end.';
        END IF;
        UPDATE bench_plpgsql.inventory i
           SET reserved = i.reserved + qty, version = i.version + 1, updated_at = now
         WHERE i.product_id = reserve.product_id AND i.stock - i.reserved >= qty;
    END IF;

    r := (bench_plpgsql.new_reservation_id(now), product_id, qty, buyer_id, idempotency_key, ttl,
          'RESERVED', now + ttl, now, NULL);
    INSERT INTO bench_plpgsql.stock_reservations SELECT r.*;
    INSERT INTO bench_plpgsql.ledger (at, kind, entity_id, event, source, reservation_id, buyer_id, reserved_delta)
    VALUES (now, 'product', product_id, 'reserve', 'call', r.id, buyer_id, qty);
    RETURN bench_plpgsql.stock_result(r, 'RESERVED', false);
END
$$;

-- Find a stock reservation, lock its product, read it again under that lock.
CREATE FUNCTION lock_stock(reservation_id text, OUT r bench_plpgsql.stock_reservations,
                           OUT inv bench_plpgsql.inventory)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    pid text;
BEGIN
    PERFORM bench_plpgsql.check_text(reservation_id, 'reservation_id', 64);
    SELECT x.product_id INTO pid FROM bench_plpgsql.stock_reservations x WHERE x.id = reservation_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'reservation "%" does not exist', reservation_id USING ERRCODE = 'RS006';
    END IF;
    SELECT * INTO inv FROM bench_plpgsql.inventory i WHERE i.product_id = pid FOR NO KEY UPDATE;
    SELECT * INTO r FROM bench_plpgsql.stock_reservations x WHERE x.id = reservation_id;
END
$$;

CREATE FUNCTION finalize(reservation_id text, late_ok boolean DEFAULT false)
RETURNS stock_reservation
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    now timestamptz := clock_timestamp();
    r bench_plpgsql.stock_reservations;
    inv bench_plpgsql.inventory;
    locked record;
BEGIN
    SELECT * INTO locked FROM bench_plpgsql.lock_stock(reservation_id);
    r := locked.r;
    inv := locked.inv;
    IF r.status = 'FINALIZED' THEN
        RETURN bench_plpgsql.stock_result(r, r.status, true);
    ELSIF r.status = 'RELEASED' THEN
        RAISE EXCEPTION 'reservation "%" is not active', r.id USING ERRCODE = 'RS004',
            HINT = 'The buyer cancelled this order: refund the payment.';
    END IF;
    IF (r.status = 'EXPIRED' OR r.expires_at <= now) AND NOT late_ok THEN
        RAISE EXCEPTION 'reservation "%" has expired', r.id USING ERRCODE = 'RS003',
            HINT = 'Refund the payment, or finalize with late_ok => true.';
    END IF;
    IF r.status = 'EXPIRED' THEN
        -- It no longer counts in reserved: it must find its stock again.
        UPDATE bench_plpgsql.inventory
           SET reserved = reserved + r.qty
         WHERE product_id = r.product_id AND stock - reserved >= r.qty;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'reservation "%" has expired', r.id USING ERRCODE = 'RS003',
                HINT = 'The stock is gone: refund the payment.';
        END IF;
    END IF;
    UPDATE bench_plpgsql.inventory
       SET stock = stock - r.qty, reserved = reserved - r.qty, version = version + 1, updated_at = now
     WHERE product_id = r.product_id;
    UPDATE bench_plpgsql.stock_reservations SET status = 'FINALIZED', ended_at = now WHERE id = r.id;
    INSERT INTO bench_plpgsql.ledger (at, kind, entity_id, event, source, reservation_id, buyer_id,
                                      reserved_delta, stock_delta)
    VALUES (now, 'product', r.product_id, 'finalize', 'call', r.id, r.buyer_id,
            CASE WHEN r.status = 'RESERVED' THEN -r.qty ELSE 0 END, -r.qty);
    RETURN bench_plpgsql.stock_result(r, 'FINALIZED', false);
END
$$;

CREATE FUNCTION unreserve(reservation_id text)
RETURNS stock_reservation
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    now timestamptz := clock_timestamp();
    r bench_plpgsql.stock_reservations;
    inv bench_plpgsql.inventory;
    ending text;
    locked record;
BEGIN
    SELECT * INTO locked FROM bench_plpgsql.lock_stock(reservation_id);
    r := locked.r;
    inv := locked.inv;
    IF r.status = 'FINALIZED' THEN
        RAISE EXCEPTION 'reservation "%" is not active', r.id USING ERRCODE = 'RS004',
            HINT = 'A finalized order cannot be cancelled; refund through your payment flow.';
    ELSIF r.status <> 'RESERVED' THEN
        RETURN bench_plpgsql.stock_result(r, r.status, true);
    END IF;
    ending := CASE WHEN r.expires_at <= now THEN 'EXPIRED' ELSE 'RELEASED' END;
    UPDATE bench_plpgsql.inventory
       SET reserved = reserved - r.qty, version = version + 1, updated_at = now
     WHERE product_id = r.product_id;
    UPDATE bench_plpgsql.stock_reservations SET status = ending, ended_at = now WHERE id = r.id;
    INSERT INTO bench_plpgsql.ledger (at, kind, entity_id, event, source, reservation_id, buyer_id, reserved_delta)
    VALUES (now, 'product', r.product_id, CASE ending WHEN 'EXPIRED' THEN 'expire' ELSE 'release' END,
            CASE ending WHEN 'EXPIRED' THEN 'reclaim' ELSE 'call' END, r.id, r.buyer_id, -r.qty);
    RETURN bench_plpgsql.stock_result(r, ending, ending = 'EXPIRED');
END
$$;

------------------------------------------------------------------------------
-- Leases with fencing tokens
------------------------------------------------------------------------------

CREATE FUNCTION lock_acquire(resource text, owner text, stale_after interval DEFAULT '3 minutes',
                             max_retries integer DEFAULT 5)
RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    now timestamptz;
    held bench_plpgsql.locks;
    stale boolean;
    taken bigint;
    attempt integer := 0;
BEGIN
    PERFORM bench_plpgsql.check_text(resource, 'resource', 64);
    PERFORM bench_plpgsql.check_text(owner, 'owner', 64);
    IF stale_after IS NULL OR stale_after <= interval '0' THEN
        RAISE EXCEPTION 'stale_after must be positive' USING ERRCODE = '22023';
    ELSIF max_retries IS NULL OR max_retries < 0 THEN
        RAISE EXCEPTION 'max_retries must not be negative' USING ERRCODE = '22023';
    END IF;
    LOOP
        now := clock_timestamp();
        SELECT * INTO held FROM bench_plpgsql.locks l
         WHERE l.resource = lock_acquire.resource FOR NO KEY UPDATE;
        IF NOT FOUND THEN
            -- A new resource: its first token.
            INSERT INTO bench_plpgsql.locks (resource, owner, token, acquired_at, heartbeat_at, stale_after)
            VALUES (resource, owner, 1, now, now, stale_after)
            ON CONFLICT DO NOTHING
            RETURNING token INTO taken;
            IF FOUND THEN
                INSERT INTO bench_plpgsql.ledger (at, kind, entity_id, event, source, detail)
                VALUES (now, 'resource', resource, 'acquire', 'call',
                        format('token %s of %s', taken, owner));
                RETURN taken;
            END IF;
            CONTINUE;           -- another caller created it just now: look again
        END IF;
        -- Staleness by the stale_after the holder acquired with.
        stale := held.heartbeat_at + held.stale_after <= now;
        IF held.owner = owner AND NOT stale THEN
            RETURN held.token;  -- ours already: the same token
        ELSIF held.owner IS NULL OR stale THEN
            UPDATE bench_plpgsql.locks l
               SET owner = lock_acquire.owner, token = l.token + 1, acquired_at = now,
                   heartbeat_at = now, stale_after = lock_acquire.stale_after
             WHERE l.resource = lock_acquire.resource
            RETURNING l.token INTO taken;
            INSERT INTO bench_plpgsql.ledger (at, kind, entity_id, event, source, detail)
            VALUES (now, 'resource', resource,
                    CASE WHEN held.owner IS NULL THEN 'acquire' ELSE 'takeover' END, 'call',
                    CASE WHEN held.owner IS NULL THEN format('token %s of %s', taken, owner)
                         ELSE format('token %s of %s -> token %s of %s',
                                     held.token, held.owner, taken, owner) END);
            RETURN taken;
        END IF;
        EXIT WHEN attempt >= max_retries;
        attempt := attempt + 1;
        PERFORM pg_sleep(least(0.2 * 2 ^ (attempt - 1) + random() * 0.2, 2.0));
    END LOOP;
    RETURN NULL;
END
$$;

CREATE FUNCTION lock_heartbeat(resource text, owner text, token bigint)
RETURNS timestamptz
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    now timestamptz := clock_timestamp();
BEGIN
    PERFORM bench_plpgsql.check_text(resource, 'resource', 64);
    PERFORM bench_plpgsql.check_text(owner, 'owner', 64);
    UPDATE bench_plpgsql.locks l SET heartbeat_at = now
     WHERE l.resource = lock_heartbeat.resource AND l.owner = lock_heartbeat.owner
       AND l.token = lock_heartbeat.token;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'lease on "%" is not held by "%" with token %', resource, owner, token
            USING ERRCODE = 'RS007', HINT = 'Stop working on the resource: another owner may have it.';
    END IF;
    RETURN now;
END
$$;

CREATE FUNCTION lock_release(resource text, owner text, token bigint)
RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM bench_plpgsql.check_text(resource, 'resource', 64);
    PERFORM bench_plpgsql.check_text(owner, 'owner', 64);
    UPDATE bench_plpgsql.locks l SET owner = NULL
     WHERE l.resource = lock_release.resource AND l.owner = lock_release.owner
       AND l.token = lock_release.token;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    INSERT INTO bench_plpgsql.ledger (at, kind, entity_id, event, source, detail)
    VALUES (clock_timestamp(), 'resource', resource, 'release', 'call',
            format('token %s of %s', token, owner));
    RETURN true;
END
$$;

-- In the caller's transaction, before a write the lease protects: RS007
-- unless owner holds it with token; the row locked FOR KEY SHARE until the
-- transaction ends (what hc_lock_check does; this port's acquire does not
-- wait for it: only the check's cost is compared).
CREATE FUNCTION lock_check(resource text, owner text, token bigint)
RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM bench_plpgsql.check_text(resource, 'resource', 64);
    PERFORM bench_plpgsql.check_text(owner, 'owner', 64);
    PERFORM FROM bench_plpgsql.locks l
      WHERE l.resource = lock_check.resource AND l.owner = lock_check.owner
        AND l.token = lock_check.token
        FOR KEY SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'lease on "%" is not held by "%" with token %', resource, owner, token
            USING ERRCODE = 'RS007', HINT = 'Stop working on the resource: another owner may have it.';
    END IF;
END
$$;

-- Before the external call: PROCEED (a new marker), COOLDOWN, MANUAL_REVIEW
-- or COMPLETED, for the lease holder only; the lease row, then the
-- attempt row, locked.
CREATE FUNCTION attempt_begin(resource text, owner text, token bigint,
                              cooldown interval DEFAULT '10 minutes', max_attempts integer DEFAULT 5,
                              OUT status text, OUT attempt integer, OUT marker text)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    now timestamptz := clock_timestamp();
    a bench_plpgsql.attempts;
BEGIN
    PERFORM bench_plpgsql.check_text(resource, 'resource', 64);
    PERFORM bench_plpgsql.check_text(owner, 'owner', 64);
    PERFORM FROM bench_plpgsql.locks l
     WHERE l.resource = attempt_begin.resource AND l.owner = attempt_begin.owner
       AND l.token = attempt_begin.token
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'lease on "%" is not held by "%" with token %', resource, owner, token
            USING ERRCODE = 'RS007';
    END IF;
    INSERT INTO bench_plpgsql.attempts AS t (resource) VALUES (attempt_begin.resource)
        ON CONFLICT DO NOTHING;
    SELECT * INTO a FROM bench_plpgsql.attempts t WHERE t.resource = attempt_begin.resource FOR UPDATE;
    IF a.status IN ('COMPLETED', 'MANUAL_REVIEW') THEN
        status := a.status;
    ELSIF a.attempts >= max_attempts THEN
        UPDATE bench_plpgsql.attempts t SET status = 'MANUAL_REVIEW' WHERE t.resource = attempt_begin.resource;
        INSERT INTO bench_plpgsql.ledger (at, kind, entity_id, event, source, detail)
        VALUES (now, 'resource', resource, 'review', 'call', format('%s attempts', a.attempts));
        status := 'MANUAL_REVIEW';
    ELSIF a.attempts > 0 AND now - a.last_attempt_at < cooldown THEN
        status := 'COOLDOWN';
    ELSE
        a.attempts := a.attempts + 1;
        a.last_marker := format('ATTEMPTED-%s-r%s-t%s', owner, a.attempts,
                                floor(extract(epoch FROM now) * 1000)::bigint);
        UPDATE bench_plpgsql.attempts t
           SET attempts = a.attempts, last_marker = a.last_marker, last_attempt_at = now,
               last_owner = attempt_begin.owner, last_token = attempt_begin.token
         WHERE t.resource = attempt_begin.resource;
        INSERT INTO bench_plpgsql.ledger (at, kind, entity_id, event, source, detail)
        VALUES (now, 'resource', resource, 'attempt', 'call', a.last_marker);
        status := 'PROCEED';
    END IF;
    attempt := a.attempts;
    marker := a.last_marker;
END
$$;


-- The best seats of a pool (issue 37), as a team would write it with the
-- same guarantees as hc_hold_best: a key, a reservation row per seat, a
-- ledger row per seat; the seats the n lowest ranks that nobody holds right
-- now (ORDER BY rank LIMIT n FOR UPDATE SKIP LOCKED), an expired hold's seat
-- taken over inline.  No adjacency, no orphan rule.
CREATE TABLE seats (
    id               text PRIMARY KEY CHECK (octet_length(id) BETWEEN 1 AND 64),
    pool             text NOT NULL,
    rank             integer NOT NULL,
    status           text NOT NULL DEFAULT 'AVAILABLE' CHECK (status IN ('AVAILABLE', 'HELD', 'SOLD')),
    hold_id          text,
    hold_expires_at  timestamptz,
    version          integer NOT NULL DEFAULT 1
);
CREATE INDEX seats_best ON seats (pool, rank, id);
CREATE TABLE seat_holds (
    id               text NOT NULL,
    seat_id          text NOT NULL,
    buyer_id         text NOT NULL,
    idempotency_key  text UNIQUE,       -- on the hold's first seat
    request          text NOT NULL,     -- pool, n and ttl: what a replay compares
    status           text NOT NULL CHECK (status IN ('HELD', 'COMMITTED', 'RELEASED', 'EXPIRED')),
    expires_at       timestamptz NOT NULL,
    created_at       timestamptz NOT NULL,
    ended_at         timestamptz,
    PRIMARY KEY (id, seat_id)
);

CREATE FUNCTION hold_best(pool text, n integer, buyer_id text, idempotency_key text,
                          ttl interval DEFAULT '10 minutes')
RETURNS SETOF text
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    now timestamptz := clock_timestamp();
    request text := format('%s/%s/%s', pool, n, ttl);
    stored bench_plpgsql.seat_holds;
    rid text;
    ids text[];
BEGIN
    PERFORM bench_plpgsql.check_text(pool, 'pool', 64);
    PERFORM bench_plpgsql.check_text(buyer_id, 'buyer_id', 64);
    PERFORM bench_plpgsql.check_text(idempotency_key, 'idempotency_key', 255);
    PERFORM bench_plpgsql.check_ttl(ttl);
    IF n IS NULL OR n NOT BETWEEN 1 AND 100 THEN
        RAISE EXCEPTION 'n must be between 1 and 100' USING ERRCODE = '22023';
    END IF;

    PERFORM bench_plpgsql.lock_key(idempotency_key);
    SELECT * INTO stored FROM bench_plpgsql.seat_holds h WHERE h.idempotency_key = hold_best.idempotency_key;
    IF FOUND THEN
        IF stored.request <> request OR stored.buyer_id <> hold_best.buyer_id THEN
            RAISE EXCEPTION 'idempotency key "%" was already used for a different request',
                idempotency_key USING ERRCODE = 'RS005';
        END IF;
        RETURN QUERY SELECT h.seat_id FROM bench_plpgsql.seat_holds h WHERE h.id = stored.id;
        RETURN;
    END IF;

    SELECT array_agg(t.id) INTO ids
      FROM (SELECT s.id FROM bench_plpgsql.seats s
             WHERE s.pool = hold_best.pool
               AND (s.status = 'AVAILABLE' OR (s.status = 'HELD' AND s.hold_expires_at <= now))
             ORDER BY s.rank, s.id LIMIT n FOR UPDATE SKIP LOCKED) t;
    IF coalesce(cardinality(ids), 0) < n THEN
        RAISE EXCEPTION 'pool "%" has fewer than % seats available', pool, n USING ERRCODE = 'RS002',
            DETAIL = format('%s left.', coalesce(cardinality(ids), 0));
    END IF;

    -- Expired holds taken over end, their ledger rows written.
    WITH ended AS (
        UPDATE bench_plpgsql.seat_holds h SET status = 'EXPIRED', ended_at = now
          FROM bench_plpgsql.seats s
         WHERE s.id = ANY (ids) AND s.status = 'HELD' AND h.id = s.hold_id AND h.seat_id = s.id
           AND h.status = 'HELD'
        RETURNING h.id, h.seat_id)
    INSERT INTO bench_plpgsql.ledger (at, kind, entity_id, event, source, reservation_id, reserved_delta)
    SELECT now, 'asset', e.seat_id, 'reclaim', 'reclaim', e.id, -1 FROM ended e;

    rid := bench_plpgsql.new_reservation_id(now);
    UPDATE bench_plpgsql.seats s
       SET status = 'HELD', hold_id = rid, hold_expires_at = now + ttl, version = s.version + 1
     WHERE s.id = ANY (ids);
    INSERT INTO bench_plpgsql.seat_holds
        (id, seat_id, buyer_id, idempotency_key, request, status, expires_at, created_at)
    SELECT rid, u.id, buyer_id, CASE WHEN u.n = 1 THEN idempotency_key END, request, 'HELD',
           now + ttl, now
      FROM unnest(ids) WITH ORDINALITY u (id, n);
    INSERT INTO bench_plpgsql.ledger (at, kind, entity_id, event, source, reservation_id, buyer_id, reserved_delta)
    SELECT now, 'asset', u.id, 'hold', 'call', rid, buyer_id, 1 FROM unnest(ids) u (id);
    RETURN QUERY SELECT unnest(ids);
END
$$;

RESET search_path;
