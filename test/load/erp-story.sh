#!/usr/bin/env bash
# The seed's story (test/erp-story.sh, which make run plays) as a test: run
# it in a fresh database and compare its output with test/erp-story.expected.
# Needs PGHOST, PGPORT, PGUSER (a superuser) for a running server; exits 0.
. "$(dirname "$0")/lib.bash"
load_setup hc_erp_story 5
q "CREATE EXTENSION holdcommit" >/dev/null || { echo "not ok - story database set up"; exit 0; }
here=$(dirname "$0")/../..
"$here/test/erp-story.sh" "$db" >"$work/story.out" 2>&1
if diff -u "$here/test/erp-story.expected" "$work/story.out" >"$work/story.diff"; then
    echo "ok - the ERP story: one payment, a race, a slow ERP, unknown outcomes, review, reset: exactly one invoice"
else
    echo "not ok - the ERP story's output differs from test/erp-story.expected"
    sed 's/^/#   /' "$work/story.diff" | head -40
fi
check "the ERP story ends with exactly one invoice" \
    "$(q "SELECT count(*) FROM erp_invoices WHERE payment_id = 'PAY-7781'")" "1"
