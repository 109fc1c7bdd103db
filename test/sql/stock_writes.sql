-- The writes of a reserve of one product, and of the finalize, unreserve or
-- expiry of an order of one product, without the executor
-- (src/stock/direct.c, src/core/write.c): what of a user's triggers,
-- foreign keys, row-level security, constraints, indexes and columns still
-- applies to them, and where they go back to their statements
-- (doc/architecture.md, "Where the executor is bypassed").  Each part runs
-- in a transaction that is rolled back, so that the suites after this one
-- see the tables as they were.

-- Which of the stock paths' write statements this session has planned: a
-- statement's plan stays in the backend (\c starts a session with none).
CREATE FUNCTION sw_statements() RETURNS text LANGUAGE sql AS $$
    SELECT coalesce(string_agg(DISTINCT CASE
               WHEN ident ~ 'INSERT INTO hc_stock_orders' THEN 'reserve'
               WHEN ident ~ 'UPDATE hc_stock_orders SET status' THEN 'move'
               WHEN ident ~ 'UPDATE hc_stock_order_lines SET status' THEN 'move line'
               WHEN ident ~ 'UPDATE hc_stock_parts' THEN 'take' END, ', '), 'none')
      FROM pg_backend_memory_contexts
     WHERE name = 'CachedPlanSource' AND ident ~ '^/\* holdcommit schema \d+ \*/ WITH'
$$;

-- A reservation's id as a tag.
CREATE TABLE sw_tags (tag text PRIMARY KEY, id text NOT NULL);
CREATE FUNCTION sw_tag(p_id text) RETURNS text LANGUAGE sql AS $$
    SELECT coalesce((SELECT tag FROM sw_tags WHERE id = p_id), p_id)
$$;
CREATE FUNCTION sw_reserve(p_tag text, p_product text, p_qty int, p_buyer text,
                           p_ttl interval DEFAULT '10 minutes')
RETURNS text LANGUAGE sql AS $$
    INSERT INTO sw_tags
    SELECT p_tag, reservation_id FROM hc_reserve(p_product, p_qty, p_buyer, 'sw-' || p_tag, p_ttl)
    RETURNING p_tag || ': ' || p_qty || ' of ' || p_product || ' for ' || p_buyer
$$;
CREATE FUNCTION sw_id(p_tag text) RETURNS text LANGUAGE sql AS $$
    SELECT id FROM sw_tags WHERE tag = p_tag
$$;
CREATE FUNCTION sw_products(p_stock int, VARIADIC p_ids text[]) RETURNS bigint LANGUAGE sql AS $$
    SELECT count(hc_stock_set(id, p_stock)) FROM unnest(p_ids) id
$$;
-- A digest of the stock tables, to prove that a failed call changed nothing.
CREATE FUNCTION sw_state() RETURNS text LANGUAGE sql AS $$
    SELECT md5(concat_ws('|',
        (SELECT string_agg(concat_ws(',', product_id, part, stock, reserved, version), ';'
                           ORDER BY product_id, part) FROM hc_stock_parts),
        (SELECT string_agg(concat_ws(',', id, status, qty, part), ';' ORDER BY id)
           FROM hc_stock_orders),
        (SELECT count(*) FROM hc_ledger)))
$$;
-- A product's ledger rows after hc_stock_set, with the part of each seq.
CREATE FUNCTION sw_ledger(p_product text)
RETURNS TABLE (part int, version bigint, event text, source text, reservation text,
               buyer_id text, reserved_delta integer, stock_delta integer) LANGUAGE sql AS $$
    SELECT (seq >> 48)::int, seq & ((1::bigint << 48) - 1), event, source, sw_tag(reservation_id),
           buyer_id, reserved_delta, stock_delta
      FROM hc_ledger
     WHERE kind = 'product' AND entity_id = p_product AND event <> 'stock_set'
     ORDER BY seq
$$;
-- Every btree index of the stock tables and the ledger has an entry for every row (amcheck).
CREATE EXTENSION IF NOT EXISTS amcheck;
CREATE FUNCTION sw_indexes() RETURNS bigint LANGUAGE sql AS $$
    SELECT count(bt_index_check(i.indexrelid, true))
      FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
     WHERE a.amname = 'btree'
       AND i.indrelid IN ('hc_stock_parts'::regclass, 'hc_stock_orders'::regclass,
                          'hc_ledger'::regclass)
$$;

-- 1. Nothing in the way: every write is made without its statement, and the
-- rows are the statements' rows (the ledger's seq the part's version).
\c
BEGIN;
SELECT sw_products(10, 'SW-1', 'SW-2');
SELECT stock FROM hc_stock_spread('SW-2', 2);
SELECT sw_reserve('a', 'SW-1', 2, 'alice');
SELECT sw_tag(reservation_id), replayed FROM hc_reserve('SW-1', 2, 'alice', 'sw-a', '10 minutes');
SELECT sw_reserve('b', 'SW-1', 3, 'bob', '1 hour');
SELECT sw_reserve('c', 'SW-1', 1, 'carol');
SELECT sw_reserve('d', 'SW-2', 4, 'dave');
SELECT sw_reserve('e', 'SW-2', 1, 'erin');
SELECT status, replayed FROM hc_finalize(sw_id('a'));
SELECT status, replayed FROM hc_finalize(sw_id('a'));
SELECT status, replayed FROM hc_unreserve(sw_id('b'));
SELECT status, replayed FROM hc_finalize('SW-2', sw_id('d'), false);
SELECT status, replayed FROM hc_unreserve('SW-2', sw_id('e'));
-- Expired: the unreserve expires it.
SELECT age_stock(sw_id('c'), '1 day');
SELECT status, replayed FROM hc_unreserve(sw_id('c'));
SELECT sw_statements();
SELECT product_id, stock, reserved, version FROM hc_inventory WHERE product_id LIKE 'SW-_'
 ORDER BY 1;
SELECT sw_tag(id) AS reservation, scope_id, buyer_id, status, qty, part IS NOT NULL AS part,
       ended_at IS NOT NULL AS ended, idempotency_key, fingerprint IS NOT NULL AS fingerprint,
       products
  FROM hc_stock_orders WHERE scope_id LIKE 'SW-_' ORDER BY 1;
SELECT * FROM sw_ledger('SW-1');
-- SW-2's rows in the parts their orders count in.
SELECT l.version > 0 AS version, l.event, l.reservation, l.reserved_delta, l.stock_delta,
       l.part = o.part AS orders_part
  FROM sw_ledger('SW-2') l JOIN hc_stock_orders o ON o.id = sw_id(l.reservation)
 ORDER BY l.reservation, l.event DESC;
SELECT count(*) FROM hc_ledger
 WHERE entity_id LIKE 'SW-_' AND (at IS NULL OR actor <> current_user OR function NOT IN
       ('hc_stock_set', 'hc_stock_spread', 'hc_reserve', 'hc_finalize', 'hc_unreserve'));
SELECT * FROM hc_check();
SELECT sw_indexes() > 0 AS checked;
-- A late finalize takes its units again with its statements, then moves.
SELECT sw_reserve('f', 'SW-1', 1, 'frank');
SELECT age_stock(sw_id('f'), '1 day');
SELECT status FROM hc_unreserve(sw_id('f'));
SELECT status, replayed FROM hc_finalize(sw_id('f'), late_ok => true);
SELECT sw_statements();
SELECT * FROM sw_ledger('SW-1') WHERE reservation = 'f';
SELECT * FROM hc_check();
ROLLBACK;

-- 2. Triggers.  A user's AFTER ROW triggers fire, as for the statements,
-- once the call's writes are done, in the statements' order; an UPDATE OF
-- trigger by the columns written; and the writes stay without their
-- statements.
\c
BEGIN;
SELECT sw_products(10, 'SW-T1');
CREATE TABLE sw_audit (n serial, what text, id text);
CREATE FUNCTION sw_audit() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r jsonb := to_jsonb(NEW);
BEGIN
    INSERT INTO public.sw_audit (id, what) VALUES (
        coalesce(r ->> 'reservation_id', r ->> 'id', r ->> 'product_id'),
        concat_ws(' ', TG_TABLE_NAME, TG_WHEN, TG_OP, TG_ARGV[0], '#',
        coalesce(r ->> 'status', r ->> 'event', 'reserved ' || (r ->> 'reserved')),
        -- the call's other rows are written when an AFTER trigger fires
        CASE WHEN TG_TABLE_NAME = 'hc_stock_parts' THEN
            '(ledger rows: ' || (SELECT count(*) FROM holdcommit.hc_ledger l
                                  WHERE l.entity_id = r ->> 'product_id') || ')' END));
    RETURN NULL;
END $$;
CREATE TRIGGER sw_orders AFTER INSERT OR UPDATE ON hc_stock_orders
    FOR EACH ROW EXECUTE FUNCTION sw_audit();
CREATE TRIGGER sw_stock AFTER UPDATE OF stock ON hc_stock_parts
    FOR EACH ROW EXECUTE FUNCTION sw_audit('of stock');
CREATE TRIGGER sw_parts AFTER UPDATE ON hc_stock_parts
    FOR EACH ROW EXECUTE FUNCTION sw_audit();
CREATE TRIGGER sw_ledger AFTER INSERT ON hc_ledger
    FOR EACH ROW EXECUTE FUNCTION sw_audit();
SELECT sw_reserve('t1', 'SW-T1', 2, 'alice');
SELECT status FROM hc_finalize(sw_id('t1'));
SELECT sw_reserve('t2', 'SW-T1', 3, 'bob');
SELECT status FROM hc_unreserve(sw_id('t2'));
SELECT replace(what, '#', sw_tag(id)) AS what FROM sw_audit ORDER BY n;
SELECT sw_statements();
-- A trigger's error fails the call, and nothing it wrote stays.
CREATE FUNCTION sw_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.buyer_id = 'mallory' THEN
        RAISE EXCEPTION 'no sale to mallory' USING ERRCODE = 'P0001';
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER sw_refuse AFTER INSERT ON hc_stock_orders
    FOR EACH ROW EXECUTE FUNCTION sw_refuse();
SELECT sw_state() AS before \gset
SELECT outcome($$SELECT hc_reserve('SW-T1', 1, 'mallory', 'sw-t3', '10 minutes')$$);
SELECT sw_state() = :'before' AS unchanged;
SELECT sw_statements();
ROLLBACK;

-- A BEFORE ROW trigger may change or cancel the row, which the statement
-- returns and counts: with one, the writes go through their statements,
-- with the statements' outcome.
\c
BEGIN;
SELECT sw_products(10, 'SW-B1', 'SW-B2');
CREATE FUNCTION sw_lower() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.buyer_id := lower(NEW.buyer_id);
    RETURN NEW;
END $$;
CREATE TRIGGER sw_lower BEFORE INSERT ON hc_stock_orders
    FOR EACH ROW EXECUTE FUNCTION sw_lower();
SELECT sw_reserve('b1', 'SW-B1', 1, 'ALICE');
SELECT buyer_id FROM hc_stock_orders WHERE id = sw_id('b1');
SELECT sw_statements();
ROLLBACK;
\c
BEGIN;
SELECT sw_products(10, 'SW-B2');
CREATE FUNCTION sw_no_sale() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RETURN CASE WHEN NEW.status = 'FINALIZED' THEN NULL ELSE NEW END;
END $$;
CREATE TRIGGER sw_no_sale BEFORE UPDATE ON hc_stock_orders
    FOR EACH ROW EXECUTE FUNCTION sw_no_sale();
SELECT sw_reserve('b2', 'SW-B2', 1, 'bob');
SELECT sw_state() AS before \gset
SELECT outcome(format('SELECT hc_finalize(%L)', sw_id('b2')));
SELECT sw_state() = :'before' AS unchanged;
SELECT status FROM hc_unreserve(sw_id('b2'));
SELECT sw_statements();
ROLLBACK;

-- A statement-level trigger, and a rule, belong to the statement: the
-- writes go through it, and they fire (a DO ALSO rule is refused in the
-- statement's WITH, as it always was).
\c
BEGIN;
SELECT sw_products(10, 'SW-S1');
CREATE TABLE sw_audit (n serial, what text);
CREATE FUNCTION sw_statement() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.sw_audit (what) VALUES (TG_TABLE_NAME || ' ' || TG_WHEN || ' ' || TG_OP);
    RETURN NULL;
END $$;
CREATE TRIGGER sw_statement AFTER UPDATE ON hc_stock_parts
    FOR EACH STATEMENT EXECUTE FUNCTION sw_statement();
SELECT sw_reserve('s1', 'SW-S1', 1, 'alice');
SELECT status FROM hc_finalize(sw_id('s1'));
SELECT what FROM sw_audit ORDER BY n;
SELECT sw_statements();
ROLLBACK;
\c
BEGIN;
SELECT sw_products(10, 'SW-S2');
CREATE TABLE sw_audit (n serial, what text);
CREATE RULE sw_rule AS ON INSERT TO hc_stock_orders
    DO ALSO INSERT INTO public.sw_audit (what) VALUES ('rule: ' || NEW.buyer_id);
SELECT outcome($$SELECT hc_reserve('SW-S2', 1, 'alice', 'sw-s2', '10 minutes')$$);
SELECT sw_statements();
ROLLBACK;

-- 3. Foreign keys.  One from a user's table to hc_stock_parts: the writes
-- keep its key, and it still guards the part.  One added from
-- hc_stock_orders to a user's table: checked for each reserve, as the
-- statement checks it, when the call's writes are done.
\c
BEGIN;
SELECT sw_products(10, 'SW-F1', 'SW-F2');
CREATE TABLE sw_listings (product_id text, part smallint,
                          FOREIGN KEY (product_id, part) REFERENCES hc_stock_parts);
INSERT INTO sw_listings VALUES ('SW-F1', 0);
SELECT sw_reserve('f1', 'SW-F1', 1, 'alice');
SELECT status FROM hc_finalize(sw_id('f1'));
SELECT outcome($$DELETE FROM hc_stock_parts WHERE product_id = 'SW-F1'$$);
CREATE TABLE sw_buyers (id text PRIMARY KEY);
INSERT INTO sw_buyers VALUES ('alice'), ('bob');
ALTER TABLE hc_stock_orders ADD CONSTRAINT sw_buyer FOREIGN KEY (buyer_id)
    REFERENCES sw_buyers (id) NOT VALID;
SELECT sw_reserve('f2', 'SW-F2', 1, 'bob');
SELECT sw_state() AS before \gset
SELECT outcome($$SELECT hc_reserve('SW-F2', 1, 'mallory', 'sw-f3', '10 minutes')$$);
SELECT sw_state() = :'before' AS unchanged;
SELECT sw_statements();
ROLLBACK;

-- 4. Row-level security.  It does not apply to the extension's owner, a
-- superuser here, even forced, for the statement or without it.
\c
BEGIN;
SELECT sw_products(10, 'SW-R1');
ALTER TABLE hc_stock_orders ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY sw_nothing ON hc_stock_orders USING (false) WITH CHECK (false);
SELECT sw_reserve('r1', 'SW-R1', 1, 'alice');
SELECT status FROM hc_unreserve(sw_id('r1'));
SELECT sw_statements();
ROLLBACK;
-- Where it applies to whom the call runs as (here a function's owner who
-- is not a superuser), the writes go through their statements, which
-- apply the policies.
\c
BEGIN;
SELECT sw_products(10, 'SW-R2');
CREATE ROLE sw_owner;
GRANT USAGE ON SCHEMA holdcommit TO sw_owner;
GRANT SELECT, INSERT, UPDATE ON hc_stock_parts, hc_stock_orders, hc_stock_order_lines, hc_ledger,
    hc_reservations, hc_stock_spreads TO sw_owner;
ALTER FUNCTION hc_reserve(text, integer, text, text, interval) OWNER TO sw_owner;
ALTER TABLE hc_stock_orders ENABLE ROW LEVEL SECURITY;
CREATE POLICY sw_read ON hc_stock_orders FOR SELECT USING (true);
CREATE POLICY sw_no_mallory ON hc_stock_orders FOR INSERT WITH CHECK (buyer_id <> 'mallory');
SELECT sw_state() AS before \gset
SELECT outcome($$SELECT hc_reserve('SW-R2', 1, 'mallory', 'sw-r2', '10 minutes')$$);
SELECT sw_state() = :'before' AS unchanged;
SELECT sw_reserve('r3', 'SW-R2', 1, 'alice');
SELECT buyer_id, actor FROM hc_ledger WHERE entity_id = 'SW-R2' AND event = 'reserve';
SELECT sw_statements();
ROLLBACK;

-- 5. Constraints, indexes and columns a user adds: checked, maintained and
-- computed without the statements; a column the statement would fill with
-- its default sends the insert back to it.
\c
BEGIN;
SELECT sw_products(10, 'SW-C1', 'SW-U1', 'SW-U2', 'SW-G1');
ALTER TABLE hc_stock_orders ADD CONSTRAINT sw_somebody CHECK (buyer_id <> 'nobody') NOT VALID;
ALTER TABLE hc_stock_parts ADD CONSTRAINT sw_small CHECK (reserved <= 5) NOT VALID;
SELECT sw_state() AS before \gset
SELECT outcome($$SELECT hc_reserve('SW-C1', 1, 'nobody', 'sw-c1', '10 minutes')$$);
SELECT outcome($$SELECT hc_reserve('SW-C1', 6, 'carol', 'sw-c2', '10 minutes')$$);
SELECT sw_state() = :'before' AS unchanged;
CREATE UNIQUE INDEX sw_one_order ON hc_stock_orders (buyer_id) WHERE scope_id LIKE 'SW-U%';
SELECT sw_reserve('u1', 'SW-U1', 1, 'carol');
SELECT sw_state() AS before \gset
SELECT outcome($$SELECT hc_reserve('SW-U2', 1, 'carol', 'sw-u2', '10 minutes')$$);
SELECT sw_state() = :'before' AS unchanged;
SELECT status FROM hc_finalize(sw_id('u1'));
ALTER TABLE hc_stock_orders
    ADD COLUMN sw_held_for interval GENERATED ALWAYS AS (expires_at - created_at) STORED;
ALTER TABLE hc_stock_parts
    ADD COLUMN sw_free integer GENERATED ALWAYS AS (stock - reserved) STORED;
SELECT sw_reserve('g1', 'SW-G1', 4, 'dave');
SELECT sw_held_for FROM hc_stock_orders WHERE id = sw_id('g1');
SELECT sw_free, available FROM hc_stock_parts WHERE product_id = 'SW-G1';
SELECT status FROM hc_finalize(sw_id('g1'));
SELECT sw_free, available FROM hc_stock_parts WHERE product_id = 'SW-G1';
SELECT sw_statements();
SELECT count(bt_index_check('sw_one_order', true));
SELECT sw_indexes() > 0 AS checked;
SELECT * FROM hc_check();
ROLLBACK;
\c
BEGIN;
SELECT sw_products(10, 'SW-D1');
ALTER TABLE hc_stock_orders ADD COLUMN sw_note text DEFAULT 'the default';
SELECT sw_reserve('d1', 'SW-D1', 1, 'erin');
SELECT sw_note FROM hc_stock_orders WHERE id = sw_id('d1');
SELECT status FROM hc_finalize(sw_id('d1'));
SELECT sw_statements();
ROLLBACK;

-- 6. With Citus in the database the rows are in the shards, which only a
-- statement reaches: every write goes through it (a stand-in row in
-- pg_extension, rolled back, in a session that has found no tables yet).
\c
BEGIN;
SET LOCAL allow_system_table_mods = on;
INSERT INTO pg_extension (oid, extname, extowner, extnamespace, extrelocatable, extversion)
VALUES (4000000001, 'citus', 10, 'pg_catalog'::regnamespace, false, 'stand-in');
SELECT sw_products(10, 'SW-X1');
SELECT sw_reserve('x1', 'SW-X1', 1, 'alice');
SELECT status FROM hc_finalize(sw_id('x1'));
SELECT sw_statements();
ROLLBACK;
