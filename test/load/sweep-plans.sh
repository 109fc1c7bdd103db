#!/usr/bin/env bash
# Plans that stay linear whatever the statistics (doc/architecture.md, "Plan
# policy").  Every statement is prepared once per backend and its plan kept,
# so a sweep planned right after CREATE EXTENSION (no statistics, autovacuum
# off) must stay as linear as one planned after ANALYZE.
#
# For N = 10,000 and 100,000: N expired holds and N expired stock lines (N/8
# orders of 4 lines and N/2 orders of one product, each its own line, over
# N/10 products), made by the calls and aged by two hours, their keys past a
# one-hour retention, in a database whose tables autovacuum never visits.  Then, two sweeps at once (so that a busy machine
# slows both alike), each the first hc_sweep() of its session, timed:
#   fresh     the session made its plans on a near-empty database (it swept a
#             backlog of one hold and one order and ran hc_check() six times,
#             as a sweeper or a pooled connection does right after CREATE
#             EXTENSION), then the backlog arrived (COPY), no ANALYZE;
#   analyzed  a copy of the same backlog, ANALYZEd, a new session.
# And at 10,000, the same backlog swept in one batch (hc_sweep(1000000), as
# in issue 18: 15 s instead of 0.3 s) by a new session planning on the full
# tables without statistics, next to an analyzed copy.  Then hc_check() in
# each session, timed.  Then, in each session, forty days pass for what the
# sweep ended (ended_at moves back), and the next hc_sweep() prunes it all
# (holdcommit.history_retention): every hold, order and line, and the
# products' ledger rows carried forward; timed.  Then the background sweeper's first runs in a copy
# of the backlog, never analyzed, timed.  Everything must be swept once, hc_check() empty, and
# the times per row (a hold or a line) of fresh and analyzed, and of 10,000
# and 100,000, within 2x of each other (times below a floor count as the
# floor).  The time compared is the CPU time of the session's backend (all
# of the work is done there: SPI plans are never parallel), which other
# work on the machine does not stretch; the elapsed time is printed too.  A
# statement whose plan is quadratic takes 10 to 100 times longer.
. "$(dirname "$0")/lib.bash"
load_setup hc_load_plans 6
sizes=${HC_PLANS_SIZES:-10000 100000}
sweep_floor_us=25   # per row: 0.5 s for 10,000 holds and 10,000 lines
check_floor_us=12   # per row: 0.25 s
ticks=$(getconf CLK_TCK 2>/dev/null || echo 100)
dbs=()

plans_cleanup() {
    local d
    for d in "${dbs[@]}"; do
        psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $d WITH (FORCE)" >/dev/null 2>&1
    done
    load_cleanup
}
trap plans_cleanup EXIT

# qd DB SQL: run SQL in DB, rows unaligned.
qd() { psql -X -qAt -v ON_ERROR_STOP=1 -d "$1" -c "$2"; }

# new_db NAME [TEMPLATE]: (re)create a database, dropped on exit.
new_db() {
    dbs+=("$1")
    psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $1 WITH (FORCE)" >/dev/null 2>&1
    psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE DATABASE $1${2:+ TEMPLATE $2}" >/dev/null
}

# install DB: the extension, its tables out of autovacuum's reach; and
# public.cpu_ticks(), the CPU time the session's backend has used (user +
# system, in clock ticks, from /proc), which another test's load on the
# machine does not inflate as it does the elapsed time.
install() {
    qd "$1" "CREATE FUNCTION public.cpu_ticks() RETURNS bigint LANGUAGE sql AS
             \$\$ SELECT m[1]::bigint + m[2]::bigint
                  FROM regexp_match(pg_read_file('/proc/self/stat'), '\\) \\S+ (?:\\S+ ){10}(\\d+) (\\d+)') m \$\$;
             CREATE EXTENSION holdcommit;
             $no_autovacuum_sql" >/dev/null
}

# age DB: what the calls made, as if made two hours ago (a superuser's shortcut).
age() {
    qd "$1" "UPDATE hc_assets SET hold_expires_at = hold_expires_at - interval '2 hours';
             UPDATE hc_reservations SET expires_at = expires_at - interval '2 hours',
                                        created_at = created_at - interval '2 hours';
             UPDATE hc_stock_order_lines SET expires_at = expires_at - interval '2 hours';
             UPDATE hc_stock_orders SET expires_at = expires_at - interval '2 hours',
                                              created_at = created_at - interval '2 hours';" >/dev/null
}

# backlog DB N: N holds and N lines made by the calls (half of them in orders
# of 4 products, half orders of one), two clients at a time, aged.
backlog() {
    local d=$1 n=$2 products=$(($2 / 10))
    qd "$d" "SELECT count(hc_asset_add('A-' || i)) FROM generate_series(1, $n) i;
             SELECT count(hc_stock_set('P-' || i, 1000000)) FROM generate_series(1, $products) i;" >/dev/null &&
    seq 0 $((n / 1000 - 1)) | xargs -P 2 -I{} psql -X -qAt -v ON_ERROR_STOP=1 -d "$d" -c \
        "SELECT count(hc_hold('A-' || i, 'buyer-' || i, 'hold-' || i, '1 hour'))
           FROM generate_series({} * 1000 + 1, {} * 1000 + 1000) i" >/dev/null &&
    seq 0 $((n / 1000 - 1)) | xargs -P 2 -I{} psql -X -qAt -v ON_ERROR_STOP=1 -d "$d" -c \
        "SELECT count(hc_reserve_items(
                  (SELECT jsonb_agg(jsonb_build_object('product_id', 'P-' || ((4 * i + k) % $products + 1),
                                                       'qty', 1))
                     FROM generate_series(0, 3) k),
                  'buyer-' || i, 'order-' || i, '1 hour'))
           FROM generate_series({} * 125 + 1, {} * 125 + 125) i" >/dev/null &&
    seq 0 $((n / 1000 - 1)) | xargs -P 2 -I{} psql -X -qAt -v ON_ERROR_STOP=1 -d "$d" -c \
        "SELECT count(hc_reserve('P-' || (i % $products + 1), 1, 'buyer-' || i, 'single-' || i, '1 hour'))
           FROM generate_series({} * 500 + 1, {} * 500 + 500) i" >/dev/null &&
    age "$d"
}

# The extension's tables (their generated columns left out), for COPY.
tables="hc_assets hc_reservations hc_stock_parts hc_stock_orders hc_stock_order_lines hc_ledger"
columns() {
    qd "$1" "SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) FROM pg_attribute
              WHERE attrelid = '$2'::regclass AND attnum > 0 AND NOT attisdropped AND attgenerated = ''"
}
# export DB DIR / import DB DIR: the backlog's rows, through files.
export_rows() {
    local t
    mkdir -p "$2"
    for t in $tables; do
        psql -X -q -v ON_ERROR_STOP=1 -d "$1" -c "\\copy $t ($(columns "$1" "$t")) TO '$2/$t'" || return 1
    done
}
cat >"$work/import.sh" <<'SH'
#!/usr/bin/env bash
# import.sh DB DIR TABLES...: COPY the files in, a client per table.
db=$1; dir=$2; shift 2
for t in "$@"; do
    cols=$(cat "$dir/$t.columns")
    psql -X -q -v ON_ERROR_STOP=1 -d "$db" -c "\\copy $t ($cols) FROM '$dir/$t'" &
done
ok=0
for job in $(jobs -p); do wait "$job" || ok=1; done
exit $ok
SH
cat >"$work/barrier.sh" <<'SH'
#!/usr/bin/env bash
# barrier.sh MINE THEIRS: say this session is there, wait (at most 5 minutes) for the other.
touch "$1"
for _ in $(seq 3000); do [ -e "$2" ] && exit 0; sleep 0.1; done
exit 1
SH
chmod +x "$work/import.sh" "$work/barrier.sh"

# session DB NAME PARTNER BATCH TIMEOUT [fresh DIR]: the first timed sweep of
# a session, then hc_check(), each started with the partner session's.  With
# fresh, the session first plans on a near-empty database, then DIR's backlog
# is copied in.  Prints "sweep|holds|reservations|keys", "sweep_s|S",
# "check|findings", "check_s|S"; slow plans (over 3 s a statement) go to
# $work/NAME.err.
session() {
    local d=$1 me=$work/$2 them=$work/$3 batch=$4 timeout=$5 prime="" dir=${7:-}
    if [ "${6:-}" = fresh ]; then
        prime="SELECT 'primed', s.* FROM hc_sweep() s;
DO \$\$ BEGIN FOR i IN 1..6 LOOP PERFORM count(*) FROM hc_check(); END LOOP; END \$\$;
\\! $work/import.sh $d $dir $tables"
    fi
    psql -X -qAt -v ON_ERROR_STOP=1 -d "$d" 2>"$me.err" <<SQL
SET holdcommit.idempotency_retention = '1h';
SET statement_timeout = '${timeout}s';
SET client_min_messages = warning;
\\set ON_ERROR_STOP 0
LOAD 'auto_explain';
\\set ON_ERROR_STOP 1
SET auto_explain.log_min_duration = '3s';
SET auto_explain.log_nested_statements = on;
SET auto_explain.log_level = warning;
$prime
\\! $work/barrier.sh $me.ready $them.ready
SELECT clock_timestamp() AS t0, public.cpu_ticks() AS c0 \\gset
SELECT 'sweep', s.* FROM hc_sweep($batch) s;
SELECT 'sweep_cpu', round((public.cpu_ticks() - :c0)::numeric / $ticks, 2);
SELECT 'sweep_s', round(extract(epoch FROM clock_timestamp() - :'t0')::numeric, 3);
\\! $work/barrier.sh $me.swept $them.swept
SELECT clock_timestamp() AS t0, public.cpu_ticks() AS c0 \\gset
SELECT 'check', count(*) FROM hc_check();
SELECT 'check_cpu', round((public.cpu_ticks() - :c0)::numeric / $ticks, 2);
SELECT 'check_s', round(extract(epoch FROM clock_timestamp() - :'t0')::numeric, 3);
\\! $work/barrier.sh $me.checked $them.checked
UPDATE hc_reservations SET ended_at = ended_at - interval '40 days';
UPDATE hc_stock_orders SET ended_at = ended_at - interval '40 days';
\\! $work/barrier.sh $me.aged $them.aged
SELECT clock_timestamp() AS t0, public.cpu_ticks() AS c0 \\gset
SELECT 'prune', count(*) FROM hc_sweep($batch);
SELECT 'prune_cpu', round((public.cpu_ticks() - :c0)::numeric / $ticks, 2);
SELECT 'prune_s', round(extract(epoch FROM clock_timestamp() - :'t0')::numeric, 3);
SELECT 'pruned', (SELECT count(*) FROM hc_reservations), (SELECT count(*) FROM hc_stock_orders),
       (SELECT count(*) FROM hc_stock_order_lines),
       (SELECT count(*) FROM hc_ledger WHERE kind = 'product' AND event NOT IN ('stock_set', 'carry')),
       (SELECT count(*) FROM hc_check());
SQL
    local rc=$?
    touch "$me.ready" "$me.swept" "$me.checked" "$me.aged"
    return $rc
}

# field FILE KEY: the value of KEY in a session's output.
field() { sed -n "s/^$2|//p" "$1"; }
# seconds FILE WHAT: the CPU time of WHAT (sweep, check), or else its elapsed time.
seconds() {
    local cpu
    cpu=$(field "$1" "$2_cpu")
    if [ -n "$cpu" ]; then echo "$cpu"; else field "$1" "$2_s"; fi
}
# sweeper_cpu DB: "PID TICKS" of each sweeper run in DB, five times a second, until killed.
sweeper_cpu() {
    exec psql -X -qAt -F' ' -d postgres <<SQL 2>/dev/null
SELECT pid, m[1]::bigint + m[2]::bigint
  FROM pg_stat_activity,
       regexp_match(pg_read_file('/proc/' || pid || '/stat'), '\) \S+ (?:\S+ ){10}(\d+) (\d+)') m
 WHERE backend_type = 'holdcommit sweeper' AND datname = '$1' \watch 0.2
SQL
}
# us_per_row SECONDS ROWS
us_per_row() { awk -v s="$1" -v n="$2" 'BEGIN { if (s == "") print ""; else printf "%.1f", s * 1e6 / n }'; }
# within2x WHAT A B FLOOR: A and B (per row) within 2x of each other, each at least FLOOR.
within2x() {
    local verdict
    verdict=$(awk -v a="$2" -v b="$3" -v f="$4" 'BEGIN {
        if (a == "" || b == "") { print "missing"; exit }
        a = (a < f) ? f : a; b = (b < f) ? f : b
        print (a <= 2 * b && b <= 2 * a) ? "yes" : "no" }')
    check "$1 ($2 vs $3 us per row, floor $4)" "$verdict" "yes"
}

# sweep_pair N BATCH TIMEOUT TAG-A DB-A TAG-B DB-B: a fresh session in DB-A and an
# analyzed one in DB-B, at once.
sweep_pair() {
    local n=$1 batch=$2 timeout=$3
    rm -f "$work/$4".* "$work/$6".*
    session "$5" "$4" "$6" "$batch" "$timeout" fresh "$work/rows$n" >"$work/$4.out" &
    local first=$!
    session "$7" "$6" "$4" "$batch" "$timeout" >"$work/$6.out" &
    local second=$!
    wait $first; wait $second
}

# verify TAG DB N: what a timed sweep did, and that nothing is left.
verify() {
    local tag=$1 d=$2 n=$3 out=$work/$1.out
    check "$tag: the sweep ended $n holds, $((n / 8 + n / 2)) orders, forgot $((n + n / 8 + n / 2)) keys" \
        "$(field "$out" sweep)" "$n|$((n / 8 + n / 2))|$((n + n / 8 + n / 2))"
    check "$tag: nothing expired is left, no line counts" \
        "$(qd "$d" "SELECT (SELECT count(*) FROM hc_reservations WHERE status = 'HELD'),
                           (SELECT count(*) FROM hc_stock_reservation_lines WHERE status = 'RESERVED'),
                           (SELECT count(*) FROM hc_stock_reservations WHERE status = 'RESERVED'),
                           (SELECT sum(reserved) FROM hc_inventory),
                           (SELECT count(*) FROM hc_idempotency_keys)")" "0|0|0|0|0"
    check "$tag: hc_check() finds nothing" "$(field "$out" check)" "0"
    check "$tag: 40 days later the sweep prunes every hold, order and line, carries the products' rows, hc_check() empty" \
        "$(field "$out" pruned)" "0|0|0|0|0"
    echo "# $tag: sweep $(field "$out" sweep_s) s ($(field "$out" sweep_cpu) s of CPU)," \
         "hc_check() $(field "$out" check_s) s ($(field "$out" check_cpu) s of CPU)," \
         "prune $(field "$out" prune_s) s ($(field "$out" prune_cpu) s of CPU)"
    # The plans of the statements inside that took over 3 s, and any error.
    awk '/^(WARNING|LOG):  duration/ { flush(); keep = 1 }
         /^(ERROR|FATAL|psql)/ { flush(); keep = 1 }
         /^Query Text: SELECT .(sweep|check)., / { keep = 0 }
         { block = block $0 "\n" }
         function flush() { if (keep && block != "") printf "%s", block; block = ""; keep = 0 }
         END { flush() }' "$work/$tag.err" | cut -c1-200 | head -60 | sed "s/^/# $tag:   /"
}

declare -A sweep_us check_us prune_us
for n in $sizes; do
    t=${db}_t$n
    new_db "$t" && install "$t" || { echo "not ok - database for $n set up"; exit 0; }
    start=$(date +%s)
    if ! backlog "$t" "$n"; then
        echo "not ok - $n expired holds and lines made"
        exit 0
    fi
    check "$n expired holds, $n expired lines in $((n / 8 + n / 2)) orders are waiting (made in $(($(date +%s) - start)) s)" \
        "$(qd "$t" "SELECT (SELECT count(*) FROM hc_reservations WHERE status = 'HELD' AND expires_at <= now()),
                           (SELECT count(*) FROM hc_stock_reservation_lines
                             WHERE status = 'RESERVED' AND expires_at <= now()),
                           (SELECT count(*) FROM hc_stock_reservations WHERE status = 'RESERVED')")" \
        "$n|$n|$((n / 8 + n / 2))"
    mkdir -p "$work/rows$n"
    for tb in $tables; do columns "$t" "$tb" >"$work/rows$n/$tb.columns"; done
    export_rows "$t" "$work/rows$n" || { echo "not ok - the backlog of $n exported"; exit 0; }

    # The fresh database: a backlog of one hold and one order, swept by the
    # session that will sweep the big one, which arrives in between.
    new_db "${db}_f$n" && install "${db}_f$n" &&
        qd "${db}_f$n" "SELECT count(hc_asset_add('TINY-A')), count(hc_stock_set('TINY-P', 10));
                        SELECT count(hc_hold('TINY-A', 'tiny', 'tiny-hold', '1 hour'));
                        SELECT count(hc_reserve('TINY-P', 1, 'tiny', 'tiny-order', '1 hour'));" >/dev/null &&
        age "${db}_f$n" || { echo "not ok - fresh database for $n set up"; exit 0; }
    new_db "${db}_a$n" "$t" && qd "${db}_a$n" "ANALYZE" >/dev/null ||
        { echo "not ok - analyzed database for $n set up"; exit 0; }
    timeout=$((n / 1000 + 40))
    sweep_pair "$n" 1000 "$timeout" "fresh$n" "${db}_f$n" "analyzed$n" "${db}_a$n"
    check "fresh$n: the first sweep swept the one hold and order made before" \
        "$(field "$work/fresh$n.out" primed)" "1|1|2"
    verify "fresh$n" "${db}_f$n" "$n"
    verify "analyzed$n" "${db}_a$n" "$n"
    for tag in fresh analyzed; do
        sweep_us[$tag$n]=$(us_per_row "$(seconds "$work/$tag$n.out" sweep)" $((2 * n)))
        check_us[$tag$n]=$(us_per_row "$(seconds "$work/$tag$n.out" check)" $((2 * n)))
        prune_us[$tag$n]=$(us_per_row "$(seconds "$work/$tag$n.out" prune)" $((2 * n)))
    done
    within2x "the prune of $n, fresh and analyzed" "${prune_us[fresh$n]}" "${prune_us[analyzed$n]}" $sweep_floor_us
    within2x "hc_sweep() of $n, fresh and analyzed" "${sweep_us[fresh$n]}" "${sweep_us[analyzed$n]}" $sweep_floor_us
    within2x "hc_check() of $n, fresh and analyzed" "${check_us[fresh$n]}" "${check_us[analyzed$n]}" $check_floor_us

    # The background sweeper's first runs in a copy of the backlog, never
    # analyzed: each run prepares its plans afresh, on no statistics.
    w=${db}_w$n
    new_db "$w" "$t" || { echo "not ok - worker database for $n set up"; exit 0; }
    # One run, however long (no time slice), timed from its own start.
    psql -X -q -d postgres -c "ALTER SYSTEM SET holdcommit.databases = '$w'" \
        -c "ALTER SYSTEM SET holdcommit.sweep_time_slice = '10min'" \
        -c "ALTER SYSTEM SET holdcommit.sweep_interval = 1" -c "SELECT pg_reload_conf()" >/dev/null
    # Its CPU time, as the sessions' (the elapsed time of a run is the share of
    # the cores a busy machine left it: CI saw 7.5 s and 46 s for the same
    # 100000): each run's, read from /proc while it runs, the last read of
    # each counted (a fifth of a second before it ended at most).
    sweeper_cpu "$w" >"$work/cpu$n" &
    sampler=$!
    db=$w wait_for "$timeout" "SELECT expired_holds FROM hc_sweeper_status" "$n" >/dev/null
    kill $sampler 2>/dev/null; wait $sampler 2>/dev/null
    worker_s=$(awk '{ last[$1] = $2 } END { for (p in last) t += last[p]; printf "%.2f", t / '"$ticks"' }' "$work/cpu$n")
    psql -X -q -d postgres -c "ALTER SYSTEM RESET holdcommit.sweep_time_slice" >/dev/null
    sweeper_off
    check "worker$n: the background sweeper's runs swept the $n holds and lines, hc_check() empty" \
        "$(qd "$w" "SELECT (SELECT count(*) FROM hc_reservations WHERE status = 'EXPIRED'),
                           (SELECT count(*) FROM hc_check())")" "$n|0"
    echo "# worker$n: swept in $worker_s s of CPU"
    sweep_us[worker$n]=$(us_per_row "$worker_s" $((2 * n)))
    psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $w WITH (FORCE)" >/dev/null 2>&1

    if [ "$n" = "${sizes%% *}" ]; then
        # One batch for the whole backlog, planned on the full tables without
        # statistics (no priming: the session's first statements see them).
        new_db "${db}_g$n" "$t" && new_db "${db}_b$n" "$t" && qd "${db}_b$n" "ANALYZE" >/dev/null ||
            { echo "not ok - one-batch databases for $n set up"; exit 0; }
        rm -f "$work"/once*
        session "${db}_g$n" "once$n" "analyzed_once$n" 1000000 "$timeout" >"$work/once$n.out" &
        first=$!
        session "${db}_b$n" "analyzed_once$n" "once$n" 1000000 "$timeout" >"$work/analyzed_once$n.out" &
        wait $first; wait $!
        verify "once$n" "${db}_g$n" "$n"
        verify "analyzed_once$n" "${db}_b$n" "$n"
        within2x "hc_sweep(1000000) of $n in one batch, fresh and analyzed" \
            "$(us_per_row "$(seconds "$work/once$n.out" sweep)" $((2 * n)))" \
            "$(us_per_row "$(seconds "$work/analyzed_once$n.out" sweep)" $((2 * n)))" $sweep_floor_us
        within2x "the prune of $n in one batch, fresh and analyzed" \
            "$(us_per_row "$(seconds "$work/once$n.out" prune)" $((2 * n)))" \
            "$(us_per_row "$(seconds "$work/analyzed_once$n.out" prune)" $((2 * n)))" $sweep_floor_us
        for d in "${db}_g$n" "${db}_b$n"; do
            psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $d WITH (FORCE)" >/dev/null 2>&1
        done
    fi
    for d in "$t" "${db}_f$n" "${db}_a$n"; do
        psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $d WITH (FORCE)" >/dev/null 2>&1
    done
    rm -rf "$work/rows$n"
done

# Linear: the time per row does not grow with the backlog.
set -- $sizes
if [ $# -ge 2 ]; then
    small=$1 large=$2
    within2x "the background sweeper's first runs, per row at $small and at $large" \
        "${sweep_us[worker$small]}" "${sweep_us[worker$large]}" $sweep_floor_us
    for tag in fresh analyzed; do
        within2x "hc_sweep() $tag, per row at $small and at $large" \
            "${sweep_us[$tag$small]}" "${sweep_us[$tag$large]}" $sweep_floor_us
        within2x "hc_check() $tag, per row at $small and at $large" \
            "${check_us[$tag$small]}" "${check_us[$tag$large]}" $check_floor_us
        within2x "the prune $tag, per row at $small and at $large" \
            "${prune_us[$tag$small]}" "${prune_us[$tag$large]}" $sweep_floor_us
    done
fi
