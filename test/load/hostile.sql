-- Hostile input for every function of the extension, driven from the
-- catalog (test/load/hostile.sh runs it): each argument of each hc_*
-- function in turn gets every hostile value of its type while the others
-- keep a valid value.  Every valid value is made fresh for each call (a new
-- asset, product, hold, reservation, lease, key), so that no call depends
-- on what an earlier one left behind, and each hostile call is preceded by
-- the same call with all-valid values (the baseline), which must succeed:
-- a refusal of the hostile call is then the hostile value's doing.  A
-- refusal must carry a SQLSTATE that the function's own section of the
-- docs lists (fz_errors), a class 22 refusal must name the argument, and
-- after it every table of the extension and the session's advisory locks
-- are as they were.  Prints one line per finding ("finding: ...") and a
-- last line "calls N, failed N, findings N".
\set ON_ERROR_STOP 1
SET search_path = public, holdcommit;
SET client_min_messages = warning;

-- A product with stock to spare, which the hostile items orders name.
SELECT hc_stock_set('FZ-P', 1000000);
DROP ROLE IF EXISTS fz_role;
CREATE ROLE fz_role NOLOGIN;

-- Fresh entities, made before each call (outside the call's digest): ids
-- never used before, so a valid value never meets a state an earlier call
-- made.  (A hostile value of fixed content, such as spaces only, may meet
-- what an earlier call with that value made: the asset hc_asset_add added,
-- the key hc_hold used; that is one more hostile state, judged the same.)
CREATE TEMP SEQUENCE fz_n;
-- A string of exactly n bytes (ASCII) that no earlier call used, so that a
-- hostile key or id meets no state an earlier call made with the same value.
CREATE FUNCTION pg_temp.fz_fill(n int, c text) RETURNS text LANGUAGE sql AS
    $$ SELECT left(nextval('fz_n') || '-' || repeat(c, n), n) $$;
CREATE FUNCTION pg_temp.fz_id(kind text) RETURNS text LANGUAGE sql AS
    $$ SELECT 'fz-' || kind || '-' || nextval('fz_n') $$;
CREATE FUNCTION pg_temp.fz_asset() RETURNS text LANGUAGE sql AS $$
    SELECT (holdcommit.hc_asset_add(a, 'fuzz asset')).id FROM pg_temp.fz_id('asset') a $$;
-- A pool of four seats in a row, for hc_hold_best.
CREATE FUNCTION pg_temp.fz_pool() RETURNS text LANGUAGE sql AS $$
    SELECT min(p) FROM pg_temp.fz_id('pool') p,
           LATERAL (SELECT holdcommit.hc_asset_add(pg_temp.fz_id('seat'), '', pool => p, rank => 1,
                                                   grp => 'R', pos => i)
                      FROM generate_series(1, 4) i) s $$;
CREATE FUNCTION pg_temp.fz_product() RETURNS text LANGUAGE sql AS $$
    SELECT (holdcommit.hc_stock_set(p, 100)).product_id FROM pg_temp.fz_id('product') p $$;
CREATE FUNCTION pg_temp.fz_hold() RETURNS text LANGUAGE sql AS $$
    SELECT (holdcommit.hc_hold(pg_temp.fz_asset(), 'fz-buyer', pg_temp.fz_id('key'), '1 hour')).reservation_id $$;
CREATE FUNCTION pg_temp.fz_stock_reservation() RETURNS text LANGUAGE sql AS $$
    SELECT (holdcommit.hc_reserve(pg_temp.fz_product(), 1, 'fz-buyer', pg_temp.fz_id('key'), '1 hour')).reservation_id $$;
-- The forms given the routing id take it first: its valid value makes the
-- hold (or order) of that asset (or first product) and leaves its id in
-- fz.hold (fz.order) for the reservation_id after it, which takes it (or
-- makes one of its own for the forms by reservation id alone).
-- fz_taken(setting): the id a form left in the setting, which it clears (NULL if none).
CREATE FUNCTION pg_temp.fz_taken(setting text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v text := NULLIF(current_setting(setting, true), '');
BEGIN
    PERFORM set_config(setting, '', false);
    RETURN v;
END $$;
CREATE FUNCTION pg_temp.fz_held_asset() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    h record := holdcommit.hc_hold(pg_temp.fz_asset(), 'fz-buyer', pg_temp.fz_id('key'), '1 hour');
BEGIN
    PERFORM set_config('fz.hold', h.reservation_id, false);
    RETURN h.asset_id;
END $$;
CREATE FUNCTION pg_temp.fz_ordered_product() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    p text := pg_temp.fz_product();
BEGIN
    PERFORM set_config('fz.order',
                       (holdcommit.hc_reserve(p, 1, 'fz-buyer', pg_temp.fz_id('key'), '1 hour')).reservation_id,
                       false);
    RETURN p;
END $$;
CREATE FUNCTION pg_temp.fz_its_hold() RETURNS text LANGUAGE sql AS $$
    SELECT COALESCE(pg_temp.fz_taken('fz.hold'), pg_temp.fz_hold()) $$;
CREATE FUNCTION pg_temp.fz_its_order() RETURNS text LANGUAGE sql AS $$
    SELECT COALESCE(pg_temp.fz_taken('fz.order'), pg_temp.fz_stock_reservation()) $$;

-- A lease held by fz-owner with one attempt recorded (so that cooldown and
-- max_attempts are read); its token is left in fz.token for the token
-- argument, which every lease function takes after its resource.
CREATE FUNCTION pg_temp.fz_lease() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r text := pg_temp.fz_id('resource');
    t bigint := holdcommit.hc_lock_acquire(r, 'fz-owner', '1 minute', 0);
BEGIN
    PERFORM set_config('fz.token', t::text, false), holdcommit.hc_attempt_begin(r, 'fz-owner', t, '1 minute', 3);
    RETURN r;
END $$;

-- Valid values, by argument name, for every function (fn '') or for one
-- that needs another kind (fn).  An argument missing here is a finding.
CREATE TEMP TABLE fz_valid (fn text, arg text, val text, PRIMARY KEY (fn, arg));
INSERT INTO fz_valid VALUES
    ('', 'id', $$pg_temp.fz_id('new')$$), ('', 'name', $$'a name'$$),
    ('', 'asset_id', 'pg_temp.fz_asset()'), ('', 'buyer_id', $$'fz-buyer'$$),
    ('', 'idempotency_key', $$pg_temp.fz_id('key')$$), ('', 'ttl', $$'10 minutes'::interval$$),
    ('', 'product_id', 'pg_temp.fz_product()'), ('', 'qty', '1'),
    ('', 'items', $$jsonb_build_array(jsonb_build_object('product_id', pg_temp.fz_product(), 'qty', 1))$$),
    ('', 'reservation_id', 'pg_temp.fz_hold()'),
    ('', 'asset_ids', 'ARRAY[pg_temp.fz_asset(), pg_temp.fz_asset()]'),
    ('', 'pool', 'pg_temp.fz_pool()'), ('', 'n', '2'),
    ('', 'rank', '1'), ('', 'grp', $$pg_temp.fz_id('row')$$), ('', 'pos', '1'),
    -- The forms given a routing id: a seat's must be its pool.
    ('hc_asset_add', 'pool', $$'fz-pool'$$), ('hc_asset_add', 'scope_id', $$'fz-pool'$$),
    ('hc_hold_many', 'scope_id', $$'fz-pool'$$),
    ('hc_commit', 'asset_id', 'pg_temp.fz_held_asset()'),
    ('hc_release', 'asset_id', 'pg_temp.fz_held_asset()'),
    ('hc_extend', 'asset_id', 'pg_temp.fz_held_asset()'),
    ('hc_commit', 'reservation_id', 'pg_temp.fz_its_hold()'),
    ('hc_release', 'reservation_id', 'pg_temp.fz_its_hold()'),
    ('hc_extend', 'reservation_id', 'pg_temp.fz_its_hold()'),
    ('hc_finalize', 'product_id', 'pg_temp.fz_ordered_product()'),
    ('hc_unreserve', 'product_id', 'pg_temp.fz_ordered_product()'),
    ('hc_finalize', 'reservation_id', 'pg_temp.fz_its_order()'),
    ('hc_unreserve', 'reservation_id', 'pg_temp.fz_its_order()'),
    ('', 'late_ok', 'false'), ('', 'resource', 'pg_temp.fz_lease()'),
    ('hc_lock_acquire', 'resource', $$pg_temp.fz_id('free')$$),
    ('hc_lock_acquire_session', 'resource', $$pg_temp.fz_id('free')$$),
    ('', 'owner', $$'fz-owner'$$), ('', 'token', $$current_setting('fz.token')::bigint$$),
    ('', 'stale_after', $$'1 minute'::interval$$), ('', 'max_retries', '0'),
    ('', 'cooldown', $$'1 minute'::interval$$), ('', 'max_attempts', '3'),
    ('', 'external_ref', $$pg_temp.fz_id('ref')$$), ('', 'request_key', $$pg_temp.fz_id('req')$$),
    ('', 'note', $$'checked'$$), ('', 'stock', '100'),
    ('', 'delta', '1'), ('', 'reason', $$'fuzz'$$), ('', 'batch_size', '100'), ('', 'parts', '2'),
    ('', 'role', $$'fz_role'::regrole$$);

-- The SQLSTATEs each function may refuse hostile input with: its arguments'
-- (class 22) and the states that a value can make (an id that names
-- nothing, a ttl that has run out, a key of another request, a role that
-- does not exist), as the function's section lists them: doc/reference.md
-- (its conventions and "Errors" lines), doc/locking.md ("Errors" and each
-- function's text), doc/sweeper.md ("Errors").  Not here, so a finding
-- whatever the call: what a valid call in autocommit never meets (25000,
-- 25006, 55000, 53000, 08006, 40P01, 55P03, 57014, 42501 as a superuser)
-- and every XX code.  A function missing here is a finding.
-- state22: the class 22 refusals about a state that the value makes, which
-- name the entity rather than the argument (a SIMILAR TO pattern).
CREATE TEMP TABLE fz_errors (fn text PRIMARY KEY, codes text[], state22 text);
INSERT INTO fz_errors (fn, codes, state22) VALUES
    ('hc_asset_add',      '{22004,22023,22001,23505}', NULL),
    ('hc_hold',           '{22004,22023,22001,RS005,RS006,RS001}', NULL),
    ('hc_hold_many',      '{22004,22023,22001,RS005,RS006,RS001}', NULL),
    ('hc_hold_best',      '{22004,22023,22001,RS005,RS006,RS002}', NULL),
    ('hc_commit',         '{22004,22023,22001,RS006,RS004,RS003}', NULL),
    ('hc_release',        '{22004,22023,22001,RS006,RS004}', NULL),
    ('hc_extend',         '{22004,22023,22001,RS006,RS004,RS003}', NULL),
    ('hc_stock_set',      '{22004,22023,22001}', 'stock of product % cannot go below what is reserved'),
    ('hc_stock_adjust',   '{22004,22023,22001,RS006}', 'stock of product % (cannot go below what is reserved|would be out of range)'),
    ('hc_stock_spread',   '{22004,22023,22001,RS006}', NULL),
    ('hc_stock_auto_spread', '{22004,22023,22001,RS006}', NULL),
    ('hc_reserve',        '{22004,22023,22001,RS005,RS006,RS002}', NULL),
    ('hc_reserve_items',  '{22004,22023,22001,RS005,RS006,RS002}', NULL),
    ('hc_finalize',       '{22004,22023,22001,RS006,RS004,RS003}', NULL),
    ('hc_unreserve',      '{22004,22023,22001,RS006,RS004}', NULL),
    ('hc_grant_app',      '{22004,42704}', NULL),
    ('hc_grant_operator', '{22004,42704}', NULL),
    ('hc_grant_monitor',  '{22004,42704}', NULL),
    ('hc_lock_acquire',   '{22004,22023,22001}', NULL),
    ('hc_lock_acquire_session', '{22004,22023,22001}', NULL),
    ('hc_lock_heartbeat', '{22004,22023,22001,RS007}', NULL),
    ('hc_lock_check', '{22004,22023,22001,RS007}', NULL),
    ('hc_lock_release',   '{22004,22023,22001}', NULL),
    ('hc_attempt_begin',  '{22004,22023,22001,RS007}', NULL),
    ('hc_attempt_complete', '{22004,22023,22001,RS007,RS004}', NULL),
    ('hc_attempt_reset',  '{22004,22023,22001,RS006,RS004}', NULL),
    ('hc_sweep',          '{22004,22023}', NULL);

-- Hostile values, by type.  An argument type missing here is a finding.
CREATE TEMP TABLE fz_hostile (type regtype, label text, val text);
INSERT INTO fz_hostile VALUES
    ('text', 'null', 'NULL::text'), ('text', 'empty', $$''$$),
    ('text', '64 bytes', $$pg_temp.fz_fill(64, 'a')$$), ('text', '65 bytes', $$pg_temp.fz_fill(65, 'a')$$),
    ('text', '63 bytes and a 2-byte character', $$pg_temp.fz_fill(63, 'a') || 'é'$$),
    ('text', '255 bytes', $$pg_temp.fz_fill(255, 'b')$$), ('text', '256 bytes', $$pg_temp.fz_fill(256, 'b')$$),
    ('text', '254 bytes and a 3-byte character', $$pg_temp.fz_fill(254, 'b') || '€'$$),
    ('text', '1 MB', $$pg_temp.fz_fill(1048576, 'c')$$),
    ('text', 'control characters', $$E'a\x01b\x1f\n\t\r'$$),
    ('text', 'spaces only', $$'   '$$), ('text', 'quotes and backslashes', $$E'\'";\\\\ DROP TABLE x; --'$$),
    ('text', 'an id of the wrong kind', $$'res_01M8S03N6QWHM83KQPQDY3E5XQ'$$),
    ('text', 'a json text', $$'{"product_id": "FZ-P"}'$$),
    ('interval', 'null', 'NULL::interval'), ('interval', 'zero', $$'0'::interval$$),
    ('interval', 'negative', $$'-1 hour'::interval$$), ('interval', 'a microsecond', $$'1 microsecond'::interval$$),
    ('interval', 'a month', $$'1 mon'::interval$$), ('interval', 'months and negative days', $$'1 mon -40 days'::interval$$),
    ('interval', 'huge', $$'178000000 years'::interval$$), ('interval', 'huge negative', $$'-178000000 years'::interval$$),
    ('integer', 'null', 'NULL::integer'), ('integer', 'zero', '0'), ('integer', 'minus one', '-1'),
    ('integer', 'max', '2147483647'), ('integer', 'min', '(-2147483648)::integer'),
    ('bigint', 'null', 'NULL::bigint'), ('bigint', 'zero', '0::bigint'), ('bigint', 'minus one', '-1::bigint'),
    ('bigint', 'max', '9223372036854775807'), ('bigint', 'min', '(-9223372036854775808)::bigint'),
    ('boolean', 'null', 'NULL::boolean'),
    ('text[]', 'null', 'NULL::text[]'), ('text[]', 'empty', $$'{}'::text[]$$),
    ('text[]', 'a null element', $$ARRAY[pg_temp.fz_asset(), NULL]$$),
    ('text[]', 'the same asset twice', $$(SELECT ARRAY[a, a] FROM pg_temp.fz_asset() a)$$),
    ('text[]', 'two dimensions', $$ARRAY[[pg_temp.fz_asset()], [pg_temp.fz_asset()]]$$),
    ('text[]', '101 assets', $$(SELECT array_agg(pg_temp.fz_asset()) FROM generate_series(1, 101))$$),
    ('text[]', '10,000 unknown assets', $$(SELECT array_agg('fz-none-' || g) FROM generate_series(1, 10000) g)$$),
    ('text[]', 'an empty id', $$ARRAY[pg_temp.fz_asset(), '']$$),
    ('text[]', 'a 65-byte id', $$ARRAY[pg_temp.fz_fill(65, 'a')]$$),
    ('text[]', 'an unknown asset', $$ARRAY[pg_temp.fz_asset(), pg_temp.fz_id('none')]$$),
    ('text[]', 'an asset sold', $$ARRAY[pg_temp.fz_asset(), (SELECT (holdcommit.hc_commit(pg_temp.fz_hold())).asset_id)]$$),
    ('jsonb', 'null', 'NULL::jsonb'), ('jsonb', 'json null', $$'null'::jsonb$$),
    ('jsonb', 'empty array', $$'[]'::jsonb$$), ('jsonb', 'an object', $$'{"product_id": "FZ-P", "qty": 1}'::jsonb$$),
    ('jsonb', 'a string', $$'"FZ-P"'::jsonb$$), ('jsonb', 'a number', $$'1'::jsonb$$),
    ('jsonb', 'qty a string', $$'[{"product_id": "FZ-P", "qty": "1"}]'::jsonb$$),
    ('jsonb', 'qty fractional', $$'[{"product_id": "FZ-P", "qty": 1.5}]'::jsonb$$),
    ('jsonb', 'qty huge', $$'[{"product_id": "FZ-P", "qty": 1e30}]'::jsonb$$),
    ('jsonb', 'qty negative', $$'[{"product_id": "FZ-P", "qty": -1}]'::jsonb$$),
    ('jsonb', 'qty over the stock', $$'[{"product_id": "FZ-P", "qty": 2000000}]'::jsonb$$),
    ('jsonb', 'product_id missing', $$'[{"qty": 1}]'::jsonb$$),
    ('jsonb', 'product_id a number', $$'[{"product_id": 7, "qty": 1}]'::jsonb$$),
    ('jsonb', 'product_id unknown', $$'[{"product_id": "FZ-NONE", "qty": 1}]'::jsonb$$),
    ('jsonb', 'product_id 1 MB', $$jsonb_build_array(jsonb_build_object('product_id', repeat('p', 1048576), 'qty', 1))$$),
    ('jsonb', 'an extra key', $$'[{"product_id": "FZ-P", "qty": 1, "price": 3}]'::jsonb$$),
    ('jsonb', 'the same product twice', $$'[{"product_id": "FZ-P", "qty": 1}, {"product_id": "FZ-P", "qty": 1}]'::jsonb$$),
    ('jsonb', 'nested arrays', $$'[[{"product_id": "FZ-P", "qty": 1}]]'::jsonb$$),
    ('jsonb', '10,000 items', $$(SELECT jsonb_agg(jsonb_build_object('product_id', 'FZ-P' || g, 'qty', 1)) FROM generate_series(1, 10000) g)$$),
    ('jsonb', 'a deep object', $$(SELECT ('[' || repeat('{"a":', 1000) || '1' || repeat('}', 1000) || ']')::jsonb)$$),
    ('regrole', 'null', 'NULL::regrole'), ('regrole', 'zero', '0::regrole'),
    ('regrole', 'a superuser', $$'postgres'::regrole$$), ('regrole', 'a predefined role', $$'pg_read_all_data'::regrole$$),
    ('regrole', 'pg_database_owner', $$'pg_database_owner'::regrole$$);

-- Every row version that every table of the extension holds, as one
-- digest: any insert, update or delete that is visible to this session
-- (committed by a worker, or not rolled back here) makes a new version or
-- removes one, so it changes the digest.  The versions (ctid, xmin), not
-- the contents: the 1 MB names and notes that succeeded make reading the
-- contents too slow to digest before and after each call.
CREATE FUNCTION pg_temp.fz_digest() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    t regclass;
    d text := '';
    part text;
BEGIN
    FOR t IN SELECT c.oid::regclass FROM pg_depend dep JOIN pg_class c ON c.oid = dep.objid
              WHERE dep.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'holdcommit')
                AND dep.classid = 'pg_class'::regclass AND c.relkind = 'r' ORDER BY 1 LOOP
        EXECUTE format('SELECT md5(coalesce(string_agg(ctid::text || xmin::text, %L ORDER BY ctid), %L)) FROM %s',
                       ',', '', t) INTO part;
        d := d || part;
    END LOOP;
    RETURN md5(d);
END $$;

-- The session's advisory locks (hc_lock_acquire_session binds a lease with
-- one, which outlives the transaction): a refused call must leave none.
CREATE FUNCTION pg_temp.fz_advisory() RETURNS text LANGUAGE sql AS $$
    SELECT coalesce(string_agg(concat_ws(':', classid, objid, objsubid), ',' ORDER BY classid, objid, objsubid), '')
      FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() $$;

-- The call with fresh valid values, and the hostile value for argument i
-- (0-based; -1: none, the baseline); the valid values are made here, so
-- before the caller's digest.  Raises for an argument without a valid value.
CREATE FUNCTION pg_temp.fz_call(p_oid oid, i int, hostile text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    f text;
    names text[];
    types regtype[];
    args text[] := '{}';
    v text;
BEGIN
    SELECT proname, proargnames, proargtypes::regtype[] INTO f, names, types FROM pg_proc WHERE oid = p_oid;
    FOR k IN 0 .. cardinality(types) - 1 LOOP
        IF k = i THEN
            args := args || (quote_ident(names[k + 1]) || ' => ' || hostile);
            CONTINUE;
        END IF;
        SELECT val INTO v FROM fz_valid WHERE arg = names[k + 1] AND fz_valid.fn IN (f, '')
         ORDER BY fz_valid.fn DESC LIMIT 1;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'argument % of % has no valid value in fz_valid', names[k + 1], f;
        END IF;
        EXECUTE format('SELECT (%s)::text', v) INTO v;
        args := args || (quote_ident(names[k + 1]) || ' => ' || quote_nullable(v) || '::' || types[k]::text);
    END LOOP;
    RETURN format('SELECT * FROM holdcommit.%I(%s)', f, array_to_string(args, ', '));
END $$;

CREATE TEMP TABLE fz_result (call text, sqlstate text, message text, finding text);

DO $$
DECLARE
    fn record;
    h record;
    call text;
    what text;
    before text;
    locks text;
    state text;
    msg text;
    allowed text[];
    state22 text;
BEGIN
    FOR fn IN
        SELECT p.oid, p.proname, p.proargnames, p.proargtypes::regtype[] AS types, p.pronargs
          FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.deptype = 'e'
          JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'holdcommit'
         WHERE p.prorettype NOT IN ('event_trigger'::regtype, 'trigger'::regtype) AND p.pronargs > 0
           -- Citus only, refused here (0A000 or 55000): the citus suite calls them.
           AND p.proname NOT IN ('hc_distribute', 'hc_order_step')
         ORDER BY p.proname
    LOOP
        SELECT codes, fz_errors.state22 INTO allowed, state22 FROM fz_errors WHERE fz_errors.fn = fn.proname;
        IF NOT FOUND THEN
            INSERT INTO fz_result VALUES (fn.proname, NULL, NULL, 'no documented SQLSTATEs in fz_errors');
        END IF;
        FOR i IN 0 .. fn.pronargs - 1 LOOP
            IF NOT EXISTS (SELECT FROM fz_hostile WHERE type = fn.types[i]) THEN
                INSERT INTO fz_result VALUES (fn.proname || '(' || fn.proargnames[i + 1] || ')', NULL, NULL,
                                              'type ' || fn.types[i] || ' has no hostile values in fz_hostile');
            END IF;
            FOR h IN SELECT * FROM fz_hostile WHERE type = fn.types[i] LOOP
                what := fn.proname || '(' || fn.proargnames[i + 1] || ' ' || h.label || ')';
                -- The baseline: the same call, all values valid and fresh.
                BEGIN
                    EXECUTE pg_temp.fz_call(fn.oid, -1, NULL);
                EXCEPTION WHEN OTHERS THEN
                    GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
                    INSERT INTO fz_result VALUES (what, state, left(msg, 200),
                                                  'the baseline with valid values failed');
                    CONTINUE;
                END;
                BEGIN
                    call := pg_temp.fz_call(fn.oid, i, h.val);
                EXCEPTION WHEN OTHERS THEN
                    GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
                    INSERT INTO fz_result VALUES (what, NULL, msg, 'no valid values');
                    CONTINUE;
                END;
                before := pg_temp.fz_digest();
                locks := pg_temp.fz_advisory();
                BEGIN
                    EXECUTE call;
                    INSERT INTO fz_result VALUES (what, '00000', NULL, NULL);
                EXCEPTION WHEN OTHERS THEN
                    GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
                    INSERT INTO fz_result VALUES (what, state, left(msg, 200), nullif(concat_ws(', ',
                        CASE WHEN state <> ALL (coalesce(allowed, '{}')) THEN 'not a SQLSTATE its docs list' END,
                        CASE WHEN state LIKE '22%' AND position(fn.proargnames[i + 1] IN msg) = 0
                                  AND msg NOT SIMILAR TO coalesce(state22, '')
                             THEN 'a class 22 refusal that does not name ' || fn.proargnames[i + 1] END,
                        CASE WHEN pg_temp.fz_digest() <> before THEN 'it changed a table' END,
                        CASE WHEN pg_temp.fz_advisory() <> locks THEN 'it left an advisory lock' END), ''));
                END;
            END LOOP;
        END LOOP;
    END LOOP;
END $$;

SELECT 'finding: ' || call || ': ' || finding || coalesce(' (SQLSTATE ' || sqlstate || ': ' || message || ')', '')
  FROM fz_result WHERE finding IS NOT NULL ORDER BY call;
SELECT 'finding: hc_check() after the calls: ' || invariant || ' ' || subject FROM hc_check();
-- Every code fz_errors allows must be one of doc/reference.md's table.
SELECT 'finding: fz_errors allows ' || c || ' for ' || fn || ', which doc/reference.md does not list'
  FROM fz_errors, unnest(codes) c WHERE c <> ALL (string_to_array(:'documented', ','));
SELECT 'failed ' || sqlstate || ' ' || count(*) FROM fz_result WHERE sqlstate <> '00000' GROUP BY sqlstate ORDER BY 1;
SELECT format('calls %s, failed %s, findings %s', count(*), count(*) FILTER (WHERE sqlstate <> '00000'),
              count(*) FILTER (WHERE finding IS NOT NULL) + (SELECT count(*) FROM hc_check())
              + (SELECT count(*) FROM fz_errors, unnest(codes) c WHERE c <> ALL (string_to_array(:'documented', ','))))
  FROM fz_result;
SELECT 1 AS usable;
