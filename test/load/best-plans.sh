#!/usr/bin/env bash
# hc_hold_best's reads keep their shape whatever the statistics, and stop early
# (doc/architecture.md, "Plan policy"): the pool's free seats are read
# through the index hc_assets_pool_rank in its order, without the executor
# (core/scan.c), so no plan can sort the pool first; the one statement it
# runs on hc_assets, the seats beside a block, goes through hc_assets_pool.
# auto_explain prints the plans a call ran: in a session that made them on a
# pool of 4 seats before a pool of 30,000 arrived (half sold, no
# statistics), in the same session after ANALYZE (its plans made again),
# and in a new session.  Each takes the best 2 seats left.  The new
# session's read stops early: it reads the index entries of the sold seats
# below the free ones, then a few free ones (PostgreSQL's count of the
# index's entries read), not the whole pool.
. "$(dirname "$0")/lib.bash"
load_setup hc_load_best_plans 2

explain="LOAD 'auto_explain';
SET auto_explain.log_min_duration = 0;
SET auto_explain.log_nested_statements = on;
SET client_min_messages = log;"

q "CREATE EXTENSION holdcommit; $no_autovacuum_sql" >/dev/null || exit 0

psql -X -q -v ON_ERROR_STOP=1 -d "$db" > "$work/fresh.log" 2>&1 <<SQL
SET search_path = holdcommit, public;
SELECT count(hc_asset_add('T-' || p, '', pool => 'tiny', rank => 1, grp => 'T', pos => p))
  FROM generate_series(1, 4) p;
SELECT count(*) FROM hc_hold_best('tiny', 2, 'ann', 'tiny-1');
SELECT count(hc_asset_add('B-' || r || '-' || p, '', pool => 'big', rank => r, grp => 'row-' || r, pos => p))
  FROM generate_series(1, 300) r, generate_series(1, 100) p;
UPDATE hc_assets SET status = 'SOLD' WHERE pool = 'big' AND rank <= 150;
$explain
SELECT asset_id FROM hc_hold_best('big', 2, 'bob', 'big-1');
\\warn REPLANNED
ANALYZE hc_assets;
SELECT asset_id FROM hc_hold_best('big', 2, 'cy', 'big-2');
SQL
# The sale's dead index entries gone, so that the index holds a seat once.
q "VACUUM holdcommit.hc_assets" || exit 0
psql -X -q -v ON_ERROR_STOP=1 -d "$db" > "$work/new.log" 2>&1 <<SQL
SET search_path = holdcommit, public;
$explain
BEGIN;
SELECT asset_id FROM hc_hold_best('big', 2, 'dee', 'big-3');
SELECT 'index entries read: ' || pg_stat_get_xact_tuples_returned('hc_assets_pool_rank'::regclass);
COMMIT;
SQL
# The session's two calls, apart (\warn writes where the plans go).
awk '/^REPLANNED/ { later = 1 } { print > (later ? "'"$work"'/replanned.plans" : "'"$work"'/fresh.plans") }' \
    "$work/fresh.log"
cp "$work/new.log" "$work/new.plans"

# The read stops early: the 15,000 sold seats below the free ones, then a
# few free ones, not the 15,000 free ones after them.
read=$(sed -n 's/^ *index entries read: //p' "$work/new.log")
check "new: the read stopped early (the 15,000 sold seats, then at most 200 entries)" \
    "$([ -n "$read" ] && [ "$read" -ge 15000 ] && [ "$read" -le 15200 ] && echo yes || echo "no: $read")" "yes"

want=(B-151-1,B-151-2 B-151-3,B-151-4 B-151-5,B-151-6)
i=0
for s in fresh replanned new; do
    log=$work/$s.plans
    # Each plan logged, on one line.
    plans=$(awk '/LOG:  duration/ { if (p != "") print p; p = "" } { p = p " " $0 } END { print p }' "$log")
    check "$s: no statement sorts or scans the pool" \
        "$(grep 'hc_assets' <<<"$plans" | grep -cE 'Sort Key: rank|Seq Scan on hc_assets ')" "0"
    check "$s: the seats beside a block read through hc_assets_pool" \
        "$(grep 'grp OPERATOR' <<<"$plans" | grep -c 'Index Only Scan using hc_assets_pool \|Index Scan using hc_assets_pool \|Bitmap Index Scan on hc_assets_pool ')" "1"
    check "$s: the call took the best two seats" \
        "$(grep -E '^ *B-' "$log" | sort | tr -d ' ' | paste -sd,)" "${want[$i]}"
    grep -q ERROR "$log" && sed 's/^/# /' "$log" | head -40
    i=$((i + 1))
done

# A read cancelled while it walks a pool with nothing free (every seat sold
# or held: the whole pool is read, then RS002): statement_timeout ends it
# with 57014, nothing is held, and the session goes on.  The same
# call without the timeout, for how long the read takes.
q "UPDATE holdcommit.hc_assets SET status = 'SOLD' WHERE pool = 'big' AND status = 'AVAILABLE'" >/dev/null
out=$(psql -X -qAt -d "$db" -v VERBOSITY=sqlstate 2>&1 <<'SQL'
SET search_path = holdcommit, public;
SET statement_timeout = '1ms';
SELECT asset_id FROM hc_hold_best('big', 2, 'eve', 'big-cancel');
RESET statement_timeout;
SELECT 'usable, held by eve: ' || count(*) FROM hc_reservations WHERE buyer_id = 'eve';
SELECT 'seats held: ' || count(*) FROM hc_assets WHERE pool = 'big' AND status = 'HELD';
\timing on
SELECT asset_id FROM hc_hold_best('big', 2, 'eve', 'big-sold-out');
SQL
)
check "a read of a sold-out pool of 30,000 cancelled by statement_timeout: 57014, nothing held, the session usable" \
    "$(grep -vE '^Time:|RS002' <<<"$out" | tr '\n' '|')" "ERROR:  57014|usable, held by eve: 0|seats held: 6|"
check "without the timeout the same call reads the whole pool and answers RS002" "$(grep -c 'ERROR:  RS002' <<<"$out")" "1"
echo "# the read of the sold-out pool of 30,000 to its end: $(sed -n 's/^Time: //p' <<<"$out" | tail -1)"
