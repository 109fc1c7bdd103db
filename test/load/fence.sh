#!/usr/bin/env bash
# Writes fenced by the token under real parallel load: 16 workers take 4
# resources over from each other while they write under hc_lock_check
# (test/load/fence.py says what is raced and audited).
# Needs PGHOST, PGPORT, PGUSER (a superuser) for a running server; prints
# "ok - ..." / "not ok - ..."; exits 0.
. "$(dirname "$0")/lib.bash"
load_setup hc_fence 20
q "CREATE EXTENSION holdcommit" >/dev/null
PGOPTIONS="-c search_path=holdcommit,public" HC_FENCE_DB=$db "${HC_PYTHON:-/usr/bin/python3}" \
    "$(dirname "$0")/fence.py" || echo "not ok - test/load/fence.py exited $?"
exit 0
