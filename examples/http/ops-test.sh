#!/usr/bin/env bash
# The operators' page, /ops of the example service (examples/http/ops.py), on a server of
# its own (port + 18: holdcommit preloaded, the sweeper every second, holdcommit.notify on):
# HTTP authentication (401 without it, or with a wrong password), the page's views as a
# monitoring role (hc_grant_monitor) that reads no key, buyer or owner, and the page itself
# in Debian's Chromium, headless (examples/http/ops_browser.py): it loads, counts move while
# a sale runs, the sweeper's state shows, no console error, and its screenshot.
# Prints "ok - ..." / "not ok - ..."; exits 0.
#   HC_OPS_SCREENSHOT  where the screenshot goes (default test/tmp/ops.png; make ops-screenshot
#                      writes doc/images/ops.png, which doc/operations.md shows)
#   HC_OPS_HTTP_PORT   the service's port on 127.0.0.1 (default HC_TCP_PORT + 11)
set -uo pipefail
cd "$(dirname "$0")/../.."
. test/harness/tap.bash

test_port=${HC_TEST_PORT:-54330}
port=$((test_port + 18))
host=${TMPDIR:-/tmp}/holdcommit-$port
http_port=${HC_OPS_HTTP_PORT:-$((${HC_TCP_PORT:-$((20000 + test_port % 10000))} + 11))}
screenshot=${HC_OPS_SCREENSHOT:-test/tmp/ops.png}
python=${HC_PYTHON:-/usr/bin/python3}
db=hc_ops
password=ops-$RANDOM$RANDOM
work=$(mktemp -d)
chmod 755 "$work"
service_pid=
cleanup() {
    [ -n "$service_pid" ] && kill "$service_pid" 2>/dev/null && wait "$service_pid" 2>/dev/null
    test/harness/server.sh stop "$port" >/dev/null 2>&1
    rm -rf "$work"
}
trap cleanup EXIT

for need in /usr/bin/chromium /usr/bin/chromedriver; do
    [ -x "$need" ] || { echo "not ok - $need is installed (test/harness/deps.sh)"; exit 0; }
done
"$python" -c 'import selenium, fastapi, uvicorn, psycopg_pool' 2>/dev/null ||
    { echo "not ok - $python has selenium, fastapi, uvicorn and psycopg_pool (test/harness/deps.sh)"; exit 0; }
if ! HC_PRELOAD=holdcommit HC_SWEEP_INTERVAL=1 HC_CONF="holdcommit.notify = on" \
    test/harness/server.sh start "$port" >"$work/server.log" 2>&1; then
    echo "not ok - a server with holdcommit preloaded starts on port $port"; sed 's/^/#   /' "$work/server.log"; exit 0
fi
export PGHOST=$host PGPORT=$port PGUSER=postgres
q() { psql -X -qAt -v ON_ERROR_STOP=1 -d "$db" -c "$1"; }
psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE DATABASE $db" >/dev/null &&
q "CREATE EXTENSION holdcommit" &&
q "CREATE ROLE hc_ops_app LOGIN; CREATE ROLE hc_ops_monitor LOGIN" &&
q "SELECT holdcommit.hc_grant_app('hc_ops_app'), holdcommit.hc_grant_monitor('hc_ops_monitor')" >/dev/null &&
q "SELECT count(holdcommit.hc_asset_add('A-' || i)) FROM generate_series(0, 199) i" >/dev/null &&
q "SELECT count(holdcommit.hc_stock_set('P-' || i, 1000)) FROM generate_series(1, 3) i" >/dev/null &&
q "SELECT holdcommit.hc_lock_acquire('OPS-L1', 'ops-worker', '1 hour', 0)" >/dev/null &&
q "SELECT (holdcommit.hc_attempt_begin('OPS-L1', 'ops-worker', 1, '0 seconds', 1)).status" >/dev/null &&
[ "$(q "SELECT (holdcommit.hc_attempt_begin('OPS-L1', 'ops-worker', 1, '0 seconds', 1)).status")" = MANUAL_REVIEW ] ||
    { echo "not ok - database $db set up (a lease held, an attempt awaiting review)"; exit 0; }

check "ops: the monitoring role reads the page's views, none with a key, a buyer or an owner" \
    "$(psql -X -qAt -d "$db" -U hc_ops_monitor -c "SELECT (SELECT count(*) FROM holdcommit.hc_ops_products),
              (SELECT count(*) FROM holdcommit.hc_ops_sales),
              (SELECT count(*) > 0 FROM holdcommit.hc_ops_sweeper WHERE database = 'hc_ops'),
              (SELECT count(*) FROM information_schema.columns WHERE table_schema = 'holdcommit'
                  AND table_name LIKE 'hc\_ops\_%' AND column_name ~ '(^|_)(key|buyer|owner)(_id)?$')")" "3|60|t|0"
check "ops: the monitoring role reads no reservation" \
    "$(psql -X -qAt -d "$db" -U hc_ops_monitor -c "SELECT count(*) FROM holdcommit.hc_reservations" 2>&1 |
       grep -c 'permission denied')" "1"

# The service as test.sh runs it, with the page's settings.
cp -r clients/python "$work/pysrc" && rm -rf "$work/pysrc/build" "$work/pysrc"/*.egg-info
if ! "$python" -m venv --system-site-packages "$work/venv" >"$work/pip.log" 2>&1 ||
   ! "$work/venv/bin/pip" install -q --no-build-isolation --no-index "$work/pysrc" >>"$work/pip.log" 2>&1; then
    echo "not ok - pip installs clients/python into a venv"; sed 's/^/#   /' "$work/pip.log" | tail -10; exit 0
fi
base=http://127.0.0.1:$http_port
# serve LOG [ENV...]: the service on $http_port as the application role, with ENV; it
# answers /healthz within 30 s, or the suite ends there.
serve() {
    local log=$1 i
    shift
    env HC_DATABASE_URL="host=$host port=$port dbname=$db user=hc_ops_app" HC_POOL_SIZE=2 \
        HC_OPS_USER=ops HC_OPS_PASSWORD="$password" "$@" \
        "$work/venv/bin/python" examples/http/app.py --host 127.0.0.1 --port "$http_port" >"$work/$log" 2>&1 &
    service_pid=$!
    for i in $(seq 1 300); do
        curl -sf "$base/healthz" >/dev/null 2>&1 && return 0
        kill -0 "$service_pid" 2>/dev/null || break
        sleep 0.1
    done
    echo "not ok - ops: the service starts ($log)"; sed 's/^/#   /' "$work/$log" | tail -10; exit 0
}
# Snapshots every 60 s without notifications: what moves within seconds moved on LISTEN.
serve service.log HC_OPS_DATABASE_URL="host=$host port=$port dbname=$db user=hc_ops_monitor" \
    HC_OPS_POLL=60 HC_OPS_MAX_VIEWERS=3
status() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
check "ops: /ops without credentials is 401, and asks for Basic" \
    "$(status "$base/ops") $(curl -s -o /dev/null -D - "$base/ops" | tr -d '\r' | grep -ci '^www-authenticate: basic')" "401 1"
check "ops: a wrong password, a wrong user, another scheme: 401" \
    "$(status -u ops:wrong "$base/ops") $(status -u admin:"$password" "$base/ops") $(status -H 'Authorization: Bearer x' "$base/ops/data")" \
    "401 401 401"
check "ops: /ops/data and /ops/events without credentials: 401" \
    "$(status "$base/ops/data") $(status --max-time 2 "$base/ops/events")" "401 401"
monitors() { q "SELECT count(*) FROM pg_stat_activity WHERE usename = 'hc_ops_monitor'"; }
check "ops: requests without credentials open no connection" "$(monitors)" "0"
check "ops: /ops/data with them: a snapshot of every part" \
    "$(curl -s -u ops:"$password" "$base/ops/data" | "$python" -c 'import json, sys; d = json.load(sys.stdin)
print(sorted(d), len(d["products"]), d["product_count"], len(d["sales"]))')" \
    "['at', 'metrics', 'product_count', 'products', 'sales', 'sweeper', 'updates'] 3 3 60"
check "ops: the page sends its own script and style only (Content-Security-Policy), and no frame may hold it" \
    "$(curl -s -o /dev/null -D - -u ops:"$password" "$base/ops" | tr -d '\r' |
       grep -ciE "^content-security-policy: default-src 'none'; script-src 'sha256-|^x-content-type-options: nosniff")" "2"

# Viewers share two connections; one more than HC_OPS_MAX_VIEWERS is 503; the listener,
# terminated, comes back; after the last viewer the connections close.
viewers=()
for i in 1 2 3; do
    curl -s -N -u ops:"$password" --max-time 12 "$base/ops/events" >"$work/stream-$i" 2>/dev/null &
    viewers+=($!)
done
sleep 2
check "ops: three viewers share two connections of the monitoring role" "$(monitors)" "2"
check "ops: a fourth viewer is refused (503) at HC_OPS_MAX_VIEWERS = 3" \
    "$(status -u ops:"$password" --max-time 2 "$base/ops/events")" "503"
q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'holdcommit ops: listen'" >/dev/null
listens() { q "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'holdcommit ops: listen' AND query LIKE 'LISTEN%'"; }
for i in $(seq 1 50); do [ "$(listens)" = 1 ] && break; sleep 0.1; done
check "ops: the listener, terminated, listens again" "$(listens)" "1"
wait "${viewers[@]}"
check "ops: every viewer got a snapshot" "$(grep -l '^data: {' "$work"/stream-* | wc -l)" "3"
for i in $(seq 1 50); do [ "$(monitors)" = 0 ] && break; sleep 0.1; done
check "ops: after the last viewer, the connections are closed" "$(monitors)" "0"

"$python" examples/http/ops_browser.py "$base/ops" ops "$password" "host=$host port=$port dbname=$db user=postgres" \
    "$screenshot" || echo "not ok - examples/http/ops_browser.py exited $?"
if grep -qE 'Traceback|ERROR' "$work/service.log"; then
    echo "not ok - ops: the service logged no errors"
    grep -E -A3 'Traceback|ERROR' "$work/service.log" | head -20 | sed 's/^/#   /'
else
    echo "ok - ops: the service logged no errors"
fi

# Without HC_OPS_DATABASE_URL the page is not served, whatever the credentials.
kill "$service_pid" 2>/dev/null && wait "$service_pid" 2>/dev/null
serve service-off.log
check "ops: without HC_OPS_DATABASE_URL, /ops, /ops/data and /ops/events are 404" \
    "$(status -u ops:"$password" "$base/ops") $(status -u ops:"$password" "$base/ops/data") $(status -u ops:"$password" --max-time 2 "$base/ops/events")" \
    "404 404 404"
exit 0
