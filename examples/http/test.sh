#!/usr/bin/env bash
# End-to-end test of the example HTTP service (run by make test): start it
# against the running test server, drive it with real HTTP requests
# (examples/http/check.py), then do it all again through PgBouncer in
# transaction pooling mode.  Prints "ok - ..." / "not ok - ..." and "# ..."
# figures; exits 0 (the harness counts the lines).
# Needs PGHOST, PGPORT, PGUSER (a superuser) for a running server, Debian's
# python3 with python3-fastapi, python3-uvicorn, python3-psycopg,
# python3-psycopg-pool, python3-venv and python3-setuptools (the package clients/python is
# installed with pip into a venv), and pgbouncer.
#   HC_HTTP_PORT       the service's port on 127.0.0.1 (default 24335, below the ephemeral range)
#   HC_PGBOUNCER_PORT  PgBouncer's port, on a Unix socket only (default 54336)
set -uo pipefail
cd "$(dirname "$0")/../.."
. test/harness/pgbouncer.bash

http_port=${HC_HTTP_PORT:-24335}
bouncer_port=${HC_PGBOUNCER_PORT:-54336}
python=${HC_PYTHON:-/usr/bin/python3}
db=hc_http
role=hc_http_app
work=$(mktemp -d)
chmod 755 "$work"
service_pid=

stop_service() {
    if [ -n "$service_pid" ]; then
        kill "$service_pid" 2>/dev/null
        wait "$service_pid" 2>/dev/null
        service_pid=
    fi
}

cleanup() {
    stop_service
    bouncer_stop "$work"
    psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "DROP ROLE IF EXISTS $role" \
        >/dev/null 2>&1
    rm -rf "$work"
}
trap cleanup EXIT
trap "exit 1" INT TERM

# start_service LABEL DSN [ENV...]: run the service on $http_port, wait until it answers.
start_service() {
    local label=$1 dsn=$2 i
    shift 2
    env HC_DATABASE_URL="$dsn" HC_POOL_SIZE=10 "$@" \
        "$python" examples/http/app.py --host 127.0.0.1 --port "$http_port" >"$work/service-$label.log" 2>&1 &
    service_pid=$!
    for i in $(seq 1 100); do
        curl -sf "http://127.0.0.1:$http_port/healthz" >/dev/null 2>&1 && return 0
        kill -0 "$service_pid" 2>/dev/null || break
        sleep 0.1
    done
    echo "not ok - the service starts ($label)"
    sed 's/^/#   /' "$work/service-$label.log" | tail -20
    return 1
}

# drive LABEL ARGS...: run the HTTP checks against the service.
drive() {
    local label=$1 t0 t1
    shift
    t0=$(date +%s.%N)
    "$python" examples/http/check.py --url "http://127.0.0.1:$http_port" \
        --admin-dsn "host=$PGHOST port=$PGPORT dbname=$db user=$PGUSER" --app-role "$role" \
        --service-pid "$service_pid" --lock-timeout "$lock_timeout" --prefix "$label-" "$@" 2>&1 | sed "s/^ok - /ok - $label: /; s/^not ok - /not ok - $label: /"
    t1=$(date +%s.%N)
    echo "# $label: all checks in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s"
    if grep -qE 'Traceback|ERROR' "$work/service-$label.log"; then
        echo "not ok - $label: the service logged no errors"
        grep -E -A3 'Traceback|ERROR' "$work/service-$label.log" | head -20 | sed 's/^/#   /'
    fi
}

"$python" -c 'import fastapi, uvicorn, psycopg, psycopg_pool' 2>/dev/null || {
    echo "not ok - $python has fastapi, uvicorn, psycopg and psycopg_pool (test/harness/deps.sh)"; exit 0; }
# The service uses holdcommit's Python package: installed with pip into a venv that sees
# Debian's packages, as doc/application.md says (from a copy: pip builds in the tree).
cp -r clients/python "$work/pysrc" && rm -rf "$work/pysrc/build" "$work/pysrc"/*.egg-info
if ! "$python" -m venv --system-site-packages "$work/venv" >"$work/pip.log" 2>&1 ||
   ! "$work/venv/bin/pip" install -q --no-build-isolation --no-index "$work/pysrc" >>"$work/pip.log" 2>&1; then
    echo "not ok - pip installs clients/python into a venv"; sed 's/^/#   /' "$work/pip.log" | tail -10; exit 0
fi
python=$work/venv/bin/python
command -v pgbouncer >/dev/null || { echo "not ok - pgbouncer is installed (test/harness/deps.sh)"; exit 0; }

# The set-up doc/application.md prints (<!-- snippet: run-by examples/http/test.sh setup -->),
# as printed but for the role's name: the extension in its own schema, first on the
# application role's search_path.  The database gets PostgreSQL's default search_path, so
# that the test server's own (which has holdcommit on it) stands in for nothing: check.py
# names the schema, the service relies on its role's search_path alone.
doc=doc/application.md
setup_sql=$(perl -ne 'if (/^\s*<!--\s*snippet:\s*run-by\s+examples\/http\/test\.sh\s+setup\s*-->/) { $m = 1; next }
                     if ($m == 1 && /^```sql\s*$/) { $m = 2; next }
                     if ($m == 2) { last if /^```\s*$/; print }' "$doc")
if [ -z "$setup_sql" ] || ! grep -q shop_app <<<"$setup_sql"; then
    echo "not ok - $doc prints the service's set-up (the sql block after run-by examples/http/test.sh setup)"
    exit 0
fi
echo "# the set-up of $doc, for the role $role:"
sed 's/^/#   /' <<<"$setup_sql"
psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "DROP ROLE IF EXISTS $role" >/dev/null 2>&1
if ! psql -X -q -v ON_ERROR_STOP=1 -d postgres \
        -c "CREATE DATABASE $db" -c "ALTER DATABASE $db SET search_path = \"\$user\", public" >/dev/null ||
   ! sed "s/\bshop_app\b/$role/g" <<<"$setup_sql" | psql -X -q -v ON_ERROR_STOP=1 -d "$db" >/dev/null; then
    echo "not ok - set up database $db and the application role $role as $doc prints"
    exit 0
fi
if [ "$(psql -X -qAt -d "$db" -c "SELECT current_setting('search_path')")" = '"$user", public' ] &&
   [ "$(psql -X -qAt -d "$db" -U "$role" -c "SELECT current_setting('search_path')")" = 'holdcommit, public' ]; then
    echo "ok - in $db the superuser's search_path is PostgreSQL's default, the service's role's holdcommit, public"
else
    echo "not ok - in $db the superuser's search_path is PostgreSQL's default, the service's role's holdcommit, public"
fi
# The bound on a wait for an in-flight key (check.py waits that long).
lock_timeout=$(psql -X -qAt -d "$db" -U "$role" -c "SELECT extract(epoch FROM current_setting('lock_timeout')::interval)")
if [ -n "$lock_timeout" ] && [ "$lock_timeout" != 0 ]; then
    echo "ok - the service's role has a lock_timeout ($lock_timeout s)"
else
    echo "not ok - the service's role has a lock_timeout (got '$lock_timeout')"; lock_timeout=3
fi

echo "# the service connects as $role, given hc_grant_app('$role'), holdcommit first on its search_path"
if start_service direct "host=$PGHOST port=$PGPORT dbname=$db user=$role"; then
    drive direct --sqlstates clients/sqlstates.json
    stop_service
fi

# PgBouncer, its files in $work; whether it started, the check below says.
bouncer_start "$work" "$bouncer_port" "$role $PGUSER" "$db = host=$PGHOST port=$PGPORT dbname=$db" \
    "admin_users = $PGUSER" "default_pool_size = 20" "max_client_conn = 500" \
    "ignore_startup_parameters = extra_float_digits" >/dev/null 2>&1
mode=$(psql -X -qAt -h "$work" -p "$bouncer_port" -U "$PGUSER" -d pgbouncer -c "SHOW CONFIG" 2>/dev/null |
       awk -F'|' '$1 == "pool_mode" { print $2 }')
if [ "$mode" != "transaction" ]; then
    echo "not ok - pgbouncer runs in transaction pooling mode (got '$mode')"
    sed 's/^/#   /' "$work/pgbouncer.log" 2>/dev/null | tail -10
    exit 0
fi
echo "ok - pgbouncer runs in transaction pooling mode on port $bouncer_port"

if start_service pgbouncer "host=$work port=$bouncer_port dbname=$db user=$role" HC_PGBOUNCER=1; then
    drive pgbouncer
    stop_service
    xacts=$(psql -X -qAt -h "$work" -p "$bouncer_port" -U "$PGUSER" -d pgbouncer -c "SHOW STATS" |
            awk -F'|' -v db="$db" '$1 == db { print $2 }')
    if [ "${xacts:-0}" -ge 2000 ]; then
        echo "ok - the requests went through pgbouncer ($xacts transactions)"
    else
        echo "not ok - the requests went through pgbouncer (got ${xacts:-no} transactions)"
    fi
fi
exit 0
