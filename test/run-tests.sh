#!/usr/bin/env bash
# make test: build, install, start a throwaway server, run every suite
# (regression, isolation, README, docs, upgrade, pgTAP, load, the example
# HTTP service, the postgres_exporter queries, the versions, the PGXN archive
# and the Debian package), remove the server, and end with "N passed, N
# failed".  Exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/.."

port=${HC_TEST_PORT:-54330}
export PGHOST=${TMPDIR:-/tmp}/holdcommit-$port PGPORT=$port PGUSER=postgres
# The example service, its PgBouncer, the Debian package's server and postgres_exporter,
# next to the test server.
export HC_HTTP_PORT=${HC_HTTP_PORT:-$((port + 5))} HC_PGBOUNCER_PORT=${HC_PGBOUNCER_PORT:-$((port + 6))}
export HC_PKG_PORT=${HC_PKG_PORT:-$((port + 7))} HC_EXPORTER_PORT=${HC_EXPORTER_PORT:-$((port + 8))}
out=test/tmp
passed=0
failed=0

fail_setup() { echo "$1" >&2; echo "0 passed, 1 failed"; exit 1; }

test/deps.sh || fail_setup "missing packages"
make -s WERROR=-Werror >/dev/null || fail_setup "build failed"
if [ -n "${HC_PGROOT:-}" ]; then
    make -s install DESTDIR="$HC_PGROOT" >/dev/null || fail_setup "install failed"
elif [ "$(id -u)" -eq 0 ]; then
    make -s install >/dev/null || fail_setup "install failed"
fi
rm -rf "$out" results output_iso && mkdir -p "$out"
test/server.sh start "$port" || fail_setup "server did not start"
trap 'test/server.sh stop "$port"' EXIT

# Count "... ok" / "... FAILED" lines of pg_regress and pg_isolation_regress.
count_regress() {
    local log=$1 ok bad
    ok=$(grep -cE '\.\.\. ok' "$log")
    bad=$(grep -cE '\.\.\. FAILED|\.\.\. failed' "$log")
    passed=$((passed + ok))
    failed=$((failed + bad))
    [ "$ok" -eq 0 ] && [ "$bad" -eq 0 ] && failed=$((failed + 1))
}

echo "== regression and isolation"
make -s installcheck 2>&1 | tee "$out/installcheck.log"
installcheck_rc=${PIPESTATUS[0]}
count_regress "$out/installcheck.log"
# A suite that stops half-way lists no FAILED line for what it never ran.
if [ "$installcheck_rc" -ne 0 ] && ! grep -qE '\.\.\. (FAILED|failed)' "$out/installcheck.log"; then
    echo "installcheck exited $installcheck_rc without a failed test"
    failed=$((failed + 1))
fi
for d in regression.diffs output_iso/regression.diffs; do
    [ -s "$d" ] && { echo "-- $d"; head -200 "$d"; }
done

echo "== README examples"
# Each SQL block of README.md must stand verbatim in sql/readme.sql, whose
# output the regression suite checks.
perl -0777 -e '
    open my $r, "<", "README.md" or die; my $readme = <$r>;
    open my $t, "<", "sql/readme.sql" or die; my $tested = <$t>;
    my $i = 0;
    while ($readme =~ /```sql\n(.*?)```/sg) {
        $i++;
        print((index($tested, $1) >= 0 ? "ok" : "not ok"), " - README sql block $i is tested in sql/readme.sql\n");
    }' >"$out/readme.log"
cat "$out/readme.log"
passed=$((passed + $(grep -c '^ok ' "$out/readme.log")))
failed=$((failed + $(grep -c '^not ok ' "$out/readme.log")))

# Scripts that print "ok - ..." / "not ok - ..." lines and exit 0.
count_tap() {
    local name=$1 rc
    shift
    "$@" >"$out/$name.log" 2>&1
    rc=$?
    cat "$out/$name.log"
    ok=$(grep -cE '^ok ' "$out/$name.log")
    bad=$(grep -cE '^not ok ' "$out/$name.log")
    passed=$((passed + ok))
    failed=$((failed + bad))
    [ $rc -ne 0 ] && [ "$bad" -eq 0 ] && failed=$((failed + 1))
    [ "$ok" -eq 0 ] && [ "$bad" -eq 0 ] && failed=$((failed + 1))
}

echo "== reference documentation"
# Every function, setting, table and type of the extension has its heading in
# doc/*.md, and every heading there names something that exists.
count_tap docs test/docs.sh

echo "== upgrade"
# 0.1.0 then ALTER EXTENSION UPDATE equals 0.2.0 installed, and keeps its data.
count_tap upgrade test/upgrade.sh

echo "== pgTAP"
psql -qX -d postgres -c "CREATE DATABASE hc_tap" >/dev/null
psql -qX -d hc_tap -c "CREATE EXTENSION pgtap; CREATE EXTENSION holdcommit;" >/dev/null
pg_prove -v -d hc_tap test/pgtap/*.sql >"$out/pgtap.log" 2>&1
prove_rc=$?
cat "$out/pgtap.log"
ok=$(grep -cE '^\s*ok [0-9]+' "$out/pgtap.log")
bad=$(grep -cE '^\s*not ok [0-9]+' "$out/pgtap.log")
passed=$((passed + ok))
failed=$((failed + bad))
[ $prove_rc -ne 0 ] && [ "$bad" -eq 0 ] && failed=$((failed + 1))

echo "== load"
for t in test/load/*.sh; do
    bash "$t" >"$out/$(basename "$t").log" 2>&1
    rc=$?
    cat "$out/$(basename "$t").log"
    ok=$(grep -cE '^ok ' "$out/$(basename "$t").log")
    bad=$(grep -cE '^not ok ' "$out/$(basename "$t").log")
    passed=$((passed + ok))
    failed=$((failed + bad))
    [ $rc -ne 0 ] && [ "$bad" -eq 0 ] && failed=$((failed + 1))
done

echo "== example HTTP service, directly and through PgBouncer"
count_tap http examples/http/test.sh

echo "== postgres_exporter queries"
count_tap exporter "${HC_PYTHON:-/usr/bin/python3}" examples/postgres_exporter/check.py \
    --admin-dsn "host=$PGHOST port=$PGPORT user=$PGUSER dbname=postgres"

echo "== versions, PGXN archive, Debian package"
count_tap versions test/versions.sh
count_tap dist test/dist.sh
count_tap package test/package.sh

echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
