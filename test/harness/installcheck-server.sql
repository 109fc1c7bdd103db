-- make installcheck's first step (REGRESS_PREP in the Makefile): against the
-- server of PGHOST/PGPORT, say what the suites need and what they will skip
-- there.  psql -v dbname=the regression database.
\set QUIET on
\set ON_ERROR_STOP on
SELECT rolsuper AS superuser FROM pg_roles WHERE rolname = current_user \gset
\if :superuser
\else
\echo 'installcheck: the suites need a superuser (PGUSER);' :USER 'is not one'
\endif
SELECT count(*) > 0 AS available FROM pg_available_extensions WHERE name = 'holdcommit' \gset
\if :available
\else
\echo 'installcheck: holdcommit is not installed on this server (make install)'
\endif
SELECT 'holdcommit' = ANY (string_to_array(translate(current_setting('shared_preload_libraries'), ' "', ''), ','))
       AS preloaded \gset
\if :preloaded
\else
\echo 'installcheck: holdcommit is not in shared_preload_libraries: no test here needs it; the background sweeper is tested by make test (load/sweep, load/sweep-bulk, load/cron)'
\endif
\i test/harness/sweeper_on.sql
\if :sweeper_on
\echo 'SKIP sweep_worker: the background sweeper works in' :dbname 'on this server (holdcommit.sweep_interval, holdcommit.databases): its check that no sweeper ran there is skipped'
\endif
