#!/usr/bin/env bash
# AddressSanitizer and UndefinedBehaviorSanitizer (run by make test, and by
# make sanitize): the module is built with -fsanitize=address,undefined in a
# copy of the sources (build/sanitize/clean: the tree's own objects and
# holdcommit.so stay as they are), installed into a private copy of the
# machine's PostgreSQL tree (15; make test runs it there only, not in the
# chroots of the other majors), and a throwaway server of that tree runs with the
# sanitizers' runtime preloaded (holdcommit and pg_cron in
# shared_preload_libraries, as on the test server).  Against it: make
# installcheck (regression and isolation), test/load/hostile.sh (hostile
# input for every function), then the background sweeper sweeps a database
# once.  It passes with no warning in the build, the runtime mapped
# in the postmaster, every test passing, no sanitizer report (the reports'
# files and the server log) and no process terminated by a signal.
# Then the canary (build/sanitize/canary, -DHC_SANITIZE_CANARY: hc_asset_add
# reads a byte past a palloc'd buffer, hc_stock_set an int64 at an odd
# address), the same way, with the regression tests hold and stock: each
# sanitizer must report its defect, and the count that the clean run finds 0
# must be 2, so a sanitizer that sees nothing fails.
# Prints "ok - ..." / "not ok - ..." lines and "# ..." figures; exits 0.
#   HC_SANITIZE_PORT  the throwaway server's port (default 54346)
set -uo pipefail
cd "$(dirname "$0")/../.."
. test/harness/tap.bash

port=${HC_SANITIZE_PORT:-54346}
export PGHOST=${TMPDIR:-/tmp}/holdcommit-$port PGPORT=$port PGUSER=postgres
build=build/sanitize
# The machine's major, whose tree the server runs from (test/harness/server.sh: PG_CONFIG).
major=$("${PG_CONFIG:-pg_config}" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
. test/packaging/private-tree.bash

# -fno-sanitize-recover=all: a UBSan finding ends the process, as an ASan one
# does, so that no test can pass over it.  -fno-omit-frame-pointer: whole
# stacks in the reports.  PGXS adds COPT to both CFLAGS and LDFLAGS, so the
# module links libasan and libubsan.
sanitize="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
libasan=$(gcc -print-file-name=libasan.so)
check "gcc has the ASan runtime" "$(test -e "$libasan" && echo yes)" "yes"
[ -e "$libasan" ] || exit 0
# ASan's runtime is preloaded (LD_PRELOAD), before libc: Debian's postgres has
# no ASan of its own.  The postmaster forks its backends and workers without
# exec: they have it too.  UBSan's comes with the module.  sanitize-init.so
# makes both start right in that postgres (test/packaging/sanitize-init.c says how).
gcc -Wall -Wextra -Werror -O2 -fPIC -shared -o "$root/sanitize-init.so" test/packaging/sanitize-init.c ||
    { echo "not ok - build test/packaging/sanitize-init.c"; exit 0; }
preload=$libasan:$root/sanitize-init.so

status_before=$(git status --porcelain --untracked-files=all)
objects_before=$(md5sum holdcommit.so $(find src -name '*.o' | sort) 2>/dev/null)

# The private tree: the system's PostgreSQL, minus any holdcommit files.
private_tree "$major"

# ASan's reports are written by the server's processes (postgres, when we are
# root): into $root/reports/NAME, which that user can reach and write whatever
# the clone's path (a clone under /root or a private mktemp -d is closed to
# it).  stop copies them to build/sanitize/NAME/reports, kept after the run.
# reports NAME: the sanitizers' reports in those files and NAME's server.log.
reports() {
    cat "$root/reports/$1"/* "$build/$1/server.log" 2>/dev/null | grep -cE 'ERROR: AddressSanitizer|runtime error:'
}

# sanitized NAME DEFINES: build the sources with the sanitizers (and DEFINES)
# in build/sanitize/NAME, install them into the private tree, start the server
# with the runtime, ASan's reports going to $root/reports/NAME/asan.PID.
sanitized() {
    local name=$1 defines=$2 dir=$build/$1 t0 pid rc
    t0=$(date +%s)
    rm -rf "$dir" "$root/reports/$name" && mkdir -p "$dir" "$root/reports/$name"
    [ "$(id -u)" -eq 0 ] && chown postgres: "$root/reports/$name"
    # The files git tracks or would track, as make deb copies them: no object of the tree's.
    git ls-files -z --cached --others --exclude-standard |
        while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
        tar --null -T - -cf - | tar -xf - -C "$dir"
    (cd "$dir" && make -s -j2 WERROR=-Werror COPT="$sanitize $defines") >"$dir/build.log" 2>&1
    rc=$?
    check "$name: the sanitized build succeeds with no warning" "$rc $(grep -c 'warning:' "$dir/build.log")" "0 0"
    (cd "$dir" && make -s install DESTDIR="$root") >>"$dir/build.log" 2>&1 ||
        { echo "not ok - $name: install into the private tree"; sed 's/^/#   /' "$dir/build.log"; return 1; }
    check "$name: the module calls ASan and UBSan" \
        "$(nm -D "$dir/holdcommit.so" | grep -oE ' U __(asan_report_load8|ubsan_handle_type_mismatch_v1_abort)$' | sort | tr -d '\n')" \
        " U __asan_report_load8 U __ubsan_handle_type_mismatch_v1_abort"
    echo "# $name: build and install $(($(date +%s) - t0)) s"

    # detect_leaks=0: a backend exits without freeing what lives as long as
    # it does (LeakSanitizer would report every process); abort_on_error=1:
    # a report ends the process by SIGABRT, which the postmaster logs as
    # "terminated by signal" and restarts from (after an exit status 1 it would
    # carry on, as after a backend's normal exit); detect_stack_use_after_return=1:
    # gcc instruments for it, its runtime leaves it off by default; log_path:
    # ASan's reports in one file per process.  UBSan: the same, with the stack;
    # its reports go to stderr, the server log: a log_path of its own would be
    # set as ASan's (libasan, first, has the same __sanitizer_set_report_path).
    if ! ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:detect_stack_use_after_return=1:log_path=$root/reports/$name/asan" \
         UBSAN_OPTIONS="print_stacktrace=1:abort_on_error=1" \
         HC_PGROOT=$root HC_LD_PRELOAD=$preload test/harness/server.sh start "$port"; then
        echo "not ok - $name: a server starts with the sanitizers' runtime"
        cp "$PGHOST/server.log" "$dir/server.log" 2>/dev/null
        tail -20 "$dir/server.log" | sed 's/^/#   /'
        return 1
    fi
    pid=$(head -1 "$PGHOST/data/postmaster.pid")
    # A file the server writes there itself (COPY TO runs as its user): without
    # that, "no sanitizer report" would pass for want of a place to write one.
    psql -X -q -d postgres -c "COPY (SELECT 'written') TO '$root/reports/$name/probe'" 2>&1 | sed 's/^/#   /'
    check "$name: the server writes in its reports' directory" \
        "$(cat "$root/reports/$name/probe" 2>/dev/null)" "written"
    rm -f "$root/reports/$name/probe"
    check "$name: the postmaster has libasan mapped" "$(grep -c '/libasan\.so' "/proc/$pid/maps" | grep -c '^[1-9]')" "1"
    check "$name: the postmaster has the sanitized holdcommit.so mapped" \
        "$(grep -c "$root/usr/lib/postgresql/$major/lib/holdcommit.so" "/proc/$pid/maps" | grep -c '^[1-9]')" "1"
}

# installcheck NAME ARGS...: make installcheck ARGS in build/sanitize/NAME against
# the server, its output appended to installcheck.log there; its status in rc.
installcheck() {
    local name=$1 t0
    shift
    t0=$(date +%s)
    (cd "$build/$name" && make -s installcheck "$@") >>"$build/$name/installcheck.log" 2>&1
    rc=$?
    echo "# $name: make installcheck $* $(($(date +%s) - t0)) s"
}

# stop NAME: stop the server, keeping its log in build/sanitize/NAME/server.log
# and ASan's reports in build/sanitize/NAME/reports.
stop() {
    cp "$PGHOST/server.log" "$build/$1/server.log"
    cp -r "$root/reports/$1" "$build/$1/reports"
    HC_PGROOT=$root test/harness/server.sh stop "$port"
}

##############################################################################
# the clean run: every suite, no report
##############################################################################
t0=$(date +%s)
if sanitized clean ""; then
    installcheck clean
    sed -nE 's/^(test |     )? *([^ ]+) +\.\.\. ok.*/ok - clean: installcheck: \2/p
             s/^(test |     )? *([^ ]+) +\.\.\. (FAILED|failed).*/not ok - clean: installcheck: \2/p' \
        "$build/clean/installcheck.log"
    check "clean: make installcheck exits 0" "$rc" "0"
    [ "$rc" -eq 0 ] || tail -5 "$build/clean/installcheck.log" | sed 's/^/#   /'
    for d in regression.diffs output_iso/regression.diffs; do
        [ -s "$build/clean/$d" ] && head -100 "$build/clean/$d" | sed 's/^/#   /'
    done
    # Every argument of every function with hostile values (test/load/hostile.sh):
    # strings on each side of the length limits, 1 MB strings, huge JSON orders.
    t1=$(date +%s)
    bash test/load/hostile.sh 2>&1 | sed -E 's|^(not )?ok - |&clean: load/hostile: |'
    echo "# clean: load/hostile $(($(date +%s) - t1)) s"

    # The background sweeper (the launcher and a sweeper run, workers of their
    # own): on for one database, where it must sweep an expired hold and an
    # expired stock reservation.
    q() { psql -X -qAt -v ON_ERROR_STOP=1 -d hc_sanitize -c "$1"; }
    psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE DATABASE hc_sanitize" >/dev/null &&
    q "CREATE EXTENSION holdcommit" &&
    q "SELECT count(hc_asset_add('SAN-A1')), count(hc_stock_set('SAN-P1', 10));
       SELECT count(hc_hold('SAN-A1', 'b', 'san-1', '1 hour')), count(hc_reserve('SAN-P1', 2, 'b', 'san-2', '1 hour'));
       UPDATE hc_assets SET hold_expires_at = hold_expires_at - interval '2 hours';
       UPDATE hc_reservations SET expires_at = expires_at - interval '2 hours';
       UPDATE hc_stock_order_lines SET expires_at = expires_at - interval '2 hours';
       UPDATE hc_stock_orders SET expires_at = expires_at - interval '2 hours'" >/dev/null &&
    psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "ALTER SYSTEM SET holdcommit.databases = 'hc_sanitize'" \
        -c "ALTER SYSTEM SET holdcommit.sweep_interval = 1" -c "SELECT pg_reload_conf()" >/dev/null ||
        echo "not ok - clean: a database for the background sweeper"
    swept=
    for i in $(seq 1 60); do
        swept=$(q "SELECT total_expired_holds || ' ' || total_expired_reservations FROM hc_sweeper_status" 2>/dev/null)
        [ "$swept" = "1 1" ] && break
        sleep 1
    done
    check "clean: the background sweeper sweeps the expired hold and reservation" "$swept" "1 1"
    stop clean
    check "clean: no sanitizer report" "$(reports clean)" "0"
    for f in "$build"/clean/reports/*; do
        [ -e "$f" ] && { echo "# $f:"; head -40 "$f" | sed 's/^/#   /'; }
    done
    check "clean: no process terminated by a signal" "$(grep -c 'terminated by signal' "$build/clean/server.log")" "0"
fi
echo "# clean run: $(($(date +%s) - t0)) s, $(reports clean) reports"

##############################################################################
# the canary: each sanitizer reports its planted defect
##############################################################################
t0=$(date +%s)
if sanitized canary -DHC_SANITIZE_CANARY; then
    # A report aborts its backend and the postmaster restarts every session, so
    # a suite sees the first defect only: hold (hc_asset_add) and stock
    # (hc_stock_set) run one after the other, each once the server is back.
    installcheck canary ISOLATION= REGRESS="setup hold"
    check "canary: make installcheck of hold fails" "$rc" "2"
    for i in $(seq 1 60); do
        psql -X -qAt -d postgres -c "SELECT 1" >/dev/null 2>&1 && break
        sleep 1
    done
    installcheck canary ISOLATION= REGRESS="setup stock"
    check "canary: make installcheck of stock fails" "$rc" "2"
    stop canary
    asan=$(grep -l 'ERROR: AddressSanitizer: heap-buffer-overflow' "$root"/reports/canary/asan.* 2>/dev/null |
           xargs -r grep -l ' in hc_asset_add src/hold/hold\.c' | wc -l)
    ubsan=$(grep -A5 '^src/stock/[a-z_]*\.c:[0-9:]*: runtime error: load of misaligned address' "$build/canary/server.log" |
            grep -c '#0 .* in hc_stock_set src/stock/[a-z_]*\.c')
    check "canary: ASan reports the read past the buffer in hc_asset_add" "$([ "$asan" -gt 0 ] && echo yes)" "yes"
    check "canary: UBSan reports the misaligned read in hc_stock_set" "$([ "$ubsan" -gt 0 ] && echo yes)" "yes"
    f=$(ls "$build"/canary/reports/asan.* 2>/dev/null | head -1)
    [ -n "$f" ] && { echo "# $f:"; head -5 "$f" | sed 's/^/#   /'; }
    echo "# $build/canary/server.log:"
    grep -m1 -A5 'runtime error:' "$build/canary/server.log" | sed 's/^/#   /'
    check "canary: the clean run's count of reports finds both" "$(reports canary)" "2"
    check "canary: each ends its process (terminated by signal 6)" \
        "$(grep -c 'terminated by signal 6' "$build/canary/server.log")" "2"
    echo "# canary run: $(($(date +%s) - t0)) s, $asan ASan and $ubsan UBSan reports of the canaries, $(reports canary) in all"
fi

check "the sanitized builds left the tree's objects as they were" "$(md5sum holdcommit.so $(find src -name '*.o' | sort) 2>/dev/null)" "$objects_before"
check "and the working tree as it was" "$(git status --porcelain --untracked-files=all)" "$status_before"
exit 0
