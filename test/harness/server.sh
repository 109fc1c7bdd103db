#!/usr/bin/env bash
# A throwaway PostgreSQL server with holdcommit preloaded (HC_PRELOAD: the
# shared_preload_libraries instead of holdcommit,pg_cron, or holdcommit where
# the major has no pg_cron (19 in its chroot: test/majors/chroot.sh); empty: none;
# HC_MAX_WORKER_PROCESSES: max_worker_processes instead of 32; HC_SEARCH_PATH:
# the server's search_path instead of 'public, holdcommit'; empty: PostgreSQL's default;
# HC_LISTEN_ADDRESSES: listen_addresses instead of none, the socket only;
# HC_CONF: more lines for postgresql.conf (a Citus node's, test/citus/cluster.sh);
# HC_LD_PRELOAD: the server's LD_PRELOAD, a sanitizer's runtime: test/packaging/sanitize.sh).
#   test/harness/server.sh start PORT   initdb (if needed) and start, in /tmp/holdcommit-PORT
#   test/harness/server.sh stop PORT    stop it and remove its data
# Its socket and data live where the postgres user can write; as root the
# server runs as postgres.  Clients connect as postgres over the socket (trust).
set -euo pipefail

cmd=${1:?usage: server.sh start|stop PORT}
port=${2:?usage: server.sh start|stop PORT}
# The major of PG_CONFIG (default pg_config: the machine's newest, 15 here; a chroot's of
# test/majors/run.sh sets it).  HC_PGROOT: a private copy of the PostgreSQL tree (a
# developer's sandbox); default the system's.
bin=$(realpath -ms "${HC_PGROOT:-}$("${PG_CONFIG:-pg_config}" --bindir)")
base=${TMPDIR:-/tmp}/holdcommit-$port
data=$base/data

# As postgres, from /: the clone may be a directory postgres cannot enter
# (initdb and pg_ctl said "could not change directory to" it).
as_server() {
    if [ "$(id -u)" -eq 0 ]; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}

case $cmd in
start)
    if [ -f "$data/postmaster.pid" ] && as_server "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; then
        as_server "$bin/pg_ctl" -D "$data" -m immediate stop >/dev/null
    fi
    rm -rf "$base"
    mkdir -p "$base"
    [ "$(id -u)" -eq 0 ] && chown postgres: "$base"
    as_server "$bin/initdb" -D "$data" -U postgres --auth=trust --no-sync -E UTF8 --locale=C.UTF-8 >/dev/null
    # The suites call the functions unqualified, with the extension's schema on the
    # search_path, after public (their own tables stay there); make run's server has none.
    search_path=${HC_SEARCH_PATH-public, holdcommit}
    cron=$(ls "${HC_PGROOT:-}$("${PG_CONFIG:-pg_config}" --pkglibdir)/pg_cron.so" 2>/dev/null || true)
    as_server tee -a "$data/postgresql.conf" >/dev/null <<CONF
port = $port
listen_addresses = '${HC_LISTEN_ADDRESSES:-}'
unix_socket_directories = '$base'
shared_preload_libraries = '${HC_PRELOAD-holdcommit${cron:+,pg_cron}}'
max_connections = 250
max_worker_processes = ${HC_MAX_WORKER_PROCESSES:-32}
# The background sweeper is off unless a test turns it on for its own
# databases (or make run sets HC_SWEEP_INTERVAL), so that suites that
# expire holds see them unswept.
holdcommit.sweep_interval = ${HC_SWEEP_INTERVAL:-0}
# pg_cron, for the test of the cron recipe: jobs run as background workers.
cron.database_name = 'postgres'
cron.use_background_workers = on
fsync = off
synchronous_commit = off
full_page_writes = off
log_min_messages = warning
${search_path:+search_path = '$search_path'}
log_line_prefix = '%m [%p] %q%a '
${HC_CONF:-}
CONF
    # Only the server (pg_ctl and the postmaster it starts) gets HC_LD_PRELOAD; it forks
    # its backends and workers without exec, so they have the runtime too.
    as_server env ${HC_LD_PRELOAD:+LD_PRELOAD="$HC_LD_PRELOAD"} \
        "$bin/pg_ctl" -D "$data" -l "$base/server.log" -w -t 60 start >/dev/null
    ;;
stop)
    if [ -d "$data" ]; then
        as_server "$bin/pg_ctl" -D "$data" -m fast -w stop >/dev/null 2>&1 || true
        rm -rf "$base"
    fi
    ;;
*)
    echo "usage: server.sh start|stop PORT" >&2
    exit 2
    ;;
esac
