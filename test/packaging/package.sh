#!/usr/bin/env bash
# The Debian package of one PostgreSQL major (run by make test: the machine's 15, and
# pgN/package in the chroot of each other major): make deb builds
# postgresql-MAJOR-holdcommit with pg_buildext; the package holds the module, the control
# file and every install and upgrade script; and the regression and isolation suites
# (make installcheck) pass against exactly the files it installs.  On the machine nothing
# goes into the system's PostgreSQL directories: the package is extracted (dpkg-deb -x)
# over a private copy of the PostgreSQL tree of that major, with any holdcommit files of
# that tree removed first, and a throwaway server runs from that copy.  With
# HC_PKG_SYSTEM=1 (as root; make test sets it in a major's chroot), the package is
# installed into the system (dpkg -i), the server runs from the system's tree, and
# afterwards the package is purged and any holdcommit files that were there before are put
# back.  The package also ships the documentation and the examples (README.md and what it
# links to, in the tree's layout), and its description, META.json's and debian/changelog
# name every family of functions; debian/control has a package for every major of
# debian/pgversions.
# Prints "ok - ..." / "not ok - ..." lines and "# ..." figures; exits 0.
#   test/packaging/package.sh [MAJOR]   the PostgreSQL major (default PG_CONFIG's)
#   HC_PKG_PORT    the throwaway server's port (default 54337)
#   HC_PKG_SYSTEM  1: install into the system's tree, as above
set -uo pipefail
cd "$(dirname "$0")/../.."
. test/harness/tap.bash

major=${1:-$("${PG_CONFIG:-pg_config}" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')}
port=${HC_PKG_PORT:-54337}
system=${HC_PKG_SYSTEM:-}
version=$(make -s version)
deb_dir=build/deb
package=postgresql-$major-holdcommit
# That major's programs: the server's (test/harness/server.sh, under HC_PGROOT if given),
# and the clients of make installcheck (pg_regress, pg_isolation_regress).
export PG_CONFIG=/usr/lib/postgresql/$major/bin/pg_config
. test/packaging/private-tree.bash
# The tree the server runs from: the private copy, or the system's.
if [ -n "$system" ]; then
    tree=
    saved=$root/saved.tar
    system_cleanup() {
        test/harness/server.sh stop "$port"
        if dpkg-query -W "$package" >/dev/null 2>&1; then dpkg --purge "$package" >/dev/null; fi
        [ -f "$saved" ] && tar -xPf "$saved"
        rm -rf "$root"
    }
    trap system_cleanup EXIT
else
    tree=$root
fi
# What the extension does today, family by family: each must be named (case-insensitive
# extended regular expressions) by every text that describes it.
families=("holds:\\bholds?\\b" "stock reservations:stock reservations?" "idempotency keys:idempotency keys?"
          "leases with fencing tokens:\\bleases?\\b.*fencing token" "the attempt guard:attempt guard"
          "the sweeper:\\bsweep" "the ledger:\\bledger\\b" "hc_check:hc_check" "Citus:\\bcitus\\b")
names_every_family() {  # names_every_family WHAT TEXT
    local f missing=
    for f in "${families[@]}"; do
        grep -qiE "${f#*:}" <<<"$(tr '\n' ' ' <<<"$2")" || missing="$missing, ${f%%:*}"
    done
    check "$1 names every family of functions" "${missing#, }" ""
}
meta_text=$(perl -MJSON::PP -0777 -ne '$m = decode_json($_); print "$m->{abstract}\n$m->{description}\n"' META.json)
names_every_family "META.json's abstract and description" "$meta_text"
names_every_family "debian/changelog" "$(cat debian/changelog)"
# debian/control is pg_buildext updatecontrol's, for every major of debian/pgversions.
majors=$(grep -E '^[0-9]+$' debian/pgversions | tr '\n' ' ')
check "debian/pgversions lists the supported majors" "$majors" "15 16 17 18 19 "
check "META.json's PostgreSQL prerequisite spans those majors" \
    "$(perl -MJSON::PP -0777 -ne 'print decode_json($_)->{prereqs}{runtime}{requires}{PostgreSQL}' META.json)" \
    ">= ${majors%% *}.0.0, < $(($(awk '{ print $NF }' <<<"$majors") + 1)).0.0"
mkdir "$root/control" && cp -a debian "$root/control/"
check "debian/control is what pg_buildext updatecontrol makes of debian/control.in for $majors" \
    "$(cd "$root/control" && PG_SUPPORTED_VERSIONS=$majors pg_buildext updatecontrol 2>&1 &&
       cmp debian/control "$OLDPWD/debian/control" && echo yes)" "yes"
check "debian/control has a package for each of them" \
    "$(sed -n 's/^Package: //p' debian/control | tr '\n' ' ')" "$(for m in $majors; do echo -n "postgresql-$m-holdcommit "; done)"
# The project has no public home yet: no made-up homepage, one maintainer everywhere.
maintainer=$(dpkg-parsechangelog -l debian/changelog -S Maintainer)
check "debian/control's maintainer is debian/changelog's" \
    "$(sed -n 's/^Maintainer: //p' debian/control)" "$maintainer"
check "META.json's maintainer is debian/changelog's" \
    "$(perl -MJSON::PP -0777 -ne 'print join(",", @{decode_json($_)->{maintainer}})' META.json)" "$maintainer"
check "no placeholder maintainer or homepage (example.org, github.com/holdcommit)" \
    "$(grep -lE 'holdcommit@example\.org|github\.com/holdcommit' debian/control debian/control.in debian/copyright META.json)" ""
check "the latest changelog entry's maintainer is not a placeholder" \
    "$(grep -c 'example\.org' <<<"$maintainer")" "0"

# The working tree's state: git's, or without git (a chroot's copy) every file's time outside
# build/ and test/tmp/ (make test's logs).
tree_state() {
    git status --porcelain --untracked-files=all 2>/dev/null ||
        find . \( -path ./build -o -path ./test/tmp \) -prune -o -type f -printf '%P %T@\n' | sort
}
status_before=$(tree_state)
t0=$(date +%s)
if ! make -s deb PG_MAJOR="$major" >"$root/deb.log" 2>&1; then
    echo "not ok - make deb builds the package"
    tail -20 "$root/deb.log" | sed 's/^/#   /'
    exit 0
fi
echo "# make deb: $(($(date +%s) - t0)) s"
deb=$deb_dir/${package}_$version-$(dpkg-parsechangelog -l debian/changelog -S Version | sed 's/.*-//')_$(dpkg --print-architecture).deb
check "make deb builds $(basename "$deb")" "$(test -f "$deb" && echo yes)" "yes"
[ -f "$deb" ] || exit 0
check "the package is $package" "$(dpkg-deb -f "$deb" Package)" "$package"
check "make deb PG_MAJOR=$major built it alone" "$(cd "$deb_dir" && ls ./*.deb | grep -v -- -dbgsym_ | tr '\n' ' ')" \
    "./$(basename "$deb") "
check "its version is the changelog's" "$(dpkg-deb -f "$deb" Version)" \
    "$(dpkg-parsechangelog -l debian/changelog -S Version)"
check "it depends on postgresql-$major" \
    "$(dpkg-deb -f "$deb" Depends | grep -oE "(^|, )postgresql-$major( |,|\$)" | tr -d ', ')" "postgresql-$major"

contents=$(dpkg-deb -c "$deb" | awk '{ print $6 }' | sed 's|^\./|/|')
for f in "/usr/lib/postgresql/$major/lib/holdcommit.so" "/usr/share/postgresql/$major/extension/holdcommit.control" \
         $(for s in sql/holdcommit--*.sql; do echo "/usr/share/postgresql/$major/extension/$(basename "$s")"; done); do
    check "the package has $f" "$(grep -cx "$f" <<<"$contents")" "1"
done
check "the package has no JIT bitcode" "$(grep -c '/bitcode/' <<<"$contents")" "0"
names_every_family "the package's description" "$(dpkg-deb -f "$deb" Description)"
check "the package names no homepage" "$(dpkg-deb -f "$deb" Homepage)" ""
check "the package's maintainer is debian/changelog's" "$(dpkg-deb -f "$deb" Maintainer)" "$maintainer"

# The README and what it links to, uncompressed, in the tree's layout.
docdir=/usr/share/doc/$package
shipped=(README.md CHANGELOG.md doc/*.md clients/sqlstates.json $(git ls-files examples 2>/dev/null || find examples -type f ! -path '*/__pycache__/*'))
missing=
for f in "${shipped[@]}"; do
    grep -qx "$docdir/$f" <<<"$contents" || missing="$missing $f"
done
check "the package has README.md, CHANGELOG.md, doc/, examples/ and clients/sqlstates.json in $docdir (${#shipped[@]} files)" \
    "${missing# }" ""
# Every relative link of those documents into what is shipped resolves in the package; links
# into the source tree's bench/ and test/, the client packages' sources (installed with pip
# and npm, not shipped) and LICENSE (the package's copyright), do not.
unresolved= elsewhere=
for f in README.md doc/*.md; do
    for l in $(grep -oE '\]\([^)#]+' "$f" | sed 's/^](//' | grep -vE '^[a-z]+:'); do
        t=$(realpath -m --relative-to=. "$(dirname "$f")/$l")
        case $t in
        bench/* | test/* | clients/python/* | clients/node/* | LICENSE) elsewhere="$elsewhere $t" ;;
        *) grep -qx "$docdir/$t" <<<"$contents" || unresolved="$unresolved $f:$l" ;;
        esac
    done
done
check "every link of the shipped documents to README, CHANGELOG, doc/, examples/ and clients/ resolves in the package" \
    "${unresolved# }" ""
echo "# links to the source tree, not shipped: $(tr ' ' '\n' <<<"$elsewhere" | sort -u | tr '\n' ' ')"
check "building it left the working tree as it was" "$(tree_state)" "$status_before"

# The tree: the system's PostgreSQL of that major, minus holdcommit, plus the package.
packaged=$(grep -E '/holdcommit[^/]*$' <<<"$contents" | sort | tr '\n' ' ')
if [ -n "$system" ]; then
    before=$(find "/usr/lib/postgresql/$major" "/usr/share/postgresql/$major" -name 'holdcommit*')
    if [ -n "$before" ]; then
        tar -cPf "$saved" $before && rm -f $before
    fi
    if ! dpkg -i "$deb" >"$root/dpkg.log" 2>&1; then
        echo "not ok - dpkg -i installs $(basename "$deb")"
        tail -20 "$root/dpkg.log" | sed 's/^/#   /'
        exit 0
    fi
    check "dpkg -i installs $package" "$(dpkg-query -W -f '${Status}' "$package")" "install ok installed"
    # (the documents' holdcommit* files, such as examples/grafana/holdcommit.json, are not PostgreSQL's)
    check "the system's holdcommit files are exactly the package's" \
        "$(find "/usr/lib/postgresql/$major" "/usr/share/postgresql/$major" -name 'holdcommit*' | sort | tr '\n' ' ')" \
        "$(tr ' ' '\n' <<<"$packaged" | grep -E "^/usr/(lib|share)/postgresql/$major/" | tr '\n' ' ')"
else
    private_tree "$major"
    dpkg-deb -x "$deb" "$root"
    check "the private tree's holdcommit files are exactly the package's" \
        "$(cd "$root" && find usr -name 'holdcommit*' | sort | sed 's|^|/|' | tr '\n' ' ')" "$packaged"
fi

where=private
[ -n "$system" ] && where="system's"
if ! HC_PGROOT=$tree test/harness/server.sh start "$port"; then
    echo "not ok - a server starts from the tree with the package"
    exit 0
fi
export PGHOST=${TMPDIR:-/tmp}/holdcommit-$port PGPORT=$port PGUSER=postgres
check "that server is PostgreSQL $major and runs from the $where tree" \
    "$(psql -X -qAt -d postgres -c "SELECT current_setting('server_version_num')::int / 10000 || ' ' || setting
                                       FROM pg_config WHERE name = 'PKGLIBDIR'" 2>&1)" \
    "$major $tree/usr/lib/postgresql/$major/lib"
check "the package's extension installs as $version, with holdcommit preloaded" \
    "$(psql -X -qAt -d postgres -c "CREATE EXTENSION holdcommit" \
            -c "SELECT extversion, 'holdcommit' = ANY (string_to_array(replace(current_setting('shared_preload_libraries'), ' ', ''), ','))
                  FROM pg_extension WHERE extname = 'holdcommit'" -c "DROP EXTENSION holdcommit" 2>&1)" \
    "$version|t"

# The regression and isolation suites of the packaged tree, against that server.
t0=$(date +%s)
(cd "$deb_dir/holdcommit-$version" && make -s installcheck) >"$root/installcheck.log" 2>&1
installcheck_rc=$?
# pg_regress's lines: "test NAME ... ok" up to 15, "ok 3 - NAME" (+ in a parallel group) from 16.
sed -nE 's/^(test |     )? *([^ ]+) +\.\.\. ok.*/ok - package installcheck: \2/p
         s/^(test |     )? *([^ ]+) +\.\.\. (FAILED|failed).*/not ok - package installcheck: \2/p
         s/^(not )?ok +[0-9]+ +[-+] +([^ ]+).*/\1ok - package installcheck: \2/p' \
    "$root/installcheck.log"
grep -qE '\.\.\. (ok|FAILED|failed)|^(not )?ok +[0-9]+ +[-+] ' "$root/installcheck.log" || {
    echo "not ok - package installcheck ran"; tail -20 "$root/installcheck.log" | sed 's/^/#   /'; }
# A suite that stops half-way (a missing expected file, a crash) lists no
# FAILED line for what it never ran: its exit status says so.
if [ "$installcheck_rc" -eq 0 ]; then
    echo "ok - package installcheck exits 0"
else
    echo "not ok - package installcheck exits 0 (exit $installcheck_rc)"
    tail -5 "$root/installcheck.log" | sed 's/^/#   /'
fi
for d in regression.diffs output_iso/regression.diffs; do
    [ -s "$deb_dir/holdcommit-$version/$d" ] && head -100 "$deb_dir/holdcommit-$version/$d" | sed 's/^/#   /'
done
echo "# installcheck against the package: $(($(date +%s) - t0)) s"
if [ -n "$system" ]; then
    test/harness/server.sh stop "$port"
    dpkg --purge "$package" >"$root/dpkg.log" 2>&1
    check "dpkg --purge removes $package and its files" \
        "$(dpkg-query -W -f '${Status}' "$package" 2>/dev/null | grep -c installed)$(
           find "/usr/lib/postgresql/$major" "/usr/share/postgresql/$major" -name 'holdcommit*' | sort | tr '\n' ' ')" "0"
fi
exit 0
