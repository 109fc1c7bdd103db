-- The background sweeper has not run in this database: the test server starts
-- with holdcommit.sweep_interval = 0 (test/load/sweep.sh turns it on for its own
-- databases).  On a server where it works in this database (make installcheck
-- against any server), that cannot hold, and the check says SKIP
-- (test/expected/sweep_worker_1.out); make test runs it both ways.
SELECT current_database() AS dbname \gset
\i test/harness/sweeper_on.sql
\if :sweeper_on
\echo SKIP: the background sweeper works in this database: not checking that it has not run
\else
SELECT count(*) FROM hc_sweeper_status;
\endif
