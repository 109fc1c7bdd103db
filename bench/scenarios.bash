# The scenarios of make bench, shared by bench/run.sh and the smoke test
# test/load/bench-smoke.sh (sourced, not run by itself).
# Needs PGHOST, PGPORT, PGUSER (a superuser) of a running server with
# holdcommit installed in the PostgreSQL tree it runs from.
#
#   bench_build_driver OUT       compile bench/driver.c to OUT
#   bench_install DB             (re)create DB with holdcommit, bench/plpgsql.sql
#                                and bench/seed.sql
#   bench_scenarios              the scenarios to run (the lease ones only when
#                                hc_lock_acquire exists)
#   bench_variants SCENARIO      its variants, holdcommit's first
#   bench_run SCENARIO VARIANT SYNC SECONDS CLIENTS [DRIVER-ARGS...]
#                                fresh data for the variant, then one driver
#                                run; prints the driver's result line
#   bench_expected SCENARIO VARIANT
#                                the only outcomes the variant may have
#   bench_sweep VARIANT SYNC SECONDS CLIENTS
#                                the sweep scenario's run (bench_run calls it)
#   bench_sold_out VARIANT SYNC CLIENTS [DRIVER-ARGS...]
#                                the sold_out scenario's run (bench_run calls it)
#   bench_sold_out_state VARIANT LINE
#                                what the tables say after a sold_out run
#
# Every variant of a scenario does the same work from the caller's side: the
# same number of clients, the same ids and keys per call (client {c}, call
# counter {i}), on data loaded fresh just before its run.
set -uo pipefail

bench_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bench_db=${bench_db:-hc_bench}
bench_work=${bench_work:-$(mktemp -d)}
bench_driver=${bench_driver:-$bench_work/driver}
# Distinct assets per hold client; a pool's reservations or leases per client
# (sized for runs of a few seconds: a pool's run ends when it is used up).
bench_assets=${HC_BENCH_ASSETS:-12000}
# hold_reclaim (issue 36): the assets per client, each held by a hold that
# has expired, so that every hold reclaims one.
bench_reclaim_assets=${HC_BENCH_RECLAIM_ASSETS:-20000}
bench_pool=${HC_BENCH_POOL:-3000}
# The sweep scenario: the expired holds of its backlog, the live clients'
# calls per second in all (0: flat out), the most seconds its sweep may take
# (statement_timeout; it is reported as a timeout).
bench_sweep_holds=${HC_BENCH_SWEEP_HOLDS:-100000}
bench_sweep_rate=${HC_BENCH_SWEEP_RATE:-1000}
bench_sweep_timeout=${HC_BENCH_SWEEP_TIMEOUT:-60}
# The sold_out scenario (issue 20): the product's units, and the most seconds
# selling them out may take (the run's -T: on a slow day it is reported as not
# sold out, not waited for).
bench_sold_out_stock=${HC_BENCH_SOLD_OUT_STOCK:-10000}
bench_sold_out_timeout=${HC_BENCH_SOLD_OUT_TIMEOUT:-120}
# The seats scenario (issue 37): the pool's rows of 100 seats; it runs until
# sold out, at most the sold_out scenario's timeout.
bench_seats_rows=${HC_BENCH_SEATS_ROWS:-100}

bench_build_driver() {
    cc -O2 -Wall -Wextra -o "$1" "$bench_dir/driver.c" \
        -I"$("${PG_CONFIG:-pg_config}" --includedir)" -L"$("${PG_CONFIG:-pg_config}" --libdir)" -lpq -pthread
}

# bq: run the SQL on stdin in the benchmark database, print rows unaligned.
bq() { PGOPTIONS="-c client_min_messages=warning" psql -X -qAt -v ON_ERROR_STOP=1 -d "$bench_db" "$@"; }

bench_install() {
    bench_db=$1
    psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $bench_db WITH (FORCE)" >/dev/null 2>&1
    psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE DATABASE $bench_db" >/dev/null &&
        echo "CREATE EXTENSION holdcommit;" | bq >/dev/null &&
        bq <"$bench_dir/plpgsql.sql" >/dev/null 2>&1 &&
        bq <"$bench_dir/seed.sql" >/dev/null 2>&1
}

# The parts a hot product's stock is kept in before its run: 0, as a user
# creates it (hc_stock_set alone: from 0.4.0 it spreads itself, issue 36);
# holdcommit_spread's are an operator's hc_stock_spread (issue 20), one per
# client, as doc/reference.md advises.
bench_hot_parts=${HC_BENCH_HOT_PARTS:-0}
bench_spread_parts=64
bench_has_parts() {
    [ "$(echo "SELECT to_regprocedure('hc_stock_spread(text,integer)') IS NOT NULL" | bq)" = t ]
}

bench_has_leases() {
    [ "$(echo "SELECT to_regprocedure('hc_lock_acquire(text,text,interval,integer)') IS NOT NULL" | bq)" = t ]
}

# hc_lock_check: 0.4.0.
bench_has_lease_check() {
    [ "$(echo "SELECT to_regprocedure('hc_lock_check(text,text,bigint)') IS NOT NULL" | bq)" = t ]
}

bench_scenarios() {
    local s="hold hold_reclaim refusal hot_product distinct_products sold_out seats commit release finalize unreserve"
    bench_has_leases && s="$s lease_acquire lease_heartbeat lease_release lease_begin"
    bench_has_lease_check && s="$s lease_check"
    echo "$s first_call sweep"
}

bench_variants() {
    case $1 in
    hold)        echo "holdcommit plpgsql seed_update_insert bare_update" ;;
    hold_reclaim) echo "holdcommit seed_update_insert bare_update" ;;
    refusal)     echo "holdcommit plpgsql point_select" ;;
    # hot_product's last three are issue 20's yardsticks: the seed's SQL as a
    # PL/pgSQL function, a bare one-row UPDATE of the product (one WAL flush
    # per sale under its row lock), and holdcommit itself with each client on
    # a product of its own.
    # holdcommit_spread: the product spread by an operator before the sale.
    hot_product) echo "holdcommit plpgsql pessimistic optimistic seed_plpgsql bare_update holdcommit_distinct holdcommit_spread" ;;
    sold_out) echo "holdcommit seed_plpgsql plpgsql holdcommit_spread" ;;
    distinct_products) echo "holdcommit seed_plpgsql plpgsql" ;;
    seats) echo "holdcommit plpgsql" ;;
    first_call)  echo "after_create after_analyze" ;;
    sweep)       echo "fresh analyzed" ;;
    # lease_check: an application's write under its lease's token (issue 38):
    # BEGIN, the check, one INSERT, COMMIT; bare_write: the same without the check
    lease_check) echo "holdcommit plpgsql bare_write" ;;
    lease_*)     echo "holdcommit holdcommit_in_block plpgsql bare_update" ;;
    memory)      echo "holdcommit" ;;
    *)           echo "holdcommit plpgsql" ;;
    esac
}

bench_clients() {
    case $1 in
    refusal | hot_product | distinct_products | sold_out | seats) echo 64 ;;
    memory) echo 1 ;;
    sweep) echo 10 ;;
    *) echo 8 ;;
    esac
}

bench_expected() {
    case $1/$2 in
    refusal/holdcommit | refusal/plpgsql) echo "RS001" ;;
    sold_out/* | seats/*) echo "00000 RS002" ;;   # RS002 once per client, when sold out
    *) echo "00000" ;;
    esac
}

# Fresh, empty tables for one implementation.
fresh_holdcommit() {
    bq <<'SQL'
DO $$
DECLARE
    tables text;
BEGIN
    SELECT string_agg(c.oid::regclass::text, ', ') INTO tables
      FROM pg_depend d JOIN pg_class c ON c.oid = d.objid
     WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_extension'::regclass
       AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'holdcommit')
       AND d.deptype = 'e' AND c.relkind = 'r';
    EXECUTE 'TRUNCATE ' || tables || ' CASCADE';
END
$$;
SQL
}
fresh_plpgsql() {
    echo "TRUNCATE bench_plpgsql.assets, bench_plpgsql.reservations, bench_plpgsql.inventory,
          bench_plpgsql.stock_reservations, bench_plpgsql.locks, bench_plpgsql.attempts,
          bench_plpgsql.seats, bench_plpgsql.seat_holds, bench_plpgsql.ledger RESTART IDENTITY" | bq
}
fresh_seed() {
    echo "TRUNCATE bench_seed.assets, bench_seed.reservations, bench_seed.inventories,
          bench_seed.stock_reservations, bench_seed.ledger RESTART IDENTITY" | bq
}

# The asset ids a-{c}-{i} of CLIENTS clients, as a FROM item.
asset_ids() {
    echo "(SELECT 'a-' || c || '-' || i AS id FROM generate_series(0, $1 - 1) c,
                   generate_series(0, $bench_assets - 1) i) ids"
}

# hold_reclaim's asset ids a-{c}-{i} of CLIENTS clients, as a FROM item.
reclaim_ids() {
    echo "(SELECT 'a-' || c || '-' || i AS id FROM generate_series(0, $1 - 1) c,
                   generate_series(0, $bench_reclaim_assets - 1) i) ids"
}

# fill_pool CLIENTS ROWS COLUMNS VALUES: a fresh bench_pool (c, n, COLUMNS)
# with ROWS rows per client, made by CLIENTS clients at once through the
# driver (as fast as the calls go); VALUES is the SQL of the columns, with the
# driver's patterns ({c}, {i}).  Fails unless every row was made.
fill_pool() {
    echo "DROP TABLE IF EXISTS bench_pool; CREATE TABLE bench_pool (c integer, n integer, $3)" |
        bq || return 1
    echo "rows:XXPOL INSERT INTO bench_pool SELECT :'{c}'::integer, :'{i}'::integer, $4" \
        >"$bench_work/pool-steps"
    "$bench_driver" -d "dbname=$bench_db" -c "$1" -n $(($1 * $2)) -l pool "$bench_work/pool-steps" |
        grep -q " outcomes=00000:$(($1 * $2)) "
}

# The steps of one lease call: alone (autocommit), or inside the caller's
# transaction block (holdcommit_in_block).
lease_steps() {
    if [ "$variant" = holdcommit_in_block ]; then
        printf -- '- BEGIN\n- %s\n- COMMIT\n' "$1"
    else
        printf -- '- %s\n' "$1"
    fi
}

# Write the scenario file of SCENARIO/VARIANT to $bench_work/steps and load
# its data; set pool_sql (empty: no pool) and pool_cycle.
bench_prepare() {
    local scenario=$1 variant=$2 clients=$3 pool=$bench_pool
    # the units of the one product of hot_product (never used up) or sold_out
    local stock=100000000
    [ "$scenario" = sold_out ] && stock=$bench_sold_out_stock
    # impl: whose tables; fn: the prefix of its functions (hc_hold, bench_plpgsql.hold)
    local impl=holdcommit fn=hc_ assets=hc_assets
    pool_sql=""
    pool_cycle=""
    case $variant in
    plpgsql) impl=plpgsql fn=bench_plpgsql. assets=bench_plpgsql.assets ;;
    seed_update_insert | bare_update | pessimistic | optimistic | seed_plpgsql) impl=seed ;;
    esac
    case $scenario/$variant in
    lease_*/bare_update) impl=plpgsql ;;
    esac
    "fresh_$impl" || return 1

    case $scenario/$variant in
    hold/holdcommit | first_call/*)
        echo "INSERT INTO hc_assets (id) SELECT id FROM $(asset_ids "$clients")" | bq || return 1
        echo "- SELECT hc_hold(:'a-{c}-{i}', :'buyer-{c}', :'key-{c}-{i}')" ;;
    hold/plpgsql)
        echo "INSERT INTO bench_plpgsql.assets (id) SELECT id FROM $(asset_ids "$clients")" | bq || return 1
        echo "- SELECT bench_plpgsql.hold(:'a-{c}-{i}', :'buyer-{c}', :'key-{c}-{i}')" ;;
    hold/seed_update_insert)
        echo "INSERT INTO bench_seed.assets (id) SELECT id FROM $(asset_ids "$clients")" | bq || return 1
        cat <<'STEPS' ;;
- BEGIN
rows:RS001 UPDATE bench_seed.assets SET status = 'HELD', hold_expires_at = now() + interval '10 minutes', current_reservation_id = :'res-{c}-{i}', version = version + 1 WHERE id = :'a-{c}-{i}' AND (status = 'AVAILABLE' OR (status = 'HELD' AND hold_expires_at < now()))
- INSERT INTO bench_seed.reservations (id, asset_id, buyer_id, idempotency_key, status, expires_at, created_at) VALUES (:'res-{c}-{i}', :'a-{c}-{i}', :'buyer-{c}', :'key-{c}-{i}', 'HELD', now() + interval '10 minutes', now())
- COMMIT
STEPS
    hold/bare_update)
        echo "INSERT INTO bench_seed.assets (id) SELECT id FROM $(asset_ids "$clients")" | bq || return 1
        echo "rows:RS006 UPDATE bench_seed.assets SET status = 'HELD', hold_expires_at = now() + interval '10 minutes', version = version + 1 WHERE id = :'a-{c}-{i%$bench_assets}'" ;;

    # Every asset held by a hold that expired an hour ago (a superuser's
    # shortcut for "its buyer walked away", as in the sweep scenario), so
    # that every hold reclaims one; the new holds live 1 microsecond.
    hold_reclaim/holdcommit)
        echo "INSERT INTO hc_assets (id, status, hold_expires_at, current_reservation_id)
              SELECT id, 'HELD', now() - interval '1 hour', 'old-' || id FROM $(reclaim_ids "$clients");
              INSERT INTO hc_reservations (id, asset_id, buyer_id, status, expires_at, created_at)
              SELECT 'old-' || id, id, 'gone', 'HELD', now() - interval '1 hour', now() - interval '2 hours'
                FROM $(reclaim_ids "$clients")" | bq || return 1
        echo "- SELECT hc_hold(:'a-{c}-{i}', :'buyer-{c}', :'key-{c}-{i}', :'1 microsecond')" ;;
    hold_reclaim/seed_update_insert)
        echo "INSERT INTO bench_seed.assets (id, status, hold_expires_at, current_reservation_id)
              SELECT id, 'HELD', now() - interval '1 hour', 'old-' || id FROM $(reclaim_ids "$clients")" |
            bq || return 1
        cat <<'STEPS' ;;
- BEGIN
rows:RS001 UPDATE bench_seed.assets SET status = 'HELD', hold_expires_at = now() + interval '1 microsecond', current_reservation_id = :'res-{c}-{i}', version = version + 1 WHERE id = :'a-{c}-{i}' AND (status = 'AVAILABLE' OR (status = 'HELD' AND hold_expires_at < now()))
- INSERT INTO bench_seed.reservations (id, asset_id, buyer_id, idempotency_key, status, expires_at, created_at) VALUES (:'res-{c}-{i}', :'a-{c}-{i}', :'buyer-{c}', :'key-{c}-{i}', 'HELD', now() + interval '1 microsecond', now())
- COMMIT
STEPS
    hold_reclaim/bare_update)
        echo "INSERT INTO bench_seed.assets (id, status, hold_expires_at)
              SELECT id, 'HELD', now() - interval '1 hour' FROM $(reclaim_ids "$clients")" | bq || return 1
        echo "rows:RS006 UPDATE bench_seed.assets SET status = 'HELD', hold_expires_at = now() + interval '1 microsecond', version = version + 1 WHERE id = :'a-{c}-{i%$bench_reclaim_assets}'" ;;

    refusal/holdcommit | refusal/point_select)
        echo "INSERT INTO hc_assets (id) VALUES ('held');
              SELECT count(hc_hold('held', 'first-buyer', 'first-key'))" | bq >/dev/null || return 1
        if [ "$variant" = holdcommit ]; then
            echo "- SELECT hc_hold(:'held', :'buyer-{c}', :'key-{c}-{i}')"
        else
            echo "rows:RS006 SELECT status, hold_expires_at FROM hc_assets WHERE id = :'held'"
        fi ;;
    refusal/plpgsql)
        echo "INSERT INTO bench_plpgsql.assets (id) VALUES ('held');
              SELECT count(bench_plpgsql.hold('held', 'first-buyer', 'first-key'))" | bq >/dev/null || return 1
        echo "- SELECT bench_plpgsql.hold(:'held', :'buyer-{c}', :'key-{c}-{i}')" ;;

    hot_product/holdcommit | sold_out/holdcommit | hot_product/holdcommit_spread | sold_out/holdcommit_spread)
        echo "SELECT count(hc_stock_set('hot', $stock))" | bq >/dev/null || return 1
        local parts=$bench_hot_parts
        [ "$variant" = holdcommit_spread ] && parts=$bench_spread_parts
        if [ "$parts" -gt 0 ] && bench_has_parts; then
            echo "SELECT count(hc_stock_spread('hot', $parts))" | bq >/dev/null || return 1
        fi
        echo "- SELECT hc_reserve(:'hot', :'1', :'buyer-{c}', :'key-{c}-{i}')" ;;
    hot_product/plpgsql | sold_out/plpgsql)
        echo "INSERT INTO bench_plpgsql.inventory (product_id, stock) VALUES ('hot', $stock)" | bq || return 1
        echo "- SELECT bench_plpgsql.reserve(:'hot', :'1', :'buyer-{c}', :'key-{c}-{i}')" ;;
    hot_product/seed_plpgsql | sold_out/seed_plpgsql)
        echo "INSERT INTO bench_seed.inventories (product_id, stock) VALUES (1, $stock)" | bq || return 1
        echo "- SELECT bench_seed.reserve(:'1', :'1', :'buyer-{c}', :'key-{c}-{i}')" ;;
    hot_product/bare_update)
        echo "INSERT INTO bench_seed.inventories (product_id, stock) VALUES (1, $stock)" | bq || return 1
        echo "rows:RS006 UPDATE bench_seed.inventories SET reserved = reserved + 1 WHERE product_id = :'1'" ;;
    hot_product/holdcommit_distinct | distinct_products/holdcommit)
        echo "SELECT count(hc_stock_set('p-' || c, 100000000)) FROM generate_series(0, $clients - 1) c" |
            bq >/dev/null || return 1
        echo "- SELECT hc_reserve(:'p-{c}', :'1', :'buyer-{c}', :'key-{c}-{i}')" ;;
    distinct_products/seed_plpgsql)
        echo "INSERT INTO bench_seed.inventories (product_id, stock)
              SELECT c, 100000000 FROM generate_series(0, $clients - 1) c" | bq || return 1
        echo "- SELECT bench_seed.reserve(:'{c}', :'1', :'buyer-{c}', :'key-{c}-{i}')" ;;
    distinct_products/plpgsql)
        echo "INSERT INTO bench_plpgsql.inventory (product_id, stock)
              SELECT 'p-' || c, 100000000 FROM generate_series(0, $clients - 1) c" | bq || return 1
        echo "- SELECT bench_plpgsql.reserve(:'p-{c}', :'1', :'buyer-{c}', :'key-{c}-{i}')" ;;
    hot_product/pessimistic)
        echo "INSERT INTO bench_seed.inventories (product_id, stock) VALUES (1, 100000000)" | bq || return 1
        cat <<'STEPS' ;;
- BEGIN
true:RS002 SELECT stock - reserved >= 1 FROM bench_seed.inventories WHERE product_id = :'1' FOR UPDATE
- UPDATE bench_seed.inventories SET reserved = reserved + 1, updated_at = now() WHERE product_id = :'1'
- COMMIT
STEPS
    hot_product/optimistic)
        echo "INSERT INTO bench_seed.inventories (product_id, stock) VALUES (1, 100000000)" | bq || return 1
        cat <<'STEPS' ;;
true:RS002 SELECT stock - reserved >= 1, version FROM bench_seed.inventories WHERE product_id = :'1'
retry UPDATE bench_seed.inventories SET reserved = reserved + 1, version = version + 1, updated_at = now() WHERE product_id = :'1' AND version = :'{s1.2}'
STEPS

    # Issue 37: a pool of $bench_seats_rows rows of 100 seats, a row's rank its
    # number; each call holds the 2 best seats, until the pool is sold out.
    seats/holdcommit)
        echo "INSERT INTO hc_assets (id, pool, rank, grp, pos)
              SELECT 's-' || r || '-' || p, 'hall', r, 'row-' || r, p
                FROM generate_series(1, $bench_seats_rows) r, generate_series(1, 100) p" | bq || return 1
        echo "- SELECT count(*) FROM hc_hold_best(:'hall', :'2', :'buyer-{c}', :'key-{c}-{i}')" ;;
    seats/plpgsql)
        echo "INSERT INTO bench_plpgsql.seats (id, pool, rank)
              SELECT 's-' || r || '-' || p, 'hall', r
                FROM generate_series(1, $bench_seats_rows) r, generate_series(1, 100) p" | bq || return 1
        echo "- SELECT count(*) FROM bench_plpgsql.hold_best(:'hall', :'2', :'buyer-{c}', :'key-{c}-{i}')" ;;

    commit/* | release/*)
        echo "INSERT INTO $assets (id) SELECT 'p-' || c || '-' || n FROM generate_series(0, $clients - 1) c,
                     generate_series(0, $pool - 1) n" | bq || return 1
        fill_pool "$clients" "$pool" "reservation_id text" \
            "(${fn}hold(:'p-{c}-{i}', :'buyer-{c}', :'pool-{c}-{i}')).reservation_id" || return 1
        pool_sql="SELECT reservation_id FROM bench_pool WHERE c = \$1::integer ORDER BY n"
        echo "- SELECT ${fn}$scenario(:'{p1}')" ;;

    finalize/* | unreserve/*)
        if [ "$impl" = plpgsql ]; then
            echo "INSERT INTO bench_plpgsql.inventory (product_id, stock)
                  SELECT 'p-' || c, 100000000 FROM generate_series(0, $clients - 1) c" | bq || return 1
        else
            echo "SELECT count(hc_stock_set('p-' || c, 100000000)) FROM generate_series(0, $clients - 1) c" |
                bq >/dev/null || return 1
        fi
        fill_pool "$clients" "$pool" "reservation_id text" \
            "(${fn}reserve(:'p-{c}', 1, :'buyer-{c}', :'pool-{c}-{i}')).reservation_id" || return 1
        pool_sql="SELECT reservation_id FROM bench_pool WHERE c = \$1::integer ORDER BY n"
        echo "- SELECT ${fn}$scenario(:'{p1}')" ;;

    lease_check/*)
        # One lease per client, beaten by nobody; each call a transaction that
        # writes one row of the application's under the token.
        echo "CREATE TABLE IF NOT EXISTS bench_writes (n bigserial PRIMARY KEY, resource text NOT NULL,
                                                        token bigint NOT NULL)" | bq || return 1
        fill_pool "$clients" 1 "resource text, owner text, token bigint" \
            ":'r-{c}-{i}', :'owner-{c}', ${fn}lock_acquire(:'r-{c}-{i}', :'owner-{c}', '3 minutes', 0)" ||
            return 1
        pool_sql="SELECT resource, owner, token FROM bench_pool WHERE c = \$1::integer ORDER BY n"
        pool_cycle=-C
        echo "- BEGIN"
        [ "$variant" = bare_write ] || echo "- SELECT ${fn}lock_check(:'{p1}', :'{p2}', :'{p3}')"
        echo "- INSERT INTO bench_writes (resource, token) VALUES (:'{p1}', :'{p3}')"
        echo "- COMMIT" ;;
    lease_*/bare_update)
        # The least a lease call can be: one UPDATE of the client's lease row.
        echo "INSERT INTO bench_plpgsql.locks (resource, owner, token, acquired_at, heartbeat_at, stale_after)
              SELECT 'r-' || c, 'owner-' || c, 1, now(), now(), '3 minutes'
                FROM generate_series(0, $clients - 1) c" | bq || return 1
        echo "rows:RS006 UPDATE bench_plpgsql.locks SET heartbeat_at = clock_timestamp() WHERE resource = :'r-{c}'" ;;
    lease_acquire/*)
        lease_steps "SELECT ${fn}lock_acquire(:'r-{c}-{i}', :'owner-{c}', :'3 minutes', :'0')" ;;
    lease_heartbeat/* | lease_release/* | lease_begin/*)
        # A heartbeat beats one lease per client over and over; a release ends
        # a lease of the pool per call; a begin makes the first attempt of a
        # lease of the pool per call (PROCEED, a marker).
        local leases=$pool call=lock_${scenario#lease_}
        if [ "$scenario" = lease_heartbeat ]; then
            leases=1
            pool_cycle=-C
        fi
        [ "$scenario" = lease_begin ] && call=attempt_begin
        fill_pool "$clients" "$leases" "resource text, owner text, token bigint" \
            ":'r-{c}-{i}', :'owner-{c}', ${fn}lock_acquire(:'r-{c}-{i}', :'owner-{c}', '3 minutes', 0)" ||
            return 1
        pool_sql="SELECT resource, owner, token FROM bench_pool WHERE c = \$1::integer ORDER BY n"
        lease_steps "SELECT ${fn}$call(:'{p1}', :'{p2}', :'{p3}')" ;;

    memory/holdcommit)
        echo "INSERT INTO hc_assets (id) SELECT 'm-' || i FROM generate_series(0, 999) i" | bq || return 1
        cat <<'STEPS' ;;
- SELECT (hc_hold(:'m-{i%1000}', :'buyer', :'mem-{i}')).reservation_id
- SELECT hc_release(:'{s1.1}')
STEPS
    *)
        echo "bench: unknown scenario $scenario/$variant" >&2
        return 1 ;;
    esac >"$bench_work/steps" || return 1

    # Statistics for the tables that hold data, as after a normal load; the
    # empty ones keep "never analyzed" (TRUNCATE resets it), so that plans
    # made while they fill up assume a size, not an empty table whose plans
    # would stay on sequential scans for the session's life.  first_call's
    # first run (no ANALYZE at all) is the exception it measures.
    if [ "$scenario/$variant" = first_call/after_create ]; then
        return 0
    fi
    bq <<'SQL'
DO $$
DECLARE
    t regclass;
BEGIN
    FOR t IN SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
              WHERE c.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema')
                AND pg_relation_size(c.oid) > 0
    LOOP
        EXECUTE format('ANALYZE %s', t);
    END LOOP;
END
$$;
SQL
}

# The extension's own tables, as a FROM item (name: regclass).
extension_tables() {
    echo "(SELECT c.oid::regclass AS name
             FROM pg_depend d JOIN pg_class c ON c.oid = d.objid
            WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_extension'::regclass
              AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'holdcommit')
              AND d.deptype = 'e' AND c.relkind = 'r') t"
}

# each_extension_table FORMAT: run FORMAT (a statement with %s for the
# table) for every table of the extension.
each_extension_table() {
    bq <<SQL
DO \$\$
DECLARE
    t regclass;
BEGIN
    FOR t IN SELECT name FROM $(extension_tables) LOOP
        EXECUTE format('$1', t);
    END LOOP;
END
\$\$;
SQL
}

# bench_sweep VARIANT SYNC SECONDS CLIENTS: issue 18's sweep of a backlog.
# A new install (the extension created just now, autovacuum off for its
# tables), a backlog of $bench_sweep_holds holds made by hc_hold and aged
# two hours (a superuser's shortcut for "their buyers walked away"), no
# ANALYZE (fresh) or ANALYZE after the load (analyzed).  CLIENTS live
# clients, each calling hc_hold and hc_release of its own asset in one
# statement (one transaction), $bench_sweep_rate calls/s in all: first for
# SECONDS without a sweep, then while SELECT * FROM hc_sweep() sweeps the
# backlog by hand in one statement, at most $bench_sweep_timeout s.  Prints
# the second run's driver line (its stmt_s: the sweep's time; stmt_result:
# the holds it expired; stmt_outcome 57014: the timeout) with the first's
# figures as base_*, and holds=, rate=, timeout_s=.
bench_sweep() {
    local variant=$1 sync=$2 seconds=$3 clients=$4 holds=$bench_sweep_holds chunk=1000
    local conninfo="dbname=$bench_db options='-c synchronous_commit=$sync'" base line got
    local rate=()
    [ "$bench_sweep_rate" != 0 ] && rate=(-R "$bench_sweep_rate")

    echo "DROP EXTENSION holdcommit CASCADE; CREATE EXTENSION holdcommit;" | bq >/dev/null 2>&1 ||
        return 1
    each_extension_table 'ALTER TABLE %s SET (autovacuum_enabled = off, toast.autovacuum_enabled = off)' ||
        return 1
    bq <<SQL || return 1
INSERT INTO hc_assets (id) SELECT 'swept-' || i FROM generate_series(0, $holds - 1) i;
INSERT INTO hc_assets (id) SELECT 'live-' || c FROM generate_series(0, $clients - 1) c;
SQL
    # The holds, by hc_hold in transactions of $chunk, one session per core.
    seq 0 $(((holds + chunk - 1) / chunk - 1)) |
        xargs -P "$(nproc)" -I{} psql -X -qAt -v ON_ERROR_STOP=1 -d "$bench_db" -c \
            "SELECT count(hc_hold('swept-' || i, 'buyer-' || i, 'swept-' || i, '1 hour'))
               FROM generate_series({} * $chunk, least({} * $chunk + $chunk, $holds) - 1) i" >/dev/null ||
        return 1
    echo "UPDATE hc_assets SET hold_expires_at = hold_expires_at - interval '2 hours' WHERE id LIKE 'swept-%';
          UPDATE hc_reservations SET expires_at = expires_at - interval '2 hours' WHERE asset_id LIKE 'swept-%';" |
        bq || return 1
    got=$(echo "SELECT count(*) FROM hc_reservations WHERE status = 'HELD' AND expires_at <= clock_timestamp()" | bq)
    if [ "$got" != "$holds" ]; then
        echo "bench: sweep/$variant: $got expired holds, not $holds" >&2
        return 1
    fi
    if [ "$variant" = analyzed ]; then
        each_extension_table 'ANALYZE %s' || return 1
    fi
    echo "- SELECT hc_release((hc_hold(:'live-{c}', :'live-buyer-{c}', :'live-{c}-{i}')).reservation_id)" \
        >"$bench_work/steps"
    echo "CHECKPOINT" | bq
    base=$("$bench_driver" -d "$conninfo" -c "$clients" -T "$seconds" "${rate[@]}" \
        -l "sweep/$variant/$sync/baseline" "$bench_work/steps") || return 1
    line=$("$bench_driver" -d "$conninfo" -c "$clients" "${rate[@]}" -l "sweep/$variant/$sync" \
        -s "SET statement_timeout = '${bench_sweep_timeout}s'" \
        -S "SELECT expired_holds FROM hc_sweep()" "$bench_work/steps") || return 1
    # Back to a new install's tables (autovacuum on) for what runs next.
    echo "DROP EXTENSION holdcommit CASCADE; CREATE EXTENSION holdcommit;" | bq >/dev/null 2>&1 ||
        return 1
    echo "$line $(echo "$base" | tr ' ' '\n' |
        grep -E '^(calls|calls_per_s|p50_ms|p99_ms|max_ms|outcomes)=' | sed 's/^/base_/' | tr '\n' ' ')holds=$holds rate=$bench_sweep_rate timeout_s=$bench_sweep_timeout"
}

# bench_sold_out_state VARIANT LINE: what the tables of VARIANT say of its
# one product after a sold_out run whose driver line is LINE, as key=value
# pairs: stock, reserved (the product's columns), reservations (the qty of its
# live reservation rows), ledger (what its ledger rows add to reserved: their
# reserved_delta, the seed's qty), check (holdcommit: the rows of hc_check();
# the others: how many of "reserved within 0..stock", "reserved =
# reservations", "reserved = ledger" fail), then sold_out (every client ended
# at an RS002) and exact: every unit sold once (exactly stock calls succeeded,
# one RS002 per client, nothing else) and the tables agree.
bench_sold_out_state() {
    local variant=$1 line=$2 outcomes clients state
    case $variant in
    holdcommit | holdcommit_spread)
        state=$(bq <<'SQL'
SELECT i.stock, i.reserved,
       (SELECT coalesce(sum(l.qty), 0) FROM hc_stock_reservation_lines l
         WHERE l.product_id = 'hot' AND l.status = 'RESERVED'),
       (SELECT coalesce(sum(g.reserved_delta), 0) FROM hc_ledger g
         WHERE g.kind = 'product' AND g.entity_id = 'hot'),
       (SELECT count(*) FROM hc_check())
  FROM hc_inventory i WHERE i.product_id = 'hot'
SQL
        ) ;;
    seed_plpgsql | plpgsql)
        local t=bench_seed.inventories r=bench_seed.stock_reservations g="bench_seed.ledger g" id=1
        local delta=g.qty by="g.product_id = 1"
        if [ "$variant" = plpgsql ]; then
            t=bench_plpgsql.inventory r=bench_plpgsql.stock_reservations g="bench_plpgsql.ledger g" id="'hot'"
            delta=g.reserved_delta by="g.kind = 'product' AND g.entity_id = 'hot'"
        fi
        state=$(bq <<SQL
SELECT stock, reserved, reservations, ledger,
       (NOT (reserved BETWEEN 0 AND stock))::integer + (reserved <> reservations)::integer
       + (reserved <> ledger)::integer
  FROM (SELECT i.stock, i.reserved,
               (SELECT coalesce(sum(r.qty), 0) FROM $r r
                 WHERE r.product_id = $id AND r.status = 'RESERVED') AS reservations,
               (SELECT coalesce(sum($delta), 0) FROM $g WHERE $by) AS ledger
          FROM $t i WHERE i.product_id = $id) s
SQL
        ) ;;
    esac
    [ -n "$state" ] || return 1
    outcomes=$(echo "$line" | sed -nE 's/.* outcomes=([^ ]*) .*/\1/p')
    clients=$(echo "$line" | sed -nE 's/.* clients=([0-9]+) .*/\1/p')
    echo "$state" | awk -F'|' -v outcomes="$outcomes" -v clients="$clients" '{
        sold_out = (outcomes ~ ("(^|,)RS002:" clients "(,|$)")) ? "yes" : "no"
        exact = (outcomes == "00000:" $1 ",RS002:" clients && $2 == $1 && $3 == $1 && $4 == $1 && $5 == 0) ? "yes" : "no"
        printf "stock=%s reserved=%s reservations=%s ledger=%s check=%s sold_out=%s exact=%s\n", $1, $2, $3, $4, $5, sold_out, exact
    }'
}

# bench_sold_out VARIANT SYNC CLIENTS [DRIVER-ARGS...]: issue 20's end of the
# stock.  One product of $bench_sold_out_stock units, CLIENTS clients each
# reserving 1 unit per call with a new key, each stopping at its first RS002
# (the driver's -x), so the run lasts until the product is sold out (at most
# $bench_sold_out_timeout s); prints the driver's line, bench_sold_out_state's
# pairs and timeout_s.
bench_sold_out() {
    local variant=$1 sync=$2 clients=$3 line
    shift 3
    bench_prepare sold_out "$variant" "$clients" || return 1
    echo "CHECKPOINT" | bq
    line=$("$bench_driver" -d "dbname=$bench_db options='-c synchronous_commit=$sync'" -c "$clients" \
        -T "$bench_sold_out_timeout" -x RS002 -l "sold_out/$variant/$sync" "$@" "$bench_work/steps") ||
        return 1
    echo "$line $(bench_sold_out_state "$variant" "$line") timeout_s=$bench_sold_out_timeout"
}

# bench_run SCENARIO VARIANT SYNC SECONDS CLIENTS [EXTRA-DRIVER-ARGS...]
# (CLIENTS "": the scenario's number)
bench_run() {
    local scenario=$1 variant=$2 sync=$3 seconds=$4
    local clients=${5:-$(bench_clients "$scenario")}
    shift 5
    local conninfo="dbname=$bench_db options='-c synchronous_commit=$sync'"

    if [ "$scenario" = sweep ]; then
        bench_sweep "$variant" "$sync" "$seconds" "$clients"
        return
    fi
    if [ "$scenario" = sold_out ]; then
        bench_sold_out "$variant" "$sync" "$clients" "$@"
        return
    fi
    if [ "$scenario" = first_call ]; then
        # A new install: the extension created just now, its tables empty
        # but for the assets loaded right after, no ANALYZE (after_create)
        # or an ANALYZE before the first call (after_analyze).
        echo "DROP EXTENSION holdcommit CASCADE; CREATE EXTENSION holdcommit;" | bq >/dev/null 2>&1 ||
            return 1
    fi
    bench_prepare "$scenario" "$variant" "$clients" || return 1
    echo "CHECKPOINT" | bq
    # seats: each client stops at its RS002, when the pool is sold out.
    [ "$scenario" = seats ] && set -- -x RS002 "$@" && seconds=$bench_sold_out_timeout
    "$bench_driver" -d "$conninfo" -c "$clients" -T "$seconds" -l "$scenario/$variant/$sync" \
        ${pool_sql:+-P "$pool_sql"} $pool_cycle "$@" "$bench_work/steps"
}
