#!/usr/bin/env bash
# The database of make run, holdcommit installed in it as the README says: in
# the extension's own schema, holdcommit, put first on the database's
# search_path (the demo's sessions are the README's psql session).  make run
# (test/demo/run-demo.sh) and its tests (test/load/demo.sh, test/load/erp-story.sh)
# set up their database with it, so that they test the install make run shows.
#   test/demo/demo-db.sh DB      (PGHOST, PGPORT, PGUSER: a superuser; DB exists)
set -euo pipefail
db=${1:?usage: demo-db.sh DATABASE}
psql -X -q -v ON_ERROR_STOP=1 -d "$db" -c "CREATE EXTENSION holdcommit" \
    -c "ALTER DATABASE \"$db\" SET search_path = holdcommit, public"
