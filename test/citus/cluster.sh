#!/usr/bin/env bash
# A throwaway Citus cluster on loopback for test/citus/run.sh: a coordinator on
# PORT and two workers on PORT+1 and PORT+2, each a test/harness/server.sh server with
# citus and holdcommit preloaded, listening on 127.0.0.1 (Citus' nodes reach
# each other over TCP; initdb's trust covers it).
#   test/citus/cluster.sh start PORT   start the three, make the cluster
#   test/citus/cluster.sh stop PORT    stop them, remove their data
# Needs Citus in the PostgreSQL tree of HC_PGROOT (or the system's):
# test/citus/run.sh skips when it is not there.
set -euo pipefail
cd "$(dirname "$0")/../.."

cmd=${1:?usage: cluster.sh start|stop PORT}
port=${2:?usage: cluster.sh start|stop PORT}
workers="$((port + 1)) $((port + 2))"

node_psql() {
    local p=$1
    shift
    psql -X -q -v ON_ERROR_STOP=1 -h "${TMPDIR:-/tmp}/holdcommit-$p" -p "$p" -U postgres -d postgres "$@"
}

case $cmd in
start)
    for p in $port $workers; do
        # Citus' two-phase commit needs prepared transactions; its deadlock
        # detector runs every 2 s by default, kept so that tests see it.
        HC_PRELOAD=citus,holdcommit HC_LISTEN_ADDRESSES=127.0.0.1 HC_CONF="
max_prepared_transactions = 100
citus.shard_count = 32
wal_level = logical
" test/harness/server.sh start "$p"
        node_psql "$p" -c "CREATE EXTENSION citus"
    done
    node_psql "$port" -c "SELECT citus_set_coordinator_host('127.0.0.1', $port)" >/dev/null
    for p in $workers; do
        node_psql "$port" -c "SELECT citus_add_node('127.0.0.1', $p)" >/dev/null
    done
    ;;
stop)
    for p in $port $workers; do
        test/harness/server.sh stop "$p"
    done
    ;;
*)
    echo "usage: cluster.sh start|stop PORT" >&2
    exit 2
    ;;
esac
