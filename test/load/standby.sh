#!/usr/bin/env bash
# A streaming standby, on servers of its own: a primary (the harness's TCP port,
# HC_TCP_PORT + 13, HC_STANDBY_PRIMARY_PORT) with holdcommit preloaded and its sweeper on
# for the database shop every second, holdcommit installed as the README
# says, data in every state; a pg_basebackup -R of it over loopback started
# as a hot standby (port + 14, HC_STANDBY_PORT), caught up.  On the standby:
#   every hc_* function of the catalog is called with valid arguments: the
#   reads answer, every write is refused with 25006 "... cannot run on a
#   standby" and a hint that sends the call to the primary, the lease calls
#   too, at once, with no worker started and no lock left behind;
#   replays of idempotency keys made on the primary answer what the primary
#   answered, a key the standby has not seen is refused as a write;
#   hc_check(), the views and every table answer as on the primary;
#   no launcher, sweeper or worker runs over several intervals, an expired
#   hold stays unswept, hc_sweeper_databases says standby, and the log has
#   no holdcommit error but the refusals made at top level.
# The primary stops, the standby is promoted: the launcher sweeps the shop
# within a few intervals (state ok), every write of the catalog works with
# the same arguments, fencing tokens go on above the old primary's, the old
# replays answer identically, hc_check() is empty.
# Needs PGHOST, PGPORT, PGUSER (a superuser) for the harness's server (only
# its port is used); exits 0.
. "$(dirname "$0")/lib.bash"
here=$(cd "$(dirname "$0")/../.." && pwd)
t_start=$(date +%s.%N)
# The primary listens on 127.0.0.1: a port below the ephemeral range (test/harness/run-tests.sh).
primary_port=${HC_STANDBY_PRIMARY_PORT:-$((${HC_TCP_PORT:-$((20000 + PGPORT % 10000))} + 13))}
standby_port=${HC_STANDBY_PORT:-$((PGPORT + 14))}
primary=${TMPDIR:-/tmp}/holdcommit-$primary_port
standby=${TMPDIR:-/tmp}/holdcommit-$standby_port
slog=$standby/server.log
interval=1

# As postgres, from / (test/harness/server.sh says why).
as_server() {
    if [ "$(id -u)" -eq 0 ]; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}
stop_standby() {
    [ -d "$standby/data" ] && as_server "$bin/pg_ctl" -D "$standby/data" -m immediate -w stop >/dev/null 2>&1
    rm -rf "$standby"
}
trap 'stop_standby; "$here/test/harness/server.sh" stop "$primary_port"; rm -rf "$work"' EXIT

P() { psql -X -qAt -v ON_ERROR_STOP=1 -h "$primary" -p "$primary_port" -d shop "$@"; }
S() { psql -X -qAt -v ON_ERROR_STOP=1 -h "$standby" -p "$standby_port" -d shop "$@"; }
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
# poll SECONDS WANT COMMAND...: run COMMAND every 0.1 s until it prints WANT;
# print the seconds it took, or timeout.
poll() {
    local seconds=$1 want=$2 t0
    shift 2
    t0=$(date +%s.%N)
    while :; do
        [ "$("$@" 2>/dev/null)" == "$want" ] && { elapsed "$t0"; echo; return 0; }
        awk -v t="$(elapsed "$t0")" -v s="$seconds" 'BEGIN { exit !(t > s) }' && { echo timeout; return 1; }
        sleep 0.1
    done
}
within() { awk -v t="$1" -v b="$2" 'BEGIN { print (t != "timeout" && t <= b) ? "yes" : "no" }'; }

##############################################################################
# the primary: holdcommit preloaded, its sweeper on for shop, data in every state
##############################################################################
# The README's installation: its own schema, first on the database's
# search_path; the server's search_path is PostgreSQL's default.
if ! HC_PRELOAD=holdcommit HC_SEARCH_PATH= HC_SWEEP_INTERVAL=$interval HC_LISTEN_ADDRESSES=127.0.0.1 \
    "$here/test/harness/server.sh" start "$primary_port" >/dev/null 2>&1; then
    echo "not ok - a primary starts on port $primary_port (127.0.0.1)"
    exit 0
fi
psql -X -q -h "$primary" -p "$primary_port" -d postgres \
    -c "ALTER SYSTEM SET holdcommit.databases = 'shop'" -c "SELECT pg_reload_conf()" \
    -c "CREATE DATABASE shop" -c "CREATE ROLE shop_app" -c "CREATE ROLE shop_ops" -c "CREATE ROLE shop_mon" >/dev/null
P -c "CREATE EXTENSION holdcommit" -c "ALTER DATABASE shop SET search_path = holdcommit, public" >/dev/null
# Each write of the matrix below has rows of its own: after the promotion
# the same calls must succeed.
P >"$work/setup.out" 2>&1 <<'SQL'
SELECT count(hc_asset_add(id, 'lot ' || id)) FROM unnest(ARRAY['A-FREE', 'A-LIVE', 'A-SOLD', 'A-REL',
    'A-EXP', 'A-HOLD', 'A-COMMIT', 'A-RELEASE', 'A-EXTEND', 'A-COMMIT2', 'A-RELEASE2', 'A-EXTEND2',
    'S-M1', 'S-M2']) id;
SELECT count(hc_asset_add('S-B' || i, '', pool => 'P-SEATS', rank => 1, grp => 'R', pos => i))
  FROM generate_series(1, 4) i;
SELECT count(hc_stock_set(p, 100)) FROM unnest(ARRAY['P-1', 'P-2', 'P-EXP', 'P-SET', 'P-ADJ', 'P-AUTO']) p;
-- holds: live, committed, released (and one each for commit, release, extend)
SELECT count(*) FROM hc_hold('A-LIVE', 'alice', 'k-live', '1 hour');
SELECT count(*) FROM hc_hold('A-SOLD', 'bob', 'k-sold', '1 hour');
SELECT count(*) FROM hc_commit((SELECT current_reservation_id FROM hc_assets WHERE id = 'A-SOLD'));
SELECT count(*) FROM hc_hold('A-REL', 'carol', 'k-rel', '1 hour');
SELECT count(*) FROM hc_release((SELECT current_reservation_id FROM hc_assets WHERE id = 'A-REL'));
SELECT count(hc_hold(a, 'dave', 'k-' || a, '1 hour'))
  FROM unnest(ARRAY['A-COMMIT', 'A-RELEASE', 'A-EXTEND', 'A-COMMIT2', 'A-RELEASE2', 'A-EXTEND2']) a;
-- stock: reserved, finalized, unreserved (and one each for finalize, unreserve)
SELECT count(*) FROM hc_reserve('P-1', 2, 'erin', 'k-order-live', '1 hour');
SELECT count(*) FROM hc_reserve_items('[{"product_id": "P-1", "qty": 1}, {"product_id": "P-2", "qty": 3}]',
                                      'frank', 'k-items-live', '1 hour');
SELECT count(*) FROM hc_reserve('P-2', 1, 'grace', 'k-order-done', '1 hour');
SELECT count(*) FROM hc_finalize((SELECT id FROM hc_stock_reservations WHERE buyer_id = 'grace'));
SELECT count(*) FROM hc_reserve('P-2', 1, 'heidi', 'k-order-gone', '1 hour');
SELECT count(*) FROM hc_unreserve((SELECT id FROM hc_stock_reservations WHERE buyer_id = 'heidi'));
SELECT count(*) FROM hc_reserve('P-1', 1, 'b-fin', 'k-order-fin', '1 hour');
SELECT count(*) FROM hc_reserve('P-1', 1, 'b-unr', 'k-order-unr', '1 hour');
SELECT count(*) FROM hc_reserve('P-1', 1, 'b-fin2', 'k-order-fin2', '1 hour');
SELECT count(*) FROM hc_reserve('P-1', 1, 'b-unr2', 'k-order-unr2', '1 hour');
SELECT count(*) FROM hc_stock_adjust('P-ADJ', -5, 'breakage');
-- leases: held, released, taken over several times; attempts open, in
-- cooldown, awaiting review, completed
SELECT hc_lock_acquire(r, 'w1', '1 hour', 0) FROM unnest(ARRAY['L-HELD', 'L-REL', 'L-ATT', 'L-COOL',
    'L-REVIEW', 'L-DONE', 'L-DONE2']) r;
SELECT hc_lock_acquire('L-PAST', 'w1', '1 hour', 0);
SELECT hc_lock_release('L-PAST', 'w1', 1);
SELECT hc_lock_acquire('L-PAST', 'w2', '1 hour', 0);
SELECT hc_lock_release('L-PAST', 'w2', 2);
SELECT hc_lock_acquire('L-PAST', 'w3', '1 hour', 0);
SELECT hc_lock_release('L-PAST', 'w3', 3);
SELECT count(*) FROM hc_attempt_begin('L-ATT', 'w1', 1, '0', 5);
SELECT count(*) FROM hc_attempt_begin('L-COOL', 'w1', 1, '1 hour', 5);
SELECT count(*) FROM hc_attempt_begin('L-REVIEW', 'w1', 1, '0', 1);
SELECT count(*) FROM hc_attempt_begin('L-REVIEW', 'w1', 1, '0', 1);
SELECT count(*) FROM hc_attempt_begin('L-DONE', 'w1', 1, '0', 5);
SELECT count(*) FROM hc_attempt_complete('L-DONE', 'w1', 1, 'INV-1');
SELECT count(*) FROM hc_attempt_begin('L-DONE2', 'w1', 1, '0', 5);
SQL
setup_rc=$?
check "the primary has data in every state (setup ran to its end)" \
    "$setup_rc $(P -c "SELECT string_agg(status, ',' ORDER BY status) FROM (SELECT DISTINCT status FROM hc_reservations) s") $(P -c "SELECT string_agg(status, ',' ORDER BY status) FROM (SELECT DISTINCT status FROM hc_stock_reservations) s") $(P -c "SELECT string_agg(status, ',' ORDER BY status) FROM (SELECT DISTINCT status FROM hc_attempts) s")" \
    "0 COMMITTED,HELD,RELEASED FINALIZED,RELEASED,RESERVED COMPLETED,MANUAL_REVIEW,OPEN"
[ "$setup_rc" -ne 0 ] && sed 's/^/#   /' "$work/setup.out"
# The replays the standby and the new primary must answer identically: the
# primary's own replay of each key.
replays="SELECT * FROM hc_hold('A-LIVE', 'alice', 'k-live', '1 hour');
SELECT * FROM hc_hold('A-SOLD', 'bob', 'k-sold', '1 hour');
SELECT * FROM hc_reserve('P-1', 2, 'erin', 'k-order-live', '1 hour');
SELECT * FROM hc_reserve_items('[{\"product_id\": \"P-1\", \"qty\": 1}, {\"product_id\": \"P-2\", \"qty\": 3}]', 'frank', 'k-items-live', '1 hour');
SELECT * FROM hc_reserve('P-2', 1, 'grace', 'k-order-done', '1 hour');"
P <<<"$replays" >"$work/replays.primary" 2>&1
check "the primary replays its 5 keys (replayed = true)" "$(grep -c '|t$' "$work/replays.primary")" "5"
waited=$(poll 10 ok P -c "SELECT state FROM hc_sweeper_databases WHERE database = 'shop'")
check "the primary's sweeper sweeps shop (${waited} s)" "$waited" "${waited%timeout}"

##############################################################################
# the standby: pg_basebackup -R over loopback, started, caught up
##############################################################################
rm -rf "$standby" && mkdir -p "$standby"
[ "$(id -u)" -eq 0 ] && chown postgres: "$standby"
t0=$(date +%s.%N)
as_server "$bin/pg_basebackup" -h 127.0.0.1 -p "$primary_port" -U postgres -D "$standby/data" \
    -R -X stream -c fast >"$work/basebackup.log" 2>&1
rc=$?
check "pg_basebackup -R over 127.0.0.1 (replication allowed by pg_hba's host replication line)" "$rc" "0"
[ "$rc" -ne 0 ] && sed 's/^/#   /' "$work/basebackup.log"
as_server tee -a "$standby/data/postgresql.conf" >/dev/null <<CONF
port = $standby_port
listen_addresses = ''
unix_socket_directories = '$standby'
CONF
as_server "$bin/pg_ctl" -D "$standby/data" -l "$slog" -w -t 60 start >/dev/null 2>&1
check "the standby starts, in recovery" "$(S -c "SELECT pg_is_in_recovery()" 2>&1)" "t"
basebackup_s=$(elapsed "$t0")

# From now on only the standby may sweep what expires: the primary's own
# sweeper stops (its configuration is its own; the standby keeps its copy).
psql -X -q -h "$primary" -p "$primary_port" -d postgres \
    -c "ALTER SYSTEM SET holdcommit.sweep_interval = 0" -c "SELECT pg_reload_conf()" >/dev/null
stopped=$(poll 10 "off 0" P -c "SELECT state || ' ' || (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'holdcommit sweeper')
                                 FROM hc_sweeper_databases WHERE database = 'shop'")
check "the primary's sweeper stopped before the hold that must stay unswept" "$([ "$stopped" != timeout ] && echo yes)" "yes"
P >/dev/null <<'SQL'
SELECT count(*) FROM hc_hold('A-EXP', 'ivan', 'k-exp', '1 second');
SELECT count(*) FROM hc_reserve('P-EXP', 4, 'judy', 'k-order-exp', '1 second');
SQL
sleep 1.1
lsn=$(P -c "SELECT pg_current_wal_lsn()")
t0=$(date +%s.%N)
waited=$(poll 30 t S -c "SELECT pg_last_wal_replay_lsn() >= '$lsn'")
check "the standby catches up with the primary's WAL position $lsn (${waited} s)" "$waited" "${waited%timeout}"

##############################################################################
# on the standby: every function of the catalog, with valid arguments
##############################################################################
# function|arguments|read or write.  Every call would succeed on a primary
# (the same calls run again after the promotion); each has rows of its own.
cat >"$work/calls" <<'CALLS'
hc_asset_add|'A-ADDED', 'added'|write
hc_asset_add|'A-ADDED2', 'added', 'P-SEATS', 1, 'R', 9|write
hc_asset_add|'P-SEATS', 'A-ADDED3', 'added', 'P-SEATS', 1, 'R', 10|write
hc_attempt_begin|'L-ATT', 'w1', 1, '0', 5|write
hc_attempt_complete|'L-DONE2', 'w1', 1, 'INV-2'|write
hc_attempt_reset|'L-REVIEW', 'checked by hand'|write
hc_check||read
hc_commit|(SELECT current_reservation_id FROM holdcommit.hc_assets WHERE id = 'A-COMMIT'), false|write
hc_commit|'A-COMMIT2', (SELECT current_reservation_id FROM holdcommit.hc_assets WHERE id = 'A-COMMIT2'), false|write
hc_distribute||citus
hc_extend|(SELECT current_reservation_id FROM holdcommit.hc_assets WHERE id = 'A-EXTEND'), '2 hours'|write
hc_extend|'A-EXTEND2', (SELECT current_reservation_id FROM holdcommit.hc_assets WHERE id = 'A-EXTEND2'), '2 hours'|write
hc_finalize|(SELECT id FROM holdcommit.hc_stock_reservations WHERE buyer_id = 'b-fin'), false|write
hc_finalize|'P-1', (SELECT id FROM holdcommit.hc_stock_reservations WHERE buyer_id = 'b-fin2'), false|write
hc_grant_app|'shop_app'|write
hc_grant_monitor|'shop_mon'|write
hc_grant_operator|'shop_ops'|write
hc_hold|'A-HOLD', 'kate', 'k-new-hold', '1 hour'|write
hc_hold_best|'P-SEATS', 2, 'omar', 'k-new-best', '1 hour'|write
hc_hold_many|ARRAY['S-M1', 'S-M2'], 'nina', 'k-new-many', '1 hour'|write
hc_hold_many|'P-SEATS', ARRAY['S-B4'], 'nina', 'k-new-many2', '1 hour'|write
hc_lock_acquire|'L-FREE', 'w-new', '3 minutes', 0|write
hc_lock_acquire_session|'L-FREE-S', 'w-new', '3 minutes', 0|write
hc_lock_check|'L-HELD', 'w1', 1|write
hc_lock_heartbeat|'L-HELD', 'w1', 1|write
hc_lock_release|'L-REL', 'w1', 1|write
hc_order_step|'P-1', 'header', '{res_x,read}'|citus
hc_release|(SELECT current_reservation_id FROM holdcommit.hc_assets WHERE id = 'A-RELEASE')|write
hc_release|'A-RELEASE2', (SELECT current_reservation_id FROM holdcommit.hc_assets WHERE id = 'A-RELEASE2')|write
hc_reserve|'P-1', 1, 'liam', 'k-new-reserve', '1 hour'|write
hc_reserve_items|'[{"product_id": "P-1", "qty": 1}, {"product_id": "P-2", "qty": 1}]', 'mia', 'k-new-items', '1 hour'|write
hc_stock_adjust|'P-ADJ', 10, 'delivery'|write
hc_stock_auto_spread|'P-AUTO', 2|write
hc_stock_set|'P-SET', 50|write
hc_stock_spread|'P-SET', 2|write
hc_stock_waits||read
hc_sweep|100|write
hc_sweeper_state||read
hc_unreserve|(SELECT id FROM holdcommit.hc_stock_reservations WHERE buyer_id = 'b-unr')|write
hc_unreserve|'P-1', (SELECT id FROM holdcommit.hc_stock_reservations WHERE buyer_id = 'b-unr2')|write
hc_worker_state||read
CALLS
# The functions a caller can call (not the event trigger's, nor hc_scope_id,
# the default of a column on Citus).
catalog="SELECT p.proname FROM pg_proc p
           JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
           JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'holdcommit'
          WHERE p.proname LIKE 'hc\\_%' AND p.prorettype <> 'event_trigger'::regtype
            AND p.proname <> 'hc_scope_id' ORDER BY 1"
check "every hc_* function of the catalog has a call here, and only those" \
    "$(S -c "$catalog" | paste -sd' ')" "$(cut -d'|' -f1 "$work/calls" | sort | paste -sd' ')"
# matrix SERVER: each call in a transaction of its own, as an application
# makes them (a lease call in the transaction of an hc_grant_*, which
# changes the functions' rows, is refused: 55000), at most 10 s each:
# function|kind|SQLSTATE|message|hint.
matrix() {
    local values
    values=$(awk -F'|' '{ printf "%s($c$%s$c$, $c$%s$c$, $c$%s$c$)", (NR > 1 ? ", " : ""), $1, $2, $3 }' "$work/calls")
    "$1" -c "SET statement_timeout = '10s'" -c "DO \$do\$
        DECLARE c record; n bigint; st text; msg text; hint text;
        BEGIN
            FOR c IN SELECT * FROM (VALUES $values) v (fn, args, kind) ORDER BY fn LOOP
                BEGIN
                    EXECUTE format('SELECT count(*) FROM holdcommit.%I(%s)', c.fn, c.args) INTO n;
                    st := '00000'; msg := ''; hint := '';
                EXCEPTION WHEN OTHERS THEN
                    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, hint = PG_EXCEPTION_HINT;
                END;
                RAISE NOTICE '%|%|%|%|%', c.fn, c.kind, st, msg, hint;
                COMMIT;
            END LOOP;
        END \$do\$" 2>&1 | sed -n 's/^NOTICE: *//p'
}
t0=$(date +%s.%N)
matrix S >"$work/matrix.standby"
matrix_s=$(elapsed "$t0")
writes=$(grep -c '|write$' "$work/calls")
reads=$(grep -c '|read$' "$work/calls")
check "on the standby the $reads reads answer" \
    "$(awk -F'|' '$2 == "read" { print $1 ":" $3 }' "$work/matrix.standby" | paste -sd' ')" \
    "$(awk -F'|' '$3 == "read" { print $1 ":00000" }' "$work/calls" | paste -sd' ')"
check "and each of the $writes writes is refused: 25006 \"NAME cannot run on a standby\", the hint sends it to the primary (${matrix_s} s for all)" \
    "$(awk -F'|' '$2 == "write" { print $1 ":" $3 ":" ($4 == $1 " cannot run on a standby") ":" ($5 ~ /primary/) }' "$work/matrix.standby" | paste -sd' ')" \
    "$(awk -F'|' '$3 == "write" { print $1 ":25006:1:1" }' "$work/calls" | paste -sd' ')"
awk -F'|' '$2 == "write" && $3 != "25006" { print "#   " $0 }' "$work/matrix.standby"
grep '^hc_hold|' "$work/matrix.standby" | sed 's/^/# a refusal: /'
check "hc_distribute and hc_order_step on the standby: 55000 (Citus is missing), 25006 (a write)" \
    "$(awk -F'|' '$2 == "citus" { print $1 ":" $3 }' "$work/matrix.standby" | paste -sd' ')" \
    "hc_distribute:55000 hc_order_step:25006"

# At top level, in one session: a lease call (bound to the session, and
# not), a hold with a new key, a sweep: refused at once, and the session is
# usable after them with no lock left behind, no worker started.
t0=$(date +%s.%N)
S -v ON_ERROR_STOP=0 >"$work/toplevel.out" 2>&1 <<'SQL'
SELECT hc_lock_acquire_session('L-FREE-S', 'w-new', '3 minutes', 0);
SELECT hc_lock_acquire('L-FREE', 'w-new', '3 minutes', 5);
SELECT * FROM hc_hold('A-HOLD', 'kate', 'k-new-hold', '1 hour');
SELECT * FROM hc_sweep();
SELECT 'usable', count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory';
SQL
toplevel_s=$(elapsed "$t0")
check "at top level, the refusals come at once (${toplevel_s} s for 4) and leave the session usable, holding no lock" \
    "$(grep -c 'ERROR:  .* cannot run on a standby' "$work/toplevel.out") $(grep '^usable' "$work/toplevel.out") $(within "$toplevel_s" 5)" \
    "4 usable|0 yes"
check "no holdcommit worker, launcher or sweeper runs on the standby" \
    "$(S -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'holdcommit%'")" "0"

# Replays are reads: the same rows as the primary's replays; a key the
# standby has not seen is a write; another request under a known key is RS005.
S <<<"$replays" >"$work/replays.standby" 2>&1
check "the 5 replays of keys made on the primary answer on the standby as on the primary" \
    "$(diff "$work/replays.primary" "$work/replays.standby" >/dev/null && echo same || echo differ)" "same"
diff "$work/replays.primary" "$work/replays.standby" | head -10 | sed 's/^/#   /'
check "a known key with another request is RS005 on the standby too" \
    "$(S -c "SELECT * FROM hc_hold('A-FREE', 'alice', 'k-live', '1 hour')" 2>&1 | sed -n 's/^ERROR: *//p')" \
    "idempotency key sha256:$(printf %s k-live | sha256sum | cut -c1-8) was already used for a different request"

# Reads: hc_check(), every table and view of the extension.
check "hc_check() answers on the standby, empty" "$(S -c "SELECT count(*) FROM hc_check()" 2>&1)" "0"
relations="SELECT c.relname, c.relkind FROM pg_class c
             JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e'
             JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'holdcommit'
            WHERE c.relkind IN ('r', 'v') ORDER BY 1"
# digest SERVER: every table of the extension, as one line each.
digest() {
    local t
    for t in $("$1" -c "$relations" | awk -F'|' '$2 == "r" { print $1 }'); do
        echo "$t $("$1" -c "SELECT md5(coalesce(string_agg(t::text, ',' ORDER BY t::text), '')) FROM holdcommit.$t t")"
    done
}
digest P >"$work/digest.primary"
digest S >"$work/digest.standby"
check "every table of the extension ($(wc -l <"$work/digest.standby")) reads on the standby as on the primary" \
    "$(diff "$work/digest.primary" "$work/digest.standby" >/dev/null && echo same || echo differ)" "same"
views_ok=$(for v in $(S -c "$relations" | awk -F'|' '$2 == "v" { print $1 }'); do
    S -c "SELECT count(*) FROM holdcommit.$v" >/dev/null 2>&1 && echo "$v" || echo "$v:failed"
done | paste -sd' ')
check "every view of the extension answers on the standby" "$(echo "$views_ok" | grep -c failed)" "0"
echo "# views read: $views_ok"
check "the standby shows the data in every state: live, committed, released holds; the lease held with its token" \
    "$(S -c "SELECT string_agg(id || ':' || status, ' ' ORDER BY id) FROM hc_assets WHERE id IN ('A-LIVE', 'A-SOLD', 'A-REL')") $(S -c "SELECT owner || ':' || token FROM hc_lease_status WHERE resource = 'L-HELD'")" \
    "A-LIVE:HELD A-REL:AVAILABLE A-SOLD:SOLD w1:1"

##############################################################################
# the sweeper idle on the standby
##############################################################################
S -c "DO \$\$
        DECLARE until timestamptz := clock_timestamp() + interval '$((3 * interval)) seconds'; n int; most int := 0;
        BEGIN
            WHILE clock_timestamp() < until LOOP
                PERFORM pg_stat_clear_snapshot();
                SELECT count(*) INTO n FROM pg_stat_activity WHERE backend_type LIKE 'holdcommit%';
                most := greatest(most, n);
                PERFORM pg_sleep(0.005);
            END LOOP;
            RAISE NOTICE 'most %', most;
        END \$\$" 2>"$work/sample" >/dev/null
check "over $((3 * interval)) s (3 intervals) no holdcommit process ran on the standby" \
    "$(sed -n 's/^NOTICE: *//p' "$work/sample")" "most 0"
check "the expired hold and order stay as they are: nothing sweeps a standby" \
    "$(S -c "SELECT a.status || ' ' || (a.hold_expires_at < now()) FROM hc_assets a WHERE id = 'A-EXP'") $(S -c "SELECT status FROM hc_stock_reservations WHERE buyer_id = 'judy'")" \
    "HELD true RESERVED"
check "hc_sweeper_databases says standby, with the reason" \
    "$(S -c "SELECT state || ': ' || reason FROM hc_sweeper_databases WHERE database = 'shop'")" \
    "standby: a standby is read-only: its primary sweeps"

# The primary goes away; the standby still answers.
"$here/test/harness/server.sh" stop "$primary_port"
check "with its primary stopped, the standby still answers reads and replays" \
    "$(S -c "SELECT count(*) FROM hc_check()")$(S <<<"$replays" 2>&1 | diff -q "$work/replays.primary" - >/dev/null && echo ' same')" \
    "0 same"
# The WAL receiver's lines once its primary is gone are not holdcommit's.
errors=$(grep -E '(ERROR|FATAL|PANIC):' "$slog" | grep -vE 'FATAL:  could not (connect to|send end-of-streaming message to|receive data from WAL stream)')
refusals='cannot run on a standby|was already used for a different request'
check "the standby's log has no error but the refusals made at top level (4 writes, 1 RS005)" \
    "$(echo "$errors" | grep -c 'cannot run on a standby') $(echo "$errors" | grep -c 'already used') $(echo "$errors" | grep -vEc "$refusals")" \
    "4 1 0"
echo "$errors" | grep -vE "$refusals" | head -5 | sed 's/^/#   /'
check "nor any line of holdcommit's launcher or sweeper" "$(grep -c 'holdcommit \(launcher\|sweeper\)' "$slog")" "0"

##############################################################################
# promotion
##############################################################################
t0=$(date +%s.%N)
as_server "$bin/pg_ctl" -D "$standby/data" -w -t 60 promote >/dev/null 2>&1
check "the standby is promoted" "$(S -c "SELECT pg_is_in_recovery()")" "f"
waited=$(poll 15 "AVAILABLE EXPIRED" S -c "SELECT (SELECT status FROM hc_assets WHERE id = 'A-EXP') || ' ' ||
                                              (SELECT status FROM hc_stock_reservations WHERE buyer_id = 'judy')")
check "the launcher starts and sweeps the expired hold and order within 3 s + 3 intervals of the promotion (${waited} s)" \
    "$(within "$waited" $((3 + 3 * interval)))" "yes"
check "by the background sweeper, as the ledger says" \
    "$(S -c "SELECT string_agg(event || ':' || source, ',' ORDER BY seq) FROM hc_ledger WHERE entity_id = 'A-EXP' AND event = 'expire'")" \
    "expire:sweep"
check "hc_sweeper_databases says ok" \
    "$(poll 5 ok S -c "SELECT replace(state, 'running', 'ok') FROM hc_sweeper_databases WHERE database = 'shop'" >/dev/null && echo ok)" "ok"
promoted_s=$(elapsed "$t0")

# The old primary's tokens, before any write here.
S -c "SELECT resource || ':' || token FROM hc_locks ORDER BY resource" >"$work/tokens.before"
matrix S >"$work/matrix.promoted"
check "every call refused on the standby works now, with the same arguments (hc_distribute and hc_order_step need Citus)" \
    "$(awk -F'|' '{ print $1 ":" $3 }' "$work/matrix.promoted" | paste -sd' ')" \
    "$(awk -F'|' '{ print $1 ":" ($3 == "citus" ? ($1 == "hc_order_step" ? "0A000" : "55000") : "00000") }' "$work/calls" | paste -sd' ')"
awk -F'|' '$3 != "00000" { print "#   " $0 }' "$work/matrix.promoted"
check "new holds and reserves work (the ones refused at top level)" \
    "$(S -c "SELECT status FROM hc_assets WHERE id = 'A-HOLD'") $(S -c "SELECT count(*) FROM hc_stock_reservations WHERE buyer_id IN ('liam', 'mia') AND status = 'RESERVED'")" \
    "HELD 2"
before=$(grep '^L-PAST:' "$work/tokens.before" | cut -d: -f2)
token=$(S -c "SELECT hc_lock_acquire('L-PAST', 'w-new', '1 hour', 0)")
check "fencing tokens go on above the old primary's: L-PAST had token ${before:-none}, the new primary gives ${token:-none}" \
    "$(awk -v a="$before" -v b="$token" 'BEGIN { print (a != "" && b != "" && b + 0 > a + 0) ? "above" : "not above" }')" "above"
check "a lease held on the old primary is still held: another owner gets none, its holder's heartbeat works" \
    "$(S -c "SELECT coalesce(hc_lock_acquire('L-HELD', 'w-other', '1 hour', 0)::text, 'busy')") $(S -c "SELECT hc_lock_heartbeat('L-HELD', 'w1', 1) IS NOT NULL")" \
    "busy t"
check "the lease released on the standby's matrix goes on at token 2" \
    "$(S -c "SELECT hc_lock_acquire('L-REL', 'w-new', '1 hour', 0)")" "2"
S <<<"$replays" >"$work/replays.promoted" 2>&1
check "the 5 replays of keys made on the old primary answer identically on the new one" \
    "$(diff "$work/replays.primary" "$work/replays.promoted" >/dev/null && echo same || echo differ)" "same"
diff "$work/replays.primary" "$work/replays.promoted" | head -10 | sed 's/^/#   /'
check "hc_check() is empty on the new primary" "$(S -c "SELECT count(*) FROM hc_check()")" "0"
check "no holdcommit error, crash or PANIC in the new primary's log" \
    "$(sed -n '/received promote request/,$p' "$slog" | grep -E '(ERROR|FATAL|PANIC):|terminated by signal' | grep -vE 'walreceiver' | grep -c .)" "0"

echo "# figures: base backup and standby start ${basebackup_s} s, the standby's matrix of $((reads + writes)) calls ${matrix_s} s," \
    "promotion to swept and ok ${promoted_s} s (swept after ${waited} s), suite $(elapsed "$t_start") s"
