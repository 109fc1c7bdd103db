#!/usr/bin/env bash
# The sale story of make run (test/demo/demo.sql) as a test: in a database set up
# as make run sets up its own (test/demo/demo-db.sh: holdcommit in its own schema,
# first on the database's search_path, which overrides the test server's), with
# the background sweeper on every 2 s for it as make run has it.  The story
# plays to its end with only its three refusals, the abandoned hold goes back
# on sale by the sweeper, and the invariants hold.
# Needs PGHOST, PGPORT, PGUSER (a superuser) for a running server; exits 0.
. "$(dirname "$0")/lib.bash"
here=$(dirname "$0")/../..
load_setup hc_demo 5
"$here/test/demo/demo-db.sh" "$db" >/dev/null || { echo "not ok - demo database set up (test/demo/demo-db.sh)"; exit 0; }
check "the demo database has the README's search_path" "$(q "SHOW search_path")" "holdcommit, public"
sweeper_on "$db" 2
waited=$(wait_for 60 "SELECT state FROM hc_sweeper_databases WHERE database = current_database()" ok)
check "the sweeper sweeps the demo database, as in make run (${waited} s)" "$waited" "${waited%timeout}"

psql -X -d "$db" <"$here/test/demo/demo.sql" >"$work/demo.out" 2>&1
# Its last statement, hc_check(), returns no rows: its header is the last thing printed.
check "test/demo/demo.sql plays to its end, hc_check() with no rows" \
    "$(grep -v '^$' "$work/demo.out" | tail -n 2 | tr '\n' '/')" " invariant | subject | detail /-----------+---------+--------/"
check "with its three refusals only: RS001, RS003 (too late: refund), RS002 (sold out)" \
    "$(grep -E 'ERROR|FATAL|PANIC' "$work/demo.out" | sed -E 's/"res_[0-9A-Z]+"/"res_<id>"/')" \
    'ERROR:  asset "LOCO-0042" is not available
ERROR:  reservation "res_<id>" has expired
ERROR:  insufficient stock for product "SNEAKER-42"'
check "the abandoned lamp went back on sale by the sweeper" \
    "$(q "SELECT a.status || ' ' || (SELECT string_agg(event || ':' || source, ',' ORDER BY seq)
                                      FROM hc_ledger WHERE entity_id = a.id AND event = 'expire')
            FROM hc_assets a WHERE a.id = 'LAMP-3'")" "AVAILABLE expire:sweep"
check "hc_check() finds nothing" "$(q "SELECT count(*) FROM hc_check()")" "0"
