-- The writes of hc_hold, hc_commit, hc_release and hc_extend without the
-- executor (src/core/write.c): what of a user's triggers, foreign keys,
-- row-level security, constraints, indexes and columns still applies to
-- them, and where they go back to their statements (doc/architecture.md,
-- "Where the executor is bypassed").  Each part runs in a transaction that
-- is rolled back, so that the suites after this one see the tables as they
-- were.

-- Which of the hold paths' write statements this session has planned: a
-- statement's plan stays in the backend (\c starts a session with none).
CREATE FUNCTION hw_statements() RETURNS text LANGUAGE sql AS $$
    SELECT coalesce(string_agg(DISTINCT CASE
               WHEN ident ~ 'WITH taken AS' THEN 'hold'
               WHEN ident ~ 'SET status = ''EXPIRED''' THEN 'reclaim'
               WHEN ident ~ 'SET status = ''SOLD''' THEN 'commit'
               WHEN ident ~ 'SET status = ''AVAILABLE''' THEN 'release'
               WHEN ident ~ 'SET expires_at' THEN 'extend' END, ', '), 'none')
      FROM pg_backend_memory_contexts
     WHERE name = 'CachedPlanSource' AND ident ~ '^/\* holdcommit schema \d+ \*/ WITH'
$$;

-- A reservation's id as a tag, its row as the tests show it.
CREATE TABLE hw_tags (tag text PRIMARY KEY, id text NOT NULL);
CREATE FUNCTION hw_tag(p_id text) RETURNS text LANGUAGE sql AS $$
    SELECT coalesce((SELECT tag FROM hw_tags WHERE id = p_id), p_id)
$$;
CREATE FUNCTION hw_hold(p_tag text, p_asset text, p_buyer text, p_ttl interval DEFAULT '10 minutes')
RETURNS text LANGUAGE sql AS $$
    INSERT INTO hw_tags
    SELECT p_tag, reservation_id FROM hc_hold(p_asset, p_buyer, 'hw-' || p_tag, p_ttl)
    RETURNING p_tag || ': ' || p_asset || ' held by ' || p_buyer
$$;
CREATE FUNCTION hw_id(p_tag text) RETURNS text LANGUAGE sql AS $$
    SELECT id FROM hw_tags WHERE tag = p_tag
$$;
-- A digest of the hold paths' tables, to prove that a failed call changed nothing.
CREATE FUNCTION hw_state() RETURNS text LANGUAGE sql AS $$
    SELECT md5(concat_ws('|',
        (SELECT string_agg(concat_ws(',', id, status, hold_expires_at, current_reservation_id, version), ';' ORDER BY id) FROM hc_assets),
        (SELECT string_agg(concat_ws(',', id, status, expires_at), ';' ORDER BY id) FROM hc_reservations),
        (SELECT count(*) FROM hc_ledger)))
$$;
CREATE FUNCTION hw_assets(VARIADIC p_ids text[]) RETURNS bigint LANGUAGE sql AS $$
    SELECT count(hc_asset_add(id)) FROM unnest(p_ids) id
$$;
CREATE FUNCTION hw_ledger(p_asset text)
RETURNS TABLE (seq bigint, event text, source text, reservation text, buyer_id text,
               reserved_delta integer, stock_delta integer, detail boolean) LANGUAGE sql AS $$
    SELECT seq, event, source, hw_tag(reservation_id), buyer_id, reserved_delta, stock_delta,
           detail IS NOT NULL
      FROM hc_ledger WHERE kind = 'asset' AND entity_id = p_asset ORDER BY seq
$$;
-- 1. Nothing in the way: every write is made without its statement, and the
-- rows are the statements' rows (the ledger's seq the asset's version).
\c
BEGIN;
SELECT hw_assets('HW-1', 'HW-2', 'HW-3', 'HW-4', 'HW-5');
SELECT hw_hold('h1', 'HW-1', 'alice');
SELECT hw_hold('h2', 'HW-2', 'bob', '1 hour');
SELECT hw_hold('h3', 'HW-3', 'carol');
SELECT hw_hold('h5', 'HW-4', 'erin');
SELECT hw_hold('h6', 'HW-5', 'frank');
SELECT status, replayed FROM hc_extend(hw_id('h2'), '2 hours');
SELECT status, replayed FROM hc_extend(hw_id('h2'), '1 minute');
SELECT status, replayed FROM hc_commit(hw_id('h1'));
SELECT status, replayed FROM hc_commit(hw_id('h1'));
SELECT status, replayed FROM hc_release(hw_id('h2'));
-- Expired: taken over by another hold, committed late, released.
SELECT age_hold(hw_id('h3'), '1 day'), age_hold(hw_id('h5'), '1 day'),
       age_hold(hw_id('h6'), '1 day');
SELECT hw_hold('h4', 'HW-3', 'dave');
SELECT status, replayed FROM hc_release(hw_id('h4'));
SELECT status, replayed FROM hc_commit(hw_id('h5'), late_ok => true);
SELECT status, replayed FROM hc_release(hw_id('h6'));
SELECT hw_statements();
SELECT id, status, hw_tag(current_reservation_id) AS reservation, version,
       hold_expires_at IS NOT NULL AS until
  FROM hc_assets WHERE id LIKE 'HW-_' ORDER BY id;
SELECT hw_tag(id) AS reservation, asset_id, buyer_id, status, ended_at IS NOT NULL AS ended,
       idempotency_key, fingerprint IS NOT NULL AS fingerprint
  FROM hc_reservations WHERE asset_id LIKE 'HW-_' ORDER BY 1;
SELECT a.* FROM unnest(ARRAY['HW-1', 'HW-2', 'HW-3', 'HW-4', 'HW-5']) id, hw_ledger(id) a;
SELECT count(*) FROM hc_ledger
 WHERE entity_id LIKE 'HW-_' AND (at IS NULL OR function NOT IN ('hc_asset_add', 'hc_hold',
       'hc_commit', 'hc_release', 'hc_extend') OR actor <> current_user);
SELECT * FROM hc_check();
-- Every index of the three tables has an entry for every row (amcheck).
CREATE EXTENSION IF NOT EXISTS amcheck;
SELECT count(bt_index_check(i.indexrelid, true))
  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
 WHERE a.amname = 'btree'
   AND i.indrelid IN ('hc_assets'::regclass, 'hc_reservations'::regclass, 'hc_ledger'::regclass);
ROLLBACK;

-- 2. Triggers.  A user's AFTER ROW triggers fire, as for the statements,
-- once the call's writes are done; an UPDATE OF trigger by the columns
-- written; and the writes stay without their statements.
\c
BEGIN;
SELECT hw_assets('HW-T1', 'HW-T2');
CREATE TABLE hw_audit (n serial, what text, id text);
CREATE FUNCTION hw_audit() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r jsonb := to_jsonb(NEW);
BEGIN
    INSERT INTO public.hw_audit (id, what) VALUES (
        coalesce(r ->> 'current_reservation_id', r ->> 'reservation_id', r ->> 'id'),
        concat_ws(' ', TG_TABLE_NAME, TG_WHEN, TG_OP, TG_ARGV[0], '#',
        coalesce(r ->> 'status', r ->> 'event'),
        -- the call's other rows are written when an AFTER trigger fires
        CASE WHEN TG_TABLE_NAME = 'hc_assets' THEN
            '(ledger rows: ' || (SELECT count(*) FROM holdcommit.hc_ledger l
                                  WHERE l.entity_id = r ->> 'id') || ')' END));
    RETURN NULL;
END $$;
CREATE TRIGGER hw_reservations AFTER INSERT OR UPDATE ON hc_reservations
    FOR EACH ROW EXECUTE FUNCTION hw_audit();
CREATE TRIGGER hw_expiry AFTER UPDATE OF expires_at ON hc_reservations
    FOR EACH ROW EXECUTE FUNCTION hw_audit('of expires_at');
CREATE TRIGGER hw_assets AFTER UPDATE ON hc_assets
    FOR EACH ROW EXECUTE FUNCTION hw_audit();
CREATE TRIGGER hw_ledger AFTER INSERT ON hc_ledger
    FOR EACH ROW EXECUTE FUNCTION hw_audit();
SELECT hw_hold('t1', 'HW-T1', 'alice', '1 hour');
SELECT status FROM hc_extend(hw_id('t1'), '2 hours');
SELECT status FROM hc_commit(hw_id('t1'));
SELECT hw_hold('t2', 'HW-T2', 'bob');
SELECT age_hold(hw_id('t2'), '1 day');
SELECT hw_hold('t3', 'HW-T2', 'carol');
SELECT status FROM hc_release(hw_id('t3'));
-- (age_hold's own UPDATEs fire them too: the three rows between t2's hold and t3's.)
SELECT replace(what, '#', hw_tag(id)) AS what FROM hw_audit ORDER BY n;
SELECT hw_statements();
-- A trigger's error fails the call, and nothing it wrote stays.
CREATE FUNCTION hw_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.buyer_id = 'mallory' THEN
        RAISE EXCEPTION 'no sale to mallory' USING ERRCODE = 'P0001';
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER hw_refuse AFTER INSERT ON hc_reservations
    FOR EACH ROW EXECUTE FUNCTION hw_refuse();
SELECT outcome($$SELECT hc_hold('HW-T2', 'mallory', 'hw-t4')$$);
SELECT status, hw_tag(current_reservation_id) FROM hc_assets WHERE id = 'HW-T2';
SELECT count(*) FROM hc_reservations WHERE buyer_id = 'mallory';
SELECT hw_statements();
ROLLBACK;

-- A BEFORE ROW trigger may change or cancel the row, which the statement
-- returns and counts: with one, the writes go through their statements.
\c
BEGIN;
SELECT hw_assets('HW-B1', 'HW-B2');
CREATE FUNCTION hw_lower() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.buyer_id := lower(NEW.buyer_id);
    RETURN NEW;
END $$;
CREATE TRIGGER hw_lower BEFORE INSERT ON hc_reservations
    FOR EACH ROW EXECUTE FUNCTION hw_lower();
SELECT hw_hold('b1', 'HW-B1', 'ALICE');
SELECT buyer_id FROM hc_reservations WHERE id = hw_id('b1');
SELECT hw_statements();
CREATE FUNCTION hw_no_sale() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RETURN CASE WHEN NEW.status = 'SOLD' THEN NULL ELSE NEW END;
END $$;
CREATE TRIGGER hw_no_sale BEFORE UPDATE ON hc_assets
    FOR EACH ROW EXECUTE FUNCTION hw_no_sale();
SELECT hw_hold('b2', 'HW-B2', 'bob');
SELECT outcome(format('SELECT hc_commit(%L)', hw_id('b2')));
SELECT hw_statements();
ROLLBACK;

-- A statement-level trigger, and a rule, belong to the statement: the
-- writes go through it, and they fire (a DO ALSO rule is refused in the
-- statement's WITH, as it always was).
\c
BEGIN;
SELECT hw_assets('HW-S1');
CREATE TABLE hw_audit (n serial, what text);
CREATE FUNCTION hw_statement() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.hw_audit (what) VALUES (TG_TABLE_NAME || ' ' || TG_WHEN || ' ' || TG_OP);
    RETURN NULL;
END $$;
CREATE TRIGGER hw_statement AFTER INSERT ON hc_ledger
    FOR EACH STATEMENT EXECUTE FUNCTION hw_statement();
SELECT hw_hold('s1', 'HW-S1', 'alice');
SELECT what FROM hw_audit ORDER BY n;
SELECT hw_statements();
ROLLBACK;
\c
BEGIN;
SELECT hw_assets('HW-S2');
CREATE TABLE hw_audit (n serial, what text);
CREATE RULE hw_rule AS ON UPDATE TO hc_assets
    DO ALSO INSERT INTO public.hw_audit (what) VALUES ('rule: ' || NEW.id || ' ' || NEW.status);
SELECT outcome($$SELECT hc_hold('HW-S2', 'alice', 'hw-s2')$$);
SELECT hw_statements();
ROLLBACK;

-- 3. Foreign keys.  One from a user's table to hc_assets: the writes keep
-- its key, its checks pass, and it still guards the asset.  One added from
-- hc_reservations to a user's table: checked for each hold, as the
-- statement checks it, when the call's writes are done.
\c
BEGIN;
SELECT hw_assets('HW-F1', 'HW-F2', 'HW-F3');
CREATE TABLE hw_listings (asset_id text PRIMARY KEY REFERENCES hc_assets (id));
INSERT INTO hw_listings VALUES ('HW-F1');
SELECT hw_hold('f1', 'HW-F1', 'alice');
SELECT status FROM hc_commit(hw_id('f1'));
SELECT outcome($$DELETE FROM hc_assets WHERE id = 'HW-F1'$$);
CREATE TABLE hw_buyers (id text PRIMARY KEY);
INSERT INTO hw_buyers VALUES ('alice'), ('bob');
ALTER TABLE hc_reservations ADD CONSTRAINT hw_buyer FOREIGN KEY (buyer_id)
    REFERENCES hw_buyers (id) NOT VALID;
SELECT hw_hold('f2', 'HW-F2', 'bob');
SELECT hw_state() AS before \gset
SELECT outcome($$SELECT hc_hold('HW-F3', 'mallory', 'hw-f3')$$);
SELECT hw_state() = :'before' AS unchanged;
SELECT hw_statements();
ROLLBACK;

-- 4. Row-level security.  It does not apply to the extension's owner, a
-- superuser here, even forced, for the statement or without it.
\c
BEGIN;
SELECT hw_assets('HW-R1');
ALTER TABLE hc_reservations ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY hw_nothing ON hc_reservations USING (false) WITH CHECK (false);
SELECT hw_hold('r1', 'HW-R1', 'alice');
SELECT status FROM hc_release(hw_id('r1'));
SELECT hw_statements();
ROLLBACK;
-- Where it applies to whom the call runs as (here a function's owner who
-- is not a superuser), the writes go through their statements, which
-- apply the policies.
\c
BEGIN;
SELECT hw_assets('HW-R2', 'HW-R3');
CREATE ROLE hw_owner;
GRANT USAGE ON SCHEMA holdcommit TO hw_owner;
GRANT SELECT, INSERT, UPDATE ON hc_assets, hc_reservations, hc_ledger, hc_stock_reservations
    TO hw_owner;
ALTER FUNCTION hc_hold(text, text, text, interval) OWNER TO hw_owner;
ALTER TABLE hc_reservations ENABLE ROW LEVEL SECURITY;
CREATE POLICY hw_read ON hc_reservations FOR SELECT USING (true);
CREATE POLICY hw_no_mallory ON hc_reservations FOR INSERT WITH CHECK (buyer_id <> 'mallory');
SELECT outcome($$SELECT hc_hold('HW-R2', 'mallory', 'hw-r2')$$);
SELECT hw_hold('r3', 'HW-R3', 'alice');
SELECT buyer_id, actor FROM hc_ledger WHERE entity_id = 'HW-R3' ORDER BY seq;
SELECT hw_statements();
ROLLBACK;

-- 5. Constraints, indexes and columns a user adds: checked, maintained and
-- computed without the statements; a column the statement would fill with
-- its default sends the insert back to it.
\c
BEGIN;
SELECT hw_assets('HW-C1', 'HW-U1', 'HW-U2', 'HW-G1');
ALTER TABLE hc_reservations ADD CONSTRAINT hw_somebody CHECK (buyer_id <> 'nobody') NOT VALID;
SELECT hw_state() AS before \gset
SELECT outcome($$SELECT hc_hold('HW-C1', 'nobody', 'hw-c1')$$);
SELECT hw_state() = :'before' AS unchanged;
CREATE UNIQUE INDEX hw_one_hold ON hc_reservations (buyer_id) WHERE asset_id LIKE 'HW-U%';
SELECT hw_hold('u1', 'HW-U1', 'carol');
SELECT hw_state() AS before \gset
SELECT outcome($$SELECT hc_hold('HW-U2', 'carol', 'hw-u2')$$);
SELECT hw_state() = :'before' AS unchanged;
ALTER TABLE hc_reservations
    ADD COLUMN hw_held_for interval GENERATED ALWAYS AS (expires_at - created_at) STORED;
SELECT hw_hold('g1', 'HW-G1', 'dave');
SELECT hw_held_for FROM hc_reservations WHERE id = hw_id('g1');
SELECT status FROM hc_extend(hw_id('g1'), '1 hour');
SELECT hw_held_for = expires_at - created_at AS computed, hw_held_for > '10 minutes' AS longer
  FROM hc_reservations WHERE id = hw_id('g1');
SELECT hw_statements();
CREATE EXTENSION IF NOT EXISTS amcheck;
SELECT count(bt_index_check('hw_one_hold', true));
ROLLBACK;
\c
BEGIN;
SELECT hw_assets('HW-D1');
ALTER TABLE hc_reservations ADD COLUMN hw_note text DEFAULT 'the default';
SELECT hw_hold('d1', 'HW-D1', 'erin');
SELECT hw_note FROM hc_reservations WHERE id = hw_id('d1');
SELECT hw_statements();
ROLLBACK;

-- 6. With Citus in the database the rows are in the shards, which only a
-- statement reaches: every write goes through it (a stand-in row in
-- pg_extension, rolled back, in a session that has found no tables yet).
\c
BEGIN;
SET LOCAL allow_system_table_mods = on;
INSERT INTO pg_extension (oid, extname, extowner, extnamespace, extrelocatable, extversion)
VALUES (4000000001, 'citus', 10, 'pg_catalog'::regnamespace, false, 'stand-in');
SELECT hw_assets('HW-X1');
SELECT hw_hold('x1', 'HW-X1', 'alice');
SELECT status FROM hc_commit(hw_id('x1'));
SELECT hw_statements();
ROLLBACK;

-- 7. An asset's version at its largest: the write refuses to wrap it, as the
-- statement did (22003), and the session goes on.
\c
BEGIN;
SELECT hw_assets('HW-MAX');
UPDATE hc_assets SET version = 2147483647 WHERE id = 'HW-MAX';
SELECT status FROM hc_hold('HW-MAX', 'alice', 'hw-max-key');
ROLLBACK;
SELECT hw_statements();
SELECT 1;
