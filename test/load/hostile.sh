#!/usr/bin/env bash
# Hostile input for every function of the extension, driven from the catalog
# (test/load/hostile.sql): every argument of every hc_* function gets NULLs,
# empty, 64/65 and 255/256-byte strings with a multi-byte character on the
# boundary, 1 MB strings, control characters, every interval form, integer
# extremes, malformed and huge JSON orders, ids of the wrong kind, roles that
# do not exist, while the others keep valid values made fresh for the call;
# the same call with all-valid values succeeds first, so a refusal is the
# hostile value's.  Each call succeeds or fails with a SQLSTATE that the
# function's own docs list (never 55000, 08006, 53000, 40P01, 25xxx or XX),
# a class 22 refusal names its argument, and a refused call leaves every
# table of the extension and the session's advisory locks as they were (for
# the lease and attempt calls, whose worker commits on its own, that is the
# proof; for the others the subtransaction's rollback sees to it, see
# test/README.md).  No backend crashes, the session is usable after, and
# hc_check() is empty.  A new function or argument is covered without
# editing this test, or fails it loudly: an argument without a valid value,
# a type without hostile values, a function without documented SQLSTATEs.
. "$(dirname "$0")/lib.bash"
load_setup hc_load_hostile 2
log=${TMPDIR:-/tmp}/holdcommit-$PGPORT/server.log
here=$(cd "$(dirname "$0")/../.." && pwd)
documented=$(grep -oE '^\| `[0-9A-Z]{5}`' "$here/doc/reference.md" | tr -d '|` ' | sort -u | paste -sd,)
crashes() { grep -cE 'terminated by signal|was terminated by' "$log"; }
# grep -c prints 0 for a log without a crash; an unreadable log prints
# nothing, which must fail the check rather than count as no crash.
crashes_before=$(crashes 2>/dev/null) || [ -n "$crashes_before" ] || crashes_before=unreadable
trap 'psql -X -q -d postgres -c "DROP ROLE IF EXISTS fz_role" >/dev/null 2>&1; load_cleanup' EXIT
q "CREATE EXTENSION holdcommit" >/dev/null
psql -X -qAt -d "$db" -v documented="$documented" -f "$here/test/load/hostile.sql" >"$work/out" 2>&1
rc=$?
summary=$(grep -E '^calls [0-9]+' "$work/out")
echo "# $summary; by SQLSTATE: $(sed -n 's/^failed \([0-9A-Z]*\) \([0-9]*\)$/\1 \2/p' "$work/out" | paste -sd,)"
grep '^finding:' "$work/out" | head -20 | sed 's/^/# /'
[ $rc -ne 0 ] && tail -3 "$work/out" | sed 's/^/# /'
check "the hostile calls ran to the end, the session usable after them" "$rc $(tail -1 "$work/out")" "0 1"
check "every failure has a SQLSTATE its function's docs list, is about the hostile argument, and changed no table and no lock; hc_check() empty" \
    "$(echo "$summary" | sed -n 's/.*findings //p')" "0"
check "hundreds of calls, most refused" \
    "$(echo "$summary" | awk '{ sub(",", "", $2); sub(",", "", $4); print ($2 + 0 >= 500 && $4 + 0 >= 400) ? "yes" : "no" }')" "yes"
crashes_after=$(crashes 2>/dev/null) || [ -n "$crashes_after" ] || crashes_after=unreadable
want="$crashes_before $crashes_before"
[[ $crashes_before =~ ^[0-9]+$ ]] || want="a readable server log"
check "no backend crashed (server log $log)" "$crashes_before $crashes_after" "$want"
