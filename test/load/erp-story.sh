#!/usr/bin/env bash
# The seed's story (test/demo/erp-story.sh, which make run plays) as a test: run
# it in a fresh database set up as make run sets up its own (test/demo/demo-db.sh:
# holdcommit in its own schema, first on the database's search_path, which
# overrides the test server's) and compare its output with
# test/demo/erp-story.expected.
# Needs PGHOST, PGPORT, PGUSER (a superuser) for a running server; exits 0.
. "$(dirname "$0")/lib.bash"
load_setup hc_erp_story 5
here=$(dirname "$0")/../..
"$here/test/demo/demo-db.sh" "$db" >/dev/null || { echo "not ok - story database set up (test/demo/demo-db.sh)"; exit 0; }
check "the story's database has the README's search_path" "$(q "SHOW search_path")" "holdcommit, public"
"$here/test/demo/erp-story.sh" "$db" >"$work/story.out" 2>&1
if diff -u "$here/test/demo/erp-story.expected" "$work/story.out" >"$work/story.diff"; then
    echo "ok - the ERP story: one payment, a race, a slow ERP, unknown outcomes, review, reset: exactly one invoice"
else
    echo "not ok - the ERP story's output differs from test/demo/erp-story.expected"
    sed 's/^/#   /' "$work/story.diff" | head -40
fi
check "the story's owners: four names, one per run or delivery, none a role's" \
    "$(q "SELECT count(DISTINCT o) || ' ' || count(*) FILTER (WHERE o IN ('webhook', 'scheduler'))
            FROM (SELECT detail::jsonb ->> 'owner' AS o FROM hc_ledger
                   WHERE kind = 'resource' AND entity_id = 'PAY-7781' AND detail::jsonb ? 'owner') x")" "4 0"
check "the ERP story ends with exactly one invoice" \
    "$(q "SELECT count(*) FROM erp_invoices WHERE payment_id = 'PAY-7781'")" "1"
# The story's own objects (the simulated ERP) are in public: the extension's schema,
# first on the search_path, holds the extension's objects only.
check "the extension's schema holds nothing but the extension's objects" \
    "$(q "SELECT string_agg(o, ', ' ORDER BY o) FROM (
            SELECT c.oid::regclass::text AS o FROM pg_class c
             WHERE c.relnamespace = 'holdcommit'::regnamespace AND c.relkind IN ('r', 'v', 'S', 'p', 'm', 'f')
               AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_class'::regclass
                                  AND d.objid = c.oid AND d.deptype IN ('e', 'a', 'i'))
            UNION ALL
            SELECT p.oid::regprocedure::text FROM pg_proc p
             WHERE p.pronamespace = 'holdcommit'::regnamespace
               AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass
                                  AND d.objid = p.oid AND d.deptype = 'e')) x")" ""
