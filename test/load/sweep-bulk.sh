#!/usr/bin/env bash
# The background sweeper under load: 100,000 expired holds are swept while
# 10 pgbench clients keep making live holds (hold + release of their own
# assets, one transaction each).  No live call may wait 100 ms or more for
# a lock the sweep holds: with log_lock_waits on and deadlock_timeout at
# 100 ms, the server logs every lock wait that reaches 100 ms, and none may
# appear, but for a table's extension lock: every inserter takes that one
# for a moment, live calls too, and on a loaded machine its holder may wait
# for a CPU (those are counted and printed).  The calls' latencies (p50, p99, max) are printed: on a loaded
# machine they include waiting for a CPU, which is not the sweep's doing.
. "$(dirname "$0")/lib.bash"
load_setup hc_load_sweeper_bulk 12
holds=100000

q "CREATE EXTENSION holdcommit;
   SELECT count(hc_asset_add('BULK-' || i)) FROM generate_series(1, $holds) i;
   SELECT count(hc_asset_add('LIVE-' || i)) FROM generate_series(0, 9) i;" >/dev/null || { echo "not ok - bulk database set up"; exit 0; }

# The holds, made by hc_hold in transactions of 1,000, two at a time, then
# aged two hours (a superuser's shortcut for "their buyers walked away").
seq 0 $((holds / 1000 - 1)) | xargs -P 2 -I{} psql -X -qAt -v ON_ERROR_STOP=1 -d "$db" -c \
    "SELECT count(hc_hold('BULK-' || i, 'buyer-' || i, 'bulk-' || i, '1 hour'))
       FROM generate_series({} * 1000 + 1, {} * 1000 + 1000) i" >/dev/null
q "UPDATE hc_assets SET hold_expires_at = hold_expires_at - interval '2 hours' WHERE id LIKE 'BULK-%';
   UPDATE hc_reservations SET expires_at = expires_at - interval '2 hours' WHERE asset_id LIKE 'BULK-%';" >/dev/null
q "VACUUM ANALYZE hc_assets" >/dev/null
q "VACUUM ANALYZE hc_reservations" >/dev/null
check "$holds expired holds are waiting" \
    "$(q "SELECT count(*) FROM hc_reservations WHERE status = 'HELD' AND expires_at <= clock_timestamp()")" "$holds"

# Live clients: each holds and releases its own asset, 100 times a second
# (1,000 hold+release transactions a second in all: a busy shop on 2 cores;
# flat out they would leave the sweeper no CPU).  The hold and its release
# in one statement: one transaction, one round trip.
cat >"$work/live.sql" <<'SQL'
\set k random(1, 1000000000000)
SELECT hc_release((hc_hold('LIVE-' || :client_id, 'live-buyer', 'live-' || :client_id || '-' || :k, '1 hour')).reservation_id);
SQL
log=${TMPDIR:-/tmp}/holdcommit-$PGPORT/server.log
psql -X -q -d postgres -c "ALTER SYSTEM SET log_lock_waits = on" \
    -c "ALTER SYSTEM SET deadlock_timeout = '100ms'" -c "SELECT pg_reload_conf()" >/dev/null
# lock_waits [extension]: the lock waits of 100 ms logged so far, but for
# (or only) those on a table's extension lock.
lock_waits() {
    if [ "${1:-}" = extension ]; then
        grep 'still waiting for' "$log" 2>/dev/null | grep -c 'on extension of relation'
    else
        grep 'still waiting for' "$log" 2>/dev/null | grep -vc 'on extension of relation'
    fi
}
waits_before=$(lock_waits)
extension_waits_before=$(lock_waits extension)
"$pgbench" -n -f "$work/live.sql" -c 10 -j 2 -R 1000 -T 30 -l --log-prefix="$work/live" "$db" >"$work/live.log" 2>&1 &
bench=$!
sleep 3
start=$(date +%s.%N)
sweeper_on "$db" 1
waited=$(wait_for 60 "SELECT total_expired_holds FROM hc_sweeper_status" "$holds")
end=$(date +%s.%N)
IFS='|' read -r runs swept <<<"$(q "SELECT runs, total_expired_holds FROM hc_sweeper_status")"
secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
check "the worker swept all $holds holds (in $runs runs of a time slice at most, ${secs} s)" "$swept" "$holds"
wait $bench
rc=$?
waits=$(( $(lock_waits) - waits_before ))
echo "# waits of 100 ms for a table's extension lock: $(( $(lock_waits extension) - extension_waits_before ))"
psql -X -q -d postgres -c "ALTER SYSTEM RESET log_lock_waits" -c "ALTER SYSTEM RESET deadlock_timeout" \
    -c "SELECT pg_reload_conf()" >/dev/null
check "pgbench's live clients ran without errors" \
    "$rc $(grep -oE '^number of failed transactions: [0-9]+' "$work/live.log" | grep -oE '[0-9]+$')" "0 0"
[ $rc -ne 0 ] && grep -iE 'error|abort' "$work/live.log" | sort | uniq -c | head -5 | sed 's/^/#   /'
check "nothing expired is left" \
    "$(q "SELECT count(*) FROM hc_reservations WHERE status = 'HELD' AND expires_at <= clock_timestamp()")" "0"

# How long the live transactions that ran while the sweep ran took (pgbench
# --log with --rate: field 3 is the latency in us counted from the scheduled
# start, field 7 the schedule lag, the client's own delay; fields 5 and 6
# the end time).  during.ms: the calls' own time; before.ms: before the sweep.
cat "$work"/live.* 2>/dev/null | awk -v s="$start" -v e="$end" '
    { t = $5 + $6 / 1e6; ms = ($3 - $7) / 1000
      if (t >= s && t - $3 / 1e6 <= e) print ms >"/dev/stdout"; else if (t < s) print ms >"/dev/stderr" }' \
    2> >(sort -n >"$work/before.ms") | sort -n >"$work/during.ms"
sleep 0.5
# pct FILE P: the P-th percentile of a sorted file
pct() { awk -v n="$(wc -l <"$1")" -v p="$2" 'NR == int(n * p / 100 + 0.999) { printf "%.1f", $1 }' "$1"; }
n=$(wc -l <"$work/during.ms")
p99=$(pct "$work/during.ms" 99)
max=$(pct "$work/during.ms" 100)
echo "# sweep of $holds holds: ${secs} s; $n live hold+release transactions ran during it:" \
     "p50 $(pct "$work/during.ms" 50) ms, p99 ${p99} ms, max ${max} ms" \
     "(before the sweep: p99 $(pct "$work/before.ms" 99) ms, max $(pct "$work/before.ms" 100) ms);" \
     "pgbench $(grep -E '^tps' "$work/live.log" | head -1)"
check "live transactions ran during the sweep" "$([ "$n" -gt 100 ] && echo yes)" "yes"
check "no live call waited 100 ms or more for a lock (lock waits of 100 ms logged: $waits)" "$waits" "0"
grep 'still waiting for' "$log" 2>/dev/null | tail -n "$waits" | head -3 | sed 's/^/#   /'
check "the live calls' p99 stayed under 100 ms (p99 ${p99} ms, max ${max} ms)" \
    "$(awk -v m="$p99" 'BEGIN { print (m < 100) ? "yes" : "no" }')" "yes"
check "hc_check() finds nothing" "$(q "SELECT count(*) FROM hc_check()")" "0"
