#!/usr/bin/env bash
# The Node package's suite (make test: "suite full clients/node"): installs the package's
# dependencies from the npm registry, type-checks index.d.ts with a typed usage file
# (test/types.ts), packs the package and installs the tarball into a temporary project, then
# runs test/*.test.js there with node --test against the running server, in a database of its
# own with the recommended install: the extension in its schema, application roles granted
# with hc_grant_app (one with search_path = public, one with the schema on it).
# It works in a copy of the package: node_modules never lands in the tree.
# Prints "ok - ..." / "not ok - ..." lines (node's TAP, top-level lines only: the lines of its
# subtests and diagnostics become "#" comments); exits non-zero on a failure.
# Needs PGHOST, PGPORT, PGUSER (a superuser) for a running server with holdcommit installed,
# node and npm.  HC_NODE: the node that runs the tests (default: node), to try another version.
set -uo pipefail
cd "$(dirname "$0")"
top=$(cd ../.. && pwd)
. "$top/test/harness/tap.bash"
: "${PGHOST:?set PGHOST, PGPORT and PGUSER}" "${PGPORT:?}" "${PGUSER:?}"
unset PGDATABASE PGOPTIONS

db=hc_node
app_role=hc_node_app
path_role=hc_node_path
work=$(mktemp -d)
failed=0
cleanup() {
    psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" \
        -c "DROP ROLE IF EXISTS $app_role" -c "DROP ROLE IF EXISTS $path_role" >/dev/null 2>&1
    rm -rf "$work"
}
trap cleanup EXIT

# step NAME COMMAND...: one assertion, the command's output as comments if it failed.
step() {
    local name=$1
    shift
    if "$@" >"$work/step.log" 2>&1; then
        echo "ok - $name"
    else
        echo "not ok - $name"
        sed -n '1,40s/^/#   /p' "$work/step.log"
        failed=1
    fi
}

# A copy of the package, so that node_modules and the tarball stay out of the tree.
mkdir "$work/pkg"
tar -cf - --exclude=./node_modules --exclude='./*.tgz' . | tar -xf - -C "$work/pkg"
cd "$work/pkg"
npm_flags=(--no-audit --no-fund --loglevel=error)
step "npm ci installs pg, @types/pg and typescript from package-lock.json" npm ci "${npm_flags[@]}"
step "tsc --noEmit -p . type-checks index.d.ts and the typed usage file test/types.ts" npx --no-install tsc --noEmit -p .
step "clients/node/sqlstates.json is a copy of clients/sqlstates.json" cmp sqlstates.json "$top/clients/sqlstates.json"
step "npm pack makes the tarball" npm pack --pack-destination "$work" "${npm_flags[@]}"
check "the tarball holds the package's files, and no test or node_modules" \
    "$(tar tzf "$work"/holdcommit-*.tgz 2>/dev/null | sort | tr '\n' ' ')" \
    "package/README.md package/calls.js package/errors.js package/index.d.ts package/index.js package/lease.js package/package.json package/sqlstates.json "
mkdir -p "$work/app/test"
echo '{"name": "hc-node-app", "private": true, "type": "module"}' >"$work/app/package.json"
step "npm install of the tarball into a new project (pg comes with it)" \
    bash -c "cd '$work/app' && npm install ${npm_flags[*]} '$work'/holdcommit-*.tgz && test -f node_modules/pg/package.json"

if ! psql -X -q -v ON_ERROR_STOP=1 -d postgres >"$work/setup.log" 2>&1 <<SQL; then
DROP DATABASE IF EXISTS $db WITH (FORCE);
DROP ROLE IF EXISTS $app_role;
DROP ROLE IF EXISTS $path_role;
CREATE DATABASE $db;
CREATE ROLE $app_role LOGIN;
CREATE ROLE $path_role LOGIN;
\c $db
CREATE EXTENSION holdcommit;
SELECT holdcommit.hc_grant_app('$app_role');
SELECT holdcommit.hc_grant_app('$path_role');
ALTER ROLE $app_role IN DATABASE $db SET search_path = public;
ALTER ROLE $path_role IN DATABASE $db SET search_path = holdcommit, public;
SQL
    echo "not ok - the suite's database $db and roles"
    sed 's/^/#   /' "$work/setup.log"
    exit 1
fi

cp test/*.test.js test/helpers.js "$work/app/test/"
# node's TAP: "ok N - name" for each top-level test at the start of a line, its subtests and
# its YAML diagnostics indented: only the top-level lines count, the rest become comments
# (without the lines that only frame them).
(cd "$work/app" && HC_NODE_DB=$db HC_NODE_APP_ROLE=$app_role HC_NODE_PATH_ROLE=$path_role \
    HC_SQLSTATES=$top/clients/sqlstates.json timeout 300 "${HC_NODE:-node}" --test --test-reporter=tap test/*.test.js) \
    >"$work/node.log" 2>&1
rc=$?
grep -vE '^\s*(# Subtest: .*|---|\.\.\.|duration_ms: .*)$' "$work/node.log" | sed -E '/^(ok|not ok) /!s/^/# /'
[ "$rc" -eq 0 ] || failed=1
exit "$failed"
