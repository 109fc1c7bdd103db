#!/usr/bin/env bash
# Bounded history under real parallel load: live calls for 60 s with
# holdcommit.history_retention at 5 s, the background sweeper on and an
# auditor sweeping by hand beside it (test/load/history.py says what is
# audited).
# Needs PGHOST, PGPORT, PGUSER (a superuser) for a running server; prints
# "ok - ..." / "not ok - ..."; exits 0.
. "$(dirname "$0")/lib.bash"
load_setup hc_history 16
q "CREATE EXTENSION holdcommit" >/dev/null
# Keys for 3 s, history for 5 s: in this database only (the settings are a
# superuser's; the sweeper reads them as the database's).
q "ALTER DATABASE $db SET holdcommit.idempotency_retention = '3s'" >/dev/null
q "ALTER DATABASE $db SET holdcommit.history_retention = '${HC_HISTORY_RETENTION:-5s}'" >/dev/null
sweeper_on "$db" 1
PGOPTIONS="-c search_path=holdcommit,public" HC_HISTORY_DB=$db "${HC_PYTHON:-/usr/bin/python3}" \
    "$(dirname "$0")/history.py" || echo "not ok - test/load/history.py exited $?"
exit 0
