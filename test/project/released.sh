#!/usr/bin/env bash
# The released install and upgrade scripts are what was released: each file
# listed in test/project/released.md5 has the md5 stored there (stored, not computed
# from git, so that a shallow clone checks it too).
# Prints "ok - ..." / "not ok - ..." lines; exits 0.
set -uo pipefail
cd "$(dirname "$0")/../.."
. test/harness/tap.bash

n=0
while read -r sum file rest; do
    case $sum in '' | '#'*) continue ;; esac
    n=$((n + 1))
    if [ -f "$file" ]; then
        check "$file is the released one, $rest (md5)" "$(md5sum <"$file" | cut -d' ' -f1)" "$sum"
    else
        echo "not ok - $file, released in $rest, exists"
    fi
done <test/project/released.md5
[ "$n" -gt 0 ] || echo "not ok - test/project/released.md5 lists the released scripts"
exit 0
