#!/usr/bin/env bash
# How long ALTER EXTENSION holdcommit UPDATE from 0.3.0 to 0.4.0 holds its
# locks on a large history of orders (doc/operations.md, "Updating"): a
# throwaway server of its own (fsync on, as in production), a 0.3.0 database
# with HC_UPDATE_ORDERS orders (default 1,000,000) stored as 0.3.0's calls
# store them, then the update, timed.  The update is one transaction: from its
# first statement on it holds ACCESS EXCLUSIVE on the orders and their lines
# (every call on stock waits), so its time is the time those locks are held.
#   HC_UPDATE_ORDERS      orders (19 of 20 of one product, 1 of 20 of two)
#   HC_UPDATE_PORT        the server's port (default 54345)
#   HC_PGROOT             a private copy of the PostgreSQL tree, as for make test
# Prints one line per step and the update's time per million orders.  On a
# shared machine the time varies with its load: run it a few times.
set -euo pipefail
cd "$(dirname "$0")/.."

orders=${HC_UPDATE_ORDERS:-1000000}
port=${HC_UPDATE_PORT:-54345}
export PGHOST=${TMPDIR:-/tmp}/holdcommit-$port PGPORT=$port PGUSER=postgres

make -s >/dev/null
if [ -n "${HC_PGROOT:-}" ]; then make -s install DESTDIR="$HC_PGROOT" >/dev/null; fi
test/harness/server.sh start "$port" >/dev/null
trap 'test/harness/server.sh stop "$port" >/dev/null' EXIT
psql -X -q -d postgres -c "ALTER SYSTEM SET fsync = on" -c "ALTER SYSTEM SET full_page_writes = on" \
    -c "ALTER SYSTEM SET max_wal_size = '4GB'" -c "SELECT pg_reload_conf()" >/dev/null
psql -X -q -d postgres -c "CREATE DATABASE hc_update"

# 1,000 products; every twentieth order of two products (two lines), the
# others of one (one line); statuses as a shop's history has them: most
# ended, a few reserved, some of them past their expiry.
start=$(date +%s.%N)
psql -X -q -v ON_ERROR_STOP=1 -d hc_update <<SQL
CREATE EXTENSION holdcommit VERSION '0.3.0';
SET search_path = holdcommit;
INSERT INTO hc_stock_parts (product_id, stock, reserved)
SELECT 'P-' || lpad(p::text, 4, '0'), 1000000, 0 FROM generate_series(1, 1000) p;
CREATE TEMP TABLE o AS
SELECT n, 'res_' || lpad(to_hex(n), 26, '0') AS id,
       'P-' || lpad((n % 1000 + 1)::text, 4, '0') AS p1,
       CASE WHEN n % 20 = 0 THEN 'P-' || lpad(((n + 7) % 1000 + 1)::text, 4, '0') END AS p2,
       CASE WHEN n % 100 < 60 THEN 'FINALIZED' WHEN n % 100 < 70 THEN 'RELEASED'
            WHEN n % 100 < 85 THEN 'EXPIRED' ELSE 'RESERVED' END AS status,
       now() - make_interval(secs => $orders - n) AS created_at
  FROM generate_series(1, $orders) n;
INSERT INTO hc_stock_reservations (scope_id, id, buyer_id, idempotency_key, status, expires_at, created_at,
                                   ended_at, fingerprint, products)
SELECT LEAST(p1 COLLATE "C", p2), id, 'buyer-' || n % 5000, 'key-' || n, status,
       created_at + interval '10 minutes', created_at,
       CASE WHEN status <> 'RESERVED' THEN created_at + interval '5 minutes' END,
       sha256(convert_to(id, 'UTF8')),
       CASE WHEN p2 IS NULL THEN ARRAY[p1] ELSE ARRAY[LEAST(p1 COLLATE "C", p2), GREATEST(p1 COLLATE "C", p2)] END
  FROM o;
INSERT INTO hc_stock_reservation_lines (product_id, reservation_id, qty, status, expires_at, buyer_id, part,
                                        scope_id)
SELECT l.p, o.id, 1 + o.n % 3, o.status, o.created_at + interval '10 minutes', 'buyer-' || o.n % 5000, 0,
       LEAST(o.p1 COLLATE "C", o.p2)
  FROM o CROSS JOIN LATERAL (VALUES (o.p1), (o.p2)) l (p) WHERE l.p IS NOT NULL;
VACUUM ANALYZE hc_stock_reservations, hc_stock_reservation_lines;
CHECKPOINT;
SQL
echo "loaded: $orders orders, $(psql -X -qAt -d hc_update -c "SELECT count(*) FROM holdcommit.hc_stock_reservation_lines") lines, $(psql -X -qAt -d hc_update -c "SELECT pg_size_pretty(pg_database_size(current_database()))") ($(printf '%.0f' "$(echo "$(date +%s.%N) - $start" | bc)") s)"

took=$(psql -X -qAt -d hc_update -c '\timing on' -c "ALTER EXTENSION holdcommit UPDATE" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p')
echo "ALTER EXTENSION holdcommit UPDATE (0.3.0 to $(psql -X -qAt -d hc_update -c "SELECT extversion FROM pg_extension WHERE extname = 'holdcommit'")): $(printf '%.1f' "$(echo "$took / 1000" | bc -l)") s, $(printf '%.1f' "$(echo "$took / 1000 * 1000000 / $orders" | bc -l)") s per million orders"
echo "after: $(psql -X -qAt -d hc_update -c "SELECT count(*) FILTER (WHERE qty IS NOT NULL) || ' orders of one product, ' || count(*) FILTER (WHERE qty IS NULL) || ' of two, ' || (SELECT count(*) FROM holdcommit.hc_stock_order_lines) || ' lines' FROM holdcommit.hc_stock_orders")"
echo "the orders and their lines now: $(psql -X -qAt -d hc_update -c "SELECT pg_size_pretty(pg_total_relation_size('holdcommit.hc_stock_orders') + pg_total_relation_size('holdcommit.hc_stock_order_lines'))") with their indexes, no dead rows"
