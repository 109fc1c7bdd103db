-- One victim's calls in test/security/victim_calls.sql, as the current role
-- under the search_path in effect: two holds (one extended and committed, one
-- released), two orders (one reserved and finalized, one of items reserved
-- and unreserved), hc_check(), and where they exist a lease with a heartbeat
-- and an attempt.  The operator also grants, and resets its first attempt by
-- hand.  What the calls returned is copied out with \gset under the prefix :p
-- (none, '' or f where a call did not answer).
--
-- Set before loading it:
--   p         the prefix of what it keeps (su_, ap_)
--   who       the tag of its keys, buyer, owner and ref (su, app)
--   commit_asset, release_asset   the assets it holds, then commits or releases
--   checked   the name of hc_check()'s column in the output
--   lease     the lease it takes
--   operator  true for the superuser: grants, and an attempt reset
\set h1 none
\set h2 none
\set r1 none
\set r2 none
\set token ''
\set released f
\set reset none
\set complete none
\set key_hold_1 :s '-' :who '-hold-1'
\set key_hold_2 :s '-' :who '-hold-2'
\set key_reserve_1 :s '-' :who '-reserve-1'
\set key_reserve_2 :s '-' :who '-reserve-2'
\set buyer 'buyer-' :who
\set owner 'owner-' :who
\set ref 'ref-' :who
SELECT reservation_id AS h1 FROM :"ext".hc_hold(:'commit_asset', :'buyer', :'key_hold_1') \gset
SELECT status AS st FROM :"ext".hc_extend(:'h1', '20 minutes') \gset
SELECT status AS st FROM :"ext".hc_commit(:'h1') \gset
SELECT reservation_id AS h2 FROM :"ext".hc_hold(:'release_asset', :'buyer', :'key_hold_2') \gset
SELECT status AS st FROM :"ext".hc_release(:'h2') \gset
SELECT reservation_id AS r1 FROM :"ext".hc_reserve(:'p1', 2, :'buyer', :'key_reserve_1') \gset
SELECT status AS st FROM :"ext".hc_finalize(:'r1') \gset
SELECT reservation_id AS r2 FROM :"ext".hc_reserve_items(:'items', :'buyer', :'key_reserve_2') \gset
SELECT status AS st FROM :"ext".hc_unreserve(:'r2') \gset
SELECT subject AS :"checked" FROM :"ext".hc_check();
\if :operator
SELECT :"ext".hc_grant_app(:'grantee_app') AS granted \gset
SELECT :"ext".hc_grant_operator(:'grantee_op') AS granted \gset
\if :have_grant
SELECT :"ext".hc_grant(:'grantee_op', '{}', '{}') AS granted \gset
\endif
\endif
\if :have_locks
SELECT :"ext".hc_lock_acquire(:'lease', :'owner') AS token \gset
SELECT :"ext".hc_lock_heartbeat(:'lease', :'owner', :'token') AS beat \gset
\if :have_attempts
SELECT status AS attempt FROM :"ext".hc_attempt_begin(:'lease', :'owner', :'token') \gset
\if :operator
SELECT status AS reset FROM :"ext".hc_attempt_reset(:'lease', 'checked by hand') \gset
SELECT status AS attempt FROM :"ext".hc_attempt_begin(:'lease', :'owner', :'token') \gset
\endif
SELECT status AS complete FROM :"ext".hc_attempt_complete(:'lease', :'owner', :'token', :'ref') \gset
\endif
SELECT :"ext".hc_lock_release(:'lease', :'owner', :'token') AS released \gset
\endif
-- Untyped literals only: no name is looked up under this search_path.
SELECT :'h1' AS h1, :'h2' AS h2, :'r1' AS r1, :'r2' AS r2, :'token' AS token, :'released' AS released,
       :'reset' AS reset, :'complete' AS complete \gset :p
