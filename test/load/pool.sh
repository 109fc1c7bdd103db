#!/usr/bin/env bash
# The worker pool of the lease and attempt calls as a shared resource, on a
# server of its own (port + 17, holdcommit preloaded, holdcommit.max_workers
# 4 then 2): every slot comes back whatever order a caller and its worker
# end in; no role or database takes the whole pool; a heartbeat is answered
# behind contended acquires; a caller whose client has gone stops; a call
# that finds no worker fails with 53000 (test/load/pool.py says each).
# Prints "ok - ..." / "not ok - ..."; exits 0.
set -uo pipefail
cd "$(dirname "$0")/../.."
. test/harness/tap.bash

port=$((${HC_TEST_PORT:-54330} + 17))
host=${TMPDIR:-/tmp}/holdcommit-$port
trap 'test/harness/server.sh stop "$port"' EXIT
if ! HC_PRELOAD=holdcommit HC_CONF="holdcommit.worker_idle_timeout = 5" \
    test/harness/server.sh start "$port" >/dev/null 2>&1; then
    echo "not ok - a server with holdcommit preloaded starts on port $port"
    exit 0
fi
PGHOST=$host PGPORT=$port PGUSER=postgres "${HC_PYTHON:-/usr/bin/python3}" test/load/pool.py ||
    echo "not ok - test/load/pool.py exited $?"
exit 0
