#!/usr/bin/env bash
# Randomized concurrency soak ("chaos"), with pgbench: a bounded random mix of
# every call, then an audit of the invariants.
#   (a) assets: 30 clients for 10 s against 20 assets on sale (a sold one is
#       replaced by a new one): hc_hold with ttl 50-300 ms (new keys, a key
#       reused with the same arguments, a key reused with other arguments, and
#       keys that all clients send at once for 5 assets of their own),
#       hc_commit (sometimes late_ok, sometimes again), hc_release, hc_extend
#       on the client's own recent holds (and now and then on another client's)
#   (b) stock: 30 clients for 10 s against 5 products: hc_reserve and
#       hc_reserve_items (1-3 lines in random order, qty 1-3, ttl 50-300 ms,
#       keys reused as above), hc_finalize (sometimes late_ok, sometimes
#       again), hc_unreserve, and hc_stock_adjust (+/-) by the operator;
#       and, in the same phase, short orders across 3 scarce products: every
#       order takes all 3 (ttl 20-80 ms), anyone unreserves or finalizes
#       recent orders, large single reserves fail with RS002 after
#       reclaiming, and the operator holds a product's row in an open
#       transaction (a stock change it then rolls back) while others reclaim
#       -- the interleavings that released 0.1.0's units twice
# Every call's outcome is recorded by a wrapper; only the SQLSTATEs the
# contract allows for that call may occur (no 40P01, 23xxx, XX000 ...; 40001
# only where doc/reference.md gives it: a finalize or unreserve whose line
# another call, a late finalize here, moved between its look and its lock),
# and a reused key must replay or give RS005 exactly as the contract says.
# hc_sweep() joins the mix when the extension has it.
# Prints "ok - ..." / "not ok - ..." per assertion and "# ..." figures; exits 0.
# Needs PGHOST, PGPORT, PGUSER (a superuser) for a running server; creates and
# drops its own database.  CHAOS_SECONDS sets the length of each phase (10).
. "$(dirname "$0")/lib.bash"
clients=30
seconds=${CHAOS_SECONDS:-10}
initial_stock=200
order_stock=30
load_setup hc_load_chaos $clients

# Test helpers, not part of the extension.  chaos_asset_step(client) and
# chaos_stock_step(client) pick a random call, make it through a wrapper that
# records the outcome (SQLSTATE 00000 on success) in chaos_calls instead of
# aborting the pgbench client, and, for a reused idempotency key, what the
# contract says must happen (expect: 'replay' of expect_id, or 'RS005'),
# judged from the calls that succeeded before with that key.
psql -X -q -v ON_ERROR_STOP=1 -d "$db" >/dev/null <<'SQL' || { echo "not ok - load database set up"; exit 0; }
CREATE EXTENSION holdcommit;
CREATE TABLE chaos_calls (
    seq             bigserial PRIMARY KEY,
    phase           text NOT NULL,          -- assets, stock
    client          int NOT NULL,
    op              text NOT NULL,          -- hold, commit, ..., reserve, items, finalize, ...
    kind            text NOT NULL,          -- new, same, diff, shared, own, any, again
    key             text,
    target          text,                   -- asset, product, or items (jsonb text)
    buyer           text,
    ttl_ms          int,
    late_ok         boolean,
    delta           int,                    -- hc_stock_adjust
    args            text,                   -- the arguments that define a hold or reserve
    expect          text,                   -- fresh, replay, RS005
    expect_id       text,
    sqlstate        text NOT NULL,
    reservation_id  text,
    replayed        boolean,
    status          text,
    items_ok        boolean,                -- hc_reserve*: items as the contract sorts them
    started_at      timestamptz NOT NULL,
    at              timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX ON chaos_calls (client, op, seq);
CREATE INDEX ON chaos_calls (key);
CREATE INDEX ON chaos_calls (op, seq);
CREATE TABLE chaos_allowed (phase text, op text, sqlstate text, PRIMARY KEY (phase, op, sqlstate));
INSERT INTO chaos_allowed VALUES
    ('assets', 'hold', '00000'), ('assets', 'hold', 'RS001'), ('assets', 'hold', 'RS005'),
    ('assets', 'commit', '00000'), ('assets', 'commit', 'RS003'), ('assets', 'commit', 'RS004'),
    ('assets', 'release', '00000'), ('assets', 'release', 'RS004'),
    ('assets', 'extend', '00000'), ('assets', 'extend', 'RS003'), ('assets', 'extend', 'RS004'),
    ('assets', 'sweep', '00000'),
    ('stock', 'reserve', '00000'), ('stock', 'reserve', 'RS002'), ('stock', 'reserve', 'RS005'),
    ('stock', 'items', '00000'), ('stock', 'items', 'RS002'), ('stock', 'items', 'RS005'),
    ('stock', 'finalize', '00000'), ('stock', 'finalize', 'RS003'), ('stock', 'finalize', 'RS004'),
    ('stock', 'finalize', '40001'),
    ('stock', 'unreserve', '00000'), ('stock', 'unreserve', 'RS004'), ('stock', 'unreserve', '40001'),
    ('stock', 'adjust', '00000'), ('stock', 'adjust', '22023'),
    ('stock', 'sweep', '00000');
CREATE SEQUENCE chaos_key_seq;
CREATE SEQUENCE chaos_asset_seq START 21;

CREATE FUNCTION chaos_ttl() RETURNS int LANGUAGE sql AS $$ SELECT 50 + floor(random() * 251)::int $$;
CREATE FUNCTION chaos_interval(ms int) RETURNS interval LANGUAGE sql AS $$ SELECT (ms || ' milliseconds')::interval $$;

-- The first successful call with this key: what a reuse must replay.
CREATE FUNCTION chaos_stored(k text, OUT args text, OUT reservation_id text) LANGUAGE sql AS $$
    SELECT x.args, x.reservation_id
      FROM (SELECT) one
      LEFT JOIN LATERAL (SELECT args, reservation_id FROM chaos_calls
                          WHERE key = k AND sqlstate = '00000' AND op IN ('hold', 'reserve', 'items')
                          ORDER BY replayed, seq LIMIT 1) x ON true
$$;

------------------------------------------------------------------------------
-- assets
------------------------------------------------------------------------------
CREATE FUNCTION chaos_pick_asset() RETURNS text LANGUAGE sql AS $$
    SELECT CASE WHEN random() < 0.9
                THEN (SELECT id FROM hc_assets WHERE id LIKE 'ca-%' AND status <> 'SOLD'
                       ORDER BY random() LIMIT 1)
                ELSE (SELECT id FROM hc_assets WHERE id LIKE 'ca-%' ORDER BY random() LIMIT 1) END
$$;

CREATE FUNCTION chaos_hold(c int, kind text, asset text, buyer text, k text, ttl int)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r hc_reservation;
    a text := asset || '|' || buyer || '|' || ttl;
    s record := chaos_stored(k);
    e text := CASE WHEN s.args IS NULL THEN 'fresh' WHEN s.args = a THEN 'replay' ELSE 'RS005' END;
    t0 timestamptz := clock_timestamp();
BEGIN
    BEGIN
        r := hc_hold(asset, buyer, k, chaos_interval(ttl));
        INSERT INTO chaos_calls (phase, client, op, kind, key, target, buyer, ttl_ms, args, expect, expect_id,
                                 sqlstate, reservation_id, replayed, status, started_at)
        VALUES ('assets', c, 'hold', kind, k, asset, buyer, ttl, a, e, s.reservation_id,
                '00000', r.reservation_id, r.replayed, r.status, t0);
        RETURN '00000';
    EXCEPTION WHEN OTHERS THEN
        INSERT INTO chaos_calls (phase, client, op, kind, key, target, buyer, ttl_ms, args, expect, expect_id,
                                 sqlstate, started_at)
        VALUES ('assets', c, 'hold', kind, k, asset, buyer, ttl, a, e, s.reservation_id, SQLSTATE, t0);
        RETURN SQLSTATE;
    END;
END
$$;

-- commit, release, extend of reservation rid.
CREATE FUNCTION chaos_asset_call(c int, op text, kind text, rid text, late boolean, ttl int)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r hc_reservation;
    t0 timestamptz := clock_timestamp();
BEGIN
    BEGIN
        IF op = 'commit' THEN
            r := hc_commit(rid, late);
            IF NOT r.replayed THEN
                -- keep 20 assets on sale
                PERFORM hc_asset_add('ca-' || nextval('chaos_asset_seq'), 'replaces ' || r.asset_id);
            END IF;
        ELSIF op = 'release' THEN
            r := hc_release(rid);
        ELSE
            r := hc_extend(rid, chaos_interval(ttl));
        END IF;
        INSERT INTO chaos_calls (phase, client, op, kind, target, ttl_ms, late_ok, expect, expect_id,
                                 sqlstate, reservation_id, replayed, status, started_at)
        VALUES ('assets', c, op, kind, r.asset_id, ttl, late,
                CASE WHEN kind = 'again' THEN 'replay' END, CASE WHEN kind = 'again' THEN rid END,
                '00000', r.reservation_id, r.replayed, r.status, t0);
        RETURN '00000';
    EXCEPTION WHEN OTHERS THEN
        INSERT INTO chaos_calls (phase, client, op, kind, ttl_ms, late_ok, expect, expect_id,
                                 sqlstate, reservation_id, started_at)
        VALUES ('assets', c, op, kind, ttl, late,
                CASE WHEN kind = 'again' THEN 'replay' END, CASE WHEN kind = 'again' THEN rid END,
                SQLSTATE, rid, t0);
        RETURN SQLSTATE;
    END;
END
$$;

-- chaos_unkeyed: a call without a key (sweep, adjust), run and recorded with
-- its outcome; its target and delta are $1 and $2 of the statement.
CREATE FUNCTION chaos_unkeyed(phase text, c int, op text, call text, target text, delta int)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz := clock_timestamp();
    state text := '00000';
BEGIN
    BEGIN
        EXECUTE call USING target, delta;
    EXCEPTION WHEN OTHERS THEN
        state := SQLSTATE;
    END;
    INSERT INTO chaos_calls (phase, client, op, kind, target, delta, sqlstate, started_at)
    VALUES (phase, c, op, 'own', target, delta, state, t0);
    RETURN state;
END
$$;

CREATE FUNCTION chaos_sweep(c int, phase text) RETURNS text LANGUAGE sql AS $$
    SELECT chaos_unkeyed(phase, c, 'sweep', 'SELECT count(*) FROM hc_sweep()', NULL, NULL)
$$;

CREATE FUNCTION chaos_asset_step(c int) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    p float8 := random();
    o record;
    s record;
    rid text;
    v_op text;
    n int;
    asset text;
    v_buyer text;
    ttl int;
BEGIN
    IF p < 0.10 THEN
        -- reuse one of this client's recent keys, with its arguments (0.05) or others (0.05)
        SELECT key, target, buyer, ttl_ms INTO o FROM chaos_calls
         WHERE client = c AND op = 'hold' AND kind <> 'shared'
         ORDER BY seq DESC LIMIT 1 OFFSET floor(random() * 10)::int;
        IF o.key IS NOT NULL THEN
            s := chaos_stored(o.key);
            IF s.args IS NOT NULL THEN
                asset := split_part(s.args, '|', 1);
                v_buyer := split_part(s.args, '|', 2);
                ttl := split_part(s.args, '|', 3)::int;
            ELSE
                asset := o.target; v_buyer := o.buyer; ttl := o.ttl_ms;
            END IF;
            IF p < 0.05 THEN
                RETURN chaos_hold(c, 'same', asset, v_buyer, o.key, ttl);
            END IF;
            n := floor(random() * 3)::int;
            IF n = 0 THEN
                asset := coalesce((SELECT id FROM hc_assets WHERE id LIKE 'ca-%' AND id <> asset
                                    ORDER BY random() LIMIT 1), asset);
            ELSIF n = 1 THEN
                v_buyer := v_buyer || '-alt';
            ELSE
                ttl := ttl + 1;
            END IF;
            RETURN chaos_hold(c, 'diff', asset, v_buyer, o.key, ttl);
        END IF;
    ELSIF p < 0.15 THEN
        -- five keys every client sends, new ones every 250 ms, for five assets of
        -- their own: mostly the same arguments, sometimes another buyer
        n := 1 + floor(random() * 5)::int;
        RETURN chaos_hold(c, 'shared', 'shared-' || n,
                          'shared-buyer-' || n || CASE WHEN random() < 0.2 THEN '-' || c ELSE '' END,
                          'shared-key-' || n || '-' || floor(extract(epoch FROM clock_timestamp()) * 4),
                          100);
    ELSIF p < 0.52 THEN
        v_op := CASE WHEN p < 0.30 THEN 'commit' WHEN p < 0.41 THEN 'release' ELSE 'extend' END;
        IF random() < 0.1 THEN
            -- another client's recent hold
            SELECT reservation_id INTO rid FROM chaos_calls
             WHERE op = 'hold' AND sqlstate = '00000' AND kind <> 'shared'
             ORDER BY seq DESC LIMIT 1 OFFSET floor(random() * 30)::int;
            IF rid IS NOT NULL THEN
                RETURN chaos_asset_call(c, v_op, 'any', rid, random() < 0.3, chaos_ttl());
            END IF;
        ELSIF random() < 0.1 AND v_op <> 'extend' THEN
            -- again: a commit or release this client made must replay
            SELECT reservation_id INTO rid FROM chaos_calls
             WHERE client = c AND op = v_op AND sqlstate = '00000'
               AND status = CASE v_op WHEN 'commit' THEN 'COMMITTED' ELSE 'RELEASED' END
             ORDER BY seq DESC LIMIT 1 OFFSET floor(random() * 5)::int;
            IF rid IS NOT NULL THEN
                RETURN chaos_asset_call(c, v_op, 'again', rid, random() < 0.3, NULL);
            END IF;
        END IF;
        SELECT reservation_id INTO rid FROM chaos_calls
         WHERE client = c AND op = 'hold' AND sqlstate = '00000' AND kind <> 'shared'
         ORDER BY seq DESC LIMIT 1 OFFSET floor(random() * 4)::int;
        IF rid IS NOT NULL THEN
            RETURN chaos_asset_call(c, v_op, 'own', rid, random() < 0.3, chaos_ttl());
        END IF;
    ELSIF p < 0.53 AND to_regprocedure('hc_sweep(integer)') IS NOT NULL THEN
        RETURN chaos_sweep(c, 'assets');
    END IF;
    RETURN chaos_hold(c, 'new', chaos_pick_asset(), 'buyer-' || c,
                      'ak-' || c || '-' || nextval('chaos_key_seq'), chaos_ttl());
END
$$;

------------------------------------------------------------------------------
-- stock
------------------------------------------------------------------------------
-- 1-3 distinct products in random order, qty 1-3 each
CREATE FUNCTION chaos_items(n int) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_agg(jsonb_build_object('product_id', 'cp-' || i, 'qty', 1 + floor(random() * 3)::int)
                     ORDER BY random())
      FROM (SELECT i FROM generate_series(1, 5) i ORDER BY random() LIMIT n) s
$$;

-- items as the contract returns them: sorted by product, one line per product
CREATE FUNCTION chaos_items_sorted(items jsonb) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_agg(jsonb_build_object('product_id', pid, 'qty', qty) ORDER BY pid COLLATE "C")
      FROM (SELECT e->>'product_id' pid, sum((e->>'qty')::int) qty
              FROM jsonb_array_elements(items) e GROUP BY 1) s
$$;

CREATE FUNCTION chaos_reserve(c int, op text, kind text, items jsonb, buyer text, k text, ttl int)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r hc_stock_reservation;
    a text := op || '|' || buyer || '|' || ttl || '|' || items::text;
    s record := chaos_stored(k);
    e text := CASE WHEN s.args IS NULL THEN 'fresh' WHEN s.args = a THEN 'replay' ELSE 'RS005' END;
    t0 timestamptz := clock_timestamp();
BEGIN
    BEGIN
        IF op = 'reserve' THEN
            r := hc_reserve(items->0->>'product_id', (items->0->>'qty')::int, buyer, k, chaos_interval(ttl));
        ELSE
            r := hc_reserve_items(items, buyer, k, chaos_interval(ttl));
        END IF;
        INSERT INTO chaos_calls (phase, client, op, kind, key, target, buyer, ttl_ms, args, expect, expect_id,
                                 sqlstate, reservation_id, replayed, status, items_ok, started_at)
        VALUES ('stock', c, op, kind, k, items::text, buyer, ttl, a, e, s.reservation_id,
                '00000', r.reservation_id, r.replayed, r.status,
                r.items = chaos_items_sorted(items), t0);
        RETURN '00000';
    EXCEPTION WHEN OTHERS THEN
        INSERT INTO chaos_calls (phase, client, op, kind, key, target, buyer, ttl_ms, args, expect, expect_id,
                                 sqlstate, started_at)
        VALUES ('stock', c, op, kind, k, items::text, buyer, ttl, a, e, s.reservation_id, SQLSTATE, t0);
        RETURN SQLSTATE;
    END;
END
$$;

-- finalize, unreserve of reservation rid
CREATE FUNCTION chaos_stock_call(c int, op text, kind text, rid text, late boolean)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r hc_stock_reservation;
    t0 timestamptz := clock_timestamp();
BEGIN
    BEGIN
        IF op = 'finalize' THEN
            r := hc_finalize(rid, late);
        ELSE
            r := hc_unreserve(rid);
        END IF;
        INSERT INTO chaos_calls (phase, client, op, kind, late_ok, expect, expect_id,
                                 sqlstate, reservation_id, replayed, status, target, started_at)
        VALUES ('stock', c, op, kind, late,
                CASE WHEN kind = 'again' THEN 'replay' END, CASE WHEN kind = 'again' THEN rid END,
                '00000', r.reservation_id, r.replayed, r.status, r.items::text, t0);
        RETURN '00000';
    EXCEPTION WHEN OTHERS THEN
        INSERT INTO chaos_calls (phase, client, op, kind, late_ok, expect, expect_id,
                                 sqlstate, reservation_id, started_at)
        VALUES ('stock', c, op, kind, late,
                CASE WHEN kind = 'again' THEN 'replay' END, CASE WHEN kind = 'again' THEN rid END,
                SQLSTATE, rid, t0);
        RETURN SQLSTATE;
    END;
END
$$;

CREATE FUNCTION chaos_adjust(c int, product text, d int) RETURNS text LANGUAGE sql AS $$
    SELECT chaos_unkeyed('stock', c, 'adjust', $q$SELECT hc_stock_adjust($1, $2, 'chaos')$q$, product, d)
$$;

CREATE FUNCTION chaos_stock_step(c int) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    p float8 := random();
    o record;
    s record;
    rid text;
    v_op text;
    items jsonb;
    v_buyer text;
    ttl int;
BEGIN
    IF p < 0.08 THEN
        -- reuse one of this client's recent keys, with its arguments (0.05) or others (0.03)
        SELECT key, op, target, buyer, ttl_ms INTO o FROM chaos_calls
         WHERE client = c AND op IN ('reserve', 'items')
         ORDER BY seq DESC LIMIT 1 OFFSET floor(random() * 10)::int;
        IF o.key IS NOT NULL THEN
            s := chaos_stored(o.key);
            IF s.args IS NOT NULL THEN
                v_op := split_part(s.args, '|', 1);
                v_buyer := split_part(s.args, '|', 2);
                ttl := split_part(s.args, '|', 3)::int;
                items := substr(s.args, length(v_op || v_buyer || ttl) + 4)::jsonb;
            ELSE
                v_op := o.op; v_buyer := o.buyer; ttl := o.ttl_ms; items := o.target::jsonb;
            END IF;
            IF p < 0.05 THEN
                RETURN chaos_reserve(c, v_op, 'same', items, v_buyer, o.key, ttl);
            END IF;
            CASE floor(random() * 3)::int
            WHEN 0 THEN
                ttl := ttl + 1;
            WHEN 1 THEN
                items := jsonb_set(items, '{0,qty}', to_jsonb((items->0->>'qty')::int + 1));
            ELSE
                -- another product first: another scope for the key
                items := jsonb_set(items, '{0,product_id}',
                                   to_jsonb('cp-' || (1 + (substr(items->0->>'product_id', 4)::int % 5))));
                IF v_op = 'items' THEN
                    items := chaos_items_sorted(items);  -- the new product may repeat a line: sum
                END IF;
            END CASE;
            RETURN chaos_reserve(c, v_op, 'diff', items, v_buyer, o.key, ttl);
        END IF;
    ELSIF p < 0.33 THEN
        RETURN chaos_reserve(c, 'reserve', 'new', chaos_items(1), 'buyer-' || c,
                             'sk-' || c || '-' || nextval('chaos_key_seq'), chaos_ttl());
    ELSIF p < 0.53 THEN
        RETURN chaos_reserve(c, 'items', 'new', chaos_items(1 + floor(random() * 3)::int), 'buyer-' || c,
                             'sk-' || c || '-' || nextval('chaos_key_seq'), chaos_ttl());
    ELSIF p < 0.95 THEN
        v_op := CASE WHEN p < 0.76 THEN 'finalize' ELSE 'unreserve' END;
        IF random() < 0.1 THEN
            -- another client's recent reservation
            SELECT reservation_id INTO rid FROM chaos_calls
             WHERE op IN ('reserve', 'items') AND sqlstate = '00000'
             ORDER BY seq DESC LIMIT 1 OFFSET floor(random() * 30)::int;
            IF rid IS NOT NULL THEN
                RETURN chaos_stock_call(c, v_op, 'any', rid, random() < 0.3);
            END IF;
        ELSIF random() < 0.15 THEN
            -- again: a finalize or unreserve this client made must replay
            SELECT reservation_id INTO rid FROM chaos_calls
             WHERE client = c AND op = v_op AND sqlstate = '00000'
               AND status = CASE v_op WHEN 'finalize' THEN 'FINALIZED' ELSE 'RELEASED' END
             ORDER BY seq DESC LIMIT 1 OFFSET floor(random() * 5)::int;
            IF rid IS NOT NULL THEN
                RETURN chaos_stock_call(c, v_op, 'again', rid, random() < 0.3);
            END IF;
        END IF;
        SELECT reservation_id INTO rid FROM chaos_calls
         WHERE client = c AND op IN ('reserve', 'items') AND sqlstate = '00000'
         ORDER BY seq DESC LIMIT 1 OFFSET floor(random() * 4)::int;
        IF rid IS NOT NULL THEN
            RETURN chaos_stock_call(c, v_op, 'own', rid, random() < 0.3);
        END IF;
    ELSIF p < 0.99 THEN
        -- the operator restocks or writes off
        RETURN chaos_adjust(c, 'cp-' || (1 + floor(random() * 5)::int),
                            CASE WHEN random() < 0.4 THEN -(5 + floor(random() * 56)::int)
                                 ELSE 1 + floor(random() * 70)::int END);
    ELSIF to_regprocedure('hc_sweep(integer)') IS NOT NULL THEN
        RETURN chaos_sweep(c, 'stock');
    END IF;
    RETURN chaos_reserve(c, 'reserve', 'new', chaos_items(1), 'buyer-' || c,
                         'sk-' || c || '-' || nextval('chaos_key_seq'), chaos_ttl());
END
$$;

-- Orders across the 3 scarce products: all three, in random order.
CREATE FUNCTION chaos_order_items() RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_agg(jsonb_build_object('product_id', 'co-' || i, 'qty', 1 + floor(random() * 2)::int)
                     ORDER BY random())
      FROM generate_series(1, 3) i
$$;

CREATE FUNCTION chaos_order_step(c int) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    p float8 := random();
    rid text;
BEGIN
    IF p < 0.45 THEN
        RETURN chaos_reserve(c, 'items', 'new', chaos_order_items(), 'buyer-' || c,
                             'so-' || c || '-' || nextval('chaos_key_seq'), 20 + floor(random() * 61)::int);
    ELSIF p < 0.6 THEN
        -- more than is usually free: RS002, after reclaiming what expired
        RETURN chaos_reserve(c, 'reserve', 'new',
                             jsonb_build_array(jsonb_build_object('product_id', 'co-' || (1 + floor(random() * 3)::int),
                                                                  'qty', 5 + floor(random() * 11)::int)),
                             'buyer-' || c, 'so-' || c || '-' || nextval('chaos_key_seq'),
                             20 + floor(random() * 61)::int);
    ELSIF p < 0.65 THEN
        -- the operator restocks what orders sold
        RETURN chaos_adjust(c, 'co-' || (1 + floor(random() * 3)::int), 1 + floor(random() * 6)::int);
    END IF;
    -- anybody's recent order
    SELECT reservation_id INTO rid FROM chaos_calls
     WHERE op = 'items' AND sqlstate = '00000' AND key LIKE 'so-%'
     ORDER BY seq DESC LIMIT 1 OFFSET floor(random() * 10)::int;
    IF rid IS NULL THEN
        RETURN chaos_reserve(c, 'items', 'new', chaos_order_items(), 'buyer-' || c,
                             'so-' || c || '-' || nextval('chaos_key_seq'), 20 + floor(random() * 61)::int);
    END IF;
    RETURN chaos_stock_call(c, CASE WHEN p < 0.9 THEN 'unreserve' ELSE 'finalize' END, 'any', rid,
                            random() < 0.3);
END
$$;

SELECT count(hc_asset_add('ca-' || i, 'chaos asset ' || i)) FROM generate_series(1, 20) i;
SELECT count(hc_asset_add('shared-' || i, 'held with shared keys only')) FROM generate_series(1, 5) i;
SQL

for i in 1 2 3 4 5; do
    q "SELECT hc_stock_set('cp-$i', $initial_stock)" >/dev/null || echo "not ok - stock set cp-$i"
done
for i in 1 2 3; do
    q "SELECT hc_stock_set('co-$i', $order_stock)" >/dev/null || echo "not ok - stock set co-$i"
done

# per_s N MS
per_s() { awk -v n="$1" -v ms="$2" 'BEGIN { if (ms > 0) printf "%.0f", n / (ms / 1000); else print "inf" }'; }

# phase_ms PHASE: first call start to last call end on the server clock
phase_ms() {
    q "SELECT round(extract(epoch FROM max(at) - min(started_at)) * 1000)
         FROM chaos_calls WHERE phase = '$1'"
}

# outcomes PHASE: "op: sqlstate xN, ...; ..." per call
outcomes() {
    q "SELECT string_agg(op || ': ' || o, '; ' ORDER BY op)
         FROM (SELECT op, string_agg(sqlstate || ' x' || n, ', ' ORDER BY sqlstate) o
                 FROM (SELECT op, sqlstate, count(*) n FROM chaos_calls
                        WHERE phase = '$1' GROUP BY 1, 2) s GROUP BY op) t"
}

# unexpected PHASE: the outcomes the contract does not allow, with a sample message-free list
unexpected() {
    q "SELECT coalesce(string_agg(op || ' ' || sqlstate || ' x' || n, ', ' ORDER BY op, sqlstate), '')
         FROM (SELECT op, sqlstate, count(*) n FROM chaos_calls c
                WHERE phase = '$1'
                  AND NOT EXISTS (SELECT FROM chaos_allowed a
                                   WHERE a.phase = c.phase AND a.op = c.op AND a.sqlstate = c.sqlstate)
                GROUP BY 1, 2) s"
}

# expectations PHASE: reused keys and repeated calls that did not do what the contract says
expectations() {
    q "SELECT count(*) FROM chaos_calls
        WHERE phase = '$1' AND CASE expect
              WHEN 'replay' THEN NOT (sqlstate = '00000' AND replayed AND reservation_id = expect_id)
              WHEN 'RS005' THEN sqlstate <> 'RS005'
              -- a key of one client with no stored call: a new reservation or a refusal
              WHEN 'fresh' THEN kind <> 'shared'
                                AND NOT (sqlstate = '00000' AND NOT replayed)
                                AND sqlstate NOT IN ('RS001', 'RS002')
              ELSE false END"
}

# one_per_key PHASE OPS: keys whose successful calls (of OPS, a SQL list)
# returned more than one reservation, had more than one set of arguments or
# were not replays but once
one_per_key() {
    q "SELECT count(*) FROM (SELECT key FROM chaos_calls
                              WHERE phase = '$1' AND op IN ($2) AND sqlstate = '00000'
                              GROUP BY key
                             HAVING count(DISTINCT reservation_id) <> 1 OR count(DISTINCT args) <> 1
                                 OR count(*) FILTER (WHERE NOT replayed) <> 1) k"
}

# keys_of_failures KIND: stored keys of KIND that no successful call made
keys_of_failures() {
    q "SELECT count(*) FROM hc_idempotency_keys k
        WHERE k.kind = '$1'
          AND NOT EXISTS (SELECT FROM chaos_calls c WHERE c.key = k.key AND c.sqlstate = '00000')"
}

# ended_as_returned PHASE OP TABLE LATE_OP SOLD: the successful calls OP
# (release, unreserve) whose reservation in TABLE is not as they returned it
# (RELEASED; or EXPIRED, or SOLD by a later late_ok LATE_OP: an expired one's
# release changes nothing), "/" those whose reservation is missing
ended_as_returned() {
    echo "$(q "SELECT count(*) FROM chaos_calls c JOIN $3 r ON r.id = c.reservation_id
           WHERE c.phase = '$1' AND c.op = '$2' AND c.sqlstate = '00000'
             AND NOT CASE c.status
                 WHEN 'RELEASED' THEN r.status = 'RELEASED'
                 WHEN 'EXPIRED' THEN r.status = 'EXPIRED'
                      OR (r.status = '$5'
                          AND EXISTS (SELECT FROM chaos_calls m
                                       WHERE m.op = '$4' AND m.reservation_id = r.id
                                         AND m.sqlstate = '00000' AND m.late_ok AND NOT m.replayed
                                         AND m.seq > c.seq))
                 ELSE false END")/$(q "SELECT count(*) FROM chaos_calls c
           WHERE phase = '$1' AND op = '$2' AND sqlstate = '00000'
             AND NOT EXISTS (SELECT FROM $3 r WHERE r.id = c.reservation_id)")"
}

##############################################################################
# (a) assets
##############################################################################
cat >"$work/assets.sql" <<'SQL'
SELECT chaos_asset_step(:client_id);
SQL
pgbench_phase assets "assets: pgbench ran $clients clients for $seconds s" -c $clients -j 2 -T $seconds
calls=$(q "SELECT count(*) FROM chaos_calls WHERE phase = 'assets'")
ms=$(phase_ms assets)
echo "# assets: $calls calls in $ms ms (server clock), $(per_s "$calls" "$ms") calls/s"
echo "# assets: outcomes: $(outcomes assets)"
echo "# assets: holds by kind: $(q "SELECT string_agg(kind || ' ' || o, '; ' ORDER BY kind)
      FROM (SELECT kind, string_agg(sqlstate || CASE WHEN replayed THEN ' replayed' ELSE '' END || ' x' || n,
                                    ', ' ORDER BY sqlstate, replayed) o
              FROM (SELECT kind, sqlstate, replayed, count(*) n FROM chaos_calls
                     WHERE phase = 'assets' AND op = 'hold' GROUP BY 1, 2, 3) s GROUP BY kind) t")"
echo "# assets: $(q "SELECT count(*) FROM hc_assets WHERE status = 'SOLD'") sold," \
     "$(q "SELECT count(*) FROM hc_reservations") reservations:" \
     "$(q "SELECT string_agg(status || ' ' || n, ', ' ORDER BY status)
             FROM (SELECT status, count(*) n FROM hc_reservations GROUP BY 1) s")"
check "assets: some holds, commits, releases and extends succeeded" \
    "$(q "SELECT count(DISTINCT op) FROM chaos_calls
           WHERE phase = 'assets' AND sqlstate = '00000' AND op IN ('hold', 'commit', 'release', 'extend')")" "4"
echo "# assets: reused keys: $(q "SELECT count(*) FILTER (WHERE expect = 'replay') || ' had to replay, '
                                       || count(*) FILTER (WHERE expect = 'RS005') || ' had to give RS005'
                                  FROM chaos_calls WHERE phase = 'assets' AND op = 'hold'");" \
     "commit/release again: $(q "SELECT count(*) FROM chaos_calls WHERE phase = 'assets' AND kind = 'again'")"
check "assets: only allowed outcomes (no 40P01, 40001, 23xxx, XX000 ...)" "$(unexpected assets)" ""
check "assets: every reused key replayed or gave RS005 as the contract says" "$(expectations assets)" "0"
check "assets: a key's successful calls all returned one reservation, for one set of arguments" \
    "$(one_per_key assets "'hold'")" "0"
check "assets: each new hold is a reservation with its key, asset and buyer" \
    "$(q "SELECT count(*) FROM chaos_calls c
           WHERE phase = 'assets' AND op = 'hold' AND sqlstate = '00000' AND NOT replayed
             AND NOT EXISTS (SELECT FROM hc_reservations r
                              WHERE r.id = c.reservation_id AND r.idempotency_key = c.key
                                AND r.asset_id = c.target AND r.buyer_id = c.buyer)")" "0"
check "assets: one reservation per key" \
    "$(q "SELECT count(*) FROM (SELECT idempotency_key FROM hc_reservations
                                 GROUP BY 1 HAVING count(*) > 1) k")" "0"
check "assets: failed holds stored no key" "$(keys_of_failures hold)" "0"
check "assets: no asset sold twice (one COMMITTED reservation per SOLD asset)" \
    "$(q "SELECT count(*) FROM hc_assets a
           WHERE a.status = 'SOLD'
             AND (SELECT count(*) FROM hc_reservations r
                   WHERE r.asset_id = a.id AND r.status = 'COMMITTED') <> 1")" "0"
check "assets: every COMMITTED reservation's asset is SOLD to it" \
    "$(q "SELECT count(*) FROM hc_reservations r JOIN hc_assets a ON a.id = r.asset_id
           WHERE r.status = 'COMMITTED'
             AND (a.status <> 'SOLD' OR a.current_reservation_id IS DISTINCT FROM r.id)")" "0"
check "assets: every successful commit returned COMMITTED and the reservation is COMMITTED" \
    "$(q "SELECT count(*) FROM chaos_calls c
           WHERE phase = 'assets' AND op = 'commit' AND sqlstate = '00000'
             AND (status <> 'COMMITTED'
                  OR NOT EXISTS (SELECT FROM hc_reservations r
                                  WHERE r.id = c.reservation_id AND r.status = 'COMMITTED'))")" "0"
# A release of an expired hold changes nothing: a late_ok commit may still sell it.
check "assets: every successful release returned RELEASED (and so it stayed) or EXPIRED (so it stayed, or a late_ok commit sold it)" \
    "$(ended_as_returned assets release hc_reservations commit COMMITTED)" "0/0"
check "assets: every successful extend returned a HELD reservation" \
    "$(q "SELECT count(*) FROM chaos_calls
           WHERE phase = 'assets' AND op = 'extend' AND sqlstate = '00000' AND status <> 'HELD'")" "0"
check "assets: one commit in the ledger per COMMITTED reservation, none for others" \
    "$(q "SELECT count(*) FROM (SELECT reservation_id FROM hc_ledger WHERE kind = 'asset' AND event = 'commit'
                                 GROUP BY 1 HAVING count(*) <> 1) l")/$(q "
          SELECT count(*) FROM hc_reservations r
           WHERE (r.status = 'COMMITTED') <> EXISTS (SELECT FROM hc_ledger l
                                                     WHERE l.kind = 'asset' AND l.event = 'commit'
                                                       AND l.reservation_id = r.id)")" "0/0"
check "assets: hc_check() is empty" "$(q "SELECT count(*) FROM hc_check()")" "0"
q "SELECT * FROM hc_check()" 2>&1 | head -5 | sed 's/^/#   /'

# Every hold ends by 300 ms after the last call: reclaim them all (hc_sweep,
# or a release, which ends an expired hold as EXPIRED) and check again.
sleep 0.4
if [ "$(q "SELECT to_regprocedure('hc_sweep(integer)') IS NOT NULL")" = t ]; then
    q "SELECT count(*) FROM hc_sweep()" >/dev/null
else
    check "assets: after every ttl, each HELD reservation releases as EXPIRED (replayed)" \
        "$(q "SELECT count(*) FILTER (WHERE x.status <> 'EXPIRED' OR NOT x.replayed)
                FROM hc_reservations r, hc_release(r.id) x WHERE r.status = 'HELD'")" "0"
fi
check "assets: after every ttl, no asset HELD and no reservation HELD" \
    "$(q "SELECT (SELECT count(*) FROM hc_assets WHERE status = 'HELD')
               + (SELECT count(*) FROM hc_reservations WHERE status = 'HELD')")" "0"
check "assets: after every ttl, hc_check() is empty" "$(q "SELECT count(*) FROM hc_check()")" "0"

##############################################################################
# (b) stock
##############################################################################
cat >"$work/stock.sql" <<'SQL'
SELECT chaos_stock_step(:client_id);
SQL
# The operator's open transaction holds a product row while it reclaims,
# then rolls back (its recorded call goes with it).
cat >"$work/orders.sql" <<'SQL'
\set r random(1, 10)
\if :r = 1
BEGIN;
SELECT chaos_adjust(:client_id, 'co-' || (1 + :client_id % 3), 1);
SELECT pg_sleep(0.02);
ROLLBACK;
\else
SELECT chaos_order_step(:client_id);
\endif
SQL
pgbench_phase stock "stock: pgbench ran $clients clients for $seconds s" -c $clients -j 2 -T $seconds \
    -f "$work/orders.sql"
calls=$(q "SELECT count(*) FROM chaos_calls WHERE phase = 'stock'")
ms=$(phase_ms stock)
echo "# stock: $calls calls in $ms ms (server clock), $(per_s "$calls" "$ms") calls/s"
echo "# stock: outcomes: $(outcomes stock)"
echo "# stock: reservations: $(q "SELECT string_agg(status || ' ' || n, ', ' ORDER BY status)
                                 FROM (SELECT status, count(*) n FROM hc_stock_reservations GROUP BY 1) s")"
echo "# stock: inventory: $(q "SELECT string_agg(product_id || ' ' || stock || '/' || reserved, ', ' ORDER BY product_id)
                              FROM hc_inventory")"
echo "# stock: reused keys: $(q "SELECT count(*) FILTER (WHERE expect = 'replay') || ' had to replay, '
                                      || count(*) FILTER (WHERE expect = 'RS005') || ' had to give RS005'
                                 FROM chaos_calls WHERE phase = 'stock' AND op IN ('reserve', 'items')");" \
     "finalize/unreserve again: $(q "SELECT count(*) FROM chaos_calls WHERE phase = 'stock' AND kind = 'again'")"
check "stock: some reserves, orders, finalizes, unreserves and adjustments succeeded" \
    "$(q "SELECT count(DISTINCT op) FROM chaos_calls
           WHERE phase = 'stock' AND sqlstate = '00000'
             AND op IN ('reserve', 'items', 'finalize', 'unreserve', 'adjust')")" "5"
check "stock: only allowed outcomes (no 40P01, 23xxx, XX000 ...; 40001 of a moved line)" "$(unexpected stock)" ""
check "stock: short orders were made, unreserved, and refused after reclaiming" \
    "$(q "SELECT (count(*) FILTER (WHERE op = 'items' AND sqlstate = '00000') > 0)::int
               + (count(*) FILTER (WHERE op = 'unreserve' AND kind = 'any' AND sqlstate = '00000') > 0)::int
               + (count(*) FILTER (WHERE op = 'reserve' AND sqlstate = 'RS002') > 0)::int
               + (SELECT (count(*) > 0)::int FROM hc_ledger WHERE source = 'reclaim' AND entity_id LIKE 'co-%')
            FROM chaos_calls WHERE phase = 'stock' AND key LIKE 'so-%' OR (op = 'unreserve' AND kind = 'any')")" "4"
check "stock: zero deadlocks (40P01)" \
    "$(q "SELECT count(*) FROM chaos_calls WHERE phase = 'stock' AND sqlstate = '40P01'")" "0"
check "stock: every reused key and repeated finalize/unreserve replayed or gave RS005 as the contract says" \
    "$(expectations stock)" "0"
check "stock: a key's successful calls all returned one reservation, for one set of arguments" \
    "$(one_per_key stock "'reserve', 'items'")" "0"
check "stock: every successful reserve returned its items sorted by product" \
    "$(q "SELECT count(*) FROM chaos_calls
           WHERE phase = 'stock' AND op IN ('reserve', 'items') AND sqlstate = '00000'
             AND items_ok IS NOT TRUE")" "0"
check "stock: each new reservation is stored with its key, buyer and lines" \
    "$(q "SELECT count(*) FROM chaos_calls c
           WHERE phase = 'stock' AND op IN ('reserve', 'items') AND sqlstate = '00000' AND NOT replayed
             AND (NOT EXISTS (SELECT FROM hc_stock_reservations r
                               WHERE r.id = c.reservation_id AND r.idempotency_key = c.key
                                 AND r.buyer_id = c.buyer)
                  OR (SELECT jsonb_agg(jsonb_build_object('product_id', l.product_id, 'qty', l.qty)
                                       ORDER BY l.product_id COLLATE \"C\")
                        FROM hc_stock_reservation_lines l WHERE l.reservation_id = c.reservation_id)
                     IS DISTINCT FROM chaos_items_sorted(c.target::jsonb))")" "0"
check "stock: failed reserves stored no key" "$(keys_of_failures stock)" "0"
check "stock: every successful finalize returned FINALIZED; the reservation and its lines are FINALIZED" \
    "$(q "SELECT count(*) FROM chaos_calls c
           WHERE phase = 'stock' AND op = 'finalize' AND sqlstate = '00000'
             AND (status <> 'FINALIZED'
                  OR NOT EXISTS (SELECT FROM hc_stock_reservations r
                                  WHERE r.id = c.reservation_id AND r.status = 'FINALIZED')
                  OR EXISTS (SELECT FROM hc_stock_reservation_lines l
                              WHERE l.reservation_id = c.reservation_id AND l.status <> 'FINALIZED'))")" "0"
# An unreserve of an expired reservation changes nothing: a late_ok finalize may still sell it.
check "stock: every successful unreserve returned RELEASED (and so it stayed) or EXPIRED (so it stayed, or a late_ok finalize sold it)" \
    "$(ended_as_returned stock unreserve hc_stock_reservations finalize FINALIZED)" "0/0"
check "stock: for every product stock >= reserved >= 0" \
    "$(q "SELECT count(*) FROM hc_inventory WHERE NOT (stock >= reserved AND reserved >= 0)")" "0"
check "stock: reserved = sum of qty of RESERVED lines, per product" \
    "$(q "SELECT count(*) FROM hc_inventory i
           WHERE i.reserved <> (SELECT coalesce(sum(qty), 0) FROM hc_stock_reservation_lines l
                                 WHERE l.product_id = i.product_id AND l.status = 'RESERVED')")" "0"
check "stock: the ledger's stock_delta and reserved_delta add up to stock and reserved, per product" \
    "$(q "SELECT count(*) FROM hc_inventory i
           WHERE (i.stock, i.reserved) IS DISTINCT FROM
                 ((SELECT coalesce(sum(stock_delta), 0) FROM hc_ledger l
                    WHERE l.kind = 'product' AND l.entity_id = i.product_id),
                  (SELECT coalesce(sum(reserved_delta), 0) FROM hc_ledger l
                    WHERE l.kind = 'product' AND l.entity_id = i.product_id))")" "0"
check "stock: FINALIZED qty = initial stock + adjustments - final stock, per product" \
    "$(q "SELECT count(*) FROM hc_inventory i
           WHERE (SELECT coalesce(sum(qty), 0) FROM hc_stock_reservation_lines l
                   WHERE l.product_id = i.product_id AND l.status = 'FINALIZED')
                 <> CASE WHEN i.product_id LIKE 'co-%' THEN $order_stock ELSE $initial_stock END
                    + (SELECT coalesce(sum(delta), 0) FROM chaos_calls c
                        WHERE c.op = 'adjust' AND c.sqlstate = '00000' AND c.target = i.product_id)
                    - i.stock")" "0"
check "stock: the ledger holds exactly the successful adjustments" \
    "$(q "SELECT count(*) || '/' || coalesce(sum(stock_delta), 0) FROM hc_ledger
           WHERE kind = 'product' AND event = 'stock_adjust'")" \
    "$(q "SELECT count(*) || '/' || coalesce(sum(delta), 0) FROM chaos_calls
           WHERE op = 'adjust' AND sqlstate = '00000'")"
check "stock: each finalized line finalized once in the ledger, no other line" \
    "$(q "SELECT count(*)
            FROM (SELECT * FROM hc_stock_reservation_lines WHERE status = 'FINALIZED') l
            FULL JOIN (SELECT entity_id, reservation_id, count(*) n FROM hc_ledger
                        WHERE kind = 'product' AND event = 'finalize' GROUP BY 1, 2) g
              ON g.entity_id = l.product_id AND g.reservation_id = l.reservation_id
           WHERE l.reservation_id IS NULL OR g.n IS DISTINCT FROM 1")" "0"
check "stock: hc_check() is empty" "$(q "SELECT count(*) FROM hc_check()")" "0"
q "SELECT * FROM hc_check()" 2>&1 | head -5 | sed 's/^/#   /'

# Every reservation ends by 300 ms after the last call: reclaim them all
# (hc_sweep, or hc_stock_set to the same stock, which reclaims inline).
sleep 0.4
if [ "$(q "SELECT to_regprocedure('hc_sweep(integer)') IS NOT NULL")" = t ]; then
    q "SELECT count(*) FROM hc_sweep()" >/dev/null
else
    # each stock change reclaims at most 1000 lines: repeat until none is left
    for _ in $(seq 50); do
        q "SELECT count(hc_stock_set(product_id, stock)) FROM hc_inventory" >/dev/null
        [ "$(q "SELECT count(*) FROM hc_stock_reservation_lines WHERE status = 'RESERVED'")" = 0 ] && break
    done
fi
check "stock: after every ttl, reserved 0 and no RESERVED reservation or line" \
    "$(q "SELECT (SELECT coalesce(sum(reserved), 0) FROM hc_inventory)
               + (SELECT count(*) FROM hc_stock_reservations WHERE status = 'RESERVED')
               + (SELECT count(*) FROM hc_stock_reservation_lines WHERE status = 'RESERVED')")" "0"
check "stock: after every ttl, hc_check() is empty" "$(q "SELECT count(*) FROM hc_check()")" "0"

exit 0
