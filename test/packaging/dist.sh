#!/usr/bin/env bash
# The PGXN release archive (run by make test): make dist makes
# build/holdcommit-VERSION.zip from the committed tree (git archive HEAD) and
# the install script that make makes from it (sql/holdcommit--VERSION.sql), and
# that archive, unpacked in a clean directory, builds and installs (into a
# DESTDIR) the module, the control file and every SQL script, as PGXN's
# client (pgxn install) would.
# Prints "ok - ..." / "not ok - ..." lines; exits 0.
set -uo pipefail
cd "$(dirname "$0")/../.."
. test/harness/tap.bash

python=${HC_PYTHON:-/usr/bin/python3}
version=$(make -s version)
name=holdcommit-$version
zip=build/$name.zip
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ! git rev-parse --verify -q HEAD >/dev/null; then
    echo "not ok - make dist needs a git checkout with a commit"
    exit 0
fi
rm -f "$zip"
make -s dist >"$work/dist.log" 2>&1
check "make dist makes $zip" "$(test -f "$zip" && echo yes)" "yes"
[ -f "$zip" ] || { sed 's/^/#   /' "$work/dist.log"; exit 0; }

listing=$("$python" -c 'import sys, zipfile; print("\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))' "$zip")
check "every file of the archive is under $name/" "$(grep -vc "^$name/" <<<"$listing")" "0"
check "the archive holds exactly the files of HEAD and the made install script" \
    "$(grep -v '/$' <<<"$listing" | sed "s|^$name/||" | sort)" \
    "$( (git ls-tree -r --name-only HEAD; echo "sql/holdcommit--$version.sql") | sort -u)"
for f in META.json Makefile holdcommit.control README.md "sql/holdcommit--$version.sql"; do
    check "the archive has $f" "$(grep -cx "$name/$f" <<<"$listing")" "1"
done
meta_version=$("$python" -c 'import json, sys, zipfile
print(json.loads(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))["version"])' "$zip" "$name/META.json" 2>&1)
check "the archive's META.json is version $version" "$meta_version" "$version"

# A clean directory: nothing but the unpacked archive.
"$python" -m zipfile -e "$zip" "$work/src" || { echo "not ok - unpack $zip"; exit 0; }
if make -C "$work/src/$name" -s -j2 >"$work/build.log" 2>&1; then
    echo "ok - the unpacked archive builds"
else
    echo "not ok - the unpacked archive builds"
    tail -20 "$work/build.log" | sed 's/^/#   /'
    exit 0
fi
if make -C "$work/src/$name" -s install DESTDIR="$work/root" >"$work/install.log" 2>&1; then
    echo "ok - the unpacked archive installs (make install DESTDIR=...)"
else
    echo "not ok - the unpacked archive installs (make install DESTDIR=...)"
    tail -20 "$work/install.log" | sed 's/^/#   /'
    exit 0
fi
pkglibdir=$(pg_config --pkglibdir)
sharedir=$(pg_config --sharedir)
check "it installs the module, the control file and every SQL script of HEAD, nothing else" \
    "$(cd "$work/root" && find . -type f | sed 's|^\.||' | sort)" \
    "$( (echo "$pkglibdir/holdcommit.so"; echo "$sharedir/extension/holdcommit.control"
         (git ls-tree --name-only HEAD sql/; echo "sql/holdcommit--$version.sql") |
             grep '^sql/holdcommit--' | sed "s|^sql/|$sharedir/extension/|") | sort -u)"
exit 0
