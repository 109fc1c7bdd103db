#!/usr/bin/env bash
# Hostile input for every function of the extension, driven from the catalog
# (test/load/hostile.sql): every argument of every hc_* function gets NULLs,
# empty, 64/65 and 255/256-byte strings with a multi-byte character on the
# boundary, 1 MB strings, control characters, every interval form, integer
# extremes, malformed and huge JSON orders, ids of the wrong kind, roles that
# do not exist, while the others stay valid.  Each call succeeds or fails
# with a SQLSTATE that doc/reference.md documents, changes no table when it
# fails (an internal error, XX000, is never one), crashes no backend, and leaves the session usable and hc_check()
# empty.  A new function or argument is covered without editing this test.
. "$(dirname "$0")/lib.bash"
load_setup hc_load_hostile 2
log=${TMPDIR:-/tmp}/holdcommit-$PGPORT/server.log
here=$(cd "$(dirname "$0")/../.." && pwd)
documented=$(grep -oE '^\| `[0-9A-Z]{5}`' "$here/doc/reference.md" | tr -d '|` ' | grep -v '^XX' | sort -u | paste -sd,)
crashes_before=$(grep -cE 'terminated by signal|was terminated by' "$log" 2>/dev/null)
trap 'psql -X -q -d postgres -c "DROP ROLE IF EXISTS fz_role" >/dev/null 2>&1; load_cleanup' EXIT
q "CREATE EXTENSION holdcommit" >/dev/null
psql -X -qAt -d "$db" -v documented="$documented" -f "$here/test/load/hostile.sql" >"$work/out" 2>&1
rc=$?
summary=$(grep -E '^calls [0-9]+' "$work/out")
echo "# $summary (documented SQLSTATEs: $documented)"
grep '^finding:' "$work/out" | head -20 | sed 's/^/# /'
check "the hostile calls ran to the end, the session usable after them" "$rc $(tail -1 "$work/out")" "0 1"
check "every failure has a documented SQLSTATE and changed no table; hc_check() empty" \
    "$(echo "$summary" | sed -n 's/.*findings //p')" "0"
check "hundreds of calls, most refused" \
    "$(echo "$summary" | awk '{ sub(",", "", $2); sub(",", "", $4); print ($2 >= 500 && $4 >= 400) ? "yes" : "no" }')" "yes"
check "no backend crashed" "$(( $(grep -cE 'terminated by signal|was terminated by' "$log" 2>/dev/null) - crashes_before ))" "0"
