-- A round of test/sql/owner_attack.sql: the victims call every function as
-- round :round; then no foreign code ran and the owner is no superuser.
\set s s :round
\set grantee_app regress_hc_grantee_app_ :round
\set grantee_op regress_hc_grantee_op_ :round
\i test/security/victim_calls.sql
SELECT during, what, ran_as, session, count(*) FROM attacker.log GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4;
SELECT rolsuper AS attacker_is_superuser FROM pg_roles WHERE rolname = 'regress_hc_dbowner';
TRUNCATE attacker.log;
ALTER ROLE regress_hc_dbowner NOSUPERUSER;
