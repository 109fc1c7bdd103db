-- Privileges and search_path safety (SPEC section 8).

-- Nothing is granted to PUBLIC: no function, no table.
SELECT p.oid::regprocedure AS public_can_execute
  FROM pg_proc p
 WHERE p.pronamespace = 'public'::regnamespace AND p.proname LIKE 'hc\_%'
   AND (p.proacl IS NULL OR EXISTS (SELECT FROM aclexplode(p.proacl) a WHERE a.grantee = 0));
SELECT c.relname AS public_can_read
  FROM pg_class c
 WHERE c.relnamespace = 'public'::regnamespace AND c.relname LIKE 'hc\_%'
   AND EXISTS (SELECT FROM aclexplode(c.relacl) a WHERE a.grantee = 0);

-- pg_dump keeps the data of the extension's tables.
SELECT unnest(extconfig)::regclass AS dumped FROM pg_extension WHERE extname = 'holdcommit' ORDER BY 1::text;

-- hc_grant_app grants only the extension's own functions, not a look-alike
-- that someone with CREATE on the schema put there under a future name.
CREATE FUNCTION public.hc_lock_acquire(text) RETURNS text LANGUAGE sql AS $$ SELECT 'not holdcommit' $$;
REVOKE ALL ON FUNCTION public.hc_lock_acquire(text) FROM PUBLIC;
-- An application role gets the calls and read access, nothing that bypasses them.
CREATE ROLE regress_hc_app;
CREATE ROLE regress_hc_nobody;
SELECT hc_grant_app('regress_hc_app');
INSERT INTO hc_assets (id) VALUES ('SEC-1'), ('SEC-2');
SELECT has_function_privilege('regress_hc_app', 'public.hc_lock_acquire(text)', 'EXECUTE') AS lookalike_granted,
       has_function_privilege('regress_hc_app', 'hc_hold(text, text, text, interval)', 'EXECUTE') AS hold_granted;
DROP FUNCTION public.hc_lock_acquire(text);

SET ROLE regress_hc_app;
SELECT buyer_id, status FROM hc_hold('SEC-1', 'app-buyer', 'sec-key-1');
SELECT status FROM hc_assets WHERE id = 'SEC-1';
SELECT count(*) FROM hc_check();
INSERT INTO hc_assets (id) VALUES ('SEC-3');
UPDATE hc_assets SET status = 'AVAILABLE' WHERE id = 'SEC-1';
DELETE FROM hc_reservations;
UPDATE hc_reservations SET status = 'COMMITTED';
SELECT count(*) FROM hc_ledger;
DELETE FROM hc_ledger;
SELECT count(*) FROM hc_idempotency_keys;
SELECT hc_asset_add('SEC-3', 'not for apps');
RESET ROLE;

-- The ledger records the caller, not the extension's owner.
SELECT actor, event FROM hc_ledger WHERE entity_id = 'SEC-1';

-- A role granted nothing can call nothing.
SET ROLE regress_hc_nobody;
SELECT hc_hold('SEC-2', 'x', 'sec-key-2');
SELECT * FROM hc_check();
RESET ROLE;

-- Objects on the caller's search_path never run inside hc_* functions.
CREATE SCHEMA regress_evil;
CREATE FUNCTION regress_evil.evil_eq(text, text) RETURNS boolean
    LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'evil operator ran'; END $$;
CREATE OPERATOR regress_evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = regress_evil.evil_eq);
CREATE FUNCTION regress_evil.clock_timestamp() RETURNS timestamptz
    LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'evil function ran'; END $$;
CREATE TABLE regress_evil.hc_assets (id text, status text);
SET search_path = regress_evil, pg_catalog, public;
SELECT buyer_id, status FROM public.hc_hold('SEC-2', 'safe', 'sec-key-3');
SELECT status FROM public.hc_release((SELECT id FROM public.hc_reservations WHERE asset_id = 'SEC-2'));
SELECT count(*) FROM public.hc_check();
RESET search_path;
DROP SCHEMA regress_evil CASCADE;

DROP OWNED BY regress_hc_app;
DROP ROLE regress_hc_app;
DROP ROLE regress_hc_nobody;
SELECT * FROM hc_check();
