#!/usr/bin/env bash
# holdcommit on Citus: a coordinator and two workers on loopback
# (test/citus/cluster.sh), the extension distributed with hc_distribute().
# Runs whenever Citus is installed in the PostgreSQL tree (HC_PGROOT or the
# system's); otherwise prints one SKIP line and passes.  Checks:
#   - every call's outcomes as on a single node, and the session usable after
#     each refusal;
#   - where each call runs (citus.log_remote_commands): a bare SELECT on one
#     worker, in one phase; PERFORM in PL code and a call in a larger query
#     sent whole to the worker; a transaction over two workers in two phases;
#   - 50 concurrent holds of one asset: one winner; 200 reserves of 100 units
#     from 20 clients: exactly 100;
#   - orders of several products, a line on each worker: every outcome of
#     hc_reserve_items, hc_finalize and hc_unreserve, two-phase commit, the
#     sweep, 100 concurrent orders (exactly the stock, no deadlock), steps
#     called by hand, and a worker stopped between PREPARE and COMMIT PREPARED
#     in the middle of such an order;
#   - hc_sweep() and hc_check() on the coordinator with a worker without
#     shards, and hc_sweep() and the grants with a worker down;
#   - what Citus cannot give, as doc/scale-out.md says: keys per routing id,
#     no session-bound lease.
# Prints "ok - ..." / "not ok - ..."; exits 0.
set -uo pipefail
cd "$(dirname "$0")/../.."
. test/harness/tap.bash

port=${HC_CITUS_PORT:-$((${PGPORT:-54330} + 20))}
# The major of PG_CONFIG, as test/harness/server.sh's.
lib=${HC_PGROOT:-}$("${PG_CONFIG:-pg_config}" --pkglibdir)
if [ ! -f "$lib/citus.so" ]; then
    echo "ok - # SKIP Citus is not installed in $lib (doc/scale-out.md: how to run this suite)"
    exit 0
fi
work=$(mktemp -d)
trap 'test/citus/cluster.sh stop "$port" >/dev/null 2>&1; test/harness/server.sh stop $((port + 3)) >/dev/null 2>&1; rm -rf "$work"' EXIT
if ! test/citus/cluster.sh start "$port" >"$work/cluster.log" 2>&1; then
    echo "not ok - a Citus cluster starts on ports $port-$((port + 2))"
    cat "$work/cluster.log"
    exit 0
fi
echo "ok - a Citus cluster starts on ports $port-$((port + 2))"

host=${TMPDIR:-/tmp}/holdcommit-$port
export PGOPTIONS="-c search_path=public,holdcommit"
# c SQL...: run on the coordinator, rows unaligned; cv: with errors shown tersely, going on.
c() { psql -X -qAt -v ON_ERROR_STOP=1 -h "$host" -p "$port" -U postgres -d postgres "$@"; }
cv() { psql -X -qAt -v VERBOSITY=terse -h "$host" -p "$port" -U postgres -d postgres "$@" 2>&1; }
# sqlstate SQL: the SQLSTATE SQL ends with, then whether the session is still usable.
sqlstate() {
    printf '%s\n' '\set VERBOSITY terse' "$1;" '\echo :SQLSTATE' 'SELECT 1;' |
        psql -X -qAt -h "$host" -p "$port" -U postgres -d postgres 2>/dev/null | tail -2 | tr '\n' ' '
}
# remote SQL: what the coordinator sent to the workers for SQL: one line per
# command, "PORT COMMAND", the shard numbers and literals left out.
remote() {
    printf '%s\n' 'SET citus.log_remote_commands = on;' 'SET client_min_messages = notice;' "$1" |
        psql -X -qAt -h "$host" -p "$port" -U postgres -d postgres 2>&1 >/dev/null |
        awk '/^NOTICE:  issuing/ { sub(/^NOTICE:  issuing /, ""); cmd = $0 }
             /^DETAIL:  on server/ { match($0, /:[0-9]+ /); print substr($0, RSTART + 1, RLENGTH - 2), cmd }' |
        sed -E "s/_[0-9]+ /_N /g; s/'[^']*'/'.'/g"
}

# snippet NAME: doc/scale-out.md's block NAME, as printed (<!-- snippet: run-by test/citus/run.sh NAME -->).
snippet() {
    perl -ne 'BEGIN { $name = shift @ARGV }
              if (m{<!--\s*snippet:\s*run-by\s+test/citus/run\.sh\s+\Q$name\E\s*-->}) { $on = 1; next }
              if ($on == 1 && /^\s*```/) { $on = 2; next } if ($on == 2 && /^\s*```/) { exit }
              print if $on == 2' "$1" doc/scale-out.md
}
snippet distribute >"$work/distribute.sql"
c -c "CREATE EXTENSION holdcommit" >/dev/null
steps=$(c -f "$work/distribute.sql" | wc -l)
again=$(c -f "$work/distribute.sql" | wc -l)
check "hc_distribute distributes the tables and the calls, then has nothing left to do" \
    "$([ "$steps" -gt 20 ] && echo yes) $again" "yes 0"
check "every table of holdcommit is distributed, colocated" \
    "$(c -c "SELECT count(*), count(DISTINCT colocationid) FROM pg_dist_partition p
             JOIN pg_class r ON r.oid = p.logicalrelid WHERE r.relnamespace = 'holdcommit'::regnamespace")" "10|1"
check "the single-node indexes are gone, the keys are unique per routing id, the orders' key holds it" \
    "$(c -c "SELECT string_agg(indexname, ' ' ORDER BY indexname) FROM pg_indexes
             WHERE schemaname = 'holdcommit' AND indexname ~ '^hc_(reservations|stock_orders)_(id|key|scope_key)$'")
$(c -c "SELECT indexdef ~ '\(scope_id, id\)' FROM pg_indexes WHERE indexname = 'hc_stock_orders_pkey'")" \
    "$(printf 'hc_reservations_scope_key hc_stock_orders_scope_key\nt')"

# Assets on both workers: a1..a40 spread by hash; a_w1, b_w1 on the first worker, a_w2, b_w2 on the second.
c -c "SELECT count(hc_asset_add('a' || g, 'lot ' || g)) FROM generate_series(1, 40) g" >/dev/null
# asset_on PORT N: the Nth asset (by id) whose shard is on the worker of PORT.
asset_on() {
    c -c "SELECT id FROM hc_assets a JOIN pg_dist_shard_placement p
             ON p.shardid = get_shard_id_for_distribution_column('holdcommit.hc_assets', a.id)
           WHERE p.nodeport = $1 ORDER BY id OFFSET $2 - 1 LIMIT 1"
}
a_w1=$(asset_on $((port + 1)) 1); b_w1=$(asset_on $((port + 1)) 2)
a_w2=$(asset_on $((port + 2)) 1); b_w2=$(asset_on $((port + 2)) 2)
check "the assets are on both workers" "$([ -n "$b_w1" ] && [ -n "$b_w2" ] && echo yes)" "yes"

# Holds: outcomes as on a single node.
r1=$(c -c "SELECT reservation_id FROM hc_hold('$a_w1', 'b1', 'k1')")
check "a hold on Citus" "$(c -c "SELECT status FROM hc_assets WHERE id = '$a_w1'")" "HELD"
check "the same hold again replays" "$(c -c "SELECT reservation_id = '$r1' AND replayed FROM hc_hold('$a_w1', 'b1', 'k1')")" "t"
check "a second buyer: RS001, the session goes on" "$(sqlstate "SELECT hc_hold('$a_w1', 'b2', 'k2')")" "RS001 1 "
check "a key reused for another request: RS005" "$(sqlstate "SELECT hc_hold('$a_w1', 'b9', 'k1')")" "RS005 1 "
check "no such asset: RS006" "$(sqlstate "SELECT hc_hold('nope', 'b1', 'k3')")" "RS006 1 "
check "a bad argument: 22023 on the coordinator" "$(sqlstate "SELECT hc_hold('$a_w1', 'b1', 'k4', '-1 s')")" "22023 1 "
check "hc_extend given the asset" \
    "$(c -c "SELECT status FROM hc_extend('$a_w1', '$r1', '20 minutes')")" "HELD"
check "a hold given another asset: RS006" "$(sqlstate "SELECT hc_commit('$a_w2', '$r1', false)")" "RS006 1 "
check "hc_commit given the asset" "$(c -c "SELECT status FROM hc_commit('$a_w1', '$r1', false)")" "COMMITTED"
check "hc_commit by reservation id alone replays" "$(c -c "SELECT status, replayed FROM hc_commit('$r1')")" "COMMITTED|t"
r2=$(c -c "SELECT reservation_id FROM hc_hold('$a_w2', 'b1', 'k5')")
check "hc_release by reservation id alone" "$(c -c "SELECT status FROM hc_release('$r2')")" "RELEASED"
check "no such reservation: RS006" "$(sqlstate "SELECT hc_release('res_nope')")" "RS006 1 "
check "the ledger on Citus" \
    "$(c -c "SELECT string_agg(event, ' ' ORDER BY seq) FROM hc_ledger WHERE entity_id = '$a_w1'")" \
    "add hold extend commit"

# Where each call runs.
check "a bare SELECT hc_hold runs on the asset's worker alone, in one phase" \
    "$(remote "SELECT hc_hold('$a_w2', 'b1', 'k6')" | sed -E 's/ SELECT holdcommit.hc_hold.*/ hc_hold/')" \
    "$((port + 2)) hc_hold"
check "a bare SELECT hc_reserve... after hc_stock_set, each on the product's worker" \
    "$(remote "SELECT hc_stock_set('p1', 100)" | wc -l)" "1"
check "PERFORM in PL code: the call is sent whole to the worker" \
    "$(remote "DO \$\$ BEGIN PERFORM hc_hold('$a_w1', 'b1', 'k7'); END \$\$" | grep -c 'hc_hold(.*HAVING true')" "1"
check "a call inside a larger query: sent whole" \
    "$(remote "SELECT h.status FROM hc_hold('$a_w2', 'b1', 'k8') h WHERE h.status IS NOT NULL" | grep -c 'HAVING true')" "1"
two=$(remote "BEGIN; SELECT hc_hold('$b_w1', 'b1', 'k9'); SELECT hc_hold('$b_w2', 'b1', 'k10'); COMMIT;")
check "a transaction on two workers commits in two phases" \
    "$(echo "$two" | grep -c 'PREPARE TRANSACTION')" "2"
c_w1=$(asset_on $((port + 1)) 5); c_w2=$(asset_on $((port + 2)) 5)
two=$(remote "BEGIN; DO \$\$ BEGIN PERFORM hc_hold('$c_w1', 'b1', 'k11'); END \$\$;
              DO \$\$ BEGIN PERFORM hc_hold('$c_w2', 'b1', 'k12'); END \$\$; COMMIT;")
check "... also when its calls are sent whole (PERFORM in PL code): Citus counts them as writes" \
    "$(echo "$two" | grep -c 'PREPARE TRANSACTION')" "2"
# A read of one shard on a node, then a write of another there, after a
# write elsewhere: Citus commits each node in one phase (doc/scale-out.md,
# "Two-phase commit after a read"), but a call sent whole reads its own
# shard first.  The read here is of a shard on the second worker other
# than the one the call then writes.
e_w1=$(asset_on $((port + 1)) 8); e_w2=$(asset_on $((port + 2)) 8)
other=$(c -c "SELECT id FROM hc_assets a JOIN pg_dist_shard_placement p
                 ON p.shardid = get_shard_id_for_distribution_column('holdcommit.hc_assets', a.id)
               WHERE p.nodeport = $((port + 2)) AND p.shardid <> get_shard_id_for_distribution_column('holdcommit.hc_assets', '$e_w2')
               ORDER BY id LIMIT 1")
two=$(remote "BEGIN; SELECT hc_hold('$e_w1', 'b1', 'k16'); SELECT count(*) FROM hc_assets WHERE scope_id = '$other';
              DO \$\$ BEGIN PERFORM hc_hold('$e_w2', 'b1', 'k17'); END \$\$; COMMIT;")
check "... also after a read of another shard on the node a call is sent to" \
    "$(echo "$two" | grep -c 'PREPARE TRANSACTION')" "2"
check "a call that must be sent whole in a read-only transaction: 25006" \
    "$(sqlstate "SET default_transaction_read_only = on; DO \$\$ BEGIN PERFORM hc_hold('$(asset_on $((port + 1)) 6)', 'b1', 'k13'); END \$\$")" \
    "25006 1 "

# An application role (hc_grant_app): its delegated calls, the calls sent
# whole and the lookups by reservation id alone all go as that role, in one
# transaction.
c -c "CREATE ROLE shop_app LOGIN" -c "SELECT hc_grant_app('shop_app')" >/dev/null
d_w1=$(asset_on $((port + 1)) 7); d_w2=$(asset_on $((port + 2)) 7)
check "an application role: a hold, then its release by reservation id alone, in one transaction" \
    "$(printf '%s\n' 'BEGIN;' "SELECT reservation_id AS r FROM hc_hold('$d_w1', 'b1', 'k14') \\gset" \
        "SELECT status FROM hc_release(:'r');" \
        "SELECT reservation_id AS r2 FROM hc_hold('$d_w2', 'b1', 'k15') h WHERE h.status IS NOT NULL \\gset" \
        "SELECT status FROM hc_commit(:'r2');" 'COMMIT;' |
        psql -X -qAt -v ON_ERROR_STOP=1 -h "$host" -p "$port" -U shop_app -d postgres 2>&1 | tr '\n' ' ')" \
    "RELEASED COMMITTED "
check "... and the ledger names it" \
    "$(c -c "SELECT string_agg(DISTINCT actor, ' ') FROM hc_ledger WHERE entity_id IN ('$d_w1', '$d_w2') AND event <> 'add'")" \
    "shop_app"

# Stock.
s1=$(c -c "SELECT reservation_id FROM hc_reserve('p1', 3, 'b1', 'sk1')")
check "a reserve on Citus" "$(c -c "SELECT reserved FROM hc_inventory WHERE product_id = 'p1'")" "3"
check "the same reserve replays" "$(c -c "SELECT replayed FROM hc_reserve('p1', 3, 'b1', 'sk1')")" "t"
check "too much: RS002" "$(sqlstate "SELECT hc_reserve('p1', 98, 'b1', 'sk2')")" "RS002 1 "
check "hc_finalize given the first product" "$(c -c "SELECT status FROM hc_finalize('p1', '$s1', false)")" "FINALIZED"
s2=$(c -c "SELECT reservation_id FROM hc_reserve_items('[{\"product_id\": \"p1\", \"qty\": 2}]', 'b1', 'sk3')")
check "hc_unreserve by reservation id alone" "$(c -c "SELECT status FROM hc_unreserve('$s2')")" "RELEASED"
check "a stock change and a spread" \
    "$(c -c "SELECT available FROM hc_stock_adjust('p1', 3, 'restock')"; c -c "SELECT available FROM hc_stock_spread('p1', 4)")" \
    "$(printf '100\n100')"

# Orders of several products: each line on the worker of its product, the
# order's row on its first product's, every step of a call sent where its
# rows are, in one transaction that Citus commits in two phases.
m1=$(asset_on $((port + 1)) 9); m2=$(asset_on $((port + 2)) 9)
c -c "SELECT hc_stock_set('$m1', 10), hc_stock_set('$m2', 10)" >/dev/null
mscope=$(printf '%s\n%s\n' "$m1" "$m2" | LC_ALL=C sort | head -1)
items="[{\"product_id\": \"$m2\", \"qty\": 2}, {\"product_id\": \"$m1\", \"qty\": 3}]"
out=$(remote "SELECT reservation_id FROM hc_reserve_items('$items', 'b1', 'mk1')")
o1=$(c -c "SELECT id FROM hc_stock_reservations WHERE idempotency_key = 'mk1'")
check "an order of two products on two workers: a line on each, counted there" \
    "$(c -c "SELECT string_agg(p.nodeport || ' ' || l.status || ' ' || i.reserved, ', ' ORDER BY p.nodeport)
             FROM hc_stock_reservation_lines l JOIN hc_inventory i USING (product_id)
             JOIN pg_dist_shard_placement p
               ON p.shardid = get_shard_id_for_distribution_column('holdcommit.hc_stock_order_lines', l.product_id)
            WHERE l.reservation_id = '$o1'")" "$((port + 1)) RESERVED 3, $((port + 2)) RESERVED 2"
check "... its row names its products, on its first product's shard" \
    "$(c -c "SELECT scope_id = '$mscope', products = ARRAY(SELECT p FROM unnest(ARRAY['$m1', '$m2']) p ORDER BY p COLLATE \"C\")
             FROM hc_stock_reservations WHERE id = '$o1'")" "t|t"
check "... and it commits in two phases" "$(echo "$out" | grep -c 'PREPARE TRANSACTION')" "2"
check "the same order replays" "$(c -c "SELECT reservation_id = '$o1' AND replayed FROM hc_reserve_items('$items', 'b1', 'mk1')")" "t"
check "the key with other items: RS005" \
    "$(sqlstate "SELECT hc_reserve_items('[{\"product_id\": \"$m1\", \"qty\": 1}, {\"product_id\": \"$m2\", \"qty\": 1}]', 'b1', 'mk1')")" "RS005 1 "
check "an unknown product is RS006 even after a line too large for its stock" \
    "$(sqlstate "SELECT hc_reserve_items('[{\"product_id\": \"$m1\", \"qty\": 99}, {\"product_id\": \"zz-none\", \"qty\": 1}]', 'b1', 'mk2')")" "RS006 1 "
check "too much of one product: RS002, and nothing changed on either worker" \
    "$(sqlstate "SELECT hc_reserve_items('[{\"product_id\": \"$m1\", \"qty\": 1}, {\"product_id\": \"$m2\", \"qty\": 9}]', 'b1', 'mk3')")$(c -c "SELECT string_agg(reserved::text, ' ' ORDER BY product_id = '$m1') FROM hc_inventory WHERE product_id IN ('$m1', '$m2')")" \
    "RS002 1 2 3"
check "hc_finalize by reservation id alone: every line and the row, once" \
    "$(c -c "SELECT status FROM hc_finalize('$o1')"; c -c "SELECT string_agg(status || ' ' || stock || ' ' || reserved, ', ' ORDER BY status, stock)
             FROM hc_stock_reservation_lines JOIN hc_inventory USING (product_id) WHERE reservation_id = '$o1'")" \
    "$(printf 'FINALIZED\nFINALIZED 7 0, FINALIZED 8 0')"
check "... again given its first product: a replay" "$(c -c "SELECT status, replayed FROM hc_finalize('$mscope', '$o1', false)")" "FINALIZED|t"
check "... and hc_unreserve then: RS004" "$(sqlstate "SELECT hc_unreserve('$o1')")" "RS004 1 "
o2=$(c -c "SELECT reservation_id FROM hc_reserve_items('$items', 'b1', 'mk4')")
o3=$(c -c "SELECT reservation_id FROM hc_reserve_items('$items', 'b1', 'mk5')")
check "hc_unreserve in PL code and given its first product in a transaction block" \
    "$(c -c "BEGIN" -c "DO \$\$ BEGIN PERFORM hc_unreserve('$o2'); END \$\$" \
         -c "SELECT status FROM hc_unreserve('$mscope', '$o3')" -c "COMMIT";
       c -c "SELECT string_agg(DISTINCT status, ' ') FROM hc_stock_reservation_lines WHERE reservation_id IN ('$o2', '$o3')";
       c -c "SELECT sum(reserved) FROM hc_inventory WHERE product_id IN ('$m1', '$m2')")" "$(printf 'RELEASED\nRELEASED\n0')"
o4=$(c -c "SELECT reservation_id FROM hc_reserve_items('$items', 'b1', 'mk6', '1 millisecond')")
o5=$(c -c "SELECT reservation_id FROM hc_reserve_items('$items', 'b1', 'mk7', '1 millisecond')")
sleep 0.1
check "an expired order: RS003 for hc_finalize, then a late finalize finds its stock" \
    "$(sqlstate "SELECT hc_finalize('$o4')")$(c -c "SELECT status FROM hc_finalize('$o4', true)")" "RS003 1 FINALIZED"
check "hc_unreserve of an expired order: EXPIRED, replayed, both lines" \
    "$(c -c "SELECT status, replayed FROM hc_unreserve('$o5')"; c -c "SELECT string_agg(status, ' ') FROM hc_stock_reservation_lines WHERE reservation_id = '$o5'")" \
    "$(printf 'EXPIRED|t\nEXPIRED EXPIRED')"
c -c "SELECT reservation_id FROM hc_reserve_items('$items', 'b1', 'mk8', '1 millisecond')" >/dev/null
sleep 0.1
# (The lines' view is a UNION ALL, which Citus pushes down to each group of
# shards together with a subquery in WHERE: read the order's id first, or
# join, as doc/scale-out.md says.)
check "hc_sweep() expires an order's lines on each worker, and its row" \
    "$(c -c "SELECT expired_reservations FROM hc_sweep()" >/dev/null;
       c -c "SELECT status FROM hc_stock_reservations WHERE idempotency_key = 'mk8'";
       c -c "SELECT string_agg(l.status, ' ') FROM hc_stock_reservation_lines l
               JOIN hc_stock_reservations r ON r.id = l.reservation_id WHERE r.idempotency_key = 'mk8'";
       c -c "WITH r AS MATERIALIZED (SELECT id FROM hc_stock_reservations WHERE idempotency_key = 'mk8')
             SELECT count(*) FROM hc_stock_reservation_lines WHERE reservation_id = (SELECT id FROM r)")" \
    "$(printf 'EXPIRED\nEXPIRED EXPIRED\n2')"
check "an application role: an order of two products, then its finalize" \
    "$(printf '%s\n' "SELECT reservation_id AS r FROM hc_reserve_items('$items', 'b1', 'mk9') \\gset" \
        "SELECT status FROM hc_finalize(:'r');" |
        psql -X -qAt -v ON_ERROR_STOP=1 -h "$host" -p "$port" -U shop_app -d postgres 2>&1 | tr '\n' ' ')" "FINALIZED "
check "hc_finalize given the order's second product: RS006, as on a single node" \
    "$(sqlstate "SELECT hc_finalize('$(printf '%s\n%s\n' "$m1" "$m2" | LC_ALL=C sort | tail -1)', '$o1', false)")" "RS006 1 "
# A step called by hand (sent to the node of its rows as Citus sends a call
# inside a query): what it changes it decides from the rows it locks.
step() { sqlstate "SELECT hc_order_step('$1', '$2', ARRAY[$3]) FROM hc_assets WHERE id = '$1' HAVING true"; }
h1=$(c -c "SELECT reservation_id FROM hc_reserve('$m1', 1, 'b1', 'hk1')")
before=$(c -c "SELECT stock FROM hc_inventory WHERE product_id = '$m1'")
check "by hand: no step ends the line of an order of one product" \
    "$(step "$m1" finish "'$h1', 'FINALIZED', 'x', 'line'")" "22023 1 "
check "... which then finalizes once" \
    "$(c -c "SELECT status FROM hc_finalize('$h1')") $(c -c "SELECT $before - stock FROM hc_inventory WHERE product_id = '$m1'")" \
    "FINALIZED 1"
c -c "SELECT hc_stock_set('$m1', 20), hc_stock_set('$m2', 20)" >/dev/null
o6=$(c -c "SELECT reservation_id FROM hc_reserve_items('$items', 'b1', 'mk10')")
check "by hand: an order's row does not end as RESERVED, nor before its first line" \
    "$(step "$mscope" end "'$o6', 'RESERVED', 'RESERVED'")$(step "$mscope" end "'$o6', 'RESERVED', 'FINALIZED'")" \
    "22023 1 22023 1 "
check "by hand: an order's row names its products once each, in order, and its own first" \
    "$(step "$mscope" open "'res_h1', 'b1', NULL, '\\x00', '$(($(date +%s%6N) - 946684800000000 + 60000000))', '$(($(date +%s%6N) - 946684800000000))', 'zz', '$mscope'")" \
    "22023 1 "
check "by hand: no line of an order's first product without its open row" \
    "$(step "$mscope" take "'res_h2', '1', 'b1', '$(($(date +%s%6N) - 946684800000000 + 60000000))', '$mscope'")" "22023 1 "
check "... and the order made meanwhile finalizes whole" "$(c -c "SELECT status FROM hc_finalize('$o6')")" "FINALIZED"
check "a step of an order is refused when its rows are on another node" \
    "$(printf '%s\n' '\set VERBOSITY sqlstate' "SELECT hc_order_step('$m1', 'header', '{res_x,read}')" |
        psql -X -qAt -h 127.0.0.1 -p $((port + 2)) -U postgres -d postgres 2>&1)" "ERROR:  40001"

# Leases and attempts.
t=$(c -c "SELECT hc_lock_acquire('erp-1', 'w1')")
check "a lease on Citus" "$t" "1"
check "a busy lease: NULL at once with max_retries 0" "$(c -c "SELECT hc_lock_acquire('erp-1', 'w2', '3 minutes', 0) IS NULL")" "t"
check "heartbeat" "$(c -c "SELECT hc_lock_heartbeat('erp-1', 'w1', $t) IS NOT NULL")" "t"
check "an attempt" "$(c -c "SELECT status FROM hc_attempt_begin('erp-1', 'w1', $t)")" "PROCEED"
check "the attempt completes" "$(c -c "SELECT status FROM hc_attempt_complete('erp-1', 'w1', $t, 'INV-1')")" "COMPLETED"
check "the lease is released" "$(c -c "SELECT hc_lock_release('erp-1', 'w1', $t)")" "t"
check "a session-bound lease is refused on Citus (0A000)" "$(sqlstate "SELECT hc_lock_acquire_session('erp-2', 'w1')")" "0A000 1 "

# A write fenced by the token (hc_lock_check): the check runs on the node of
# the lease's row, in the caller's transaction.  A takeover of the lease gone
# stale meanwhile is busy until that transaction ends, which writes on the
# other worker too: Citus prepares it on both and commits it.  An
# application's own PREPARE TRANSACTION after a check is still refused.
ft=$(c -c "SELECT hc_lock_acquire('erp-f', 'w1', '3 seconds')")
fnode=$(c -c "SELECT nodeport FROM pg_dist_shard_placement
               WHERE shardid = get_shard_id_for_distribution_column('holdcommit.hc_locks', 'erp-f')")
fasset=$(asset_on $((fnode == port + 1 ? port + 2 : port + 1)) 11)
# The transaction stays open until the takeover has been tried (the table
# fence_tried made), at most a minute.
printf '%s\n' 'SET citus.log_remote_commands = on;' 'SET client_min_messages = notice;' 'BEGIN;' \
    "SELECT hc_lock_check('erp-f', 'w1', $ft);" "SELECT status FROM hc_hold('$fasset', 'b1', 'kf1');" \
    "DO \$\$ BEGIN FOR i IN 1..600 LOOP EXIT WHEN to_regclass('public.fence_tried') IS NOT NULL;
                                      PERFORM pg_sleep(0.1); END LOOP; END \$\$;" \
    'COMMIT;' "SELECT 'committed';" |
    psql -X -qAt -h "$host" -p "$port" -U postgres -d postgres >"$work/fence.out" 2>&1 &
fencer=$!
for i in $(seq 1 100); do
    [ "$(c -c "SELECT heartbeat_at + stale_after < now() FROM hc_locks WHERE resource = 'erp-f'")" = t ] && break
    sleep 0.2
done
check "a lease checked by an open transaction and gone stale meanwhile: a takeover is busy" \
    "$(c -c "SELECT hc_lock_acquire('erp-f', 'w2', '1 minute', 0) IS NULL")" "t"
c -c "CREATE TABLE public.fence_tried ()"
wait $fencer
c -c "DROP TABLE public.fence_tried"
check "... the transaction, which held an asset on the other worker, commits in two phases" \
    "$(grep -v '^NOTICE\|^DETAIL' "$work/fence.out" | grep -v '^$' | tr '\n' ' ')$(grep -c 'PREPARE TRANSACTION' "$work/fence.out")" \
    "HELD committed 2"
check "... and the lease is taken over once it has ended" \
    "$(c -c "SELECT hc_lock_acquire('erp-f', 'w2', '1 minute', 0)")" "$((ft + 1))"
check "on the lease's node, a transaction that ran a check cannot be prepared by hand (0A000)" \
    "$(printf '%s\n' '\set VERBOSITY terse' 'BEGIN;' "SELECT hc_lock_check('erp-f', 'w2', $((ft + 1)));" \
           "PREPARE TRANSACTION 'by-hand';" '\echo :SQLSTATE' 'ROLLBACK;' 'SELECT 1;' |
         PGOPTIONS="$PGOPTIONS" psql -X -qAt -h "${TMPDIR:-/tmp}/holdcommit-$fnode" -p "$fnode" -U postgres -d postgres 2>/dev/null |
         tail -2 | tr '\n' ' ')" "0A000 1 "
check "a check with another token, in PL code (sent whole to the node): RS007, the session usable" \
    "$(sqlstate "DO \$\$ BEGIN PERFORM hc_lock_check('erp-f', 'w2', $ft); END \$\$")" "RS007 1 "

# A bare call whose routing argument is null: Citus would hash the null to
# find its shard and crash the coordinator; holdcommit's planner hook refuses
# it first, as the call does on a single node (22004), called in the select
# list or from FROM, bound as a parameter (a custom plan), and once the plan
# is generic.
check "a bare call with a null routing id: 22004, the coordinator up (constant, FROM, parameter, every call)" \
    "$(sqlstate "SELECT hc_hold(NULL, 'b1', 'kn1')")$(sqlstate "SELECT * FROM hc_hold(NULL, 'b1', 'kn1')")$(sqlstate "SELECT hc_lock_acquire(NULL, 'w1')")$(sqlstate "SELECT hc_stock_set(NULL, 1)")$(printf '%s\n' '\set VERBOSITY terse' "PREPARE n(text) AS SELECT hc_hold(\$1, 'b1', 'kn2');" \
         $(for i in 1 2 3 4 5 6 7; do echo 'EXECUTE n(NULL);'; done) '\echo :SQLSTATE' 'SELECT 1;' |
         psql -X -qAt -h "$host" -p "$port" -U postgres -d postgres 2>/dev/null | tail -2 | tr '\n' ' ')$(c -c "SELECT 'up'")" \
    "22004 1 22004 1 22004 1 22004 1 22004 1 up"

# What Citus cannot give: one key space.
check "the same key on assets of two workers is accepted twice (keys are per routing id)" \
    "$(c -c "SELECT hc_hold('$(asset_on $((port + 1)) 3)', 'b1', 'kx') IS NOT NULL"; c -c "SELECT hc_hold('$(asset_on $((port + 2)) 3)', 'b1', 'kx') IS NOT NULL")" "$(printf 't\nt')"

# Concurrency: 50 holds of one asset, 200 reserves of 100 units.
c -c "SELECT hc_asset_add('race')" >/dev/null
for i in $(seq 1 50); do
    sqlstate "SELECT hc_hold('race', 'b$i', 'race-$i')" >"$work/hold.$i" &
done
wait
check "50 concurrent holds of one asset: one winner, 49 RS001" \
    "$(cat "$work"/hold.* | tr ' ' '\n' | grep -E '^(00000|RS001)$' | sort | uniq -c | awk '{print $2 "=" $1}' | tr '\n' ' ')" \
    "00000=1 RS001=49 "
c -c "SELECT hc_stock_set('flash', 100)" >/dev/null
for i in $(seq 1 20); do
    (for j in $(seq 1 10); do sqlstate "SELECT hc_reserve('flash', 1, 'b$i', 'f-$i-$j')"; echo; done) >"$work/reserve.$i" &
done
wait
check "200 reserves of 100 units from 20 clients: exactly 100" \
    "$(cat "$work"/reserve.* | awk '{print $1}' | sort | uniq -c | awk '{print $2 "=" $1}' | tr '\n' ' ')" \
    "00000=100 RS002=100 "
check "the product agrees" "$(c -c "SELECT stock, reserved FROM hc_inventory WHERE product_id = 'flash'")" "100|100"
check "its ledger agrees" \
    "$(c -c "SELECT count(*), sum(reserved_delta) FROM hc_ledger WHERE entity_id = 'flash' AND event = 'reserve'")" "100|100"

# 100 orders of two products, one on each worker, from 20 clients, their
# items in either order: exactly as many as the scarcer product has, each
# all or nothing, and no deadlock.
n1=$(asset_on $((port + 1)) 10); n2=$(asset_on $((port + 2)) 10)
c -c "SELECT hc_stock_set('$n1', 30), hc_stock_set('$n2', 40)" >/dev/null
for i in $(seq 1 20); do
    (for j in $(seq 1 5); do
        if [ $((j % 2)) = 0 ]; then a=$n1 b=$n2; else a=$n2 b=$n1; fi
        sqlstate "SELECT hc_reserve_items('[{\"product_id\": \"$a\", \"qty\": 1}, {\"product_id\": \"$b\", \"qty\": 1}]', 'b$i', 'mo-$i-$j')"
        echo
    done) >"$work/order.$i" &
done
wait
check "100 orders of two products over both workers from 20 clients: exactly 30, no deadlock" \
    "$(cat "$work"/order.* | awk '{print $1}' | sort | uniq -c | awk '{print $2 "=" $1}' | tr '\n' ' ')" \
    "00000=30 RS002=70 "
check "both products agree" \
    "$(c -c "SELECT string_agg(stock || ' ' || reserved, ', ' ORDER BY stock) FROM hc_inventory WHERE product_id IN ('$n1', '$n2')")" \
    "30 30, 40 30"

# The sweep: hc_sweep() on the coordinator has each worker sweep its shards;
# the background sweeper of each worker sweeps its own.
w() { local p=$1; shift; psql -X -qAt -v ON_ERROR_STOP=1 -h "${TMPDIR:-/tmp}/holdcommit-$p" -p "$p" -U postgres -d postgres "$@"; }
c -c "SELECT count(hc_asset_add('sw-' || g)) FROM generate_series(1, 20) g" >/dev/null
c -c "SELECT count(hc_hold('sw-' || g, 'b1', 'sw-' || g, '1 millisecond')) FROM generate_series(1, 20) g" >/dev/null
c -c "SELECT count(hc_reserve('flash-' || g, 1, 'b1', 'swr-' || g, '1 millisecond'))
        FROM generate_series(1, 4) g, LATERAL hc_stock_set('flash-' || g, 5)" >/dev/null
sleep 0.1
check "hc_sweep() on the coordinator: every worker sweeps its shards" \
    "$(c -c "SELECT expired_holds, expired_reservations FROM hc_sweep()")" "20|4"
check "... on both workers" \
    "$(c -c "SELECT count(DISTINCT nodeport) FROM hc_assets a JOIN pg_dist_shard_placement p
             ON p.shardid = get_shard_id_for_distribution_column('holdcommit.hc_assets', a.id)
             WHERE a.id LIKE 'sw-%' AND a.status = 'AVAILABLE'")" "2"
for p in $((port + 1)) $((port + 2)); do
    w $p -c "ALTER SYSTEM SET holdcommit.sweep_interval = 1" -c "SELECT pg_reload_conf()" >/dev/null
done
c -c "SELECT count(hc_hold('sw-' || g, 'b1', 'sw2-' || g, '1 millisecond')) FROM generate_series(1, 20) g" >/dev/null
for i in $(seq 1 100); do
    [ "$(c -c "SELECT count(*) FROM hc_assets WHERE id LIKE 'sw-%' AND status = 'HELD'")" = 0 ] && break
    sleep 0.1
done
check "the background sweeper of each worker sweeps its shards" \
    "$(c -c "SELECT count(*) FROM hc_assets WHERE id LIKE 'sw-%' AND status = 'HELD'")
$(w $((port + 1)) -c "SELECT runs > 0 AND last_error IS NULL FROM hc_sweeper_status")
$(w $((port + 2)) -c "SELECT runs > 0 AND last_error IS NULL FROM hc_sweeper_status")" "$(printf '0\nt\nt')"

# An order of two products, one on each worker, whose second worker stops
# after Citus' PREPARE TRANSACTION and before its COMMIT PREPARED (the
# coordinator held there under gdb): the commit stands, and Citus' recovery
# commits the prepared transaction once the worker is back.
bin=$(realpath -ms "${HC_PGROOT:-}$("${PG_CONFIG:-pg_config}" --bindir)")
# As postgres, from / (test/harness/server.sh says why).
as_server() { if [ "$(id -u)" -eq 0 ]; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi; }
w2data=${TMPDIR:-/tmp}/holdcommit-$((port + 2))/data
if command -v gdb >/dev/null; then
    x1=$(asset_on $((port + 1)) 4); x2=$(asset_on $((port + 2)) 4)
    c -c "SELECT hc_stock_set('$x1', 5), hc_stock_set('$x2', 5)" >/dev/null
    printf '%s\n' '\set VERBOSITY terse' 'SELECT pg_backend_pid() \g '"$work/pid" 'SELECT pg_sleep(3);' \
        'BEGIN;' "SELECT hc_hold('$x1', 'b1', 'two-1');" \
        "SELECT hc_reserve_items('[{\"product_id\": \"$x1\", \"qty\": 1}, {\"product_id\": \"$x2\", \"qty\": 1}]', 'b1', 'two-2');" \
        'COMMIT;' \
        '\echo commit :SQLSTATE' |
        psql -X -qAt -h "$host" -p "$port" -U postgres -d postgres >"$work/two.out" 2>&1 &
    two=$!
    for i in $(seq 1 50); do [ -s "$work/pid" ] && break; sleep 0.1; done
    gdb -p "$(cat "$work/pid")" -batch -ex 'break CoordinatedRemoteTransactionsCommit' -ex continue \
        -ex "shell runuser -u postgres -- $bin/pg_ctl -D $w2data stop -m immediate >/dev/null 2>&1 || $bin/pg_ctl -D $w2data stop -m immediate >/dev/null" \
        -ex detach >"$work/gdb.log" 2>&1
    wait $two
    check "the commit over both workers stands when one stops after PREPARE" \
        "$(grep -c '^commit 00000' "$work/two.out") $(grep -c 'failed to commit' "$work/two.out")" "1 1"
    as_server "$bin/pg_ctl" -D "$w2data" -l "$w2data/../server.log" -w start >/dev/null
    check "... its prepared transaction waits on the stopped worker" \
        "$(w $((port + 2)) -c "SELECT count(*) FROM pg_prepared_xacts")" "1"
    c -c "SELECT recover_prepared_transactions()" >/dev/null
    check "... and Citus' recovery commits it: the hold and both lines of the order are there" \
        "$(c -c "SELECT status FROM hc_assets WHERE id = '$x1'") $(c -c "SELECT string_agg(status, ' ')
                   FROM hc_stock_reservation_lines WHERE product_id IN ('$x1', '$x2')")
$(w $((port + 2)) -c "SELECT count(*) FROM pg_prepared_xacts")" "$(printf 'HELD RESERVED RESERVED\n0')"
else
    echo "ok - # SKIP gdb is not installed: the stop between PREPARE and COMMIT PREPARED needs it"
fi

# A shard moved to the other worker while 8 clients hold and release assets
# of it through the coordinator: Citus blocks the writes to it while it
# switches over, the calls made on that worker's shards take the lock that
# blocks them, and no write is lost (every call that succeeded is there).
if cc -O2 -o "$work/driver" bench/driver.c -I"$(pg_config --includedir)" -L"$(pg_config --libdir)" -lpq -pthread; then
    c -c "SELECT count(hc_asset_add('mv-' || g)) FROM generate_series(1, 4000) g" >/dev/null
    shard=$(c -c "SELECT get_shard_id_for_distribution_column('holdcommit.hc_assets', 'mv-1')")
    from=$(c -c "SELECT nodeport FROM pg_dist_shard_placement WHERE shardid = $shard")
    to=$((from == port + 1 ? port + 2 : port + 1))
    printf '%s\n' "- SELECT reservation_id FROM holdcommit.hc_hold(:'{p1}', :'b{c}', :'mv-{c}-{i}')" \
        "- SELECT status FROM holdcommit.hc_release(:'{p1}', :'{s1.1}')" >"$work/move.steps"
    (sleep 2; c -c "SELECT citus_move_shard_placement($shard, '127.0.0.1', $from, '127.0.0.1', $to,
                                                     shard_transfer_mode => 'force_logical')" >"$work/move.out" 2>&1) &
    mover=$!
    "$work/driver" -d "host=$host port=$port user=postgres dbname=postgres" -c 8 -T 8 -C \
        -P "SELECT id FROM holdcommit.hc_assets WHERE id LIKE 'mv-%'
              AND get_shard_id_for_distribution_column('holdcommit.hc_assets', id) = $shard
              AND abs(hashtext(id)) % 8 = \$1" "$work/move.steps" >"$work/move.driver"
    wait $mover
    ok_calls=$(sed -n 's/.*outcomes=00000:\([0-9]*\).*/\1/p' "$work/move.driver")
    check "a shard moves to the other worker under load" \
        "$(c -c "SELECT nodeport FROM pg_dist_shard_placement WHERE shardid = $shard") $(grep -c ERROR "$work/move.out")" "$to 0"
    # A call that waited for the shards while they moved away answers 40001
    # (retry it).  A release that did leaves its hold, which the client's
    # next turn on that asset finds taken (RS001): as many holds left as
    # releases refused at most, and no other outcome.
    outcomes=$(sed -n 's/.*outcomes=\([^ ]*\).*/\1/p' "$work/move.driver" | tr ',' '\n')
    retried=$(echo "$outcomes" | sed -n 's/^40001://p'); retried=${retried:-0}
    left=$(c -c "SELECT count(*) FROM hc_reservations WHERE idempotency_key LIKE 'mv-%' AND status = 'HELD'")
    check "... and every hold and release that succeeded meanwhile is there ($ok_calls calls; $retried answered 40001, $left holds left)" \
        "$(c -c "SELECT count(*) FROM hc_reservations WHERE idempotency_key LIKE 'mv-%' AND status = 'RELEASED'")
other:$(echo "$outcomes" | grep -vE '^(00000|40001):' | grep -vE "$([ "$left" -gt 0 ] && echo '^RS001:' || echo '^$')" | tr '\n' ' ')
$([ "$left" -le "$retried" ] && echo "left <= retried")" "$ok_calls
other:
left <= retried"
else
    echo "not ok - the load driver builds (bench/driver.c)"
fi

# A worker added without shards yet (before a rebalance): hc_sweep() and
# hc_check() on the coordinator ask it too, and it answers for its own
# (none), not by asking every worker again.
HC_PRELOAD=citus,holdcommit HC_LISTEN_ADDRESSES=127.0.0.1 HC_CONF="max_prepared_transactions = 100
wal_level = logical" test/harness/server.sh start $((port + 3)) >/dev/null 2>&1
w $((port + 3)) -c "CREATE EXTENSION citus" >/dev/null 2>&1
c -c "SELECT citus_add_node('127.0.0.1', $((port + 3)))" >/dev/null
check "a worker without shards: hc_sweep() and hc_check() on the coordinator answer at once" \
    "$({ c -c "SET statement_timeout = '20s'" -c "SELECT expired_holds FROM hc_sweep()" 2>&1
         c -c "SET statement_timeout = '20s'" -c "SELECT count(*) FROM hc_check()" 2>&1; } | grep -cE '^[0-9]+$')" "2"
# The same worker down: hc_sweep() there fails with 08006, as a call whose
# node went away does (call again once it is back); hc_grant_app() too
# (Citus' own propagation of the grants refuses first).
w3data=${TMPDIR:-/tmp}/holdcommit-$((port + 3))/data
as_server "$bin/pg_ctl" -D "$w3data" -m immediate stop >/dev/null
check "a worker down: hc_sweep() and hc_grant_app() on the coordinator fail with 08006" \
    "$(sqlstate "SELECT expired_holds FROM hc_sweep()")$(sqlstate "SELECT hc_grant_app('shop_app')")" \
    "08006 1 08006 1 "
as_server "$bin/pg_ctl" -D "$w3data" -l "$w3data/../server.log" -w start >/dev/null
c -c "SELECT citus_remove_node('127.0.0.1', $((port + 3)))" >/dev/null
test/harness/server.sh stop $((port + 3)) >/dev/null 2>&1

# Every row written, by statements or without the executor, is in a shard: the
# tables of the extension themselves (the coordinator's, and the workers' shells)
# are as empty as hc_distribute() left them.
shells="SELECT count(*) || ' ' || sum(pg_relation_size(p.logicalrelid)) FROM pg_dist_partition p
         JOIN pg_class c ON c.oid = p.logicalrelid WHERE c.relnamespace = 'holdcommit'::regnamespace"
check "no row is in a table on the coordinator or a worker's shell, only in the shards" \
    "$(c -c "$shells") $(w $((port + 1)) -c "$shells") $(w $((port + 2)) -c "$shells")" "10 0 10 0 10 0"

# hc_check on the coordinator: every worker checks its shards.
check "hc_check() on the coordinator is empty after all of it" "$(c -c "SELECT count(*) FROM hc_check()")" "0"
shard=$(w $((port + 1)) -c "SET citus.override_table_visibility = off" \
          -c "SELECT relname FROM pg_class WHERE relname LIKE 'hc\_assets\_%' AND relkind = 'r' LIMIT 1")
w $((port + 1)) -c "UPDATE holdcommit.$shard SET status = 'HELD'
                    WHERE id = (SELECT min(id) FROM holdcommit.$shard WHERE status = 'AVAILABLE')" >/dev/null
check "... and reports a row broken on a worker" \
    "$(c -c "SELECT string_agg(DISTINCT invariant, '; ') FROM hc_check()")" \
    "asset has the shape of its status; held asset has its one held reservation"
w $((port + 1)) -c "UPDATE holdcommit.$shard SET status = 'AVAILABLE'
                    WHERE status = 'HELD' AND current_reservation_id IS NULL" >/dev/null
check "... and is empty again once it is mended" "$(c -c "SELECT count(*) FROM hc_check()")" "0"

# The views that answer on the coordinator, and the three doc/scale-out.md
# says Citus cannot plan.
views=$(c -c "SELECT viewname FROM pg_views WHERE schemaname = 'holdcommit' ORDER BY 1")
check "every view answers on the coordinator but hc_lease_status, hc_metrics and hc_overview" \
    "$(for v in $views; do psql -X -qAt -h "$host" -p "$port" -U postgres -d postgres \
           -c "SELECT count(*) FROM holdcommit.$v" >/dev/null 2>&1 || echo -n "$v "; done)" \
    "hc_lease_status hc_metrics hc_overview "

# Group holds on Citus (doc/scale-out.md, "Group holds"): a pool's seats,
# their holds and their ledger rows on the pool's shard; a group hold there
# runs on that worker alone and commits in one phase.
c -c "SELECT count(hc_asset_add('seat-' || i, 'A' || i, pool => 'cat-1', rank => i, grp => 'A', pos => i))
      FROM generate_series(1, 8) i" \
  -c "SELECT count(hc_asset_add('seat-b' || i, 'B' || i, pool => 'cat-2', rank => i, grp => 'B', pos => i))
      FROM generate_series(1, 4) i" >/dev/null
pool_port=$(c -c "SELECT p.nodeport FROM pg_dist_shard_placement p
                   WHERE p.shardid = get_shard_id_for_distribution_column('holdcommit.hc_assets', 'cat-1')")
check "a pool's seats are on its one shard, their routing ids recorded by seat" \
    "$(c -c "SELECT count(DISTINCT get_shard_id_for_distribution_column('holdcommit.hc_assets', scope_id)),
                    count(*), bool_and(scope_id = 'cat-1') FROM hc_assets WHERE pool = 'cat-1'")
$(c -c "SELECT count(*) FROM hc_asset_routes WHERE scope_id = 'cat-1'")" "1|8|t
8"
check "an asset id is one asset across pools and outside them (23505), a place one seat" \
    "$(sqlstate "SELECT hc_asset_add('seat-1', 'x', pool => 'cat-2', rank => 9)")$(sqlstate "SELECT hc_asset_add('seat-2')")$(sqlstate "SELECT hc_asset_add('$a_w1', 'x', pool => 'cat-2')")$(sqlstate "SELECT hc_asset_add('seat-x', 'x', pool => 'cat-1', rank => 1, grp => 'A', pos => 1)")" \
    "23505 1 23505 1 23505 1 23505 1 "
check "... and a refused seat leaves no routing id behind" \
    "$(c -c "SELECT count(*) FROM hc_asset_routes WHERE asset_id = 'seat-x'")" "0"
many=$(remote "SELECT hc_hold_many(ARRAY['seat-2', 'seat-1'], 'b1', 'kg1')")
check "hc_hold_many of a pool's seats: sent to the pool's worker alone, in one phase" \
    "$(echo "$many" | grep 'holdcommit.hc_hold_many(' | awk '{ print $1 " hc_hold_many" }') $(echo "$many" | grep -c 'PREPARE TRANSACTION')" \
    "$pool_port hc_hold_many 0"
g1=$(c -c "SELECT id FROM hc_reservations WHERE asset_id = 'seat-1' AND status = 'HELD'")
check "... one reservation over both seats, each seat naming it, the ledger on the pool's shard" \
    "$(c -c "SELECT count(*), min(seats), bool_and(scope_id = 'cat-1') FROM hc_reservations WHERE id = '$g1'")
$(c -c "SELECT string_agg(id, ' ' ORDER BY id) FROM hc_assets WHERE current_reservation_id = '$g1'")
$(c -c "SELECT count(*) FROM hc_ledger WHERE reservation_id = '$g1' AND scope_id = 'cat-1'")" "2|2|t
seat-1 seat-2
2"
check "the same seats in another order with the same key replay" \
    "$(c -c "SELECT string_agg(reservation_id || ':' || replayed, ' ' ORDER BY asset_id) FROM hc_hold_many(ARRAY['seat-1', 'seat-2'], 'b1', 'kg1')")" \
    "$g1:true $g1:true"
check "a taken seat: RS001, nothing held; an unknown one: RS006; the key for other seats: RS005" \
    "$(sqlstate "SELECT hc_hold_many(ARRAY['seat-3', 'seat-2'], 'b2', 'kg2')")$(sqlstate "SELECT hc_hold_many(ARRAY['seat-3', 'nope'], 'b2', 'kg3')")$(sqlstate "SELECT hc_hold_many(ARRAY['seat-3'], 'b1', 'kg1')")$(c -c "SELECT status FROM hc_assets WHERE id = 'seat-3'")" \
    "RS001 1 RS006 1 RS005 1 AVAILABLE"
check "seats of two pools, or a seat and an asset outside pools, in one call: 0A000" \
    "$(sqlstate "SELECT hc_hold_many(ARRAY['seat-3', 'seat-b1'], 'b2', 'kg4')")$(sqlstate "SELECT hc_hold_many(ARRAY['seat-3', '$b_w1'], 'b2', 'kg5')")" \
    "0A000 1 0A000 1 "
check "a seat of a pool given by its id to hc_hold, or to hc_commit with a group's id: 0A000 with a hint" \
    "$(sqlstate "SELECT hc_hold('seat-3', 'b2', 'kg6')")$(sqlstate "SELECT hc_commit('seat-1', '$g1', false)")$(c -c "SELECT hc_hold('seat-3', 'b2', 'kg6')" 2>&1 | grep -c 'hc_hold_many(ARRAY')" \
    "0A000 1 0A000 1 1"
check "hc_extend, hc_commit by the group's id alone: every seat, on the pool's worker; a repeat replays" \
    "$(c -c "SELECT status FROM hc_extend('$g1', '20 minutes')" -c "SELECT status FROM hc_commit('$g1')" \
         -c "SELECT status || ':' || replayed FROM hc_commit('$g1')" | tr '\n' ' ')$(c -c "SELECT string_agg(status, ' ') FROM hc_assets WHERE current_reservation_id = '$g1'")" \
    "HELD COMMITTED COMMITTED:true SOLD SOLD"
best=$(remote "SELECT hc_hold_best('cat-1', 3, 'b3', 'kg7')")
check "hc_hold_best: the pool's worker alone, in one phase; the best block of three" \
    "$(echo "$best" | grep 'hc_hold_best' | sed -E 's/ SELECT holdcommit.hc_hold_best.*/ hc_hold_best/') $(echo "$best" | grep -c 'PREPARE TRANSACTION')
$(c -c "SELECT string_agg(id, ' ' ORDER BY id) FROM hc_assets WHERE status = 'HELD' AND pool = 'cat-1'")" \
    "$pool_port hc_hold_best 0
seat-3 seat-4 seat-5"
g2=$(c -c "SELECT current_reservation_id FROM hc_assets WHERE id = 'seat-3'")
check "... a replay, and its release by the group's id, from PL code" \
    "$(c -c "SELECT count(*) FILTER (WHERE replayed) FROM hc_hold_best('cat-1', 3, 'b3', 'kg7')" \
         -c "DO \$\$ BEGIN PERFORM hc_release('$g2'); END \$\$" \
         -c "SELECT count(*) FROM hc_assets WHERE pool = 'cat-1' AND status = 'AVAILABLE'" | tr '\n' ' ')" "3 6 "
check "hc_hold_best that Citus does not send (its pool a subquery): it sends itself, its rows come back" \
    "$(c -c "SELECT string_agg(status, ' ') FROM hc_hold_best((SELECT 'cat-1'), 2, 'gb3', 'kg13')" \
         -c "SELECT count(*) FROM hc_hold_best((SELECT 'cat-1'), 2, 'gb3', 'kg13') WHERE replayed")" \
    "$(printf 'HELD HELD\n2')"
c -c "SELECT hc_release(reservation_id) FROM hc_hold_best('cat-1', 2, 'gb3', 'kg13') LIMIT 1" >/dev/null
two=$(remote "BEGIN; SELECT count(*) FROM hc_hold_best('cat-1', 2, 'gb4', 'kg8'); SELECT count(*) FROM hc_hold_many(ARRAY['seat-b1', 'seat-b2'], 'gb4', 'kg9'); COMMIT;")
check "group holds in two pools of one transaction: all or nothing, in two phases" \
    "$(echo "$two" | grep -c 'PREPARE TRANSACTION') $(c -c "SELECT count(*) FROM hc_reservations WHERE buyer_id = 'gb4'")" \
    "$(c -c "SELECT CASE WHEN count(DISTINCT p.nodeport) = 2 THEN 2 ELSE 0 END FROM pg_dist_shard_placement p
             WHERE p.shardid IN (get_shard_id_for_distribution_column('holdcommit.hc_assets', 'cat-1'),
                                 get_shard_id_for_distribution_column('holdcommit.hc_assets', 'cat-2'))") 4"
# An expired group: taken whole by a hold of one of its seats, or by the sweeper.
c -c "SELECT count(*) FROM hc_hold_many(ARRAY['seat-7', 'seat-8'], 'b5', 'kg10', '1 millisecond')" \
  -c "SELECT count(*) FROM hc_hold_many(ARRAY['seat-b3', 'seat-b4'], 'b5', 'kg11', '1 millisecond')" >/dev/null
# Until both groups have expired (a state, bounded at 10 s).
c -c "DO \$\$ BEGIN FOR i IN 1..1000 LOOP EXIT WHEN NOT EXISTS (SELECT 1 FROM holdcommit.hc_reservations r
        WHERE r.buyer_id = 'b5' AND r.asset_id LIKE 'seat-%' AND r.expires_at > clock_timestamp());
        PERFORM pg_sleep(0.01); END LOOP; END \$\$" >/dev/null
# (The background sweeper runs every second here, and may end them first.)
check "an expired group ends whole when one of its seats is held again; the sweeper ends another's seats, once" \
    "$(c -c "SELECT status FROM hc_hold_many(ARRAY['seat-8'], 'b6', 'kg12')" \
         -c "SELECT string_agg(asset_id || ':' || status, ' ' ORDER BY asset_id) FROM hc_reservations WHERE buyer_id = 'b5' AND asset_id LIKE 'seat-_'" \
         -c "SELECT count(*) FROM hc_sweep()" \
         -c "SELECT string_agg(status, ' ') FROM hc_reservations WHERE buyer_id = 'b5' AND asset_id LIKE 'seat-b%'" \
         -c "SELECT count(*) FROM hc_ledger WHERE event = 'expire' AND entity_id IN ('seat-b3', 'seat-b4')" | tr '\n' ' ')" \
    "HELD seat-7:EXPIRED seat-8:EXPIRED 1 EXPIRED EXPIRED 2 "
# Buyers racing for a pool's best pairs until it is sold out.
c -c "SELECT count(hc_asset_add('race-' || i, '', pool => 'race', rank => i, grp => 'R' || (i / 10), pos => i % 10))
      FROM generate_series(0, 99) i" >/dev/null
for i in $(seq 1 10); do
    (for j in $(seq 1 8); do sqlstate "SELECT count(*) FROM hc_hold_best('race', 2, 'rb$i', 'race-$i-$j')"; echo; done) >"$work/best.$i" &
done
wait
check "10 buyers racing for the best pairs of 100 seats: every seat held once, 50 holds of two, no deadlock" \
    "$(c -c "SELECT count(*), count(DISTINCT asset_id), count(DISTINCT id) FROM hc_reservations WHERE asset_id LIKE 'race-%'")
$(cat "$work"/best.* | tr ' ' '\n' | grep -v '^1$' | grep -v '^$' | sort | uniq -c | awk '{print $2 ":" $1}' | tr '\n' ' ')" \
    "100|100|50
00000:50 RS002:30 "
# After a group hold, whose look at the seats' routing ids may have reached
# the other worker, a bare call there (delegated by Citus), and a seat added
# whose id is there: two phases (doc/scale-out.md, "Two-phase commit after a read").
c -c "SELECT count(hc_asset_add('seat-c' || i, '', pool => 'cat-1', rank => 100 + i, grp => 'C', pos => i))
      FROM generate_series(1, 40) i" >/dev/null
other_port=$((pool_port == port + 1 ? port + 2 : port + 1))
f_other=$(asset_on $other_port 13)
two=$(remote "BEGIN; SELECT count(*) FROM hc_hold_many(ARRAY['seat-c1', 'seat-c2', 'seat-c3', 'seat-c4', 'seat-c5', 'seat-c6', 'seat-c7', 'seat-c8'], 'gb7', 'kg14');
              SELECT hc_hold('$f_other', 'gb7', 'kg15'); COMMIT;")
check "a group hold, then a bare hc_hold on the other worker: two phases" \
    "$(echo "$two" | grep -c 'PREPARE TRANSACTION')" "2"
new_id=$(c -c "SELECT 'new-' || g FROM generate_series(1, 200) g JOIN pg_dist_shard_placement p
                 ON p.shardid = get_shard_id_for_distribution_column('holdcommit.hc_asset_routes', 'new-' || g)
               WHERE p.nodeport = $other_port ORDER BY g LIMIT 1")
two=$(remote "BEGIN; SELECT count(*) FROM hc_hold_many(ARRAY['seat-c9', 'seat-c10'], 'gb8', 'kg16');
              SELECT id FROM hc_asset_add('$new_id', '', pool => 'cat-1', rank => 200); COMMIT;")
check "a group hold, then a seat added whose id is on the other worker: two phases" \
    "$(echo "$two" | grep -c 'PREPARE TRANSACTION') $(c -c "SELECT pool FROM hc_assets WHERE id = '$new_id'")" "2 cat-1"
# A seat whose id falls on its pool's shard: refused by its id all the same.
pinned=$(c -c "SELECT 'pin-' || g FROM generate_series(1, 500) g
               WHERE get_shard_id_for_distribution_column('holdcommit.hc_assets', 'pin-' || g)
                   = get_shard_id_for_distribution_column('holdcommit.hc_assets', 'cat-1') ORDER BY g LIMIT 1")
c -c "SELECT id FROM hc_asset_add('$pinned', '', pool => 'cat-1', rank => 300)" >/dev/null
check "a seat whose id falls on its pool's shard, given by its id to hc_hold: 0A000 too" \
    "$(sqlstate "SELECT hc_hold('$pinned', 'b2', 'kg17')")" "0A000 1 "
check "hc_hold_many given a routing id that is not the seats' (22023), by an application role" \
    "$(printf '%s\n' '\set VERBOSITY terse' "SELECT hc_hold_many('$pinned', ARRAY['$pinned'], 'b2', 'kg18', '1 minute');" '\echo :SQLSTATE' 'SELECT 1;' |
         psql -X -qAt -h "$host" -p "$port" -U shop_app -d postgres 2>/dev/null | tail -2 | tr '\n' ' ')$(c -c "SELECT status FROM hc_assets WHERE id = '$pinned'")" \
    "22023 1 AVAILABLE"
check "hc_check() is empty after the group holds" "$(c -c "SELECT count(*) FROM hc_check()")" "0"
check "a row written by hand, without its routing id: XX000, nothing written" \
    "$(sqlstate "INSERT INTO hc_ledger (kind, entity_id, seq, at, event, source, function, actor)
                 VALUES ('asset', 'seat-1', 99, now(), 'add', 'adjustment', 'by hand', 'me')")$(c -c "SELECT count(*) FROM hc_ledger WHERE function = 'by hand'")" \
    "XX000 1 0"
# Bounded history is not on Citus yet (doc/scale-out.md): a released hold
# whose key was forgotten long ago is kept by every sweep.
s1=$(asset_on $((port + 1)) 12)
r=$(c -c "SELECT reservation_id FROM hc_hold('$s1', 'b1', 'kg8')")
c -c "SELECT hc_release('$r')" >/dev/null
check "a hold that ended 90 days ago, its key forgotten, is kept by the sweep (no pruning on Citus)" \
    "$(c -c "UPDATE hc_reservations SET idempotency_key = NULL, ended_at = now() - interval '90 days'
              WHERE id = '$r' RETURNING status") $(c -c "SELECT count(*) FROM hc_sweep()") $(c -c "SELECT count(*) FROM hc_reservations WHERE id = '$r' AND ended_at < now() - interval '89 days'") $(c -c "SELECT count(*) FROM hc_ledger WHERE reservation_id = '$r'")" \
    "RELEASED 1 1 2"

# A database distributed with 0.3.0, updated to 0.4.0 from the coordinator
# with ALTER EXTENSION holdcommit UPDATE (doc/scale-out.md, "Updating"): its
# own database on the three nodes.  The stock as 0.3.0's calls stored it
# (this library refuses 0.3.0's stock calls until the update; the rows as in
# test/upgrade/upgrade-0.3.0.sh): orders of one product and of several, whose
# lines are on both workers, reserved, finalized, released, expired and swept,
# expired and not swept, one a reclaim left RESERVED; holds by 0.3.0's calls.
# The stock tables and their views, as a fresh install distributed by
# hc_distribute() has them (the database postgres, above).
# The extension's relations, not their shards (named TABLE_SHARDID), as a
# fresh install distributed by hc_distribute() has them: columns with their
# defaults, indexes with their options, constraints, views, and what Citus
# distributes (tables by which column, functions by which argument).
schema="SELECT string_agg(x, E'\n' ORDER BY x) FROM (
    SELECT 'column ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod) ||
           CASE WHEN a.attnotnull THEN ' not null' ELSE '' END ||
           coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '') x
      FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
      LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
     WHERE c.relnamespace = 'holdcommit'::regnamespace AND c.relkind IN ('r', 'v') AND c.relname !~ '_[0-9]+$'
    UNION ALL
    SELECT 'index ' || i.indexdef || coalesce(' ' || array_to_string(c.reloptions, ','), '')
      FROM pg_indexes i JOIN pg_class c ON c.relname = i.indexname AND c.relnamespace = 'holdcommit'::regnamespace
     WHERE i.schemaname = 'holdcommit' AND i.tablename !~ '_[0-9]+$'
    UNION ALL
    SELECT 'constraint ' || conrelid::regclass || ' ' || conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint
     WHERE connamespace = 'holdcommit'::regnamespace AND conrelid::regclass::text !~ '_[0-9]+$'
    UNION ALL
    SELECT 'view ' || viewname || ' ' || definition FROM pg_views WHERE schemaname = 'holdcommit'
    UNION ALL
    SELECT 'distributed ' || r.relname || ' by ' || column_to_column_name(p.logicalrelid, p.partkey)
      FROM pg_dist_partition p JOIN pg_class r ON r.oid = p.logicalrelid
     WHERE r.relnamespace = 'holdcommit'::regnamespace
    UNION ALL
    SELECT 'function ' || o.objid::regprocedure || ' by \$' || (o.distribution_argument_index + 1) ||
           CASE WHEN o.force_delegation THEN ' forced' ELSE '' END
      FROM pg_dist_object o JOIN pg_proc p ON o.classid = 'pg_proc'::regclass AND o.objid = p.oid
     WHERE p.pronamespace = 'holdcommit'::regnamespace AND o.distribution_argument_index IS NOT NULL) s"
fresh_schema=$(c -c "$schema")
u() { local p=$1; shift; psql -X -qAt -v ON_ERROR_STOP=1 -h "${TMPDIR:-/tmp}/holdcommit-$p" -p "$p" -U postgres -d hc_up3 "$@"; }
uc() { u "$port" "$@"; }
# The background sweepers off (the sweep above set them to run every second):
# the calls below sweep, and the rows are compared; a sweep under way during
# the update is checked apart.
for p in $port $((port + 1)) $((port + 2)); do
    w $p -c "ALTER SYSTEM SET holdcommit.sweep_interval = 0" -c "SELECT pg_reload_conf()" >/dev/null
done
for p in $port $((port + 1)) $((port + 2)); do
    w $p -c "CREATE DATABASE hc_up3" >/dev/null 2>&1
    u $p -c "CREATE EXTENSION citus" >/dev/null
done
uc -c "SELECT citus_set_coordinator_host('127.0.0.1', $port)" \
   -c "SELECT citus_add_node('127.0.0.1', $((port + 1))), citus_add_node('127.0.0.1', $((port + 2)))" \
   -c "CREATE EXTENSION holdcommit VERSION '0.3.0'" -c "SELECT count(*) FROM hc_distribute()" \
   -c "SELECT hc_grant_app('shop_app')" >/dev/null
# product_on PORT: a product whose shard is on the worker of PORT.
product_on() {
    uc -c "SELECT 'u3-p' || g FROM generate_series(1, 100) g JOIN pg_dist_shard_placement p
              ON p.shardid = get_shard_id_for_distribution_column('holdcommit.hc_stock_parts', 'u3-p' || g)
            WHERE p.nodeport = $1 ORDER BY g LIMIT 1"
}
p1=$(product_on $((port + 1))); p2=$(product_on $((port + 2))); hot=u3-hot
if ! u "$port" -v p1="$p1" -v p2="$p2" -v hot="$hot" >"$work/up3.log" 2>&1 <<'SQL'; then
\set VERBOSITY terse
SELECT hc_asset_add('u3-a' || n) FROM generate_series(1, 3) n;
SELECT hc_hold('u3-a1', 'alice', 'u3-hold-held', '30 minutes');
SELECT hc_commit(reservation_id) FROM hc_hold('u3-a2', 'bob', 'u3-hold-sold');
CREATE FUNCTION pg_temp.fp(VARIADIC v text[]) RETURNS bytea LANGUAGE sql AS $$
    SELECT sha256(convert_to(string_agg(octet_length(x) || ':' || x || ';', '' ORDER BY i), 'UTF8'))
      FROM unnest(v) WITH ORDINALITY AS u (x, i) $$;
BEGIN;
CREATE TEMP TABLE orders (n int, id text, fn text, buyer text, key text, status text, items text[][],
                          ttl interval, line_status text);
INSERT INTO orders VALUES
    (1, 'res_01U3CITUS0000000000000011', 'hc_reserve_items', 'erin', 'u3-order-reserved', 'RESERVED',
     ARRAY[[:'p1', '2', '0'], [:'p2', '3', '0']], '30 minutes', NULL),
    (2, 'res_01U3CITUS0000000000000012', 'hc_reserve', 'erin', 'u3-order-single', 'RESERVED',
     ARRAY[[:'p1', '1', '0']], '30 minutes', NULL),
    (3, 'res_01U3CITUS0000000000000013', 'hc_reserve', 'erin', 'u3-order-hot', 'RESERVED',
     ARRAY[[:'hot', '3', '1']], '30 minutes', NULL),
    (4, 'res_01U3CITUS0000000000000014', 'hc_reserve_items', 'frank', 'u3-order-final', 'FINALIZED',
     ARRAY[[:'p1', '4', '0'], [:'p2', '1', '0']], '10 minutes', NULL),
    (5, 'res_01U3CITUS0000000000000015', 'hc_reserve', 'frank', 'u3-order-hot-final', 'FINALIZED',
     ARRAY[[:'hot', '2', '2']], '10 minutes', NULL),
    (6, 'res_01U3CITUS0000000000000016', 'hc_reserve', 'grace', 'u3-order-released', 'RELEASED',
     ARRAY[[:'p2', '2', '0']], '10 minutes', NULL),
    (7, 'res_01U3CITUS0000000000000017', 'hc_reserve', 'heidi', 'u3-order-swept', 'EXPIRED',
     ARRAY[[:'p1', '1', '0']], '-1 minute', NULL),
    (8, 'res_01U3CITUS0000000000000018', 'hc_reserve', 'ivan', 'u3-order-expired', 'RESERVED',
     ARRAY[[:'p2', '1', '0']], '-1 minute', NULL),
    (9, 'res_01U3CITUS0000000000000019', 'hc_reserve', 'judy', 'u3-order-left', 'RESERVED',
     ARRAY[[:'p2', '1', '0']], '-1 minute', 'EXPIRED'),
    (10, 'res_01U3CITUS0000000000000020', 'hc_reserve_items', 'kim', 'u3-order-multi-expired', 'RESERVED',
     ARRAY[[:'p1', '1', '0'], [:'p2', '1', '0']], '-1 minute', NULL);
CREATE TEMP VIEW lines AS
SELECT o.*, o.items[k][1] AS product_id, o.items[k][2]::int AS qty, o.items[k][3]::smallint AS part,
       COALESCE(o.line_status, o.status) AS lstatus
  FROM orders o, generate_subscripts(o.items, 1) k;
INSERT INTO hc_stock_reservations (scope_id, id, buyer_id, idempotency_key, status, expires_at, created_at,
                                   ended_at, fingerprint, products)
SELECT (SELECT min(l.product_id COLLATE "C") FROM lines l WHERE l.id = o.id), id, buyer, key, status,
       now() + ttl, now() - interval '2 minutes',
       CASE WHEN status = 'RESERVED' THEN NULL ELSE now() - interval '1 minute' END,
       pg_temp.fp(VARIADIC ARRAY[fn, buyer, (CASE WHEN ttl > '0' THEN extract(epoch FROM ttl)::bigint * 1000000
                                                  ELSE 1000 END)::text] ||
                  ARRAY(SELECT v.x FROM lines l, LATERAL (VALUES (1, l.product_id), (2, l.qty::text)) v (j, x)
                         WHERE l.id = o.id ORDER BY l.product_id COLLATE "C", v.j)),
       ARRAY(SELECT l.product_id FROM lines l WHERE l.id = o.id ORDER BY l.product_id COLLATE "C")
  FROM orders o;
INSERT INTO hc_stock_reservation_lines (product_id, reservation_id, qty, status, expires_at, buyer_id, part,
                                        scope_id)
SELECT l.product_id, l.id, l.qty, l.lstatus, now() + l.ttl, l.buyer, l.part,
       (SELECT min(m.product_id COLLATE "C") FROM lines m WHERE m.id = l.id) FROM lines l;
CREATE TEMP TABLE changes AS
SELECT row_number() OVER (PARTITION BY product_id, part ORDER BY n, step) AS version, *
  FROM (SELECT product_id, 0::smallint AS part, 0 AS n, 0 AS step, 'stock_set' AS event,
               'adjustment' AS source, 'hc_stock_set' AS fn, NULL::text AS rid, NULL::text AS buyer,
               0 AS rdelta, stock AS sdelta, 'created' AS detail
          FROM (VALUES (:'p1', 20), (:'p2', 10), (:'hot', 40)) p (product_id, stock)
        UNION ALL
        SELECT product_id, part, n, 2, 'reserve', 'call', fn, id, buyer, qty, 0, NULL FROM lines
        UNION ALL
        SELECT product_id, part, n, 3,
               CASE lstatus WHEN 'EXPIRED' THEN 'expire' WHEN 'FINALIZED' THEN 'finalize' ELSE 'release' END,
               CASE WHEN line_status IS NOT NULL THEN 'reclaim' WHEN lstatus = 'EXPIRED' THEN 'sweep'
                    ELSE 'call' END,
               CASE WHEN line_status IS NOT NULL THEN 'hc_reserve' WHEN lstatus = 'EXPIRED' THEN 'hc_sweep'
                    WHEN lstatus = 'FINALIZED' THEN 'hc_finalize' ELSE 'hc_unreserve' END,
               id, buyer, -qty, CASE lstatus WHEN 'FINALIZED' THEN -qty ELSE 0 END, NULL
          FROM lines WHERE lstatus <> 'RESERVED') c;
-- The hot product: spread by hand over 4 parts of 10 (part 0 gave 30 away).
INSERT INTO hc_stock_parts (product_id, part, stock, reserved, version)
SELECT product_id, part, sum(sdelta) + CASE WHEN product_id <> :'hot' THEN 0 WHEN part = 0 THEN -30 ELSE 10 END,
       sum(rdelta), max(version)
  FROM changes GROUP BY product_id, part
UNION ALL
SELECT :'hot', p, 10, 0, 0 FROM generate_series(1, 3) p
 WHERE NOT EXISTS (SELECT FROM changes c WHERE c.product_id = :'hot' AND c.part = p);
INSERT INTO hc_ledger (kind, entity_id, seq, at, event, source, function, reservation_id, buyer_id,
                       reserved_delta, stock_delta, actor, detail)
SELECT 'product', product_id, part * 281474976710656 + version, now(), event, source, fn, rid, buyer,
       rdelta, sdelta, current_user, detail
  FROM changes;
COMMIT;
SQL
    echo "not ok - a distributed 0.3.0 with data in every state"
    sed 's/^/#   /' "$work/up3.log"
fi
stock="SELECT string_agg(product_id || '=' || stock || '/' || reserved, ' '
                ORDER BY array_position(ARRAY['$hot', '$p1', '$p2'], product_id)) FROM hc_inventory"
left=res_01U3CITUS0000000000000019
rows="SELECT md5(string_agg(r, E'\n' ORDER BY r)) FROM (
    SELECT 'a' || row(id, name, status, current_reservation_id, version)::text r FROM hc_assets UNION ALL
    SELECT 'r' || row(id, asset_id, buyer_id, idempotency_key, status, expires_at, created_at, ended_at,
                      fingerprint)::text FROM hc_reservations UNION ALL
    SELECT 'i' || row(product_id, stock, reserved, available, version)::text FROM hc_inventory UNION ALL
    SELECT 'p' || row(product_id, part, stock, reserved)::text FROM hc_stock_parts UNION ALL
    SELECT 's' || row(id, scope_id, buyer_id, idempotency_key, status, expires_at, created_at, ended_at,
                      fingerprint, products)::text FROM hc_stock_reservations WHERE id <> '$left' UNION ALL
    SELECT 'l' || row(product_id, reservation_id, qty, status, expires_at, buyer_id, part, scope_id)::text
      FROM hc_stock_reservation_lines WHERE reservation_id <> '$left' UNION ALL
    SELECT 'g' || row(kind, entity_id, seq, at, event, source, function, reservation_id, buyer_id,
                      reserved_delta, stock_delta, actor, detail)::text FROM hc_ledger) s"
check "a distributed 0.3.0: orders on both workers, hc_check() empty" \
    "$(uc -c "SELECT count(DISTINCT p.nodeport) FROM hc_stock_reservation_lines l JOIN pg_dist_shard_placement p
                ON p.shardid = get_shard_id_for_distribution_column('holdcommit.hc_stock_reservation_lines', l.product_id)")
$(uc -c "SELECT count(*) FROM hc_check()") $(uc -c "$stock")" "2
0 $hot=38/3 $p1=16/4 $p2=9/5"
rows_before=$(uc -c "$rows")
# doc/scale-out.md's update, as printed.
snippet update >"$work/update.sql"
uc -f "$work/update.sql" >"$work/up3-update.log" 2>&1
check "ALTER EXTENSION holdcommit UPDATE on the coordinator of a distributed 0.3.0: 0.4.0 on every node" \
    "$(grep -c 'ALTER EXTENSION holdcommit UPDATE' "$work/update.sql") $(for p in $port $((port + 1)) $((port + 2)); do
           u $p -c "SELECT extversion FROM pg_extension WHERE extname = 'holdcommit'"; done | tr '\n' ' ')" \
    "1 0.4.0 0.4.0 0.4.0 "
grep -q 'ERROR' "$work/up3-update.log" && grep -B2 -A6 'ERROR' "$work/up3-update.log" | sed 's/^/#   /'
# Each worker's hc_stock_spreads: the floors of its own products that 0.3.0
# spread, read from its shards (not by a distributed query from within the
# coordinator's transaction, after which Citus crashed at COMMIT PREPARED).
floors() {
    u "$1" -c "SELECT coalesce(string_agg(product_id || ':' || min_parts, ' ' ORDER BY product_id), '-')
                 FROM holdcommit.hc_stock_spreads"
}
spread_on() {
    uc -c "SELECT coalesce(string_agg(s.product_id || ':' || s.n, ' ' ORDER BY s.product_id), '-')
             FROM (SELECT product_id, count(*) n FROM hc_stock_parts GROUP BY 1 HAVING count(*) > 1) s
             JOIN pg_dist_shard_placement p
               ON p.shardid = get_shard_id_for_distribution_column('holdcommit.hc_stock_parts', s.product_id)
            WHERE p.nodeport = $1"
}
got_floors="$(floors $((port + 1))) $(floors $((port + 2)))"
check "each worker keeps the floors of its own products that 0.3.0 spread ($hot among them)" \
    "$got_floors $(case " $got_floors " in *" $hot:"*) echo "$hot spread" ;; esac)" \
    "$(spread_on $((port + 1))) $(spread_on $((port + 2))) $hot spread"
check "every row kept, the views as 0.3.0's tables showed them" "$(uc -c "$rows")" "$rows_before"
check "the order a reclaim left RESERVED ended EXPIRED with its line" \
    "$(uc -c "SELECT o.status, o.ended_at IS NOT NULL, l.status, l.qty FROM hc_stock_reservations o
                JOIN hc_stock_reservation_lines l ON l.reservation_id = o.id WHERE o.id = '$left'")" "EXPIRED|t|EXPIRED|1"
check "each order of one product is one row now, each of several keeps its lines" \
    "$(uc -c "SELECT string_agg(buyer_id || ':' || (qty IS NOT NULL), ' ' ORDER BY id) FROM hc_stock_orders")
$(uc -c "SELECT string_agg(right(reservation_id, 2) || ':' || n, ' ' ORDER BY reservation_id)
           FROM (SELECT reservation_id, count(*) n FROM hc_stock_order_lines GROUP BY reservation_id) l")" \
    "erin:false erin:true erin:true frank:false frank:true grace:true heidi:true ivan:true judy:true kim:false
11:2 14:2 20:2"
# A database distributed by 0.3.0 keeps its asset tables distributed by asset
# id (doc/scale-out.md, "Updating"): what a fresh install has but for that.
by_asset_id() {
    sed -E 's/^(column hc_(assets|ledger|reservations)\.scope_id text) not null default hc_scope_id\(\)$/\1/
            /^(constraint hc_(assets|ledger|reservations) |index CREATE UNIQUE INDEX hc_(assets|ledger|reservations)_(pkey|one_committed) )/s/, scope_id\)/)/
            s/^(index CREATE )UNIQUE (INDEX hc_assets_pool .*\(pool, grp, pos)(, scope_id)\)/\1\2)/
            s/(hc_reservations_scope_key .*\()scope_id, /\1asset_id, /
            /^constraint hc_(assets|ledger|reservations) hc_[a-z]+_scope_id_not_null NOT NULL scope_id$/d
            /^distributed hc_asset_routes /d
            /^function hc_(asset_add\(text,text,text,text,integer,text,integer\)|hold_many\(text,text\[\],text,text,interval\)) by /d
            s/^distributed hc_assets by scope_id$/distributed hc_assets by id/
            s/^distributed hc_ledger by scope_id$/distributed hc_ledger by entity_id/
            s/^distributed hc_reservations by scope_id$/distributed hc_reservations by asset_id/' |
        { cat; echo 'function hc_asset_add(text,text,text,integer,text,integer) by $1 forced'; } | LC_ALL=C sort
}
check "the extension as a fresh install distributed by hc_distribute(), the asset tables by asset id: relations, indexes, constraints, views, distribution" \
    "$(uc -c "$schema" | LC_ALL=C sort)" "$(echo "$fresh_schema" | by_asset_id)"
check "... which names the 10 tables' distribution columns and the 21 calls sent by their first argument" \
    "$(echo "$fresh_schema" | grep -c '^distributed ') $(echo "$fresh_schema" | grep -c '^function ')" "10 21"
check "... and on each worker, its copies of them as a fresh install's there, but for that" \
    "$(for p in $((port + 1)) $((port + 2)); do [ "$(u $p -c "$schema" | LC_ALL=C sort)" = "$(w $p -c "$schema" | by_asset_id)" ] && echo -n "same "; done)" \
    "same same "
check "group holds are refused there (0A000): its asset tables stay distributed by asset id" \
    "$(printf '%s\n' '\set VERBOSITY terse' "SELECT hc_hold_many(ARRAY['u3-a1'], 'b1', 'u3-g1');" '\echo :SQLSTATE' 'SELECT 1;' |
         psql -X -qAt -h "$host" -p "$port" -U postgres -d hc_up3 2>/dev/null | tail -2 | tr '\n' ' ')" "0A000 1 "
check "hc_distribute() has nothing left to do; hc_check() is empty" \
    "$(uc -c "SELECT count(*) FROM hc_distribute()") $(uc -c "SELECT count(*) FROM hc_check()")" "0 0"
check "0.3.0 keys replay, of an order of one product and of several, and of a hold" \
    "$(uc -c "SELECT reservation_id, replayed FROM hc_reserve('$p1', 1, 'erin', 'u3-order-single', '30 minutes')" \
          -c "SELECT reservation_id, replayed FROM hc_reserve_items('[{\"product_id\": \"$p2\", \"qty\": 3}, {\"product_id\": \"$p1\", \"qty\": 2}]',
                                                                   'erin', 'u3-order-reserved', '30 minutes')" \
          -c "SELECT status, replayed FROM hc_hold('u3-a1', 'alice', 'u3-hold-held', '30 minutes')" | tr '\n' ' ')" \
    "res_01U3CITUS0000000000000012|t res_01U3CITUS0000000000000011|t HELD|t "
check "the sweep takes the expired orders, of one product and of several" \
    "$(uc -c "SELECT expired_reservations FROM hc_sweep()")
$(uc -c "SELECT string_agg(status, ' ' ORDER BY id) FROM hc_stock_reservations WHERE id IN
           ('res_01U3CITUS0000000000000018', 'res_01U3CITUS0000000000000020')")" "$(printf '2\nEXPIRED EXPIRED')"
check "the converted orders finalize and unreserve, given their product and by id alone" \
    "$(uc -c "SELECT status FROM hc_finalize('$p1', 'res_01U3CITUS0000000000000012', false)" \
          -c "SELECT status FROM hc_unreserve('res_01U3CITUS0000000000000013')" \
          -c "SELECT status FROM hc_finalize('res_01U3CITUS0000000000000011')" | tr '\n' ' ')" \
    "FINALIZED RELEASED FINALIZED "
check "new reserves, of one product and of several, by the application role" \
    "$(psql -X -qAt -h "$host" -p "$port" -U shop_app -d hc_up3 \
           -c "SELECT status FROM hc_reserve('$hot', 2, 'x1', 'u3-new-1')" \
           -c "SELECT status FROM hc_reserve_items('[{\"product_id\": \"$p1\", \"qty\": 1}, {\"product_id\": \"$p2\", \"qty\": 1}]', 'x1', 'u3-new-2')" \
           -c "SELECT count(*) FROM hc_stock_reservations WHERE buyer_id = 'x1'" 2>&1 | tr '\n' ' ')" \
    "RESERVED RESERVED 2 "
check "the stock adds up after them; hc_check() is empty" \
    "$(uc -c "$stock") $(uc -c "SELECT count(*) FROM hc_check()")" "$hot=38/2 $p1=13/1 $p2=6/1 0"
# Each row of the stock tables is in the shard of its routing id (a
# product's rows on one shard), on every worker.
misplaced="SELECT COALESCE(sum((xpath('/row/n/text()', query_to_xml(pg_catalog.format(
              'SELECT count(*) AS n FROM holdcommit.%I t WHERE get_shard_id_for_distribution_column(%L, t.%I) <> %s',
              c.relname || '_' || s.shardid, s.logicalrelid::text, a.attname, s.shardid), false, true, '')))[1]::text::int), 0)
             || ' ' || (count(*) > 0)
             FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid)
             JOIN pg_class c ON c.oid = s.logicalrelid
             JOIN pg_dist_partition d ON d.logicalrelid = s.logicalrelid
             JOIN pg_attribute a ON a.attrelid = s.logicalrelid AND a.attname = column_to_column_name(d.logicalrelid, d.partkey)
            WHERE p.groupid = (SELECT groupid FROM pg_dist_local_group)
              AND c.relname IN ('hc_stock_orders', 'hc_stock_order_lines', 'hc_stock_parts', 'hc_ledger')"
check "each row of the stock tables is on the shard of its product (shards checked on each worker)" \
    "$(u $((port + 1)) -c "$misplaced") $(u $((port + 2)) -c "$misplaced")" "0 true 0 true"

# A database with data, distributed by 0.4.0's hc_distribute(): each row
# given its routing id (a group hold's rows their pool's), moved to the
# shards and gone from the coordinator's tables; the holds made before
# replay and commit there.
d() { psql -X -qAt -v ON_ERROR_STOP=1 -h "${TMPDIR:-/tmp}/holdcommit-$1" -p "$1" -U postgres -d hc_data "${@:2}"; }
for p in $port $((port + 1)) $((port + 2)); do
    w $p -c "CREATE DATABASE hc_data" >/dev/null 2>&1
    d $p -c "CREATE EXTENSION citus" >/dev/null
done
d $port -c "SELECT citus_set_coordinator_host('127.0.0.1', $port)" \
   -c "SELECT citus_add_node('127.0.0.1', $((port + 1))), citus_add_node('127.0.0.1', $((port + 2)))" \
   -c "CREATE EXTENSION holdcommit" \
   -c "SELECT count(hc_asset_add('d-' || i, '', pool => 'cat-d', rank => i, grp => 'D', pos => i)) FROM generate_series(1, 6) i" \
   -c "SELECT count(hc_asset_add('d-a' || i)) FROM generate_series(1, 3) i" \
   -c "SELECT count(*) FROM hc_hold_best('cat-d', 2, 'b1', 'dk1')" \
   -c "SELECT count(*) FROM hc_hold('d-a1', 'b1', 'dk2')" \
   -c "SELECT hc_stock_set('d-p', 5)" -c "SELECT count(*) FROM hc_reserve('d-p', 2, 'b1', 'dk3')" >/dev/null
# A live group hold of a seat and an asset outside pools, which a single node allows.
mixed=$(d $port -c "SELECT reservation_id FROM hc_hold_many(ARRAY['d-5', 'd-a3'], 'b2', 'dk4') LIMIT 1")
check "hc_distribute() refuses a database with a live group hold of several pools (55000), then goes on once it ended" \
    "$(printf '%s\n' '\set VERBOSITY terse' 'SELECT count(*) FROM hc_distribute();' '\echo :SQLSTATE' |
         psql -X -qAt -h "$host" -p "$port" -U postgres -d hc_data 2>/dev/null | tail -1) $(d $port -c "SELECT status FROM hc_release('$mixed')")" \
    "55000 RELEASED"
check "hc_distribute() of a database with data: every row's routing id, its rows in the shards alone" \
    "$(d $port -c "SELECT count(*) FROM hc_distribute()" >/dev/null
       d $port -c "SELECT string_agg(s, ' ' ORDER BY s) FROM (SELECT DISTINCT coalesce(scope_id, '-') s FROM hc_reservations
                   UNION SELECT DISTINCT coalesce(scope_id, '-') FROM hc_ledger) x")
$(d $port -c "SELECT sum(pg_relation_size(logicalrelid)) FROM pg_dist_partition")
$(d $port -c "SELECT count(*) FROM hc_asset_routes") $(d $port -c "SELECT count(*) FROM hc_check()")" \
    "cat-d d-a1 d-a2 d-a3 d-p
0
9 0"
check "... where the holds made before replay, and a group of them commits" \
    "$(d $port -c "SELECT count(*) FILTER (WHERE replayed) FROM hc_hold_best('cat-d', 2, 'b1', 'dk1')" \
          -c "SELECT status FROM hc_commit((SELECT reservation_id FROM hc_hold_best('cat-d', 2, 'b1', 'dk1') LIMIT 1))" \
          -c "SELECT replayed FROM hc_hold('d-a1', 'b1', 'dk2')" | tr '\n' ' ')" "2 COMMITTED t "
exit 0
