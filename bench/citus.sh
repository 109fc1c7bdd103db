#!/usr/bin/env bash
# make bench-citus: holdcommit through a Citus coordinator against the same
# calls on a single node, with synchronous_commit = on and fsync on, on one
# machine: a coordinator and two workers (test/citus/cluster.sh), and a
# database of the coordinator without Citus as the single node.  8 clients,
# HC_CITUS_BENCH_ROUNDS rounds (3) of HC_CITUS_BENCH_SECONDS (5 s) per run:
#   hold          hc_hold of an asset of its own per call
#   reserve       hc_reserve of 1 unit of the client's own product
#   bare_update   a one-row UPDATE of the client's own row (what any call
#                 through the coordinator pays at least)
#   order_2pc     two holds in one transaction, of assets on the two workers
#                 (Citus: two-phase commit)
#   order_items   hc_reserve_items of 1 unit of each of two products of the
#                 client's own, one on each worker (Citus: each step on its
#                 product's worker, two-phase commit)
# Writes bench/results/citus.md (HC_CITUS_BENCH_RESULT: another name).
# Needs Citus in the PostgreSQL tree (HC_PGROOT or the system's).
set -euo pipefail
cd "$(dirname "$0")/.."
lib=${HC_PGROOT:-}$("${PG_CONFIG:-pg_config}" --pkglibdir)
[ -f "$lib/citus.so" ] || { echo "bench-citus: Citus is not installed in $lib" >&2; exit 2; }
port=${HC_CITUS_BENCH_PORT:-54740}
rounds=${HC_CITUS_BENCH_ROUNDS:-3}
seconds=${HC_CITUS_BENCH_SECONDS:-5}
clients=8
assets=${HC_CITUS_BENCH_ASSETS:-5000}
result=bench/results/${HC_CITUS_BENCH_RESULT:-citus}.md
work=$(mktemp -d)
trap 'test/citus/cluster.sh stop "$port" >/dev/null 2>&1; rm -rf "$work"' EXIT

cc -O2 -o "$work/driver" bench/driver.c -I"$(pg_config --includedir)" -L"$(pg_config --libdir)" -lpq -pthread
test/citus/cluster.sh start "$port" >"$work/cluster.log" 2>&1 || { cat "$work/cluster.log"; exit 1; }
node() { local p=$1; shift; psql -X -qAt -v ON_ERROR_STOP=1 -h "${TMPDIR:-/tmp}/holdcommit-$p" -p "$p" -U postgres "$@"; }
for p in $port $((port + 1)) $((port + 2)); do
    node $p -d postgres -c "ALTER SYSTEM SET fsync = on" -c "ALTER SYSTEM SET full_page_writes = on" \
        -c "ALTER SYSTEM SET synchronous_commit = on" -c "SELECT pg_reload_conf()" >/dev/null
done
node $port -d postgres -c "CREATE DATABASE single" >/dev/null
node $port -d single -c "CREATE EXTENSION holdcommit" >/dev/null
node $port -d postgres -c "CREATE EXTENSION holdcommit" -c "SELECT count(*) FROM holdcommit.hc_distribute()" >/dev/null

# setup DB: the rows every scenario needs, in DB.
setup() {
    node $port -d "$1" <<SQL >/dev/null
SET search_path = holdcommit, public;
CREATE TABLE public.bare (id text PRIMARY KEY, n bigint NOT NULL DEFAULT 0);
$([ "$1" = postgres ] && echo "SELECT create_distributed_table('public.bare', 'id', colocate_with => 'holdcommit.hc_assets');")
INSERT INTO public.bare (id) SELECT g::text FROM generate_series(0, $clients - 1) g;
INSERT INTO hc_assets (id, name, created_at, updated_at)
SELECT 'a-' || c || '-' || i, '', now(), now() FROM generate_series(0, $clients - 1) c, generate_series(0, $assets - 1) i;
SELECT count(hc_stock_set('p-' || c, 100000000)) FROM generate_series(0, $clients - 1) c;
SQL
}
setup single
setup postgres
# Two assets of each client on different workers, for order_2pc: pairs of
# a-C-I whose shards are on the two workers (on the single node the same ids).
node $port -d postgres -At -c "
    CREATE TABLE public.pairs AS
    SELECT c, row_number() OVER (PARTITION BY c ORDER BY x.i) - 1 AS n, x.id AS first, y.id AS second
      FROM generate_series(0, $clients - 1) c
      CROSS JOIN LATERAL (SELECT i, 'b-' || c || '-' || i AS id FROM generate_series(0, 3 * $assets / 2) i) x
      CROSS JOIN LATERAL (SELECT 'b-' || c || '-' || (x.i + 1) AS id) y
     WHERE (SELECT nodeport FROM pg_dist_shard_placement WHERE shardid = get_shard_id_for_distribution_column('holdcommit.hc_assets', x.id))
        <> (SELECT nodeport FROM pg_dist_shard_placement WHERE shardid = get_shard_id_for_distribution_column('holdcommit.hc_assets', y.id))
       AND x.i % 2 = 0" >/dev/null
node $port -d postgres -c "INSERT INTO holdcommit.hc_assets (id, name, created_at, updated_at)
                           SELECT unnest(ARRAY[first, second]), '', now(), now() FROM public.pairs WHERE n < $assets / 2" >/dev/null
node $port -d postgres -c "SELECT c, n, first, second FROM public.pairs WHERE n < $assets / 2" >"$work/pairs"
node $port -d single -c "CREATE TABLE public.pairs (c int, n bigint, first text, second text)" \
    -c "\\copy public.pairs FROM '$work/pairs' WITH (DELIMITER '|')" \
    -c "INSERT INTO holdcommit.hc_assets (id, name, created_at, updated_at)
        SELECT unnest(ARRAY[first, second]), '', now(), now() FROM public.pairs" >/dev/null

# Two products of each client, one on each worker, for order_items (on the
# single node the same ids).
node $port -d postgres -At -c "
    CREATE TABLE public.products AS
    SELECT c, (SELECT id FROM (SELECT 'q-' || c || '-' || i AS id FROM generate_series(0, 99) i) q
                WHERE (SELECT nodeport FROM pg_dist_shard_placement
                        WHERE shardid = get_shard_id_for_distribution_column('holdcommit.hc_stock_parts', q.id)) = $((port + 1))
                ORDER BY id LIMIT 1) AS first,
              (SELECT id FROM (SELECT 'q-' || c || '-' || i AS id FROM generate_series(0, 99) i) q
                WHERE (SELECT nodeport FROM pg_dist_shard_placement
                        WHERE shardid = get_shard_id_for_distribution_column('holdcommit.hc_stock_parts', q.id)) = $((port + 2))
                ORDER BY id LIMIT 1) AS second
      FROM generate_series(0, $clients - 1) c" >/dev/null
node $port -d postgres -c "SELECT c, first, second FROM public.products" >"$work/products"
node $port -d single -c "CREATE TABLE public.products (c int, first text, second text)" \
    -c "\\copy public.products FROM '$work/products' WITH (DELIMITER '|')" >/dev/null
for d in single postgres; do
    node $port -d $d -c "SELECT count(holdcommit.hc_stock_set(unnest, 100000000))
                           FROM public.products, unnest(ARRAY[first, second])" >/dev/null
done

printf '%s\n' "- SELECT holdcommit.hc_hold(:'a-{c}-{i}', :'buyer-{c}', :'key-{c}-{i}')" >"$work/hold"
printf '%s\n' "- SELECT holdcommit.hc_reserve(:'p-{c}', :'1', :'buyer-{c}', :'rkey-{c}-{i}')" >"$work/reserve"
printf '%s\n' "rows:RS006 UPDATE public.bare SET n = n + 1 WHERE id = :'{c}'" >"$work/bare_update"
printf '%s\n' "- BEGIN" "- SELECT holdcommit.hc_hold(:'{p2}', :'buyer-{c}', :'okey-{c}-{i}-1')" \
    "- SELECT holdcommit.hc_hold(:'{p3}', :'buyer-{c}', :'okey-{c}-{i}-2')" "- COMMIT" >"$work/order_2pc"
printf '%s\n' "- SELECT holdcommit.hc_reserve_items(pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object('product_id', :'{p1}'::pg_catalog.text, 'qty', 1), pg_catalog.jsonb_build_object('product_id', :'{p2}'::pg_catalog.text, 'qty', 1)), :'buyer-{c}', :'ikey-{c}-{i}')" >"$work/order_items"

# reset DB: every asset free and every product whole again, nothing held.
reset() {
    node $port -d "$1" -c "TRUNCATE holdcommit.hc_reservations, holdcommit.hc_ledger,
                                    holdcommit.hc_stock_reservations, holdcommit.hc_stock_reservation_lines" \
        -c "UPDATE holdcommit.hc_assets SET status = 'AVAILABLE', hold_expires_at = NULL,
                   current_reservation_id = NULL WHERE status <> 'AVAILABLE'" \
        -c "UPDATE holdcommit.hc_stock_parts SET reserved = 0 WHERE reserved <> 0" >/dev/null
}
# run DB SCENARIO: calls per second of one run, on data reset for it.
run() {
    local pool=()
    reset "$1"
    [ "$2" = order_2pc ] && pool=(-P "SELECT n, first, second FROM public.pairs WHERE c = \$1 ORDER BY n")
    [ "$2" = order_items ] && pool=(-C -P "SELECT first, second FROM public.products WHERE c = \$1")
    "$work/driver" -d "host=${TMPDIR:-/tmp}/holdcommit-$port port=$port user=postgres dbname=$1" \
        -c $clients -T "$seconds" -l "$1-$2" "${pool[@]}" "$work/$2" | tee -a "$work/raw" |
        sed -n 's/.* calls_per_s=\([0-9.]*\).*/\1/p'
}
: >"$work/ratios"
for r in $(seq 1 "$rounds"); do
    for s in hold reserve bare_update order_2pc order_items; do
        one=$(run single $s)
        many=$(run postgres $s)
        echo "$s $r $one $many" >>"$work/ratios"
        echo "round $r $s: single node $one/s, through the coordinator $many/s" >&2
    done
done

{
    echo "# make bench-citus: holdcommit through a Citus coordinator"
    echo
    echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') at commit \`$(git rev-parse --short HEAD)\` on $(nproc) cores, $(node $port -d postgres -c "SELECT citus_version()" | sed 's/ on .*//'),"
    echo "PostgreSQL $(node $port -d postgres -c 'SHOW server_version')."
    echo "A coordinator and two workers on this one machine, fsync and \`synchronous_commit\` on; the single node is a database"
    echo "of the coordinator without Citus. $clients clients, $rounds rounds of $seconds s; each row is the round of the median ratio."
    echo
    echo "| call | single node, calls/s | through the coordinator, calls/s | ratio (rounds min–max) | goal |"
    echo "|---|---|---|---|---|"
    for s in hold reserve bare_update order_2pc order_items; do
        awk -v s="$s" '$1 == s { print $3, $4, $4 / $3 }' "$work/ratios" | sort -k3 -g |
            awk -v s="$s" '{ one[NR] = $1; many[NR] = $2; q[NR] = $3 }
                END { m = int((NR + 1) / 2);
                      goal = (s == "hold" || s == "reserve") ? "≥ 0.3" : "—";
                      printf "| %s | %.0f | %.0f | %.2f (%.2f–%.2f) | %s |\n", s, one[m], many[m], q[m], q[1], q[NR], goal }'
    done
    echo
    echo "order_2pc: two holds in one transaction, of assets on the two workers, which Citus commits in two phases;"
    echo "order_items: an order of two products, one on each worker, each step on its product's worker (doc/scale-out.md), in two phases;"
    echo "each call of the other scenarios commits in one phase on one worker (test/citus/run.sh checks both)."
    echo
    echo "Every driver line:"
    echo
    echo '```'
    cat "$work/raw"
    echo '```'
} >"$result"
cat "$result"
