#!/usr/bin/env bash
# make test (TIER=full, the default) / make check-quick (TIER=quick): build,
# install, start a throwaway server, run the suites of the tier, remove the
# server.  Prints one line per suite ("ok   NAME   N assertions   T s" or
# "FAIL NAME   N passed, N failed   T s" followed by that suite's log), and
# ends with "N passed, N failed" alone on the last line.  Exits non-zero on
# any failure.  Every suite's log stays in test/tmp/NAME.log.
# TIER=full then runs the suites of the other majors (HC_MAJORS, default
# "17 18 19"; empty: none), each in its Debian chroot (test/majors/run.sh),
# their lines named pgN/NAME and counted in the total.  TIER=major is what
# runs there: the suites of the tier "major", with PG_MAJOR's PG_CONFIG.
#
# The unit counted is the assertion: every "ok" / "not ok" line of a TAP
# script (test/harness/tap.bash, test/harness/tap.py, pgTAP's pg_prove -v), and every test
# file of pg_regress and pg_isolation_regress ("... ok" / "... FAILED").  A
# suite that exits non-zero without a failed assertion, or that makes none,
# counts one failure.
#
# The suites are listed at the end (test/README.md describes each): adding one
# is one line, "suite TIER NAME COMMAND...", where COMMAND prints assertions.
set -uo pipefail
cd "$(dirname "$0")/../.."

tier=${TIER:-full}
case $tier in
quick | full | major) ;;
*) echo "TIER is quick, full or major, not '$tier'" >&2; exit 2 ;;
esac
# In a major's chroot the suites are named pgN/NAME and their lines name the package tested;
# on the machine, those that the majors do not run say "15 only" (its major) when majors run.
major=$("${PG_CONFIG:-pg_config}" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
majors=
prefix=
out=test/tmp
if [ "$tier" = major ]; then
    major=${PG_MAJOR:?TIER=major runs in a chroot of test/majors/run.sh}
    prefix=pg$major/
    out=test/tmp/pg$major
    package="postgresql-$major $(dpkg-query -W -f='${Version}' "postgresql-$major")"
elif [ "$tier" = full ]; then
    majors=${HC_MAJORS-17 18 19}
fi

port=${HC_TEST_PORT:-54330}
export PGHOST=${TMPDIR:-/tmp}/holdcommit-$port PGPORT=$port PGUSER=postgres
# The example service, its PgBouncer, the Debian package's server, postgres_exporter and the
# two servers of installcheck against other configurations, next to the test server.  What
# listens on TCP takes a port below Linux's ephemeral range (32768-60999), where no client
# connection's own port can hold it at that moment (the exporter's bind failed so once).
export HC_TCP_PORT=${HC_TCP_PORT:-$((20000 + port % 10000))}
export HC_HTTP_PORT=${HC_HTTP_PORT:-$((HC_TCP_PORT + 5))} HC_PGBOUNCER_PORT=${HC_PGBOUNCER_PORT:-$((port + 6))}
export HC_PKG_PORT=${HC_PKG_PORT:-$((port + 7))} HC_EXPORTER_PORT=${HC_EXPORTER_PORT:-$((HC_TCP_PORT + 8))}
# The server with the sanitizers' runtime (test/packaging/sanitize.sh).
export HC_SANITIZE_PORT=${HC_SANITIZE_PORT:-$((port + 16))}
other_port=$((port + 9))
passed=0
failed=0

fail_setup() { echo "FAIL ${prefix}setup   $1" >&2; echo "0 passed, 1 failed"; exit 1; }

t0=$(date +%s)
rm -rf "$out" results output_iso regression.diffs regression.out && mkdir -p "$out"
# A major's chroot has its packages (test/majors/chroot.sh).
if [ "$tier" != major ]; then
    test/harness/deps.sh >"$out/setup.log" 2>&1 || { cat "$out/setup.log"; fail_setup "missing packages"; }
fi
make -s WERROR=-Werror >>"$out/setup.log" 2>&1 || { cat "$out/setup.log"; fail_setup "build failed"; }
if [ -n "${HC_PGROOT:-}" ]; then
    make -s install DESTDIR="$HC_PGROOT" >>"$out/setup.log" 2>&1 || { cat "$out/setup.log"; fail_setup "install failed"; }
elif [ "$(id -u)" -eq 0 ]; then
    make -s install >>"$out/setup.log" 2>&1 || { cat "$out/setup.log"; fail_setup "install failed"; }
fi
test/harness/server.sh start "$port" >>"$out/setup.log" 2>&1 || { cat "$out/setup.log"; fail_setup "server did not start"; }
# The server's log is kept with the suites' logs.
trap 'cp "$PGHOST/server.log" "$out/server.log" 2>/dev/null; test/harness/server.sh stop "$port"' EXIT
printf '%-4s %-26s %s\n' ok "${prefix}setup" \
    "build, install, server on port $port${package:+ ($package)}   $(($(date +%s) - t0)) s"
# The chroots of the other majors are built (or found in their cache) while the machine's
# suites run; their suites run after (run_majors, below).
if [ -n "$majors" ] && [ "$(id -u)" -eq 0 ]; then
    for m in $majors; do
        test/majors/chroot.sh "$m" >/dev/null 2>"$out/chroot-$m.log" &
    done
fi

# suite TIERS NAME COMMAND...: run COMMAND if this run's tier is one of
# TIERS (comma-separated; full runs quick and full), its output in
# test/tmp/NAME.log; count its assertions and print one line, and the log if
# anything failed.
suite() {
    local tiers=,$1, name=$prefix$2 log=$out/$2.log rc ok bad start note=${package:-}
    shift 2
    case $tier,$tiers in
    full,*,quick,* | full,*,full,* | quick,*,quick,* | major,*,major,*) ;;
    *) return 0 ;;
    esac
    # What the majors do not run, and depends on the server's, ran on the machine's only.
    if [ -n "$majors" ] && [ "$tiers" = "${tiers/,major,/}" ] && ! grep -qw -- "$name" <<<"$project"; then
        note="$major only"
    fi
    mkdir -p "$(dirname "$log")"
    start=$(date +%s)
    "$@" >"$log" 2>&1
    rc=$?
    ok=$(grep -cE '^\s*ok |\.\.\. ok' "$log")
    bad=$(grep -cE '^\s*not ok( |$)|\.\.\. (FAILED|failed)' "$log")
    if [ "$rc" -ne 0 ] && [ "$bad" -eq 0 ]; then
        echo "not ok - $name exited $rc without a failed assertion" >>"$log"
        bad=1
    fi
    if [ "$ok" -eq 0 ] && [ "$bad" -eq 0 ]; then
        echo "not ok - $name made no assertion" >>"$log"
        bad=1
    fi
    passed=$((passed + ok))
    failed=$((failed + bad))
    if [ "$bad" -eq 0 ]; then
        printf '%-4s %-26s %5d assertions %5d s%s\n' ok "$name" "$ok" $(($(date +%s) - start)) "${note:+   $note}"
        # A suite that could not run here says so on a line of its own.
        grep -h -m1 -o '^ok - # SKIP .*' "$log" | sed "s|^ok - # |     $name: |"
    else
        printf '%-4s %-26s %5d passed, %d failed %5d s%s\n' FAIL "$name" "$ok" "$bad" $(($(date +%s) - start)) "${note:+   $note}"
        echo "--- $log"
        cat "$log"
        echo "--- end of $log"
    fi
}

# pg_regress's differences, as "#" lines (not counted), after its own lines.
show_diffs() {
    local d
    for d in regression.diffs output_iso/regression.diffs; do
        [ -s "$d" ] && { echo "# $d:"; sed 's/^/#   /' "$d"; }
    done
    return 0
}

# The regression suite (test/sql/*.sql): on this server, with holdcommit
# preloaded and the background sweeper off, no test may take the path that
# skips what needs the sweeper off (the SKIP lines of make installcheck).
regression() {
    local rc skipped
    make -s installcheck ISOLATION=
    rc=$?
    show_diffs
    skipped=$(grep -l '^SKIP' results/*.out 2>/dev/null | sed 's|^results/||; s|\.out$||' | tr '\n' ' ')
    check "no regression test skips anything on the test server" "${skipped:-none}" "none"
    return $rc
}

# The isolation specs (test/specs/*.spec).
isolation() {
    local rc
    make -s installcheck REGRESS=
    rc=$?
    show_diffs
    return $rc
}

# pgTAP (test/pgtap/NAME.sql), in one database that the files share, as
# they did when pg_prove ran them together.
pgtap() {
    if ! psql -X -qAt -d postgres -c "SELECT 1 FROM pg_database WHERE datname = 'hc_tap'" | grep -q 1; then
        psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE DATABASE hc_tap" &&
            psql -X -q -v ON_ERROR_STOP=1 -d hc_tap -c "CREATE EXTENSION pgtap" -c "CREATE EXTENSION holdcommit" ||
            return 1
    fi
    pg_prove -v -d hc_tap "$1"
}

# make installcheck against another server of the same install (port + 9):
#   other_installcheck no-preload         holdcommit not in shared_preload_libraries:
#                                         every test runs and passes, none skips
#   other_installcheck sweeper-on TESTS   holdcommit preloaded, the sweeper on every
#                                         second: the tests that need it off skip
other_installcheck() {
    local config=$1 rc skipped want
    shift
    if [ "$config" = no-preload ]; then
        HC_PRELOAD= test/harness/server.sh start "$other_port" || { echo "not ok - a server starts without preload"; return 0; }
    else
        HC_SWEEP_INTERVAL=1 test/harness/server.sh start "$other_port" || { echo "not ok - a server starts"; return 0; }
    fi
    rm -rf results output_iso regression.diffs regression.out
    # "$@": the tests to run; none: every regression test and isolation spec.
    if [ $# -gt 0 ]; then
        PGHOST=${TMPDIR:-/tmp}/holdcommit-$other_port PGPORT=$other_port make -s installcheck ISOLATION= REGRESS="$*"
    else
        PGHOST=${TMPDIR:-/tmp}/holdcommit-$other_port PGPORT=$other_port make -s installcheck
    fi
    rc=$?
    show_diffs
    test/harness/server.sh stop "$other_port"
    skipped=$(grep -l '^SKIP' results/*.out 2>/dev/null | sed 's|^results/||; s|\.out$||' | tr '\n' ' ')
    if [ "$config" = no-preload ]; then want=none; else want="sweep_worker "; fi
    check "the tests that skip something on a $config server" "${skipped:-none}" "$want"
    return $rc
}

# The other majors (HC_MAJORS), each in its chroot (test/majors/run.sh), on
# ports of their own (port + 25, + 50, + 75: test/README.md), HC_MAJORS_JOBS
# (2) at a time: three at once took 8 minutes, but the machine's load made a
# bound of load/sweepers miss once; their lines printed in order, their counts added.
run_majors() {
    local m i=0 jobs=${HC_MAJORS_JOBS:-2} list=() pids=()
    for m in $majors; do
        list+=("$m")
        HC_TEST_PORT=$((port + 25 * (i + 1))) test/majors/run.sh "$m" >"$out/pg$m.out" 2>&1 &
        pids+=($!)
        i=$((i + 1))
        [ "$i" -ge "$jobs" ] && major_done "${list[i - jobs]}" "${pids[i - jobs]}"
    done
    for ((j = (i >= jobs ? i - jobs + 1 : 0); j < i; j++)); do
        major_done "${list[j]}" "${pids[j]}"
    done
}
major_done() {
    local counts
    wait "$2"
    head -n -1 "$out/pg$1.out"
    counts=$(tail -1 "$out/pg$1.out")
    if [[ $counts =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
        passed=$((passed + BASH_REMATCH[1]))
        failed=$((failed + BASH_REMATCH[2]))
    else
        echo "FAIL pg$1   test/majors/run.sh ended without its counts"
        failed=$((failed + 1))
    fi
}

. test/harness/tap.bash

# The suites that check the project's files, whatever the server.
project="layout released sqlstates versions source hosts grafana dist"

# TIERS           NAME                      COMMAND
suite quick       layout                    test/project/layout.sh
suite quick       released                  test/project/released.sh
suite quick,major regression                regression
suite quick,major isolation                 isolation
suite quick       snippets                  test/project/snippets.sh
suite quick       docs                      test/project/docs.sh
suite quick       sqlstates                 bash test/project/sqlstates.sh
suite quick       versions                  test/project/versions.sh
suite quick       source                    test/project/source.sh
suite quick       hosts                     test/project/hosts.sh
suite quick       grafana                   test/project/grafana.sh
suite quick,major upgrade                   test/upgrade/upgrade.sh
suite quick,major upgrade-0.2.0             test/upgrade/upgrade-0.2.0.sh
suite quick,major upgrade-0.3.0             test/upgrade/upgrade-0.3.0.sh
suite quick,major move                      test/upgrade/move.sh
for f in test/pgtap/*.sql; do
    suite quick,major "pgtap/$(basename "$f" .sql)" pgtap "$f"
done
# The load suites that the other majors run too.
major_load="autonomous best-plans cron fence history hostile lease search-paths seats sweep sweepers"
for f in test/load/*.sh; do
    f=$(basename "$f" .sh)
    suite "full$(grep -qw "$f" <<<"$major_load" && echo ,major)" "load/$f" bash "test/load/$f.sh"
done
suite full        http                      examples/http/test.sh
suite full        ops                       examples/http/ops-test.sh
suite full        clients/python            bash clients/python/test.sh
suite full        exporter                  "${HC_PYTHON:-/usr/bin/python3}" examples/postgres_exporter/check.py \
                                            --admin-dsn "host=$PGHOST port=$PGPORT user=$PGUSER dbname=postgres"
suite full        clients/node              bash clients/node/test.sh
suite full        citus                     test/citus/run.sh
suite full        dist                      test/packaging/dist.sh
# In a major's chroot the package is installed into the system (dpkg -i), as a user would.
suite full,major  package                   env HC_PKG_SYSTEM=$([ "$tier" = major ] && echo 1) \
                                            test/packaging/package.sh "$major"
suite full        sanitize                  test/packaging/sanitize.sh
suite full        installcheck/no-preload   other_installcheck no-preload
suite full        installcheck/sweeper-on   other_installcheck sweeper-on setup sweep_worker
[ -n "$majors" ] && run_majors

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
