-- Every hc_* function, called by a victim while someone hostile has been at
-- work: first as the superuser (every function), then as the application
-- role :app (the functions granted to applications), each with the calls
-- of test/security/victim_role.sql; then what each call did, read from the
-- extension's own tables.  Loaded with \i by
-- test/sql/security.sql and test/sql/owner_attack.sql.
--
-- Set before loading it:
--   ext          the extension's schema, as it is named now
--   s            a tag for this round; every id made here starts with it
--   victim_path  the search_path the victims call under (may be hostile)
--   app          an application role (hc_grant_app)
--   grantee_app, grantee_op  fresh roles for hc_grant_app / hc_grant_operator
-- and have a product CHECK-CANARY in hc_inventory that has no ledger rows,
-- which hc_check() must report (so hc_check is seen to read the real tables).
--
-- The calls name the functions by schema, pass only untyped literals and
-- psql variables, and keep every result with \gset: while the hostile
-- search_path is in effect, the test's own statements look up no operator,
-- function, cast or type, so whatever foreign code runs, runs inside the
-- extension.  What each call did is checked afterwards under a safe
-- search_path, by the ids the calls returned.

SET search_path = pg_catalog, pg_temp;
\set a1 :s '-asset-1'
\set a2 :s '-asset-2'
\set a3 :s '-asset-3'
\set a4 :s '-asset-4'
\set p1 :s '-product-1'
\set p2 :s '-product-2'
\set lease1 :s '-lease-1'
\set lease2 :s '-lease-2'
\set items '[{"product_id": "' :p1 '", "qty": 1}, {"product_id": "' :p2 '", "qty": 2}]'
-- The lease and attempt functions and hc_sweep are called only where they
-- exist (they come with the lock work); hc_grant only while it exists.
SELECT pg_catalog.to_regprocedure(:'ext' || '.hc_lock_acquire(text,text,interval,integer)') IS NOT NULL AS have_locks,
       pg_catalog.to_regproc(:'ext' || '.hc_attempt_begin') IS NOT NULL AS have_attempts,
       pg_catalog.to_regprocedure(:'ext' || '.hc_sweep(integer)') IS NOT NULL AS have_sweep,
       pg_catalog.to_regprocedure(:'ext' || '.hc_grant(regrole,text[],text[])') IS NOT NULL AS have_grant
\gset

-- As the superuser, under the victims' search_path.
SET search_path = :victim_path;
SELECT id AS added FROM :"ext".hc_asset_add(:'a1', 'first') \gset
SELECT id AS added FROM :"ext".hc_asset_add(:'a2', 'second') \gset
SELECT id AS added FROM :"ext".hc_asset_add(:'a3', 'third') \gset
SELECT id AS added FROM :"ext".hc_asset_add(:'a4', 'fourth') \gset
SELECT stock AS stock FROM :"ext".hc_stock_set(:'p1', 10) \gset
SELECT stock AS stock FROM :"ext".hc_stock_set(:'p2', 10) \gset
SELECT stock AS stock FROM :"ext".hc_stock_adjust(:'p1', 5, 'restock') \gset
\set p su_
\set who su
\set commit_asset :a1
\set release_asset :a2
\set checked superuser_check
\set lease :lease1
\set operator true
\i test/security/victim_role.sql
\if :have_sweep
SELECT expired_holds AS swept FROM :"ext".hc_sweep(10) \gset
\endif

-- As the application role, under the same search_path.
SET SESSION AUTHORIZATION :app;
\set p ap_
\set who app
\set commit_asset :a3
\set release_asset :a4
\set checked app_check
\set lease :lease2
\set operator false
\i test/security/victim_role.sql
RESET SESSION AUTHORIZATION;

-- What the calls did, under a safe search_path.  Each reservation is found
-- by the id its call returned, in the state the later calls left it in.
SET search_path = pg_catalog, pg_temp;
SELECT v.call, r.status
  FROM (VALUES ('1 superuser: hold, extend, commit', :'su_h1'), ('2 superuser: hold, release', :'su_h2'),
               ('3 app: hold, extend, commit', :'ap_h1'), ('4 app: hold, release', :'ap_h2')) v (call, id)
  LEFT JOIN :"ext".hc_reservations r ON r.id = v.id
 ORDER BY v.call;
SELECT v.call, r.status, (SELECT pg_catalog.string_agg(l.product_id || ':' || l.qty || ':' || l.status, ', '
                                                       ORDER BY l.product_id)
                            FROM :"ext".hc_stock_reservation_lines l WHERE l.reservation_id = r.id) AS lines
  FROM (VALUES ('1 superuser: reserve, finalize', :'su_r1'), ('2 superuser: reserve_items, unreserve', :'su_r2'),
               ('3 app: reserve, finalize', :'ap_r1'), ('4 app: reserve_items, unreserve', :'ap_r2')) v (call, id)
  LEFT JOIN :"ext".hc_stock_reservations r ON r.id = v.id
 ORDER BY v.call;
SELECT product_id, stock, reserved FROM :"ext".hc_inventory
 WHERE product_id LIKE :'s' || '-%' ORDER BY product_id;
-- Every function that changes state wrote its ledger rows, as its caller.
SELECT function, event, actor, pg_catalog.count(*) AS entries
  FROM :"ext".hc_ledger WHERE entity_id LIKE :'s' || '-%'
 GROUP BY function, event, actor ORDER BY function, event, actor;
SELECT pg_catalog.has_function_privilege(:'grantee_app', :'ext' || '.hc_hold(text,text,text,interval)', 'EXECUTE') AS grant_app_reached,
       pg_catalog.has_function_privilege(:'grantee_op', :'ext' || '.hc_stock_set(text,integer)', 'EXECUTE') AS grant_operator_reached;
-- The leases and attempts, where they exist: true when every call reached them.
\set locks_reached true
\if :have_locks
SELECT :'su_token' <> '' AND :'ap_token' <> '' AND :'su_released' AND :'ap_released' AS locks_reached \gset
\if :have_attempts
SELECT :'locks_reached' AND :'su_complete' = 'COMPLETED' AND :'ap_complete' = 'COMPLETED'
       AND :'su_reset' = 'PROCEED' AS locks_reached \gset
\endif
\endif
SELECT :'locks_reached' AS leases_and_attempts_reached;
