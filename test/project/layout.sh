#!/usr/bin/env bash
# Where the tests live (test/README.md): sql/ holds only the install scripts;
# the regression inputs test/sql/NAME.sql and the isolation specs
# test/specs/NAME.spec each have test/expected/NAME.out (NAME_N.out: an
# alternative output), no regression test and spec share a name, every
# expected output belongs to one of them, and a spec's is of a spec that parsed.
# Prints "ok - ..." / "not ok - ..." lines; exits 0.
set -uo pipefail
cd "$(dirname "$0")/../.."
. test/harness/tap.bash

names() { for f in "$@"; do [ -e "$f" ] && basename "${f%.*}"; done | sort; }

check "sql/ holds only the install scripts sql/holdcommit--*.sql" \
    "$(ls sql | grep -v '^holdcommit--.*\.sql$' | tr '\n' ' ')" ""
regress=$(names test/sql/*.sql)
specs=$(names test/specs/*.spec)
check "test/sql has regression inputs, setup among them" "$(grep -cx setup <<<"$regress")" "1"
check "test/specs has isolation specs" "$([ -n "$specs" ] && echo yes)" "yes"
for name in $regress $specs; do
    check "$name has test/expected/$name.out" "$(test -f "test/expected/$name.out" && echo yes)" "yes"
done
check "no regression test and isolation spec share a name" "$(comm -12 <(echo "$regress") <(echo "$specs") | tr '\n' ' ')" ""
orphans=
for f in test/expected/*.out; do
    name=$(basename "$f" .out)
    grep -qxF -- "${name%_[1-9]}" <<<"$regress
$specs" || orphans="$orphans $name"
done
check "every expected output belongs to a regression test or a spec" "${orphans:-none}" "none"
# An expected output that holds the spec's parse error instead of its permutations passes
# as long as the spec stays broken: each starts as the tester's parsed spec does.
unparsed=
for name in $specs; do
    for f in test/expected/"$name".out test/expected/"$name"_[1-9].out; do
        [ -e "$f" ] && ! head -1 "$f" | grep -q '^Parsed test spec with [0-9]* sessions$' && unparsed="$unparsed $name"
    done
done
check "every isolation spec's expected output is of a spec that parsed" "${unparsed:-none}" "none"
exit 0
