#!/usr/bin/env bash
# A caller whose search_path changes call after call does not make holdcommit analyse its
# kept statements again (core/search_path.c: every call's statements run with the same
# path, pg_catalog and the extension's schema, whatever the caller's).  PostgreSQL's plan
# cache analyses a kept statement again when the search path it was analysed with is not
# the one in force; a path that followed the caller's would cost a parse analysis of every
# statement of every call.
#
# One session alternates two search paths, call after call: SET search_path = a, ...;
# hc_hold, hc_reserve, a refusal of a held asset, an order of two products (hc_reserve_items:
# the first three read and write without statements since 0.4.0, an order of several
# products still runs its statements); SET search_path = b, ...; the same.  With
# log_parser_stats on, PostgreSQL logs "PARSE ANALYSIS STATISTICS" for every analysis, the
# top-level statements' and those of the statements holdcommit prepares or re-plans
# through SPI.  The same script with a trivial function in place of each call is the
# baseline: the difference is what holdcommit's statements were analysed, which must be 0
# once each call has run once on each path.  Then the count is shown to see holdcommit's
# analyses: after ANALYZE of its tables (a relcache invalidation, which makes the plan
# cache analyse the statements that read them again), one more round differs from the
# baseline.  Runs on every major (make test's pgNN suites too).
. "$(dirname "$0")/lib.bash"
load_setup hc_load_paths 2
rounds=${HC_PATHS_ROUNDS:-20}

# The extension in its own schema, its tables out of autovacuum's reach (lib.bash); two
# schemas the caller switches between, each with a look-alike hc_assets.
q "CREATE EXTENSION holdcommit;
   $no_autovacuum_sql
   CREATE SCHEMA a; CREATE SCHEMA b;
   CREATE TABLE a.hc_assets (id text); CREATE TABLE b.hc_assets (id text);
   SELECT count(holdcommit.hc_asset_add(t || '-' || p || i))
     FROM unnest(ARRAY['plain', 'analyzed']) t, generate_series(0, $rounds) i, unnest(ARRAY['a', 'b']) p;
   SELECT holdcommit.hc_asset_add('TAKEN');
   SELECT holdcommit.hc_hold('TAKEN', 'first', 'taken-key', '1 day');
   SELECT holdcommit.hc_stock_set('SKU', 1000000);
   SELECT holdcommit.hc_stock_set('SKU-2', 1000000);" >/dev/null

# script TAG REAL FIRST LAST: the calls of rounds FIRST to LAST on both paths, on assets
# TAG-a0... and with keys of TAG's own; REAL 0 puts a trivial function in place of each
# call (the same statements otherwise).
script() {
    local i p
    for ((i = $3; i <= $4; i++)); do
        for p in a b; do
            echo "SET search_path = $p, public, holdcommit;"
            if [ "$2" = 1 ]; then
                echo "SELECT status FROM hc_hold('$1-$p$i', 'buyer', '$1-hold-$p$i');"
                echo "SELECT status FROM hc_reserve('SKU', 1, 'buyer', '$1-reserve-$p$i');"
                echo "SELECT status FROM hc_hold('TAKEN', 'buyer', '$1-refused-$p$i');"
                echo "SELECT status FROM hc_reserve_items('[{\"product_id\": \"SKU\", \"qty\": 1}, {\"product_id\": \"SKU-2\", \"qty\": 1}]', 'buyer', '$1-items-$p$i');"
            else
                echo "SELECT pg_catalog.concat('$1-$p$i', 'buyer', '$1-hold-$p$i') AS status;"
                echo "SELECT pg_catalog.concat('SKU', 1, 'buyer', '$1-reserve-$p$i') AS status;"
                echo "SELECT pg_catalog.concat('TAKEN', 'buyer', '$1-refused-$p$i') AS status;"
                echo "SELECT pg_catalog.concat('SKU', 'SKU-2', 'buyer', '$1-items-$p$i') AS status;"
            fi
        done
    done
}

# analyses REAL [ANALYZE]: one session: round 0 unlogged (each call runs once on each path:
# its statements are prepared), then the rounds logged (after ANALYZE of holdcommit's
# tables if asked); prints the number of parse analyses logged.
analyses() {
    local tag=${2:-plain}
    {
        script "$tag" "$1" 0 0
        [ -n "${2:-}" ] && echo "ANALYZE holdcommit.hc_assets, holdcommit.hc_reservations, holdcommit.hc_stock_parts, holdcommit.hc_stock_orders, holdcommit.hc_stock_order_lines;"
        echo "SET log_parser_stats = on;"
        echo "SET client_min_messages = log;"
        script "$tag" "$1" 1 "$rounds"
        echo "RESET client_min_messages;"
    } >"$work/calls-$1-$tag.sql"
    psql -X -q -d "$db" -f "$work/calls-$1-$tag.sql" >"$work/out-$1-$tag" 2>&1
    grep -c 'LOG:  PARSE ANALYSIS STATISTICS' "$work/out-$1-$tag"
}

baseline=$(analyses 0)
real=$(analyses 1)
echo "# parse analyses over $rounds rounds of 2 paths x 4 calls: $real with holdcommit, $baseline with a trivial function"
check "the calls answered: held, reserved (one product, two), refused (RS001), on both paths" \
    "$(grep -c '^ HELD$' "$work/out-1-plain") $(grep -c '^ RESERVED$' "$work/out-1-plain") $(grep -c 'ERROR:  asset "TAKEN"' "$work/out-1-plain")" \
    "$((rounds * 2 + 2)) $((rounds * 4 + 4)) $((rounds * 2 + 2))"
check "the baseline counts the top-level statements' analyses (at least one per statement)" \
    "$([ "$baseline" -ge $((rounds * 10)) ] && echo yes || echo "no: $baseline")" "yes"
check "a caller alternating two search paths makes holdcommit analyse none of its kept statements again" \
    "$((real - baseline))" "0"
analyzed=$(analyses 1 analyzed)
echo "# after ANALYZE of holdcommit's tables: $analyzed analyses"
check "the count sees holdcommit's statements analysed again (after ANALYZE of its tables)" \
    "$([ "$analyzed" -gt "$baseline" ] && echo yes || echo "no: $analyzed, baseline $baseline")" "yes"
