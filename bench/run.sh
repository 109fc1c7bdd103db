#!/usr/bin/env bash
# make bench: holdcommit against what an application team would write
# instead (bench/plpgsql.sql, the seeds' plain SQL in bench/seed.sql), every
# scenario of issues 9 and 20, all variants in one run on one throwaway server,
# each with synchronous_commit off and on.  Each scenario runs ROUNDS rounds;
# the order of the variants (and of off/on) flips from one round to the next,
# and each variant runs on data loaded fresh for it.  Writes
#   bench/results/latest.md   the tables (targets of issues 9 and 17, of issue
#                             20, every run, the sell-out of a product, the
#                             sweep of a backlog, memory)
#   bench/results/latest.tsv  every driver line, with its round
#   bench/results/latest.png  the ratios as a chart (gnuplot)
# The sweep scenario (issue 18) runs fewer rounds: each loads a backlog of
# expired holds, and on the code of today its fresh case runs to its timeout.
# The sold_out scenario (issue 20) runs until its product is sold out, not for
# HC_BENCH_SECONDS: about 20 s a run with synchronous_commit on.
# Settings (environment):
#   HC_BENCH_PORT          the server's port (default 54340)
#   HC_BENCH_SECONDS       seconds per variant and round (default 2)
#   HC_BENCH_ROUNDS        rounds (default 6)
#   HC_BENCH_SCENARIOS     only these scenarios (default: all)
#   HC_BENCH_MEMORY_CALLS  calls of the memory scenario (default 1000000; 0: skip it)
#   HC_BENCH_ASSETS, HC_BENCH_POOL  see bench/scenarios.bash
#   HC_BENCH_SWEEP_ROUNDS  rounds of the sweep scenario (default 2, at most ROUNDS)
#   HC_BENCH_SWEEP_HOLDS   its backlog of expired holds (default 100000)
#   HC_BENCH_SWEEP_RATE    its live clients' calls/s in all (default 1000; 0: flat out)
#   HC_BENCH_SWEEP_TIMEOUT the most seconds its sweep may take (default 60)
#   HC_BENCH_SOLD_OUT_STOCK   the sold_out scenario's units (default 10000)
#   HC_BENCH_SOLD_OUT_TIMEOUT the most seconds selling them out may take (default 120)
#   HC_BENCH_HOT_PARTS     the parts hc_stock_spread gives the product of hot_product and
#                          sold_out's holdcommit before each run (default 0: hc_stock_set alone,
#                          as a user creates it; holdcommit_spread's are 64)
#   HC_BENCH_RESULT        the name of the outputs in bench/results (default latest)
#   HC_PGROOT              a private copy of the PostgreSQL tree, as for make test
set -uo pipefail
cd "$(dirname "$0")/.."

port=${HC_BENCH_PORT:-54340}
seconds=${HC_BENCH_SECONDS:-2}
rounds=${HC_BENCH_ROUNDS:-6}
only=${HC_BENCH_SCENARIOS:-}
memory_calls=${HC_BENCH_MEMORY_CALLS:-1000000}
sweep_rounds=${HC_BENCH_SWEEP_ROUNDS:-2}
[ "$sweep_rounds" -gt "$rounds" ] && sweep_rounds=$rounds
result=${HC_BENCH_RESULT:-latest}
export PGHOST=${TMPDIR:-/tmp}/holdcommit-$port PGPORT=$port PGUSER=postgres
results=bench/results
server_log=$PGHOST/server.log

die() { echo "bench: $*" >&2; exit 1; }

test/harness/deps.sh || die "missing packages"
if ! command -v gnuplot >/dev/null; then
    if [ "$(id -u)" -eq 0 ]; then
        echo "installing gnuplot-nox"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gnuplot-nox >/dev/null ||
            { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gnuplot-nox >/dev/null; } ||
            die "could not install gnuplot-nox"
    else
        echo "bench: no chart without gnuplot: sudo apt-get install -y gnuplot-nox" >&2
    fi
fi
make -s >/dev/null || die "build failed"
if [ -n "${HC_PGROOT:-}" ]; then
    make -s install DESTDIR="$HC_PGROOT" >/dev/null || die "install failed"
elif [ "$(id -u)" -eq 0 ]; then
    make -s install >/dev/null || die "install failed"
fi

bench_work=$(mktemp -d)
. bench/scenarios.bash
bench_build_driver "$bench_driver" || die "the driver did not build"
test/harness/server.sh start "$port" || die "server did not start"
trap 'test/harness/server.sh stop "$port"; rm -rf "$bench_work"' EXIT
# test/harness/server.sh turns fsync off for speed; here synchronous_commit = on must
# pay for a real WAL flush, as it does in production.
# A pool of lease workers as large as the most clients that make lease calls
# at once (8), as doc/operations.md advises, so that no call waits for one.
psql -X -q -d postgres -c "ALTER SYSTEM SET fsync = on" -c "ALTER SYSTEM SET full_page_writes = on" \
    -c "ALTER SYSTEM SET holdcommit.max_workers = 8" \
    -c "SELECT pg_reload_conf()" >/dev/null || die "could not turn fsync on"
bench_install hc_bench || die "could not install holdcommit and the ports"

raw=$bench_work/runs.tsv
: >"$raw"
log_size() { stat -c %s "$server_log" 2>/dev/null || echo 0; }

# record ROUND SCENARIO VARIANT SYNC LINE...: one driver run into the raw file
record() {
    local round=$1 scenario=$2 variant=$3 sync=$4 before after line
    shift 4
    before=$(log_size)
    line=$(bench_run "$scenario" "$variant" "$sync" "$seconds" "" "$@")
    after=$(log_size)
    if [ -z "$line" ]; then
        echo "bench: $scenario/$variant/$sync gave no result" >&2
        return
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$scenario" "$variant" "$sync" \
        "$((after - before))" "$line" >>"$raw"
    echo "  $line"
}

reverse() { local out=() w; for w in "$@"; do out=("$w" "${out[@]}"); done; echo "${out[@]}"; }

started=$(date +%s)
for scenario in $(bench_scenarios); do
    if [ -n "$only" ] && ! [[ " $only " == *" $scenario "* ]]; then
        continue
    fi
    echo "== $scenario"
    scenario_rounds=$rounds
    [ "$scenario" = sweep ] && scenario_rounds=$sweep_rounds
    for round in $(seq 1 "$scenario_rounds"); do
        variants=$(bench_variants "$scenario")
        syncs="off on"
        if [ $((round % 2)) -eq 0 ]; then
            variants=$(reverse $variants)
            syncs=$(reverse $syncs)
        fi
        for sync in $syncs; do
            for variant in $variants; do
                record "$round" "$scenario" "$variant" "$sync"
            done
        done
    done
done
if [ "$memory_calls" -gt 0 ] && { [ -z "$only" ] || [[ " $only " == *" memory "* ]]; }; then
    echo "== memory ($memory_calls calls: hc_hold + hc_release pairs in one session)"
    pairs=$((memory_calls / 2))
    record 1 memory holdcommit off -n "$pairs" -m $(((pairs + 19) / 20))
fi
elapsed=$(($(date +%s) - started))

mkdir -p "$results"
cp "$raw" "$results/$result.tsv"
# The code measured: the last commit that changed the extension itself.
code="src sql holdcommit.control"
commit=$(git log -1 --format=%h -- $code)
git diff --quiet HEAD -- $code 2>/dev/null || commit="$commit with uncommitted changes"
bench/report.awk -v commit="$commit" \
    -v date="$(date -u '+%Y-%m-%d %H:%M UTC')" -v cores="$(nproc)" \
    -v pg="$(psql -X -qAt -d postgres -c 'SHOW server_version')" \
    -v rounds="$rounds" -v seconds="$seconds" -v elapsed="$elapsed" \
    -v chart_data="$bench_work/chart.dat" \
    "$raw" >"$results/$result.md" || die "could not write the report"

if command -v gnuplot >/dev/null && [ -s "$bench_work/chart.dat" ]; then
    gnuplot -e "data='$bench_work/chart.dat'; out='$results/$result.png'; title='holdcommit ÷ alternative (calls/s), $commit'" \
        bench/chart.gp || die "gnuplot failed"
fi
echo
cat "$results/$result.md"
echo
echo "bench: $elapsed s; $results/$result.md, $result.tsv$(command -v gnuplot >/dev/null && [ -s "$bench_work/chart.dat" ] && echo ", $result.png")"
