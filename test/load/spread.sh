#!/usr/bin/env bash
# A hot product spreads itself (issue 36): a product made by hc_stock_set
# alone, drained by 64 clients with pgbench while holdcommit spreads it and
# gathers it back (holdcommit.stock_gather_after = 1 s in this database).
#   (a) a rush of 64 clients, each transaction a reserve of 1-3 units (a
#       third with a ttl of 100-300 ms, left to expire), then a finalize,
#       an unreserve, nothing, or a ROLLBACK of all of it: the product is
#       spread by the worker a reserve starts, sized to the reserves at once
#   (b) one client goes on alone while hc_sweep() runs every 0.2 s: the
#       product is gathered back to one part while it reserves
#   (c) the rush again, until the product is sold out: spread again
#   (d) what is left sold by one client, a unit at a time, until RS002
#   Throughout: no deadlock and no 40001 (pgbench --failures-detailed: a
#   finalize or unreserve of a line that a gather moved finds it in part 0),
#   no refusal while the units asked for remain (each RS002's detail), and at
#   the end exactly the stock sold (finalized and reserved units), the
#   ledger agreeing, hc_check() empty.
#   (e) the stall bound: a gather that would hold part 0 longer than
#       holdcommit.stock_spread_stall (1 ms, its 4,000 lines to move) rolls
#       back and says so, the parts as they were; with a bound it can keep
#       (10 s, whatever the machine) it gathers.
# Prints "ok - ..." / "not ok - ..." per assertion and "# ..." figures; exits 0.
# Needs PGHOST, PGPORT, PGUSER (a superuser) for a running server with holdcommit
# preloaded; creates and drops its own database.
. "$(dirname "$0")/lib.bash"
load_setup hc_load_spread 64

stock=${HC_SPREAD_STOCK:-8000}
q "
CREATE EXTENSION holdcommit;
ALTER DATABASE $db SET holdcommit.stock_gather_after = 1;
CREATE SEQUENCE refusals;
CREATE SEQUENCE false_refusals;
-- One client's transaction: reserve qty, then (action) finalize, unreserve or
-- nothing.  RS002 is counted, and checked against its own numbers: the units
-- asked for were not there when the reserve decided, every part locked.
-- Every other error goes to pgbench (40001 and 40P01 would be retried and counted).
CREATE FUNCTION spread_step(client int, qty int, action int, ttl_ms int) RETURNS text
LANGUAGE plpgsql AS \$\$
DECLARE
    r hc_stock_reservation;
    detail text;
    asked int;
    available int;
BEGIN
    BEGIN
        r := hc_reserve('HOT', qty, 'buyer-' || client, 'k-' || client || '-' || gen_random_uuid(),
                        make_interval(secs => ttl_ms / 1000.0));
    EXCEPTION WHEN SQLSTATE 'RS002' THEN
        GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
        asked := substring(detail from '^(\d+) requested')::int;
        available := substring(detail from '(\d+) available')::int;
        PERFORM nextval('refusals');
        IF available >= asked THEN
            PERFORM nextval('false_refusals');
            RAISE WARNING 'RS002 with the units there: %', detail;
        END IF;
        RETURN 'RS002';
    END;
    -- A reservation left to expire may have by now: it is neither finalized nor unreserved.
    IF ttl_ms < 1000 THEN
        RETURN 'ok';
    ELSIF action = 1 THEN
        PERFORM hc_finalize(r.reservation_id);
    ELSIF action = 2 THEN
        PERFORM hc_unreserve(r.reservation_id);
    END IF;
    RETURN 'ok';
END
\$\$;
SELECT product_id, stock FROM hc_stock_set('HOT', $stock);
" >/dev/null
q "$no_autovacuum_sql" >/dev/null

cat >"$work/mix.sql" <<'SQL'
\set qty random(1, 3)
\set action random(0, 3)
\set short random(1, 3)
\set ttl_ms random(100, 300)
\set roll random(1, 8)
BEGIN;
SELECT spread_step(:client_id, :qty, :action, CASE WHEN :short = 1 THEN :ttl_ms ELSE 600000 END);
\if :roll = 1
ROLLBACK;
\else
COMMIT;
\endif
SQL
# pgbench_mix NAME SECONDS CLIENTS: the mix, 40001 and 40P01 retried and counted.
pgbench_mix() {
    cp "$work/mix.sql" "$work/$1.sql"
    pgbench_phase "$1" "$1: $3 clients for $2 s" -c "$3" -j 4 -T "$2" --max-tries=20 --failures-detailed
    echo "# $1: $(grep -E '^(number of transactions actually processed|number of transactions retried|tps)' "$work/$1.log" | tr '\n' ' ')"
    check "$1: no deadlock" "$(sed -n 's/^number of deadlock failures: \([0-9]*\).*/\1/p' "$work/$1.log")" "0"
    check "$1: no 40001 or 40P01 (nothing retried)" \
        "$(sed -n 's/^number of transactions retried: \([0-9]*\).*/\1/p' "$work/$1.log")" "0"
    check "$1: nothing failed, whatever was retried" \
        "$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$work/$1.log")" "0"
}
parts="SELECT count(*) FROM hc_stock_parts WHERE product_id = 'HOT'"
spreads="SELECT spreads || '/' || gathers FROM hc_stock_spreads WHERE product_id = 'HOT'"

# (a) The rush; when the first spread commits, polled every 50 ms.
q "SELECT 1" >/dev/null
( for _ in $(seq 1 400); do
      t=$(q "SELECT clock_timestamp() FROM hc_stock_spreads WHERE product_id = 'HOT' AND spreads > 0")
      [ -n "$t" ] && { echo "$t" >"$work/first_spread"; break; }
      sleep 0.05
  done ) &
poller=$!
pgbench_mix rush 4 64
wait $poller
check "(a) the rush spread the product by itself, into a power of two of parts" \
    "$(q "SELECT n > 1 AND n & (n - 1) = 0 FROM ($parts) p (n)")" "t"
check "(a) sized to the reserves at once (holdcommit.stock_spread_callers or more), the decision recorded" \
    "$(q "SELECT spreads >= 1 AND last_waiters >= 8 FROM hc_stock_spreads WHERE product_id = 'HOT'")" "t"
echo "# (a) $(q "$parts") parts; the first spread seen $(q "SELECT round(extract(epoch FROM '$(cat "$work/first_spread" 2>/dev/null || echo infinity)'::timestamptz - min(created_at))::numeric, 2)
                 FROM hc_stock_reservations") s after the first reserve, the last sized for $(
    q "SELECT last_waiters FROM hc_stock_spreads WHERE product_id = 'HOT'") waiters, holding part 0 $(
    q "SELECT round(max_stall_ms::numeric, 1) FROM hc_stock_spreads WHERE product_id = 'HOT'") ms at most"
check "(a) hc_check() is empty" "$(q "SELECT count(*) FROM hc_check()")" "0"

# (b) One client alone while the sweep starts the gathers.
q "SELECT pg_sleep(1.2)" >/dev/null
( for _ in $(seq 1 25); do q "SELECT * FROM hc_sweep()" >/dev/null; sleep 0.2; done ) &
sweeps=$!
pgbench_mix alone 5 1
wait $sweeps
waited=$(wait_for 30 "$parts" 1)
check "(b) gathered back to one part while a client reserved (in ${waited} s more)" "$waited" "${waited#timeout}"
check "(b) ... counted" "$(q "SELECT gathers >= 1 FROM hc_stock_spreads WHERE product_id = 'HOT'")" "t"
check "(b) hc_check() is empty" "$(q "SELECT count(*) FROM hc_check()")" "0"

# (c) The rush again, until the product is sold out.
gathers_before=$(q "SELECT spreads FROM hc_stock_spreads WHERE product_id = 'HOT'")
pgbench_mix again 8 64
check "(c) spread again" "$(q "SELECT spreads > $gathers_before FROM hc_stock_spreads WHERE product_id = 'HOT'")" "t"
echo "# (c) $(q "$parts") parts, spreads/gathers $(q "$spreads"), $(q "SELECT available FROM hc_inventory WHERE product_id = 'HOT'") units left"

# (d) Sold out: the expired released, the rest sold a unit at a time.
q "SELECT * FROM hc_sweep()" >/dev/null
q "DO \$\$
   DECLARE sold_out boolean := false;
   BEGIN
       WHILE NOT sold_out LOOP
           BEGIN
               PERFORM hc_reserve('HOT', 1, 'last', 'last-' || gen_random_uuid());
           EXCEPTION WHEN SQLSTATE 'RS002' THEN
               sold_out := true;
           END;
       END LOOP;
   END \$\$" >/dev/null
check "no refusal while the units asked for remained ($(q "SELECT last_value FROM refusals") RS002)" \
    "$(q "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM false_refusals")" "0"
check "sold out: nothing available" "$(q "SELECT available FROM hc_inventory WHERE product_id = 'HOT'")" "0"
check "exactly the stock sold: finalized and reserved units" \
    "$(q "SELECT sum(qty) FILTER (WHERE status IN ('FINALIZED', 'RESERVED'))
            FROM hc_stock_reservation_lines WHERE product_id = 'HOT'")" "$stock"
check "... as the ledger says: reserved and finalized units" \
    "$(q "SELECT sum(reserved_delta) || '/' || -sum(stock_delta) FILTER (WHERE event <> 'stock_set')
            FROM hc_ledger WHERE entity_id = 'HOT'")" \
    "$(q "SELECT sum(qty) FILTER (WHERE status = 'RESERVED') || '/' || sum(qty) FILTER (WHERE status = 'FINALIZED')
            FROM hc_stock_reservation_lines WHERE product_id = 'HOT'")"
check "hc_check() is empty" "$(q "SELECT count(*) FROM hc_check()")" "0"
echo "# spreads/gathers $(q "$spreads"), runs that changed nothing $(q "SELECT failures FROM hc_stock_spreads WHERE product_id = 'HOT'"), longest stall of part 0 $(q "SELECT round(max_stall_ms::numeric, 1) FROM hc_stock_spreads WHERE product_id = 'HOT'") ms"

# (e) The stall bound: 4,000 lines in the last of 2 parts.
q "SELECT product_id, stock FROM hc_stock_set('LINES', 4000)" >/dev/null
q "SELECT hc_stock_auto_spread('LINES', 2)" >/dev/null
q "UPDATE hc_stock_parts SET stock = CASE part WHEN 1 THEN 4000 ELSE 0 END WHERE product_id = 'LINES'" >/dev/null
q "SELECT count(*) FROM generate_series(1, 4000) i, hc_reserve('LINES', 1, 'b', 'lines-' || i)" >/dev/null
lines="SELECT count(*) FILTER (WHERE part = 1) FROM hc_stock_reservation_lines WHERE product_id = 'LINES'"
check "(e) 4,000 lines in part 1" "$(q "$lines")" "4000"
q "UPDATE hc_stock_spreads SET changed_at = '-infinity' WHERE product_id = 'LINES'" >/dev/null
q "ALTER DATABASE $db SET holdcommit.stock_spread_stall = 1" >/dev/null
q "SELECT * FROM hc_sweep()" >/dev/null
check "(e) a gather that would hold part 0 longer than 1 ms rolls back" \
    "$(wait_for 30 "SELECT failures >= 1 FROM hc_stock_spreads WHERE product_id = 'LINES'" t >/dev/null
       q "SELECT last_failure FROM hc_stock_spreads WHERE product_id = 'LINES'")" \
    "canceling statement due to statement timeout"
check "(e) ... the parts and lines as they were" \
    "$(q "SELECT count(*) FROM hc_stock_parts WHERE product_id = 'LINES'")/$(q "$lines")" "2/4000"
q "ALTER DATABASE $db SET holdcommit.stock_spread_stall = 10000" >/dev/null
q "SELECT * FROM hc_sweep()" >/dev/null
check "(e) with a bound it can keep (10 s), it gathers" \
    "$(wait_for 30 "SELECT count(*) FROM hc_stock_parts WHERE product_id = 'LINES'" 1 >/dev/null
       q "SELECT count(*) FROM hc_stock_parts WHERE product_id = 'LINES'")/$(q "$lines")" "1/0"
echo "# (e) the gather held part 0 $(q "SELECT round(last_stall_ms::numeric, 1) FROM hc_stock_spreads WHERE product_id = 'LINES'") ms, its commit included"
check "(e) hc_check() is empty" "$(q "SELECT count(*) FROM hc_check()")" "0"
exit 0
