# A private PgBouncer in front of the server of PGHOST and PGPORT, for
# test/load/pgbouncer.sh and examples/http/test.sh (sourced).  PgBouncer
# refuses to run as root: then it runs as postgres, its files in a directory
# postgres owns.
#   as_postgres CMD...   run CMD, as postgres when we are root
#   bouncer_start DIR PORT USERS DATABASE [SETTING...]
#       write DIR/pgbouncer.ini and start PgBouncer as a daemon: DATABASE is
#       its line of [databases], USERS (separated by spaces) log in with no
#       password, it listens on DIR's socket for PORT only (no TCP), pools by
#       transaction, logs to DIR/pgbouncer.log, and each SETTING is one more
#       line of [pgbouncer].  Returns once the socket is there (at most 5 s);
#       false if PgBouncer refused to start.
#   bouncer_stop DIR     stop DIR's PgBouncer by its pidfile, wait until it has ended
as_postgres() {
    if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

bouncer_start() {
    local dir=$1 port=$2 users=$3 database=$4 user i
    shift 4
    {
        printf '[databases]\n%s\n\n[pgbouncer]\n' "$database"
        printf '%s\n' "listen_addr =" "listen_port = $port" "unix_socket_dir = $dir" "auth_type = trust" \
            "auth_file = $dir/userlist.txt" "pool_mode = transaction" "$@" \
            "logfile = $dir/pgbouncer.log" "pidfile = $dir/pgbouncer.pid"
    } >"$dir/pgbouncer.ini"
    for user in $users; do printf '"%s" ""\n' "$user"; done >"$dir/userlist.txt"
    [ "$(id -u)" -eq 0 ] && chown postgres: "$dir" "$dir/pgbouncer.ini" "$dir/userlist.txt"
    as_postgres "$(command -v pgbouncer || echo /usr/sbin/pgbouncer)" -d -q "$dir/pgbouncer.ini" || return 1
    for i in $(seq 1 50); do
        [ -S "$dir/.s.PGSQL.$port" ] && break
        sleep 0.1
    done
}

bouncer_stop() {
    local pid i
    [ -s "$1/pgbouncer.pid" ] || return 0
    pid=$(cat "$1/pgbouncer.pid")
    kill "$pid" 2>/dev/null
    for i in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null
}
