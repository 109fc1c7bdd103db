#!/usr/bin/env bash
# make run: install what is missing, build, start a throwaway server with
# holdcommit preloaded and its sweeper on, load a small catalogue and play
# the story of a sale.
set -euo pipefail
cd "$(dirname "$0")/../.."

port=${HC_RUN_PORT:-54320}
export PGHOST=${TMPDIR:-/tmp}/holdcommit-$port PGPORT=$port PGUSER=postgres

test/harness/deps.sh
make -s
if [ -n "${HC_PGROOT:-}" ]; then
    # A private copy of the PostgreSQL tree (test/harness/server.sh runs its server from there).
    make -s install DESTDIR="$HC_PGROOT"
elif [ "$(id -u)" -eq 0 ]; then
    make -s install
elif [ ! -w "$(pg_config --pkglibdir)" ]; then
    echo "run 'sudo make install' first, then make run again" >&2
    exit 1
else
    make -s install
fi
# The background sweeper runs every 2 s here (30 s by default), so that the
# demo can show an abandoned hold going back on sale with no call.  The server
# has PostgreSQL's default search_path, not the test suites' one.
HC_SEARCH_PATH= HC_SWEEP_INTERVAL=2 test/harness/server.sh start "$port"
psql -qX -d postgres -c "CREATE DATABASE holdcommit_demo"
# As the README installs it: the extension's own schema, first on the search_path.
test/demo/demo-db.sh holdcommit_demo
psql -X -d holdcommit_demo <test/demo/demo.sql 2>&1
echo
echo "== Dual-layer locking: the ERP story of one payment (test/demo/erp-story.sh, about 80 s)"
test/demo/erp-story.sh holdcommit_demo

cat <<MSG

holdcommit is running on a throwaway server (port $port). Connect with:

    psql -h $PGHOST -p $port -U postgres holdcommit_demo

Stop it and remove its data with: make stop
MSG
