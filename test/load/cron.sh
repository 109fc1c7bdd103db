#!/usr/bin/env bash
# pg_cron as the scheduler instead of the background worker:
# the README's recipe, run as is in cron.database_name (postgres on the test
# server, where test/server.sh preloads pg_cron), really sweeps.  pg_cron
# 1.4 schedules by the minute: this waits up to 75 s.
. "$(dirname "$0")/lib.bash"
db=postgres
cleanup() {
    psql -X -q -d postgres -c "SELECT cron.unschedule('holdcommit-sweep')" >/dev/null 2>&1
    psql -X -q -d postgres -c "DROP EXTENSION IF EXISTS pg_cron" \
        -c "DROP EXTENSION IF EXISTS holdcommit" >/dev/null 2>&1
    rm -rf "$work"
}
trap cleanup EXIT

if [ "$(q "SHOW cron.database_name" 2>/dev/null)" != "postgres" ]; then
    echo "not ok - pg_cron is preloaded with cron.database_name = postgres"
    exit 0
fi
q "SET client_min_messages = warning; DROP EXTENSION IF EXISTS holdcommit; CREATE EXTENSION holdcommit;
   CREATE EXTENSION IF NOT EXISTS pg_cron" >/dev/null
q "SELECT hc_asset_add('CRON-1'), hc_asset_add('CRON-2'), hc_stock_set('CRON-P', 5);
   SELECT hc_hold('CRON-1', 'walked-away', 'cron-k1', '1 hour');
   SELECT hc_hold('CRON-2', 'still-here', 'cron-k2', '1 hour');
   SELECT hc_reserve('CRON-P', 2, 'walked-away', 'cron-k3', '1 hour');
   UPDATE hc_assets SET hold_expires_at = hold_expires_at - interval '2 hours' WHERE id = 'CRON-1';
   UPDATE hc_reservations SET expires_at = expires_at - interval '2 hours' WHERE asset_id = 'CRON-1';
   UPDATE hc_stock_reservation_lines SET expires_at = expires_at - interval '2 hours';
   UPDATE hc_stock_reservations SET expires_at = expires_at - interval '2 hours';" >/dev/null

# The recipe of README.md, verbatim.
q "SELECT cron.schedule('holdcommit-sweep', '* * * * *', 'SELECT hc_sweep()')" >/dev/null
waited=$(wait_for 75 "SELECT status FROM hc_assets WHERE id = 'CRON-1'" AVAILABLE)
check "the cron job swept the expired hold (after ${waited} s)" "$waited" "${waited%timeout}"
waited=$(wait_for 5 "SELECT reserved FROM hc_inventory WHERE product_id = 'CRON-P'" 0)
check "and the expired stock reservation" "$waited" "${waited%timeout}"
check "the live hold stays" "$(q "SELECT status FROM hc_assets WHERE id = 'CRON-2'")" "HELD"
check "the ledger names the sweep and the job's role" \
    "$(q "SELECT string_agg(kind || ':' || source || ':' || actor, ',' ORDER BY kind)
            FROM hc_ledger WHERE event = 'expire'")" "asset:sweep:postgres,product:sweep:postgres"
waited=$(wait_for 5 "SELECT d.status FROM cron.job_run_details d JOIN cron.job j USING (jobid)
                      WHERE j.jobname = 'holdcommit-sweep' ORDER BY d.runid LIMIT 1" succeeded)
check "pg_cron records the run as succeeded" "$waited" "${waited%timeout}"
check "hc_check() finds nothing" "$(q "SELECT count(*) FROM hc_check()")" "0"
