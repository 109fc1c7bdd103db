#!/usr/bin/env bash
# The Debian chroots in which make test runs the suites of the PostgreSQL majors other than
# the machine's (test/majors/run.sh), built from Debian's packages and kept between runs.
#   test/majors/chroot.sh MAJOR   print the directory of MAJOR's chroot, built first if
#                                 missing or older than HC_CHROOT_DAYS days (default 7)
# One chroot per Debian suite: trixie has 17; sid has 18, and 19 from experimental (its
# release candidate; its final release once sid has it); any other major is looked for in
# sid and experimental, in a sid chroot of its own with 18 and 19.  A major the registry does
# not carry is left out of the chroot and recorded (test/majors/run.sh says SKIP), not an error.
# The chroots live in HC_CHROOT_CACHE (default /var/cache/holdcommit/chroots) as
# SUITE-MAJORS-HASH, HASH of the mirror and the packages, so that a changed list builds a new
# one (and the old one goes once no run uses it).  Each is built in a temporary directory and
# renamed into place, under a lock (flock) that a second make test waits on; once built it is
# never written again: test/majors/run.sh runs in an overlay of it.  The mirror is the
# machine's own (its apt sources' entry for its own release), or HC_DEBIAN_MIRROR.  Needs root
# (debootstrap, chroot, unshare).
set -euo pipefail
cd "$(dirname "$0")/../.."

major=${1:?usage: chroot.sh MAJOR}
cache=${HC_CHROOT_CACHE:-/var/cache/holdcommit/chroots}
days=${HC_CHROOT_DAYS:-7}

case $major in
17) suite=trixie majors=17 ;;
18 | 19) suite=sid majors="18 19" ;;
*) suite=sid majors="18 19 $major" ;;
esac

# The URI of the machine's apt source for its own release (not -updates or -security), from
# /etc/apt/sources.list and sources.list.d: one-line (*.list) and deb822 (*.sources) entries.
machine_mirror() {
    local codename
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    {
        cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
            sed -E 's/#.*//; s/\[[^]]*\]//' | awk -v c="$codename" '$1 == "deb" && $3 == c { print $2 }'
        cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
            awk -v c="$codename" 'BEGIN { RS = ""; FS = "\n" }
                { types = uris = suites = ""; enabled = "yes"
                  for (i = 1; i <= NF; i++) {
                      if ($i ~ /^#/) continue
                      split($i, kv, ":[ \t]*"); v = substr($i, length(kv[1]) + 2); sub(/^[ \t]+/, "", v)
                      k = tolower(kv[1])
                      if (k == "types") types = v; else if (k == "uris") uris = v
                      else if (k == "suites") suites = v; else if (k == "enabled") enabled = tolower(v)
                  }
                  if (enabled != "no" && (" " types " ") ~ / deb / && (" " suites " ") ~ (" " c " ")) {
                      split(uris, u, " "); print u[1] } }'
    } | head -1 || true
}

mirror=${HC_DEBIAN_MIRROR:-$(machine_mirror)}
[ -n "$mirror" ] || { echo "no Debian mirror in the machine's apt sources: set HC_DEBIAN_MIRROR" >&2; exit 1; }

# The packages of a major: deps.sh --major lists them (one place with the machine's list).
packages=$(for m in $majors; do test/harness/deps.sh --major "$m"; done | sort -u | tr '\n' ' ')
# Bumped when the steps below change what a chroot holds.
steps=2
hash=$(echo "$steps $mirror $suite $majors $packages" | md5sum | cut -c1-12)
name=$suite-${majors// /-}
dir=$cache/$name-$hash

fresh() { [ -f "$dir/etc/holdcommit-chroot" ] && [ -n "$(find "$dir/etc/holdcommit-chroot" -mtime -"$days")" ]; }
if fresh; then echo "$dir"; exit 0; fi

[ "$(id -u)" -eq 0 ] || { echo "building a chroot needs root (debootstrap, chroot)" >&2; exit 1; }
mkdir -p "$cache"
exec 9>"$cache/$name.lock"
flock 9
if fresh; then echo "$dir"; exit 0; fi

t0=$(date +%s)
# What an interrupted build left (this lock is free only when no build runs).
rm -rf "$cache/$name".build.*
tmp=$cache/$name.build.$$
mkdir "$tmp"
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
# apt's and dpkg's output goes to the log, shown if a step fails.
log=$cache/$name.log
: >"$log"
step() { "$@" >>"$log" 2>&1 || { echo "failed: $*" >&2; tail -25 "$log" >&2; exit 1; }; }
echo "debootstrap --variant=minbase $suite from $mirror" >&2
step debootstrap --variant=minbase "$suite" "$tmp" "$mirror"
echo "deb $mirror $suite main" >"$tmp/etc/apt/sources.list"
[ "$suite" = sid ] && echo "deb $mirror experimental main" >>"$tmp/etc/apt/sources.list"
# The mirror may be a snapshot, whose Release files have expired.
cat >"$tmp/etc/apt/apt.conf.d/99holdcommit" <<'CONF'
Acquire::Check-Valid-Until "false";
APT::Install-Recommends "false";
CONF
# No service starts in the chroot, and no cluster is made: the suites make their own.
printf '#!/bin/sh\nexit 101\n' >"$tmp/usr/sbin/policy-rc.d"
chmod 755 "$tmp/usr/sbin/policy-rc.d"
mkdir -p "$tmp/etc/postgresql-common/createcluster.d"
echo "create_main_cluster = false" >"$tmp/etc/postgresql-common/createcluster.d/holdcommit.conf"

# In the chroot, in a mount namespace of its own: /proc is mounted there only.
in_chroot() {
    unshare -m sh -c 'mount -t proc proc "$1/proc" && shift && exec chroot "$@"' sh "$tmp" "$tmp" \
        env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 "$@"
}
step in_chroot apt-get update
# Each major from the first of its suites that has it (19: experimental while sid lacks it);
# a major that none has is recorded and left out, as are the packages of a major that the
# registry lacks (postgresql-19-pgtap before 19's release: test/majors/run.sh says which).
: >"$tmp/etc/holdcommit-majors"
for m in $majors; do
    from=$(in_chroot apt-cache madison "postgresql-$m" | awk -F ' [|] ' '{ split($3, a, " "); sub("/.*", "", a[2]); print a[2] }' |
        grep -m1 -xE "$suite|experimental" || true)
    if [ -z "$from" ]; then
        echo "$m missing: the registry has no postgresql-$m in $suite$([ "$suite" = sid ] && echo " or experimental")" |
            tee -a "$tmp/etc/holdcommit-majors" >&2
        continue
    fi
    have=() lack=()
    for p in $(test/harness/deps.sh --major "$m"); do
        if in_chroot apt-cache -q show "$p" >/dev/null 2>&1; then have+=("$p"); else lack+=("$p"); fi
    done
    echo "installing postgresql-$m from $from${lack:+, without ${lack[*]} (not in the registry)}" >&2
    step in_chroot apt-get install -y -t "$from" "${have[@]}"
    note=${lack:+; not in the registry: ${lack[*]}}
    # pgTAP is SQL only, the same for every major since 11: another major's package serves.
    other=$(ls -d "$tmp"/usr/share/postgresql/*/extension/pgtap.control 2>/dev/null | head -1)
    if [[ " ${lack[*]} " == *" postgresql-$m-pgtap "* ]] && [ -n "$other" ]; then
        cp -a "$(dirname "$other")"/pgtap[.-]* "$tmp/usr/share/postgresql/$m/extension/"
        other=${other%/extension/pgtap.control}
        other=${other##*/}
        note="$note; pgTAP's SQL from postgresql-$other-pgtap"
    fi
    echo "$m $from$note" >>"$tmp/etc/holdcommit-majors"
done
step in_chroot apt-get clean
echo "built $(date -u +%FT%TZ) in $(($(date +%s) - t0)) s" >"$tmp/etc/holdcommit-chroot"
# Older chroots of the suite go (once no run uses them: test/majors/run.sh holds NAME.use);
# the new one takes their place.
for old in "$cache/$name"-*/; do
    old=${old%/}
    if [ "$old" = "$dir" ]; then
        # One of the same name, expired: once the runs that use it end.
        flock "$old.use" rm -rf "$old"
    else
        flock -n "$old.use" rm -rf "$old" "$old.use" || true
    fi
done
mv "$tmp" "$dir"
trap - EXIT
cat "$dir/etc/holdcommit-chroot" >&2
echo "$dir"
