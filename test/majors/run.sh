#!/usr/bin/env bash
# The suites of a PostgreSQL major other than the machine's, in its Debian chroot
# (test/majors/chroot.sh): make test runs it for each of HC_MAJORS, make test-major MAJOR=N
# for one.
#   test/majors/run.sh MAJOR
# It works in an overlay of the cached chroot, whose upper layer is a directory of its own in
# HC_CHROOT_CACHE/runs/ that it removes at the end, in a mount namespace of its own
# (unshare -m) where only proc, a tmpfs on /dev/shm and the overlay are mounted: nothing of
# the machine is bound into it, and the cached chroot below is never written.  The files git
# tracks or would track are copied to /build/holdcommit there (a git repository of their own:
# make deb lists its files with git), and test/harness/run-tests.sh runs there as root with
# TIER=major and MAJOR's pg_config and programs.  Prints its lines, each suite named
# pgMAJOR/NAME with the package version it tested, the logs of those that failed, and
# "N passed, N failed" last; the logs stay in test/tmp/pgMAJOR/.  A major the registry does
# not carry is one "skip" line, and "0 passed, 0 failed".
#   HC_TEST_PORT   the port of its server, and of those derived from it (test/README.md)
set -uo pipefail
cd "$(dirname "$0")/../.."

major=${1:?usage: run.sh MAJOR}
name=pg$major
out=test/tmp/$name
cache=${HC_CHROOT_CACHE:-/var/cache/holdcommit/chroots}
rm -rf "$out" && mkdir -p "$out"

fail() {
    printf '%-4s %-26s %s\n' FAIL "$name/setup" "$1"
    [ -s "${2:-}" ] && { echo "--- $2"; cat "$2"; echo "--- end of $2"; }
    echo "0 passed, 1 failed"
    exit 1
}

[ "$(id -u)" -eq 0 ] ||
    fail "PostgreSQL $major's suites run in a Debian chroot, which needs root (debootstrap, unshare, chroot): run it with sudo, or 'HC_MAJORS= make test' for the machine's PostgreSQL alone"
t0=$(date +%s)
chroot=$(test/majors/chroot.sh "$major" 2>"$out/chroot.log") || fail "its chroot (test/majors/chroot.sh)" "$out/chroot.log"
# The chroot stays while this run uses it (test/majors/chroot.sh removes old ones).
exec 7>"$chroot.use"
flock -s 7
if [ ! -x "$chroot/usr/lib/postgresql/$major/bin/pg_config" ]; then
    printf '%-4s %-26s %s\n' skip "$name" \
        "$(sed -n "s/^$major missing: //p" "$chroot/etc/holdcommit-majors" | grep . || echo "no postgresql-$major in $(basename "$chroot")")"
    echo "0 passed, 0 failed"
    exit 0
fi
version=$(dpkg-query --admindir="$chroot/var/lib/dpkg" -W -f='${Version}' "postgresql-$major")
# Its suite, and what the registry lacks for it (test/majors/chroot.sh).
from=$(sed -n "s/^$major \([a-z]*\)/from \1/p" "$chroot/etc/holdcommit-majors")

# This run's directory; one that no run holds any more (its lock free) is a leftover.  The
# removal of leftovers and the making and locking of this run's directory happen under one
# lock of the runs: a run that started at the same moment could otherwise find this
# directory made and not yet locked, and remove it under this run.
runs=$cache/runs
mkdir -p "$runs"
exec 6>"$runs/.lock"
flock 6
for d in "$runs"/*/; do
    [ -d "$d" ] && flock -n "$d/lock" rm -rf "$d"
done
# Unique while this run lives; a leftover of the same name went with the loop above.
run=$runs/$name.$$
mkdir "$run" || fail "its directory $run"
chmod 755 "$run"
exec 8>"$run/lock"
flock 8 || fail "the lock of $run"
exec 6>&-
trap 'rm -rf "$run"' EXIT
mkdir -p "$run/upper/build/holdcommit" "$run/work" "$run/root"
# What make deb copies: the files git tracks or would track.
git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
    tar --null -T - -cf - | tar -xf - -C "$run/upper/build/holdcommit" ||
    fail "copy the files into the chroot"
printf '%-4s %-26s %s\n' ok "$name/chroot" "$(basename "$chroot") ($(cat "$chroot/etc/holdcommit-chroot")), postgresql-$major $version $from   $(($(date +%s) - t0)) s"

# The port and those derived from it are the caller's (a chroot has its own /tmp, not its own
# network): the suites' TCP ports must not meet the machine's.
unshare -m sh -ec '
    run=$1 chroot=$2
    shift 2
    mount -t overlay overlay -o "lowerdir=$chroot,upperdir=$run/upper,workdir=$run/work" "$run/root"
    mount -t proc proc "$run/root/proc"
    mount -t tmpfs -o mode=1777 tmpfs "$run/root/dev/shm"
    exec chroot "$run/root" "$@"' sh "$run" "$chroot" \
    env -i PATH="/usr/lib/postgresql/$major/bin:/usr/sbin:/usr/bin:/sbin:/bin" HOME=/root LANG=C.UTF-8 \
    TIER=major PG_MAJOR="$major" PG_CONFIG="/usr/lib/postgresql/$major/bin/pg_config" \
    HC_TEST_PORT="${HC_TEST_PORT:-54330}" \
    bash -c 'cd /build/holdcommit && git init -q && git add -A &&
             git -c user.name=make-test -c user.email=make-test@localhost commit -qm "make test copy" &&
             exec test/harness/run-tests.sh' 2>&1 | tee "$run/out" | head -n -1
rc=$?
cp -a "$run/upper/build/holdcommit/test/tmp/$name/." "$out/" 2>/dev/null
# run-tests.sh ends with the counts; if it did not get there, one failure.
if ! tail -1 "$run/out" | grep -qE '^[0-9]+ passed, [0-9]+ failed$'; then
    tail -1 "$run/out"
    printf '%-4s %-26s %s\n' FAIL "$name" "the chroot's run ended (exit $rc) before its counts"
    echo "0 passed, 1 failed"
    exit 1
fi
# The major's figures, on a line of its own before the counts (which stay last).
counts=$(tail -1 "$run/out")
echo "     $name: $counts, $(($(date +%s) - t0)) s in all"
echo "$counts"
exit $rc
