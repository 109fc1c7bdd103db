-- Hostile input for every function of the extension, driven from the
-- catalog (test/load/hostile.sh runs it): each argument of each hc_*
-- function in turn gets every hostile value of its type while the others
-- keep a valid value.  A call succeeds or fails with a SQLSTATE of
-- doc/reference.md (:'documented', a comma-separated list); after a failure
-- every table of the extension is as it was.  Prints one line per finding
-- ("finding: ...") and a last line "calls N, failed N, findings N".
\set ON_ERROR_STOP 1
SET search_path = public, holdcommit;
SET client_min_messages = warning;

SELECT hc_asset_add('FZ-A', 'fuzz asset'), hc_stock_set('FZ-P', 100);
SELECT hc_hold('FZ-A', 'fz-buyer', 'fz-key-hold', '1 hour');
SELECT hc_reserve('FZ-P', 1, 'fz-buyer', 'fz-key-reserve', '1 hour');
DROP ROLE IF EXISTS fz_role;
CREATE ROLE fz_role NOLOGIN;

-- Valid values, by argument name (all that the functions take).
CREATE TEMP TABLE fz_valid (arg text PRIMARY KEY, val text);
INSERT INTO fz_valid VALUES
    ('id', $$'FZ-NEW'$$), ('name', $$'a name'$$), ('asset_id', $$'FZ-A'$$),
    ('buyer_id', $$'fz-buyer'$$), ('idempotency_key', $$'fz-' || md5(random()::text)$$),
    ('ttl', $$'10 minutes'::interval$$), ('product_id', $$'FZ-P'$$), ('qty', '1'),
    ('items', $$'[{"product_id": "FZ-P", "qty": 1}]'::jsonb$$),
    ('reservation_id', $$(SELECT id FROM holdcommit.hc_reservations ORDER BY created_at LIMIT 1)$$),
    ('late_ok', 'false'), ('resource', $$'FZ-R'$$), ('owner', $$'fz-owner'$$),
    ('token', '1'), ('stale_after', $$'1 minute'::interval$$), ('max_retries', '0'),
    ('cooldown', $$'1 minute'::interval$$), ('max_attempts', '3'),
    ('external_ref', $$'INV-1'$$), ('note', $$'checked'$$), ('stock', '100'),
    ('delta', '1'), ('reason', $$'fuzz'$$), ('batch_size', '100'),
    ('role', $$'fz_role'::regrole$$);

-- Hostile values, by type.
CREATE TEMP TABLE fz_hostile (type regtype, label text, val text);
INSERT INTO fz_hostile VALUES
    ('text', 'null', 'NULL::text'), ('text', 'empty', $$''$$),
    ('text', '64 bytes', $$repeat('a', 64)$$), ('text', '65 bytes', $$repeat('a', 65)$$),
    ('text', '63 bytes and a 2-byte character', $$repeat('a', 63) || 'é'$$),
    ('text', '255 bytes', $$repeat('b', 255)$$), ('text', '256 bytes', $$repeat('b', 256)$$),
    ('text', '254 bytes and a 3-byte character', $$repeat('b', 254) || '€'$$),
    ('text', '1 MB', $$repeat('c', 1048576)$$),
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
    ('jsonb', 'null', 'NULL::jsonb'), ('jsonb', 'json null', $$'null'::jsonb$$),
    ('jsonb', 'empty array', $$'[]'::jsonb$$), ('jsonb', 'an object', $$'{"product_id": "FZ-P", "qty": 1}'::jsonb$$),
    ('jsonb', 'a string', $$'"FZ-P"'::jsonb$$), ('jsonb', 'a number', $$'1'::jsonb$$),
    ('jsonb', 'qty a string', $$'[{"product_id": "FZ-P", "qty": "1"}]'::jsonb$$),
    ('jsonb', 'qty fractional', $$'[{"product_id": "FZ-P", "qty": 1.5}]'::jsonb$$),
    ('jsonb', 'qty huge', $$'[{"product_id": "FZ-P", "qty": 1e30}]'::jsonb$$),
    ('jsonb', 'qty negative', $$'[{"product_id": "FZ-P", "qty": -1}]'::jsonb$$),
    ('jsonb', 'product_id missing', $$'[{"qty": 1}]'::jsonb$$),
    ('jsonb', 'product_id a number', $$'[{"product_id": 7, "qty": 1}]'::jsonb$$),
    ('jsonb', 'product_id 1 MB', $$jsonb_build_array(jsonb_build_object('product_id', repeat('p', 1048576), 'qty', 1))$$),
    ('jsonb', 'an extra key', $$'[{"product_id": "FZ-P", "qty": 1, "price": 3}]'::jsonb$$),
    ('jsonb', 'the same product twice', $$'[{"product_id": "FZ-P", "qty": 1}, {"product_id": "FZ-P", "qty": 1}]'::jsonb$$),
    ('jsonb', 'nested arrays', $$'[[{"product_id": "FZ-P", "qty": 1}]]'::jsonb$$),
    ('jsonb', '10,000 items', $$(SELECT jsonb_agg(jsonb_build_object('product_id', 'FZ-P' || g, 'qty', 1)) FROM generate_series(1, 10000) g)$$),
    ('jsonb', 'a deep object', $$(SELECT ('[' || repeat('{"a":', 1000) || '1' || repeat('}', 1000) || ']')::jsonb)$$),
    ('regrole', 'null', 'NULL::regrole'), ('regrole', 'zero', '0::regrole'),
    ('regrole', 'a superuser', $$'postgres'::regrole$$), ('regrole', 'a predefined role', $$'pg_read_all_data'::regrole$$),
    ('regrole', 'pg_database_owner', $$'pg_database_owner'::regrole$$);

-- What every table of the extension holds, as one digest.
CREATE FUNCTION pg_temp.fz_digest() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    t regclass;
    d text := '';
    part text;
BEGIN
    FOR t IN SELECT c.oid::regclass FROM pg_depend dep JOIN pg_class c ON c.oid = dep.objid
              WHERE dep.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'holdcommit')
                AND dep.classid = 'pg_class'::regclass AND c.relkind = 'r' ORDER BY 1 LOOP
        EXECUTE format('SELECT md5(coalesce(string_agg(x::text, %L ORDER BY x::text), %L)) FROM %s x',
                       E'\n', '', t) INTO part;
        d := d || part;
    END LOOP;
    RETURN md5(d);
END $$;

CREATE TEMP TABLE fz_result (call text, sqlstate text, message text, changed boolean);

DO $$
DECLARE
    fn record;
    arg record;
    h record;
    args text[];
    call text;
    before text;
    state text;
    msg text;
    i int;
BEGIN
    FOR fn IN
        SELECT p.oid, p.proname, p.proargnames, p.proargtypes::regtype[] AS types, p.pronargs
          FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.deptype = 'e'
          JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'holdcommit'
         WHERE p.prorettype NOT IN ('event_trigger'::regtype, 'trigger'::regtype) AND p.pronargs > 0
         ORDER BY p.proname
    LOOP
        FOR i IN 0 .. fn.pronargs - 1 LOOP
            FOR h IN SELECT * FROM fz_hostile WHERE type = fn.types[i] LOOP
                args := '{}';
                FOR arg IN SELECT generate_subscripts(fn.types, 1) AS k LOOP
                    IF arg.k = i THEN
                        args := args || (fn.proargnames[arg.k + 1] || ' => ' || h.val);
                    ELSE
                        args := args || (fn.proargnames[arg.k + 1] || ' => ' ||
                                         (SELECT val FROM fz_valid WHERE fz_valid.arg = fn.proargnames[arg.k + 1]));
                    END IF;
                END LOOP;
                call := format('SELECT * FROM holdcommit.%I(%s)', fn.proname, array_to_string(args, ', '));
                before := pg_temp.fz_digest();
                BEGIN
                    EXECUTE call;
                    INSERT INTO fz_result VALUES (fn.proname || '(' || fn.proargnames[i + 1] || ' ' || h.label || ')',
                                                  '00000', NULL, NULL);
                EXCEPTION WHEN OTHERS THEN
                    GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
                    INSERT INTO fz_result VALUES (fn.proname || '(' || fn.proargnames[i + 1] || ' ' || h.label || ')',
                                                  state, left(msg, 200), pg_temp.fz_digest() <> before);
                END;
            END LOOP;
        END LOOP;
    END LOOP;
END $$;

SELECT 'finding: ' || call || ': SQLSTATE ' || sqlstate || ' (' || message || ')'
       || CASE WHEN changed THEN ', and it changed a table' ELSE '' END
  FROM fz_result
 WHERE sqlstate <> '00000' AND (sqlstate <> ALL (string_to_array(:'documented', ',')) OR changed)
 ORDER BY call;
SELECT 'finding: hc_check() after the calls: ' || invariant || ' ' || subject FROM hc_check();
SELECT format('calls %s, failed %s, findings %s', count(*), count(*) FILTER (WHERE sqlstate <> '00000'),
              count(*) FILTER (WHERE sqlstate <> '00000'
                                 AND (sqlstate <> ALL (string_to_array(:'documented', ',')) OR changed))
              + (SELECT count(*) FROM hc_check()))
  FROM fz_result;
SELECT 1 AS usable;
