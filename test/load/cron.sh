#!/usr/bin/env bash
# pg_cron as the scheduler instead of the background worker: the recipe of
# doc/sweeper.md ("pg_cron instead"), run exactly as printed.  The blocks
# marked <!-- snippet: run-by test/load/cron.sh NAME --> are extracted from the
# document, never retyped here:
#   conf                  the postgresql.conf lines: the test server must run with them
#                         (test/harness/server.sh sets them)
#   schedule              run in cron.database_name (postgres), where holdcommit is installed too
#   schedule-in-database  run there as well, for holdcommit in the database shop
#   runs                  cron.job_run_details, read after the runs
# Both databases have holdcommit in its own schema, as the README installs it,
# and PostgreSQL's default search_path ("$user", public), not the test server's
# global one, which has holdcommit on it: so a job that called hc_sweep()
# unqualified would fail, and the same jobs unqualified are scheduled beside the
# printed ones to show that they do.  pg_cron 1.4 schedules by the minute: this
# waits up to 75 s.
. "$(dirname "$0")/lib.bash"
top=$(cd "$(dirname "$0")/../.." && pwd)
# A major with no pg_cron package (19 before its release: test/majors/chroot.sh) says so.
if [ "$(psql -X -qAt -d postgres -c "SELECT count(*) FROM pg_available_extensions WHERE name = 'pg_cron'")" = 0 ]; then
    echo "ok - # SKIP no pg_cron for PostgreSQL $(psql -X -qAt -d postgres -c "SELECT current_setting('server_version_num')::int / 10000") (its Debian package is not in the registry)"
    exit 0
fi
doc=doc/sweeper.md
shop=shop
db=postgres
cleanup() {
    psql -X -q -d postgres -c "SELECT cron.unschedule(jobid) FROM cron.job" >/dev/null 2>&1
    psql -X -q -d postgres -c "DROP EXTENSION IF EXISTS pg_cron" \
        -c "DROP EXTENSION IF EXISTS holdcommit" -c "ALTER DATABASE postgres RESET search_path" \
        -c "DROP DATABASE IF EXISTS $shop WITH (FORCE)" >/dev/null 2>&1
    rm -rf "$work"
}
trap cleanup EXIT
# sql_in DB SQL: run SQL in DB, print rows unaligned.
sql_in() { psql -X -qAt -v ON_ERROR_STOP=1 -d "$1" -c "$2"; }

# The blocks, by name, into $work/block-NAME; one line "NAME LINE" each.
perl -e '
    my ($doc, $dir) = @ARGV;
    open my $fh, "<", $doc or die "$doc: $!\n";
    my @l = <$fh>;
    for (my $i = 0; $i < @l; $i++) {
        next unless $l[$i] =~ m{^\s*<!--\s*snippet:\s*run-by\s+test/load/cron\.sh\s+(\S+)\s*-->\s*$};
        my $name = $1;
        my $j = $i + 1;
        $j++ while $j < @l && $l[$j] =~ /^\s*$/;
        die "$doc:" . ($i + 1) . ": no fenced block after the marker\n"
            unless $j < @l && $l[$j] =~ /^(\s*)(`{3,})/;
        my ($indent, $ticks) = ($1, $2);
        open my $out, ">", "$dir/block-$name" or die "$dir/block-$name: $!\n";
        for ($j++; $j < @l && $l[$j] !~ /^\s*\Q$ticks\E\s*$/; $j++) {
            (my $b = $l[$j]) =~ s/^\Q$indent\E//;
            print $out $b;
        }
        close $out;
        print "$name ", $i + 1, "\n";
    }' "$top/$doc" "$work" >"$work/blocks" 2>"$work/err" || {
    echo "not ok - the recipe's blocks are read from $doc: $(head -1 "$work/err")"; exit 0; }
check "$doc prints the blocks conf, schedule, schedule-in-database, runs" \
    "$(awk '{ print $1 }' "$work/blocks" | sort | tr '\n' ' ')" "conf runs schedule schedule-in-database "
for name in conf schedule schedule-in-database runs; do
    [ -s "$work/block-$name" ] || { echo "not ok - the block $name is not empty"; exit 0; }
done
awk -v doc="$doc" '{ print "# " doc ":" $2 ": block " $1 }' "$work/blocks"

# The server runs with the printed postgresql.conf lines: each cron.* setting has the
# printed value, and the libraries named are preloaded.
while read -r name value; do
    case $name in
    shared_preload_libraries)
        have=",$(q "SHOW shared_preload_libraries" 2>/dev/null | tr -d ' '),"
        for lib in $(tr -d "' " <<<"$value" | tr ',' ' '); do
            check "the server preloads $lib, as printed" "$([[ $have == *",$lib,"* ]] && echo yes)" "yes"
        done
        ;;
    *) check "the server runs with $name = $value, as printed" \
           "$(q "SHOW $name" 2>/dev/null)" "$(tr -d "'" <<<"$value")" ;;
    esac
done < <(sed -E 's/#.*//' "$work/block-conf" |
         perl -ne "print \"\$1 \$2\\n\" if /^\\s*([a-z_.]+)\\s*=\\s*('[^']*'|\\S+)/")
if [ "$(q "SHOW cron.database_name" 2>/dev/null)" != "postgres" ]; then
    echo "not ok - pg_cron is preloaded with cron.database_name = postgres"
    exit 0
fi

# The job's command, as the README names it too.
command=$(perl -ne "print \$1 if /cron\\.schedule\\('[^']*', '[^']*', '([^']*)'\\)/" "$work/block-schedule")
check "the printed job calls holdcommit.hc_sweep() by its schema" \
    "$(grep -c 'holdcommit\.hc_sweep' <<<"$command")" "1"
check "README.md names the same job command (\`$command\`)" \
    "$(grep -cF -- "\`$command\`" "$top/README.md")" "1"

# Both databases as the README installs holdcommit, with the search_path of a server
# whose configuration does not name holdcommit.
psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $shop WITH (FORCE)" >/dev/null 2>&1
if ! psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE DATABASE $shop" >/dev/null; then
    echo "not ok - create database $shop"; exit 0
fi
for d in postgres "$shop"; do
    sql_in postgres "ALTER DATABASE $d SET search_path = \"\$user\", public" >/dev/null &&
    sql_in "$d" "SET client_min_messages = warning; DROP EXTENSION IF EXISTS holdcommit; CREATE EXTENSION holdcommit" \
        >/dev/null || { echo "not ok - holdcommit installed in $d"; exit 0; }
    check "in $d holdcommit is in its own schema and not on the search_path" \
        "$(sql_in "$d" "SELECT n.nspname || ', ' || current_setting('search_path')
                      FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
                     WHERE e.extname = 'holdcommit'")" 'holdcommit, "$user", public'
    # Expired: a hold and a stock reservation; live: a hold.
    sql_in "$d" "SELECT holdcommit.hc_asset_add('CRON-1'), holdcommit.hc_asset_add('CRON-2'),
                    holdcommit.hc_stock_set('CRON-P', 5);
             SELECT holdcommit.hc_hold('CRON-1', 'walked-away', 'cron-k1', '1 hour');
             SELECT holdcommit.hc_hold('CRON-2', 'still-here', 'cron-k2', '1 hour');
             SELECT holdcommit.hc_reserve('CRON-P', 2, 'walked-away', 'cron-k3', '1 hour');
             UPDATE holdcommit.hc_assets SET hold_expires_at = hold_expires_at - interval '2 hours'
              WHERE id = 'CRON-1';
             UPDATE holdcommit.hc_reservations SET expires_at = expires_at - interval '2 hours'
              WHERE asset_id = 'CRON-1';
             UPDATE holdcommit.hc_stock_order_lines SET expires_at = expires_at - interval '2 hours';
             UPDATE holdcommit.hc_stock_orders SET expires_at = expires_at - interval '2 hours';" \
        >/dev/null || { echo "not ok - expired holds set up in $d"; exit 0; }
done

# The recipe as printed, in cron.database_name; beside it the same jobs unqualified.
for name in schedule schedule-in-database; do
    if psql -X -q -v ON_ERROR_STOP=1 -d postgres -f "$work/block-$name" >"$work/$name.out" 2>&1; then
        echo "ok - $doc's block $name runs as printed"
    else
        echo "not ok - $doc's block $name runs as printed: $(grep -m1 ERROR "$work/$name.out")"
    fi
    sed -e 's/holdcommit\.hc_sweep/hc_sweep/' -e "s/'holdcommit-sweep/'unqualified-holdcommit-sweep/" \
        "$work/block-$name" | grep -v 'CREATE EXTENSION' >"$work/unqualified-$name.sql"
    psql -X -q -v ON_ERROR_STOP=1 -d postgres -f "$work/unqualified-$name.sql" >/dev/null ||
        echo "not ok - the unqualified $name is scheduled"
done
check "four jobs: the recipe's two and the same unqualified" \
    "$(q "SELECT string_agg(jobname || '@' || database || ': ' || command, '; ' ORDER BY jobname) FROM cron.job")" \
    "holdcommit-sweep@postgres: $command; holdcommit-sweep-shop@shop: $command; unqualified-holdcommit-sweep@postgres: ${command/holdcommit./}; unqualified-holdcommit-sweep-shop@shop: ${command/holdcommit./}"

for d in postgres "$shop"; do
    db=$d
    waited=$(wait_for 75 "SELECT status FROM holdcommit.hc_assets WHERE id = 'CRON-1'" AVAILABLE)
    check "in $d the cron job swept the expired hold (after ${waited} s)" "$waited" "${waited%timeout}"
    waited=$(wait_for 5 "SELECT reserved FROM holdcommit.hc_inventory WHERE product_id = 'CRON-P'" 0)
    check "in $d and the expired stock reservation" "$waited" "${waited%timeout}"
    check "in $d the live hold stays" "$(q "SELECT status FROM holdcommit.hc_assets WHERE id = 'CRON-2'")" "HELD"
    check "in $d the ledger names the sweep and the job's role" \
        "$(q "SELECT string_agg(kind || ':' || source || ':' || actor, ',' ORDER BY kind)
                FROM holdcommit.hc_ledger WHERE event = 'expire'")" "asset:sweep:postgres,product:sweep:postgres"
    check "in $d hc_check() finds nothing" "$(q "SELECT count(*) FROM holdcommit.hc_check()")" "0"
done

# How the first run of each job ended, as cron.job_run_details says.
db=postgres
first_run="SELECT d.status || ': ' || coalesce(split_part(d.return_message, chr(10), 1), '')
             FROM cron.job_run_details d JOIN cron.job j USING (jobid)
            WHERE j.jobname = '%s' AND d.status IN ('succeeded', 'failed') ORDER BY d.runid LIMIT 1"
for job in holdcommit-sweep holdcommit-sweep-shop; do
    # shellcheck disable=SC2059
    waited=$(wait_for 5 "$(printf "$first_run" "$job")" "succeeded: SELECT 1")
    check "pg_cron records the run of $job as succeeded" "$waited" "${waited%timeout}"
    waited=$(wait_for 5 "$(printf "$first_run" "unqualified-$job")" \
                       "failed: ERROR: function hc_sweep() does not exist")
    check "the same job unqualified fails: function hc_sweep() does not exist" "$waited" "${waited%timeout}"
done
if psql -X -q -v ON_ERROR_STOP=1 -d postgres -f "$work/block-runs" >"$work/runs.out" 2>&1; then
    echo "ok - $doc's block runs runs as printed"
else
    echo "not ok - $doc's block runs runs as printed: $(grep -m1 ERROR "$work/runs.out")"
fi
for job in holdcommit-sweep@postgres holdcommit-sweep-shop@shop; do
    check "and shows a run of ${job%@*} in ${job#*@} as succeeded" \
        "$(grep -qE "^ ${job%@*} +\| ${job#*@} +\| succeeded " "$work/runs.out" && echo yes)" "yes"
done
sed 's/^/#   /' "$work/runs.out"
