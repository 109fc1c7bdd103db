#!/usr/bin/env bash
# Benchmark: hc_hold against the plain-SQL hold of the seed article (one
# conditional UPDATE plus an INSERT with a unique idempotency key), on the
# same server in one run.  Each call holds a fresh asset, so every call
# succeeds; prints calls/s for 1 and 20 clients and the ratio.
# Needs PGHOST/PGPORT/PGUSER of a running server (make test's, or make run's).
set -euo pipefail

db=hc_bench_holds
pgbench=/usr/lib/postgresql/15/bin/pgbench
n=${HC_BENCH_CALLS:-20000}
psql -qX -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
trap 'psql -qX -d postgres -c "DROP DATABASE IF EXISTS $db"' EXIT

psql -qX -v ON_ERROR_STOP=1 -d $db <<SQL
CREATE EXTENSION holdcommit;
CREATE SEQUENCE pick;
INSERT INTO hc_assets (id) SELECT 'A' || g FROM generate_series(1, 2 * $n) g;

CREATE TABLE plain_assets (
    id text PRIMARY KEY, status text NOT NULL DEFAULT 'AVAILABLE',
    hold_expires_at timestamptz, current_reservation_id text, version int NOT NULL DEFAULT 1);
CREATE TABLE plain_reservations (
    id text PRIMARY KEY, asset_id text NOT NULL REFERENCES plain_assets (id),
    buyer_id text NOT NULL, idempotency_key text UNIQUE NOT NULL, status text NOT NULL,
    expires_at timestamptz NOT NULL, created_at timestamptz NOT NULL);
INSERT INTO plain_assets (id) SELECT 'A' || g FROM generate_series(1, 2 * $n) g;

CREATE FUNCTION plain_hold(asset text, buyer text, key text) RETURNS text
LANGUAGE plpgsql AS \$\$
DECLARE
    rid text := 'res_' || md5(random()::text);
    now timestamptz := clock_timestamp();
BEGIN
    UPDATE plain_assets
       SET status = 'HELD', hold_expires_at = now + interval '10 minutes',
           current_reservation_id = rid, version = version + 1
     WHERE id = asset AND (status = 'AVAILABLE' OR (status = 'HELD' AND hold_expires_at < now));
    IF NOT FOUND THEN
        RAISE EXCEPTION 'asset % is not available', asset USING ERRCODE = 'RS001';
    END IF;
    INSERT INTO plain_reservations
    VALUES (rid, asset, buyer, key, 'HELD', now + interval '10 minutes', now);
    RETURN rid;
END \$\$;
SQL

cat >/tmp/hc_bench_hc.sql <<'S'
SELECT hc_hold('A' || nextval('pick'), 'buyer-' || :client_id, 'key-' || currval('pick'));
S
cat >/tmp/hc_bench_plain.sql <<'S'
SELECT plain_hold('A' || nextval('pick'), 'buyer-' || :client_id, 'key-' || currval('pick'));
S

run() {   # run SCRIPT CLIENTS -> calls/s
    psql -qX -d $db -c "SELECT setval('pick', 1, false)" >/dev/null
    "$pgbench" -n -f "$1" -c "$2" -j "$2" -t $(( n / $2 / 2 )) $db 2>&1 |
        sed -n 's/^tps = \([0-9.]*\).*/\1/p'
}
for clients in 1 20; do
    hc=$(run /tmp/hc_bench_hc.sql $clients)
    plain=$(run /tmp/hc_bench_plain.sql $clients)
    printf '# holds, %2d clients: hc_hold %8.0f calls/s, plain SQL %8.0f calls/s, ratio %.2f\n' \
        "$clients" "$hc" "$plain" "$(awk -v a="$hc" -v b="$plain" 'BEGIN { print a / b }')"
    # reset for the next round
    psql -qX -d $db -c "TRUNCATE hc_ledger; DELETE FROM hc_reservations;
        UPDATE hc_assets SET status = 'AVAILABLE', hold_expires_at = NULL, current_reservation_id = NULL;
        TRUNCATE plain_reservations; UPDATE plain_assets SET status = 'AVAILABLE'" >/dev/null
done
rm -f /tmp/hc_bench_hc.sql /tmp/hc_bench_plain.sql
