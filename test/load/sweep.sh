#!/usr/bin/env bash
# The background sweeper, on the harness's server (the
# library is preloaded; the sweeper is off until this script turns it on,
# with a 1 s interval, for its own databases only):
#   visible in pg_stat_activity; sweeps expired holds and reservations within
#   two intervals with no other call; hc_sweeper_status shows it; a killed
#   worker comes back; a run that fails is logged and recorded and changes
#   nothing, and the next run sweeps; a SIGHUP change of the interval takes effect; a
#   database without the extension is skipped with one LOG line while the
#   others are swept; a database created and given the extension later is
#   swept without a restart; manual sweeps racing the worker release each
#   reservation once; its memory stays flat from run to run.
. "$(dirname "$0")/lib.bash"
load_setup hc_load_sweeper 10
late=hc_load_sweeper_late
bare=hc_load_sweeper_bare
log=${TMPDIR:-/tmp}/holdcommit-$PGPORT/server.log
[ -r "$log" ] || { echo "not ok - server log readable at $log"; exit 0; }

for d in $late $bare; do
    psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $d WITH (FORCE)" >/dev/null 2>&1
done
psql -X -q -d postgres -c "CREATE DATABASE $bare" >/dev/null
trap 'sweeper_off; for d in $late $bare; do psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $d WITH (FORCE)" >/dev/null 2>&1; done; load_cleanup' EXIT

q "CREATE EXTENSION holdcommit" >/dev/null
q "SELECT count(hc_asset_add('SWP-' || i)) FROM generate_series(1, 20) i;
   SELECT hc_stock_set('SWP-P1', 100), hc_stock_set('SWP-P2', 100);" >/dev/null

# age SQL-WHERE: make the holds and stock reservations chosen by the
# condition expire, as if made two hours ago (a superuser's shortcut).
age_holds() {
    q "UPDATE hc_assets SET hold_expires_at = hold_expires_at - interval '2 hours'
        WHERE status = 'HELD' AND $1;
       UPDATE hc_reservations SET expires_at = expires_at - interval '2 hours'
        WHERE status = 'HELD' AND asset_id IN (SELECT id FROM hc_assets WHERE $1)" >/dev/null
}
age_orders() {
    q "UPDATE hc_stock_reservation_lines SET expires_at = expires_at - interval '2 hours'
        WHERE reservation_id IN (SELECT id FROM hc_stock_reservations WHERE $1);
       UPDATE hc_stock_reservations SET expires_at = expires_at - interval '2 hours' WHERE $1" >/dev/null
}
sweeper_pid() {
    psql -X -qAt -d postgres -c "SELECT pid FROM pg_stat_activity
        WHERE backend_type = 'holdcommit sweeper' AND datname = '$1'"
}
log_count() { grep -c "$1" "$log"; }

skips_before=$(log_count "skips database \"$bare\"")
sweeper_on "$db,$late,$bare" 1

##############################################################################
# visible, and sweeping with no other call
##############################################################################
check "the launcher is in pg_stat_activity" \
    "$(psql -X -qAt -d postgres -c "SELECT count(*) FROM pg_stat_activity
        WHERE backend_type = 'holdcommit launcher' AND application_name = 'holdcommit launcher'")" "1"
waited=$(wait_for 5 "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'holdcommit sweeper'
                        AND application_name = 'holdcommit sweeper' AND datname = current_database()" 1)
check "a sweeper for the database is in pg_stat_activity (after ${waited} s)" "$waited" "${waited%timeout}"

q "SELECT count(hc_hold('SWP-' || i, 'b' || i, 'swp-k' || i, '1 hour')) FROM generate_series(1, 10) i;
   SELECT count(hc_reserve_items(jsonb_build_array(jsonb_build_object('product_id', 'SWP-P1', 'qty', 2),
                                                   jsonb_build_object('product_id', 'SWP-P2', 'qty', 1)),
                                 'o' || i, 'swp-o' || i, '1 hour')) FROM generate_series(1, 5) i;" >/dev/null
age_holds "id IN ('SWP-1', 'SWP-2', 'SWP-3', 'SWP-4')"
age_orders "buyer_id IN ('o1', 'o2')"
waited=$(wait_for 2 "SELECT count(*) FROM hc_reservations WHERE status = 'HELD' AND expires_at <= clock_timestamp()" 0)
check "expired holds swept within two intervals, no other call (${waited} s)" "$waited" "${waited%timeout}"
waited=$(wait_for 2 "SELECT count(*) FROM hc_stock_reservations WHERE status = 'RESERVED' AND expires_at <= clock_timestamp()" 0)
check "expired stock reservations swept within two intervals (${waited} s)" "$waited" "${waited%timeout}"
check "the assets are back on sale, the live holds stay" \
    "$(q "SELECT string_agg(status || ':' || n, ' ' ORDER BY status) FROM
            (SELECT status, count(*) n FROM hc_assets GROUP BY status) s")" "AVAILABLE:14 HELD:6"
check "reserved counts only the live orders" \
    "$(q "SELECT string_agg(reserved::text, ',' ORDER BY product_id) FROM hc_inventory")" "6,3"
check "the ledger names the sweep and the role it runs as" \
    "$(q "SELECT count(*) || ' ' || string_agg(DISTINCT actor || '/' || function, ',')
            FROM hc_ledger WHERE source = 'sweep'")" "8 postgres/hc_sweep"
check "hc_sweeper_status shows the runs and what they swept" \
    "$(q "SELECT database = current_database(), pid = (SELECT pid FROM pg_stat_activity
                 WHERE backend_type = 'holdcommit sweeper' AND datname = current_database()),
                 runs > 1, total_expired_holds, total_expired_reservations,
                 last_end >= last_start, next_run > last_end, last_error IS NULL
            FROM hc_sweeper_status")" "t|t|t|4|2|t|t|t"
check "hc_check() finds nothing" "$(q "SELECT count(*) FROM hc_check()")" "0"

##############################################################################
# a killed worker comes back
##############################################################################
pid=$(sweeper_pid "$db")
psql -X -qAt -d postgres -c "SELECT pg_terminate_backend($pid)" >/dev/null
waited=$(wait_for 5 "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'holdcommit sweeper'
                        AND datname = current_database() AND pid <> $pid" 1)
check "a terminated sweeper comes back (${waited} s)" "$waited" "${waited%timeout}"
age_holds "id = 'SWP-5'"
waited=$(wait_for 2 "SELECT status FROM hc_assets WHERE id = 'SWP-5'" AVAILABLE)
check "and sweeps (${waited} s)" "$waited" "${waited%timeout}"

##############################################################################
# a run that fails is logged and recorded, changes nothing, and the next run
# tries again; a run that cannot record itself either is logged
##############################################################################
# The sweeper waits for a table lock at most 200 ms (a database setting: it
# takes effect when the terminated worker comes back).
psql -X -q -d postgres -c "ALTER DATABASE $db SET lock_timeout = '200ms'" >/dev/null
psql -X -qAt -d postgres -c "SELECT pg_terminate_backend($(sweeper_pid "$db"))" >/dev/null
q "SELECT count(hc_hold('SWP-11', 'f', 'swp-fail-1', '1 hour'))" >/dev/null
failed_line="holdcommit sweeper run in database \"$db\" failed: canceling statement due to lock timeout"
unrecorded_line="holdcommit sweeper could not record its run in database \"$db\": canceling statement due to lock timeout"
failed_before=$(log_count "$failed_line")
unrecorded_before=$(log_count "$unrecorded_line")
# wait_log SECONDS PATTERN BEFORE: until the log has more lines matching
# PATTERN than BEFORE; print yes or no.
wait_log() {
    local i
    for i in $(seq 1 $(($1 * 10))); do
        [ "$(log_count "$2")" -gt "$3" ] && { echo yes; return; }
        sleep 0.1
    done
    echo no
}

# A session holds the ledger locked for 4 s: every run fails before it writes.
# (The test's own sessions wait for locks as long as it takes.)
export PGOPTIONS="-c lock_timeout=0"
psql -X -q -d "$db" -c "BEGIN" -c "LOCK hc_ledger" -c "SELECT pg_sleep(4)" -c "COMMIT" >/dev/null &
locker=$!
sleep 0.3
age_holds "id = 'SWP-11'"
check "a run that fails is logged" "$(wait_log 3 "$failed_line" "$failed_before")" "yes"
failing_pid=$(sweeper_pid "$db")
waited=$(wait_for 3 "SELECT count(*) FROM hc_sweeper_status
                      WHERE last_error = 'canceling statement due to lock timeout'
                        AND last_error_at > clock_timestamp() - interval '3 seconds'" 1)
check "and recorded in hc_sweeper_status (${waited} s)" "$waited" "${waited%timeout}"
check "it changed nothing: the expired hold is still HELD" \
    "$(q "SELECT a.status || ' ' || r.status FROM hc_assets a JOIN hc_reservations r ON r.id = a.current_reservation_id
          WHERE a.id = 'SWP-11' AND a.hold_expires_at <= clock_timestamp()")" "HELD HELD"
wait $locker

# Now hc_sweeper_status is locked too: the run's record cannot be written.
psql -X -q -d "$db" -c "BEGIN" -c "LOCK hc_ledger, hc_sweeper_status" -c "SELECT pg_sleep(3)" \
    -c "COMMIT" >/dev/null &
locker=$!
check "a run that cannot record itself is logged" "$(wait_log 3 "$unrecorded_line" "$unrecorded_before")" "yes"
wait $locker
waited=$(wait_for 3 "SELECT status FROM hc_assets WHERE id = 'SWP-11'" AVAILABLE)
check "the locks gone, the next run sweeps (${waited} s)" "$waited" "${waited%timeout}"
waited=$(wait_for 3 "SELECT last_end > last_error_at FROM hc_sweeper_status" t)
check "that run is recorded (${waited} s)" "$waited" "${waited%timeout}"
check "the last error stays until the next failure" \
    "$(q "SELECT last_error FROM hc_sweeper_status")" "canceling statement due to lock timeout"
check "the sweeper lived through both" "$(sweeper_pid "$db")" "$failing_pid"
unset PGOPTIONS
psql -X -q -d postgres -c "ALTER DATABASE $db RESET lock_timeout" >/dev/null
psql -X -qAt -d postgres -c "SELECT pg_terminate_backend($(sweeper_pid "$db"))" >/dev/null

##############################################################################
# a SIGHUP change of the interval takes effect
##############################################################################
psql -X -q -d postgres -c "ALTER SYSTEM SET holdcommit.sweep_interval = 3" -c "SELECT pg_reload_conf()" >/dev/null
sleep 4.5
check "after a reload with a 3 s interval the next run is due 3 s after the last" \
    "$(q "SELECT round(extract(epoch FROM next_run - last_end)) FROM hc_sweeper_status")" "3"
runs0=$(q "SELECT runs FROM hc_sweeper_status")
sleep 6.5
runs=$(( $(q "SELECT runs FROM hc_sweeper_status") - runs0 ))
check "two or three runs in 6.5 s at a 3 s interval (got $runs)" "$([ $runs -ge 2 ] && [ $runs -le 3 ] && echo yes)" "yes"
psql -X -q -d postgres -c "ALTER SYSTEM SET holdcommit.sweep_interval = 0" -c "SELECT pg_reload_conf()" >/dev/null
waited=$(wait_for 5 "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'holdcommit sweeper'" 0)
check "interval 0 stops every sweeper (${waited} s)" "$waited" "${waited%timeout}"
psql -X -q -d postgres -c "ALTER SYSTEM SET holdcommit.sweep_interval = 1" -c "SELECT pg_reload_conf()" >/dev/null
waited=$(wait_for 5 "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'holdcommit sweeper' AND datname = current_database()" 1)
check "interval 1 starts them again (${waited} s)" "$waited" "${waited%timeout}"

##############################################################################
# a database without the extension, and one given it later
##############################################################################
sleep 3
check "a database without the extension is skipped with one LOG line" \
    "$(( $(log_count "skips database \"$bare\"") - skips_before ))" "1"
check "no sweeper stays in it" \
    "$(psql -X -qAt -d postgres -c "SELECT count(*) FROM pg_stat_activity WHERE datname = '$bare'")" "0"
age_holds "id = 'SWP-6'"
waited=$(wait_for 2 "SELECT status FROM hc_assets WHERE id = 'SWP-6'" AVAILABLE)
check "the other databases are still swept (${waited} s)" "$waited" "${waited%timeout}"

psql -X -q -d postgres -c "CREATE DATABASE $late" >/dev/null
psql -X -q -d $late -c "CREATE EXTENSION holdcommit" \
    -c "SELECT hc_asset_add('LATE-1')" -c "SELECT hc_hold('LATE-1', 'b', 'late-k', '1 hour')" \
    -c "UPDATE hc_assets SET hold_expires_at = hold_expires_at - interval '2 hours'" \
    -c "UPDATE hc_reservations SET expires_at = expires_at - interval '2 hours'" >/dev/null
waited=$(db=$late wait_for 5 "SELECT status FROM hc_assets WHERE id = 'LATE-1'" AVAILABLE)
check "a database created and given the extension later is swept, no restart (${waited} s)" \
    "$waited" "${waited%timeout}"
check "its sweeper is in pg_stat_activity" "$(sweeper_pid $late | wc -l)" "1"

# DROP DATABASE needs the database to itself: its sweeper steps aside, and
# is not started again in a database that is gone.
mark=$(wc -l <"$log")
psql -X -q -d postgres -c "DROP DATABASE $late" >"$work/drop.out" 2>&1
check "DROP DATABASE without FORCE succeeds while the database has a sweeper" \
    "$(cat "$work/drop.out")$(psql -X -qAt -d postgres -c "SELECT count(*) FROM pg_database WHERE datname = '$late'")" "0"
sleep 3
check "no sweeper tries the dropped database" \
    "$(tail -n +"$((mark + 1))" "$log" | grep -cE 'FATAL: +database [0-9]+ does not exist')" "0"

##############################################################################
# manual sweeps racing the worker: each reservation released once
##############################################################################
psql -X -q -d postgres -c "ALTER SYSTEM SET holdcommit.sweep_batch = 50" -c "SELECT pg_reload_conf()" >/dev/null
q "SELECT count(hc_asset_add('RACE-' || i)) FROM generate_series(1, 3000) i;
   SELECT hc_stock_set('RACE-P' || i, 1000) FROM generate_series(1, 5) i;
   SELECT count(hc_hold('RACE-' || i, 'r' || i, 'race-k' || i, '1 hour')) FROM generate_series(1, 3000) i;
   SELECT count(hc_reserve_items(jsonb_build_array(jsonb_build_object('product_id', 'RACE-P' || (i % 5 + 1), 'qty', 1),
                                                   jsonb_build_object('product_id', 'RACE-P' || ((i + 1) % 5 + 1), 'qty', 2)),
                                 'ro' || i, 'race-o' || i, '1 hour')) FROM generate_series(1, 300) i;" >/dev/null
cat >"$work/race.sql" <<'SQL'
SELECT * FROM hc_sweep(25);
SQL
before=$(q "SELECT total_expired_holds || ',' || total_expired_reservations FROM hc_sweeper_status")
age_holds "id LIKE 'RACE-%'"
age_orders "buyer_id LIKE 'ro%'"
# Start the manual sweeps once the worker is in the middle of its run (it
# commits every 50 rows), so that both really sweep the same backlog.
for i in $(seq 100); do
    [ "$(psql -X -qAt -d postgres -c "SELECT state FROM pg_stat_activity
            WHERE backend_type = 'holdcommit sweeper' AND datname = '$db'")" == active ] && break
    sleep 0.02
done
"$pgbench" -n -f "$work/race.sql" -c 4 -j 2 -T 4 "$db" >"$work/race.log" 2>&1
waited=$(wait_for 5 "SELECT count(*) FROM hc_reservations WHERE status = 'HELD' AND expires_at <= clock_timestamp()" 0)
check "the race leaves no expired hold (${waited} s)" "$waited" "${waited%timeout}"
check "each raced hold expired once: one ledger row each" \
    "$(q "SELECT count(*) || '/' || count(DISTINCT reservation_id) FROM hc_ledger
           WHERE kind = 'asset' AND event = 'expire' AND entity_id LIKE 'RACE-%'")" "3000/3000"
check "each raced stock line released once" \
    "$(q "SELECT count(*) || '/' || sum(-reserved_delta) FROM hc_ledger
           WHERE kind = 'product' AND event = 'expire' AND entity_id LIKE 'RACE-P%'")" "600/900"
check "the raced products reserve nothing" \
    "$(q "SELECT sum(reserved) FROM hc_inventory WHERE product_id LIKE 'RACE-P%'")" "0"
check "the raced orders all ended EXPIRED" \
    "$(q "SELECT string_agg(DISTINCT status, ',') FROM hc_stock_reservations WHERE buyer_id LIKE 'ro%'")" "EXPIRED"
by_worker=$(q "SELECT total_expired_holds FROM hc_sweeper_status")
echo "# race: the worker expired $(( by_worker - ${before%,*} )) holds, the manual sweeps the rest"
check "hc_check() agrees with the ledger" "$(q "SELECT count(*) FROM hc_check()")" "0"

##############################################################################
# memory stays flat from run to run
##############################################################################
pid=$(sweeper_pid "$db")
# kept_memory: the bytes of the worker's memory contexts as it logs them,
# less a transaction's (the log may catch it in the middle of a run).
kept_memory() {
    local mark
    mark=$(wc -l <"$log")
    psql -X -qAt -d postgres -c "SELECT pg_log_backend_memory_contexts($pid)" >/dev/null
    sleep 1.5
    tail -n +"$((mark + 1))" "$log" | grep "\[$pid\]" | awk '
        /level: 1;/ { in_xact = /TopTransactionContext/ }
        / total in / && !in_xact { sub(/ total in .*/, ""); sub(/.* /, ""); kept += $0 }
        END { print kept + 0 }'
}
# Its caches grow and shrink by some 100 kB as plans and relations are
# rebuilt after invalidations; what must not happen is growth run after run.
# Three samples 12 s (12 runs) apart, each run sweeping a few holds.
sweep_some() {
    q "SELECT count(hc_hold('SWP-' || i, 'm', 'swp-m' || i || '-' || $1, '1 hour'))
         FROM generate_series(7, 20) i WHERE (SELECT status FROM hc_assets WHERE id = 'SWP-' || i) = 'AVAILABLE'" >/dev/null
    age_holds "id LIKE 'SWP-%'"
}
samples=()
for round in 1 2 3; do
    for s in $(seq 1 6); do sweep_some "$round$s"; sleep 2; done
    samples+=("$(kept_memory)")
done
echo "# sweeper memory outside transactions, 12 runs apart: ${samples[*]} bytes"
check "the sweeper's memory does not grow from run to run (within 128 kB of cache churn)" \
    "$(awk -v a="${samples[0]:-0}" -v c="${samples[2]:-0}" 'BEGIN { print (a > 0 && c - a < 131072) ? "flat" : "grows" }')" "flat"
