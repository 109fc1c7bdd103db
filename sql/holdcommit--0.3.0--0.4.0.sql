-- holdcommit 0.3.0 to 0.4.0.  Also the second half of 0.4.0's install script,
-- which make joins from sql/holdcommit--0.3.0.sql and this file: whatever is
-- written here runs on a fresh install too, on empty tables.
\echo Use "ALTER EXTENSION holdcommit UPDATE TO '0.4.0'" to load this file. \quit

-- A library running in other sessions learns of an update from a change to
-- pg_proc (src/core/version.c): this one changes nothing else.
ALTER FUNCTION @extschema@.hc_check() VOLATILE;
