-- Sets the psql variable sweeper_on (\gset): whether holdcommit's background
-- sweeper works in the database named by the psql variable dbname on this
-- server, i.e. holdcommit is in shared_preload_libraries, holdcommit.sweep_interval
-- is not 0, and holdcommit.databases is empty or names that database.
-- Read by test/sql/sweep_worker.sql and by make installcheck's note
-- (test/harness/installcheck-server.sql).
SELECT 'holdcommit' = ANY (string_to_array(translate(current_setting('shared_preload_libraries'), ' "', ''), ','))
       AND coalesce(current_setting('holdcommit.sweep_interval', true), '0') NOT IN ('0', '0s', '0ms')
       AND (coalesce(current_setting('holdcommit.databases', true), '') = ''
            OR :'dbname' = ANY (string_to_array(translate(current_setting('holdcommit.databases', true), ' "', ''), ',')))
       AS sweeper_on \gset
