-- holdcommit 0.1.0 -> 0.2.0.  Installing 0.2.0 directly (holdcommit--0.2.0.sql)
-- and updating from 0.1.0 with this script give the same schema; make test
-- compares the two and checks that data made under 0.1.0 survives.

\echo Use "ALTER EXTENSION holdcommit UPDATE TO '0.2.0'" to load this file. \quit
