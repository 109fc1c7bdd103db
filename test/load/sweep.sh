#!/usr/bin/env bash
# The background sweeper in a few databases, on the harness's server (the
# library is preloaded; the sweeper is off until this script turns it on,
# with a 1 s interval and a 1 s time slice, for its own databases only):
#   its runs are in pg_stat_activity, sweep expired holds and reservations
#   within two intervals with no other call, and show in hc_sweeper_status
#   and hc_sweeper_databases; runs start when they fall due, not a tick
#   late; a terminated run is followed by the next; a run that fails is
#   logged with its SQLSTATE, recorded, named once in a WARNING and changes
#   nothing, and the next run sweeps; a batch that fails mid-run leaves the
#   committed batches' counts; serializable, read-only and timeout defaults
#   of the database do not stop it; a FATAL while a command needs the
#   database to itself does not leave it paused; such a command stops a run
#   in progress with a LOG line, no FATAL, no failure, and the database is
#   swept afterwards, while a stranger's refused one stops none; a SIGHUP
#   change of the interval takes effect; a database without the extension
#   is looked at and skipped with one LOG line; a database created and given
#   the extension later is swept; DROP DATABASE steps over it; manual sweeps
#   racing the worker release each reservation once; a manual sweep of a
#   large backlog stays in flat memory.
. "$(dirname "$0")/lib.bash"
load_setup hc_load_sweeper 10
late=hc_load_sweeper_late
bare=hc_load_sweeper_bare
# Another database with the extension, from which the state of $db is read
# while a command keeps new sessions out of $db.
watch=hc_load_sweeper_watch
log=${TMPDIR:-/tmp}/holdcommit-$PGPORT/server.log
[ -r "$log" ] || { echo "not ok - server log readable at $log"; exit 0; }

for d in $late $bare $watch ${db}_copy; do
    psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $d WITH (FORCE)" >/dev/null 2>&1
done
psql -X -q -d postgres -c "CREATE DATABASE $bare" -c "CREATE DATABASE $watch" >/dev/null
psql -X -q -d $watch -c "CREATE EXTENSION holdcommit" >/dev/null
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
    q "UPDATE hc_stock_order_lines SET expires_at = expires_at - interval '2 hours'
        WHERE reservation_id IN (SELECT id FROM hc_stock_reservations WHERE $1);
       UPDATE hc_stock_orders SET expires_at = expires_at - interval '2 hours' WHERE $1" >/dev/null
}
# hold_expired ID: hold the asset with a fresh key and make the hold expire.
hold_expired() {
    q "SELECT count(hc_hold('$1', 'b', 'swp-' || md5(random()::text), '1 hour'))" >/dev/null
    age_holds "id = '$1'"
}
state() {
    psql -X -qAt -d $watch -c "SELECT state FROM hc_sweeper_databases WHERE database = '${1:-$db}'"
}
log_count() { grep -c "$1" "$log"; }
# lock_tables TABLES: a session of $db holds TABLES locked (ACCESS EXCLUSIVE)
# until unlock_tables cancels it; returns once it holds them (up to 10 s).
lock_tables() {
    PGAPPNAME=hc_load_locker psql -X -q -d "$db" -c "BEGIN" -c "LOCK $1" -c "SELECT pg_sleep(300)" \
        -c "COMMIT" >/dev/null 2>&1 &
    locker=$!
    wait_for 10 "SELECT count(*) FROM pg_stat_activity
                  WHERE application_name = 'hc_load_locker' AND wait_event = 'PgSleep'" 1 >/dev/null
}
unlock_tables() {
    psql -X -qAt -d postgres -c "SELECT pg_cancel_backend(pid) FROM pg_stat_activity
                                  WHERE application_name = 'hc_load_locker'" >/dev/null
    wait $locker
}
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

skips_before=$(log_count "skips database \"$bare\"")
psql -X -q -d postgres -c "ALTER SYSTEM SET holdcommit.sweep_time_slice = '1s'" >/dev/null
sweeper_on "$db,$late,$bare,${db}_copy" 1
trap 'sweeper_off; psql -X -q -d postgres -c "ALTER SYSTEM RESET holdcommit.sweep_time_slice" -c "SELECT pg_reload_conf()" >/dev/null
      for d in $late $bare $watch ${db}_copy; do psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $d WITH (FORCE)" >/dev/null 2>&1; done
      load_cleanup' EXIT

##############################################################################
# visible, and sweeping with no other call
##############################################################################
check "the launcher is in pg_stat_activity" \
    "$(psql -X -qAt -d postgres -c "SELECT count(*) FROM pg_stat_activity
        WHERE backend_type = 'holdcommit launcher' AND application_name = 'holdcommit launcher'")" "1"
check "a sweeper's run in the database shows in pg_stat_activity" \
    "$(sample_sweepers 3 "datname = '$db' AND application_name = 'holdcommit sweeper'" | cut -d' ' -f1)" "seen"

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
sleep 1.2
check "hc_sweeper_status shows the runs and what they swept" \
    "$(q "SELECT database = current_database(), pid > 0, runs > 1, total_expired_holds,
                 total_expired_reservations, last_end >= last_start, next_run > last_end,
                 last_error IS NULL
            FROM hc_sweeper_status")" "t|t|t|4|2|t|t|t"
waited=$(wait_for 3 "SELECT state, installed, runs > 1, failures, last_swept > clock_timestamp() - interval '3 s',
                             next_run < clock_timestamp() + interval '2 s'
                        FROM hc_sweeper_databases WHERE database = current_database()" "ok|t|t|0|t|t")
check "hc_sweeper_databases shows it swept, from shared memory (${waited} s)" "$waited" "${waited%timeout}"
check "hc_check() finds nothing" "$(q "SELECT count(*) FROM hc_check()")" "0"

##############################################################################
# a run starts when it falls due, not a launcher's tick later
##############################################################################
# Every 10 ms, from the entry in shared memory: each run's start against the
# time it fell due (next_run, until the launcher reaps the run), until 10
# runs are seen (a busy machine hides some: the sample misses the moment
# between a run's start and its reaping), at most 60 s.  The launcher used
# to sleep a whole tick (1 s) past a run that fell due while it worked: one
# run in five or so at a 1 s interval.
lateness=$(q "CREATE TEMP TABLE starts (last_start timestamptz PRIMARY KEY, due timestamptz);
          DO \$\$ DECLARE until timestamptz := clock_timestamp() + interval '60 seconds'; BEGIN
            WHILE clock_timestamp() < until AND (SELECT count(*) FROM starts) < 10 LOOP
              INSERT INTO starts SELECT last_start, next_run FROM hc_sweeper_databases
               WHERE database = current_database() AND last_start >= next_run ON CONFLICT DO NOTHING;
              PERFORM pg_sleep(0.01);
            END LOOP; END \$\$;
          SELECT count(*) >= 10, count(*) FILTER (WHERE last_start - due >= interval '0.5 s'),
                 round(extract(epoch FROM max(last_start - due))::numeric, 2) FROM starts")
echo "# runs seen, of them late by half a second or more, the latest: $lateness"
check "runs start when they fall due: none of 10 or more half a second late" "${lateness%|*}" "t|0"

##############################################################################
# a terminated run: the next one sweeps
##############################################################################
for i in $(seq 100); do
    pid=$(psql -X -qAt -d postgres -c "SELECT pid FROM pg_stat_activity
            WHERE backend_type = 'holdcommit sweeper' AND datname = '$db'")
    [ -n "$pid" ] && break
    sleep 0.02
done
psql -X -qAt -d postgres -c "SELECT pg_terminate_backend($pid)" >/dev/null 2>&1
hold_expired SWP-15
waited=$(wait_for 3 "SELECT status FROM hc_assets WHERE id = 'SWP-15'" AVAILABLE)
check "after a terminated run the next one sweeps (${waited} s)" "$waited" "${waited%timeout}"

##############################################################################
# a run that fails is logged with its SQLSTATE and recorded, named once in a
# WARNING, changes nothing, and the next run tries again
##############################################################################
failed_line="holdcommit sweeper run in database \"$db\" failed with SQLSTATE"
warning_line="WARNING:  holdcommit sweeper: database \"$db\" is not swept: its last run failed"
again_line="holdcommit sweeper: database \"$db\" is swept again"
unrecorded_line="holdcommit sweeper record of its run in database \"$db\" failed with SQLSTATE"
failed_before=$(log_count "$failed_line")
warned_before=$(log_count "$warning_line")
again_before=$(log_count "$again_line")
unrecorded_before=$(log_count "$unrecorded_line")

# A session holds the ledger locked until two runs have failed: every run (a
# 1 s slice, its statements' timeouts what is left of it) fails before it
# writes.  (Held for a fixed 4 s, it once covered only one run on a loaded
# machine.)
export PGOPTIONS="-c lock_timeout=0"
q "SELECT count(hc_hold('SWP-11', 'f', 'swp-fail-1', '1 hour'))" >/dev/null
lock_tables hc_ledger
age_holds "id = 'SWP-11'"
check "a run that fails is logged with its SQLSTATE" "$(wait_log 10 "$failed_line" "$failed_before")" "yes"
waited=$(wait_for 5 "SELECT last_error_sqlstate || ' ' || last_error FROM hc_sweeper_status
                      WHERE last_error_at > clock_timestamp() - interval '10 seconds'" \
                   "57014 canceling statement due to statement timeout")
check "and recorded in hc_sweeper_status with its SQLSTATE (${waited} s)" "$waited" "${waited%timeout}"
# Between two runs: while one runs the view says running.
waited=$(wait_for 5 "SELECT state, last_error_sqlstate, reason FROM hc_sweeper_databases WHERE database = current_database()" \
                   "failed|57014|canceling statement due to statement timeout")
check "hc_sweeper_databases says failed, with the SQLSTATE and why (${waited} s)" "$waited" "${waited%timeout}"
check "it changed nothing: the expired hold is still HELD" \
    "$(q "SELECT a.status || ' ' || r.status FROM hc_assets a JOIN hc_reservations r ON r.id = a.current_reservation_id
          WHERE a.id = 'SWP-11' AND a.hold_expires_at <= clock_timestamp()")" "HELD HELD"
wait_log 10 "$failed_line" "$((failed_before + 1))" >/dev/null
unlock_tables
waited=$(wait_for 3 "SELECT status FROM hc_assets WHERE id = 'SWP-11'" AVAILABLE)
check "the lock gone, the next run sweeps (${waited} s)" "$waited" "${waited%timeout}"
waited=$(wait_for 3 "SELECT state FROM hc_sweeper_databases WHERE database = current_database()" ok)
check "and hc_sweeper_databases says ok again (${waited} s)" "$waited" "${waited%timeout}"
# The launcher logs the recovery on its next look, a moment after the state
# reads ok (it failed once in CI when counted at once).
wait_log 3 "$again_line" "$again_before" >/dev/null
check "runs failed twice or more: one WARNING naming the database, one LOG once it is swept again" \
    "$(( $(log_count "$failed_line") - failed_before >= 2 )) $(( $(log_count "$warning_line") - warned_before )) $(( $(log_count "$again_line") - again_before ))" \
    "1 1 1"

# Now hc_sweeper_status is locked too, until a run has failed to record
# itself.
q "SELECT count(hc_hold('SWP-14', 'f', 'swp-fail-2', '1 hour'))" >/dev/null
lock_tables "hc_sweeper_status, hc_ledger"
age_holds "id = 'SWP-14'"
check "a run that cannot record itself is logged" "$(wait_log 10 "$unrecorded_line" "$unrecorded_before")" "yes"
unlock_tables
waited=$(wait_for 3 "SELECT status FROM hc_assets WHERE id = 'SWP-14'" AVAILABLE)
check "the locks gone, the next run sweeps (${waited} s)" "$waited" "${waited%timeout}"
waited=$(wait_for 3 "SELECT last_end > last_error_at FROM hc_sweeper_status" t)
check "that run is recorded (${waited} s)" "$waited" "${waited%timeout}"
check "the last error stays until the next failure" \
    "$(q "SELECT last_error FROM hc_sweeper_status")" "canceling statement due to statement timeout"
check "the session is usable" "$(q "SELECT 1")" "1"
unset PGOPTIONS

##############################################################################
# a batch failing mid-run: only the committed batches count
##############################################################################
# Batches of 10; a trigger on the ledger fails the 11th row: the first batch
# commits, the second rolls back, and what the run records is the first.
psql -X -q -d postgres -c "ALTER SYSTEM SET holdcommit.sweep_batch = 10" -c "SELECT pg_reload_conf()" >/dev/null
q "CREATE TABLE public.mid (i int);
   SELECT count(hc_asset_add('MID-' || i)) FROM generate_series(1, 25) i;
   SELECT count(hc_hold('MID-' || i, 'm', 'mid-k' || i, '1 hour')) FROM generate_series(1, 25) i;
   CREATE SEQUENCE public.ledger_rows;
   CREATE FUNCTION public.fail_after_ten() RETURNS trigger LANGUAGE plpgsql AS
     \$\$BEGIN IF pg_catalog.nextval('public.ledger_rows') > 10 THEN
       RAISE EXCEPTION 'the eleventh ledger row' USING ERRCODE = 'P0001'; END IF; RETURN NEW; END\$\$;
   CREATE TRIGGER fail_after_ten BEFORE INSERT ON hc_ledger FOR EACH ROW
     WHEN (NEW.entity_id LIKE 'MID-%') EXECUTE FUNCTION public.fail_after_ten();" >/dev/null
total0=$(q "SELECT total_expired_holds FROM hc_sweeper_status")
age_holds "id LIKE 'MID-%'"
waited=$(wait_for 3 "SELECT count(*) FROM hc_sweeper_status WHERE last_error = 'the eleventh ledger row'" 1)
check "a run whose second batch fails is recorded as failed (${waited} s)" "$waited" "${waited%timeout}"
check "ten holds swept: the first batch, committed" \
    "$(q "SELECT count(*) FROM hc_assets WHERE id LIKE 'MID-%' AND status = 'AVAILABLE'")" "10"
# Read between two runs (each fails: the sequence is past 10).
waited=$(wait_for 5 "SELECT s.total_expired_holds - $total0, d.state, d.last_error_sqlstate
                      FROM hc_sweeper_status s, hc_sweeper_databases d WHERE d.database = s.database" \
                   "10|failed|P0001")
check "hc_sweeper_status counts only what was committed; hc_sweeper_databases says failed (${waited} s)" \
    "$waited" "${waited%timeout}"
q "DROP TRIGGER fail_after_ten ON hc_ledger" >/dev/null
waited=$(wait_for 3 "SELECT count(*) FROM hc_assets WHERE id LIKE 'MID-%' AND status = 'AVAILABLE'" 25)
check "the trigger gone, the next run sweeps the other 15 (${waited} s)" "$waited" "${waited%timeout}"
check "the 25 counted once in the totals" "$(q "SELECT total_expired_holds - $total0 FROM hc_sweeper_status")" "25"
psql -X -q -d postgres -c "ALTER SYSTEM RESET holdcommit.sweep_batch" -c "SELECT pg_reload_conf()" >/dev/null

##############################################################################
# the database's defaults do not decide the sweeper's transactions
##############################################################################
psql -X -q -d postgres -c "ALTER DATABASE $db SET default_transaction_isolation = 'serializable'" \
    -c "ALTER DATABASE $db SET default_transaction_read_only = on" \
    -c "ALTER DATABASE $db SET statement_timeout = '1ms'" -c "ALTER DATABASE $db SET lock_timeout = '1ms'" >/dev/null
sleep 1.5
export PGOPTIONS="-c default_transaction_isolation=read\\ committed -c default_transaction_read_only=off -c statement_timeout=0 -c lock_timeout=0"
hold_expired SWP-12
waited=$(wait_for 3 "SELECT status FROM hc_assets WHERE id = 'SWP-12'" AVAILABLE)
check "serializable, read-only and 1 ms timeouts as the database's defaults: still swept (${waited} s)" \
    "$waited" "${waited%timeout}"
# Read between two runs: while one runs the view says running.
waited=$(wait_for 5 "SELECT state FROM hc_sweeper_databases WHERE database = current_database()" ok)
check "and recorded (${waited} s)" "$waited" "${waited%timeout}"
unset PGOPTIONS
psql -X -q -d postgres -c "ALTER DATABASE $db RESET ALL" >/dev/null

##############################################################################
# a FATAL while a command needs the database to itself leaves no pause
##############################################################################
# A session stays connected to the database (until cancelled), so each
# command waits for it (5 s, then fails); the command's session is terminated
# while it waits and the database reads paused.  Meanwhile the command keeps
# new sessions out of the database: its state is read from another one.
# (The command once ran late on a loaded machine, after a blocker of a fixed
# 4 s had gone: the rename succeeded.)
for cmd in "CREATE DATABASE ${db}_copy TEMPLATE $db" "ALTER DATABASE $db RENAME TO ${db}_renamed" \
           "DROP DATABASE $db"; do
    PGAPPNAME=hc_load_blocker psql -X -q -d "$db" -c "SELECT pg_sleep(300)" >/dev/null 2>&1 &
    blocker=$!
    wait_for 10 "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'hc_load_blocker'
                  AND wait_event = 'PgSleep'" 1 >/dev/null
    PGAPPNAME=hc_load_command psql -X -q -d postgres -c "$cmd" >/dev/null 2>&1 &
    command=$!
    for i in $(seq 1 100); do
        paused=$(state)
        [ "$paused" = paused ] && break
        sleep 0.05
    done
    psql -X -qAt -d postgres -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                                  WHERE application_name = 'hc_load_command'" >/dev/null
    wait $command
    psql -X -qAt -d postgres -c "SELECT pg_cancel_backend(pid) FROM pg_stat_activity
                                  WHERE application_name = 'hc_load_blocker'" >/dev/null
    wait $blocker
    hold_expired SWP-13
    waited=$(wait_for 3 "SELECT status FROM hc_assets WHERE id = 'SWP-13'" AVAILABLE)
    check "${cmd%% $db*}: paused while it waits ($paused), swept after its FATAL (${waited} s)" \
        "$paused $waited" "paused ${waited%timeout}"
done

##############################################################################
# a command that needs the database to itself stops a run in progress
# quietly: no FATAL, not a failure; a role that may not run it stops none
##############################################################################
# A trigger on the ledger sleeps 20 ms at every expired hold of a backlog of
# 2,000 (batches of 10, a 60 s slice): a run has 40 s of work at least, so
# each command below meets one in progress, in the trigger's pg_sleep.
psql -X -q -d postgres -c "ALTER SYSTEM SET holdcommit.sweep_time_slice = '60s'" \
    -c "ALTER SYSTEM SET holdcommit.sweep_batch = 10" -c "SELECT pg_reload_conf()" >/dev/null
q "SELECT count(hc_asset_add('PAUSE-' || i)) FROM generate_series(1, 2000) i;
   SELECT count(hc_hold('PAUSE-' || i, 'p', 'pause-k' || i, '1 hour')) FROM generate_series(1, 2000) i;
   CREATE FUNCTION public.slow_expire() RETURNS trigger LANGUAGE plpgsql AS
     \$\$BEGIN PERFORM pg_catalog.pg_sleep(0.02); RETURN NEW; END\$\$;
   CREATE TRIGGER slow_expire BEFORE INSERT ON hc_ledger FOR EACH ROW
     WHEN (NEW.entity_id LIKE 'PAUSE-%' AND NEW.event = 'expire') EXECUTE FUNCTION public.slow_expire();" >/dev/null
mark=$(wc -l <"$log")
age_holds "id LIKE 'PAUSE-%'"
# in_progress DATABASE: the pid of the run sweeping there, in the trigger
# (waited for up to 20 s; empty if none).
in_progress() {
    local i pid
    for i in $(seq 1 200); do
        pid=$(psql -X -qAt -d postgres -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'holdcommit sweeper'
                                            AND datname = '$1' AND wait_event = 'PgSleep'")
        [ -n "$pid" ] && { echo "$pid"; return; }
        sleep 0.1
    done
}
alive() { psql -X -qAt -d postgres -c "SELECT count(*) FROM pg_stat_activity WHERE pid = ${1:-0}"; }

psql -X -q -d postgres -c "DROP ROLE IF EXISTS hc_load_stranger" -c "CREATE ROLE hc_load_stranger LOGIN" >/dev/null 2>&1
pid=$(in_progress "$db")
refused=0
for i in $(seq 1 10); do
    out=$(psql -X -q -U hc_load_stranger -d postgres -c "DROP DATABASE $db" 2>&1)
    case $out in *"must be owner"*) refused=$((refused + 1)) ;; esac
done
check "ten DROP DATABASE refused to a stranger stop no run: the run in progress goes on" \
    "$refused $(alive "$pid")" "10 1"
psql -X -q -d postgres -c "DROP ROLE hc_load_stranger" >/dev/null

# Each command of the owner meets a run in progress, stops it and succeeds
# (it would fail were the run still connected): twice each kind, the second
# DROP WITH (FORCE), which terminates the sessions it finds.
stopped=0
for step in "$db|CREATE DATABASE ${db}_copy TEMPLATE $db" "$db|ALTER DATABASE $db RENAME TO ${db}_renamed" \
            "${db}_copy|DROP DATABASE ${db}_copy" "$db|CREATE DATABASE ${db}_copy TEMPLATE $db" \
            "$db|ALTER DATABASE $db RENAME TO ${db}_renamed" "${db}_copy|DROP DATABASE ${db}_copy WITH (FORCE)"; do
    pid=$(in_progress "${step%%|*}")
    out=$(psql -X -q -d postgres -c "${step#*|}" 2>&1)
    [ -n "$pid" ] && [ -z "$out" ] && [ "$(alive "$pid")" = 0 ] && stopped=$((stopped + 1))
    [ -n "$out" ] && echo "# ${step#*|}: $out"
    case $step in *RENAME*) psql -X -q -d postgres -c "ALTER DATABASE ${db}_renamed RENAME TO $db" ;; esac
done
since() { tail -n +"$((mark + 1))" "$log" | grep -cE "$1"; }
check "six runs in progress stopped by a command, each with one LOG line, no FATAL meanwhile" \
    "$stopped $(since 'LOG:  holdcommit sweeper stopped its run in database') $(since 'FATAL:')" "6 6 0"
# (A renamed database's entry starts again: failures are counted from the log.)
check "none of them a failure: no run logged as failed, none named in a WARNING as failed" \
    "$(since 'holdcommit sweeper run in database .* failed|is not swept: its last run failed')" "0"
q "DROP TRIGGER slow_expire ON hc_ledger" >/dev/null
waited=$(wait_for 20 "SELECT count(*) FROM hc_assets WHERE id LIKE 'PAUSE-%' AND status = 'AVAILABLE'" 2000)
check "and the database is swept afterwards (${waited} s)" "$waited" "${waited%timeout}"
check "each stopped batch rolled back: one expire row per hold, hc_check() finds nothing" \
    "$(q "SELECT count(*) || '/' || count(DISTINCT entity_id) FROM hc_ledger WHERE event = 'expire' AND entity_id LIKE 'PAUSE-%'") $(q "SELECT count(*) FROM hc_check()")" \
    "2000/2000 0"
psql -X -q -d postgres -c "ALTER SYSTEM SET holdcommit.sweep_time_slice = '1s'" \
    -c "ALTER SYSTEM RESET holdcommit.sweep_batch" -c "SELECT pg_reload_conf()" >/dev/null

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
sleep 1
runs0=$(q "SELECT runs FROM hc_sweeper_status")
sleep 2
check "interval 0: no run starts, and the view says off" \
    "$(q "SELECT runs FROM hc_sweeper_status") $(state)" "$runs0 off"
psql -X -q -d postgres -c "ALTER SYSTEM SET holdcommit.sweep_interval = 1" -c "SELECT pg_reload_conf()" >/dev/null
waited=$(wait_for 5 "SELECT runs > $runs0 FROM hc_sweeper_status" t)
check "interval 1 starts the runs again (${waited} s)" "$waited" "${waited%timeout}"

##############################################################################
# a database without the extension, and one given it later
##############################################################################
check "a database without the extension is skipped with one LOG line" \
    "$(( $(log_count "skips database \"$bare\"") - skips_before ))" "1"
waited=$(wait_for 5 "SELECT state FROM hc_sweeper_databases WHERE database = '$bare'" skipped)
check "and shows as skipped, no holdcommit (${waited} s)" "$waited" "${waited%timeout}"
check "no sweeper stays in it" \
    "$(psql -X -qAt -d postgres -c "SELECT count(*) FROM pg_stat_activity WHERE datname = '$bare'")" "0"

psql -X -q -d postgres -c "CREATE DATABASE $late" >/dev/null
psql -X -q -d $late -c "CREATE EXTENSION holdcommit" \
    -c "SELECT hc_asset_add('LATE-1')" -c "SELECT hc_hold('LATE-1', 'b', 'late-k', '1 hour')" \
    -c "UPDATE hc_assets SET hold_expires_at = hold_expires_at - interval '2 hours'" \
    -c "UPDATE hc_reservations SET expires_at = expires_at - interval '2 hours'" >/dev/null
waited=$(db=$late wait_for 5 "SELECT status FROM hc_assets WHERE id = 'LATE-1'" AVAILABLE)
check "a database created and given the extension later is swept, no restart (${waited} s)" \
    "$waited" "${waited%timeout}"

# DROP DATABASE needs the database to itself: its sweeper steps aside, and
# no run starts in a database that is gone.
mark=$(wc -l <"$log")
psql -X -q -d postgres -c "DROP DATABASE $late" >"$work/drop.out" 2>&1
check "DROP DATABASE without FORCE succeeds while the database is swept" \
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
before=$(q "SELECT total_expired_holds FROM hc_sweeper_status")
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
echo "# race: the worker expired $(( by_worker - before )) holds, the manual sweeps the rest"
check "hc_check() agrees with the ledger" "$(q "SELECT count(*) FROM hc_check()")" "0"
sweeper_off

##############################################################################
# a manual sweep of a large backlog stays in flat memory
##############################################################################
# A statement trigger on the ledger notes the session's memory at every
# batch of hc_sweep(100) over 20,000 expired holds: 200 batches.
q "CREATE TABLE public.sweep_memory (batch serial, bytes bigint);
   CREATE FUNCTION public.note_memory() RETURNS trigger LANGUAGE plpgsql AS
     \$\$BEGIN INSERT INTO public.sweep_memory (bytes)
       SELECT pg_catalog.sum(used_bytes) FROM pg_catalog.pg_backend_memory_contexts; RETURN NULL; END\$\$;
   SELECT count(hc_asset_add('MEM-' || i)) FROM generate_series(1, 20000) i;
   SELECT count(hc_hold('MEM-' || i, 'm', 'mem-k' || i, '1 hour')) FROM generate_series(1, 20000) i;
   CREATE TRIGGER note_memory AFTER INSERT ON hc_ledger FOR EACH STATEMENT
     EXECUTE FUNCTION public.note_memory();" >/dev/null
age_holds "id LIKE 'MEM-%'"
check "hc_sweep(100) sweeps the 20,000" "$(q "SELECT expired_holds FROM hc_sweep(100)")" "20000"
growth=$(q "SELECT (SELECT bytes FROM public.sweep_memory ORDER BY batch DESC LIMIT 1 OFFSET 1)
                 - (SELECT bytes FROM public.sweep_memory WHERE batch = 20)")
echo "# memory growth from the 20th to the last batch: $growth bytes"
check "its memory does not grow from batch to batch (under 64 kB from the 20th to the 200th)" \
    "$([ "$growth" -lt 65536 ] && echo flat || echo "grows")" "flat"
