#!/usr/bin/env bash
# Benchmark: what holdcommit.notify costs.  8 pgbench clients, each holding
# and releasing one of its own 1,000 assets per transaction (one
# notification per transaction with the setting on, at the release), for
# HC_BENCH_SECONDS (default 10) per run, HC_BENCH_ROUNDS (default 4) rounds
# of one run off and one on (the tables vacuumed before each run); prints
# each run's transactions/s, the medians and their ratio.
# NOTIFY serializes the commits of the transactions that notify (one queue
# lock), which is what this measures, with a listener reading the queue.
# Needs PGHOST/PGPORT/PGUSER of a running server.
set -euo pipefail

db=hc_bench_notify
bin=${HC_PGROOT:-}$("${PG_CONFIG:-pg_config}" --bindir)
pgbench=$bin/pgbench
[ -x "$pgbench" ] || pgbench=$(command -v pgbench)
secs=${HC_BENCH_SECONDS:-10}
rounds=${HC_BENCH_ROUNDS:-4}
work=$(mktemp -d)
psql -qX -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
trap 'psql -qX -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)"; rm -rf "$work"' EXIT

psql -qX -v ON_ERROR_STOP=1 -d $db <<'SQL' >/dev/null
CREATE EXTENSION holdcommit;
SELECT count(hc_asset_add('N-' || c || '-' || i)) FROM generate_series(0, 7) c, generate_series(1, 1000) i;
CREATE FUNCTION cycle(asset text, key text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    r hc_reservation;
BEGIN
    r := hc_hold(asset, 'buyer', key, '10 minutes');
    PERFORM hc_release(r.reservation_id);
END
$$;
SQL
cat >"$work/cycle.sql" <<'SQL'
\set k random(1, 1000000000000)
SELECT cycle('N-' || :client_id || '-' || (:k % 1000 + 1), 'n-' || :client_id || '-' || :k);
SQL

# run off|on: transactions per second
run() {
    PGOPTIONS="-c holdcommit.notify=$1" "$pgbench" -n -f "$work/cycle.sql" -c 8 -j 2 -T "$secs" $db \
        2>&1 | grep -E '^tps' | sed -E 's/^tps = ([0-9.]+).*/\1/'
}
# A listener, so that notifications are really queued and read: an idle
# session (one that sat in a long statement would hold back the cleanup of
# the rows every hold and release rewrites, and slow everything down).
mkfifo "$work/listen"
psql -qX -d $db <"$work/listen" >/dev/null 2>&1 &
exec 3>"$work/listen"
echo "LISTEN holdcommit;" >&3
vacuum() { psql -qX -d $db -c "VACUUM ANALYZE" >/dev/null; }
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { printf "%.0f", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
offs=""
ons=""
for r in $(seq "$rounds"); do
    vacuum; offs="$offs $(run off)"
    vacuum; ons="$ons $(run on)"
done
exec 3>&-
off=$(echo "$offs" | median)
on=$(echo "$ons" | median)
echo "hold+release per transaction, 8 clients, $rounds rounds of ${secs} s off and ${secs} s on:"
echo "  holdcommit.notify = off:$offs tps (median $off)"
echo "  holdcommit.notify = on: $ons tps (median $on)"
awk -v on="$on" -v off="$off" 'BEGIN { printf "  with NOTIFY: %.0f%% of the throughput without (%+.0f%%)\n", 100 * on / off, 100 * (on - off) / off }'
