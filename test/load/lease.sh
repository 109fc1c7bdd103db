#!/usr/bin/env bash
# Load check for dual-layer locking: 50 workers compete for 5 resources for
# several seconds with a short stale_after (400 ms) and heartbeats every
# ~100 ms.  Some workers "crash" (stop heartbeating and never release), some
# stall past stale_after and come back.  Afterwards the ledger and the
# workers' own log are audited:
#   - at every point of the ledger at most one worker held each resource
#     with a valid token: no attempt or release of a token comes after the
#     next token's grant, and no heartbeat after its token's takeover;
#   - tokens strictly increase per resource;
#   - no attempt marker is lost: every PROCEED a worker saw is in the ledger
#     and in hc_attempts.total_attempts.
# Each worker is one psql session running an unrolled loop, one call per
# statement, as an application's would.  10 of the 50 make their calls
# inside a transaction block instead, a third of the blocks with a 5 ms
# statement_timeout, and roll half of the blocks back: what such a worker
# saw (a token, a PROCEED) counts as seen, whatever became of its block, and
# is logged after it.  No session may be left in an aborted state, and the
# server log may show nothing at FATAL or PANIC meanwhile.
# Prints "ok - ..." / "not ok - ..." and "# ..." figures; exits 0.
. "$(dirname "$0")/lib.bash"
workers=${HC_LOCK_WORKERS:-50}
block_workers=${HC_LOCK_BLOCK_WORKERS:-10}
seconds=${HC_LOCK_SECONDS:-8}
# Each worker in blocks runs at least this many blocks, however long a loaded machine takes:
# a third of them have the 5 ms timeout, which must strike some calls: their acquire retries a
# busy lease (3 retries, where the others make none), and the timeout strikes its backoff's
# sleep, however fast the machine.
min_blocks=${HC_LOCK_MIN_BLOCKS:-12}
server_log=${TMPDIR:-/tmp}/holdcommit-$PGPORT/server.log
load_setup hc_load_locks "$workers"

q "
CREATE EXTENSION holdcommit;
-- What each worker saw, with the database time each call returned.
CREATE TABLE lk_log (
    worker      int NOT NULL,
    resource    text NOT NULL,
    owner       text NOT NULL,
    token       bigint NOT NULL,
    event       text NOT NULL,      -- acquired, heartbeat, fenced, proceed, cooldown, released, lost, crashed
    at          timestamptz,        -- heartbeat: the time hc_lock_heartbeat returned
    marker      text,
    logged_at   timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE lk_busy (worker int NOT NULL, resource text NOT NULL);
" >/dev/null || { echo "not ok - load database set up"; exit 0; }

# One iteration of a worker: pick a resource, acquire (2 retries), log,
# heartbeat 3 times while "working", begin an attempt, then release, crash
# (stop, no release) or stall past stale_after and try to carry on.
iteration() {
    cat <<'PSQL'
SELECT extract(epoch FROM clock_timestamp()) < :deadline AS go,
       'lk-' || (1 + floor(random() * 5))::int AS res,
       'w' || :w || '-' || md5(random()::text) AS owner,
       CASE WHEN random() < 0.10 THEN 'crash' WHEN random() < 0.08 THEN 'stall' ELSE 'release' END AS fate \gset
\if :go
SELECT coalesce(hc_lock_acquire(:'res', :'owner', '400 ms', 2), 0) AS token \gset
SELECT :token > 0 AS got \gset
\if :got
INSERT INTO lk_log (worker, resource, owner, token, event) VALUES (:w, :'res', :'owner', :token, 'acquired');
SELECT true AS alive \gset
SELECT pg_sleep(0.05 + random() * 0.05);
SELECT hc_lock_heartbeat(:'res', :'owner', :token) AS beat \gset
SELECT :'SQLSTATE' = '00000' AS alive \gset
\if :alive
INSERT INTO lk_log (worker, resource, owner, token, event, at) VALUES (:w, :'res', :'owner', :token, 'heartbeat', :'beat');
SELECT status, marker FROM hc_attempt_begin(:'res', :'owner', :token, '0 seconds', 1000000) \gset
SELECT :'SQLSTATE' = '00000' AS alive \gset
\if :alive
INSERT INTO lk_log (worker, resource, owner, token, event, marker) VALUES (:w, :'res', :'owner', :token, lower(:'status'), :'marker');
SELECT pg_sleep(0.05 + random() * 0.05);
SELECT hc_lock_heartbeat(:'res', :'owner', :token) AS beat \gset
SELECT :'SQLSTATE' = '00000' AS alive \gset
\if :alive
INSERT INTO lk_log (worker, resource, owner, token, event, at) VALUES (:w, :'res', :'owner', :token, 'heartbeat', :'beat');
\endif
\endif
\else
INSERT INTO lk_log (worker, resource, owner, token, event) VALUES (:w, :'res', :'owner', :token, 'fenced');
\endif
\if :alive
SELECT :'fate' = 'crash' AS crash, :'fate' = 'stall' AS stall \gset
\if :crash
INSERT INTO lk_log (worker, resource, owner, token, event) VALUES (:w, :'res', :'owner', :token, 'crashed');
\else
\if :stall
SELECT pg_sleep(0.6);
SELECT hc_lock_heartbeat(:'res', :'owner', :token) AS beat \gset
\if :ERROR
INSERT INTO lk_log (worker, resource, owner, token, event) VALUES (:w, :'res', :'owner', :token, 'fenced');
\else
INSERT INTO lk_log (worker, resource, owner, token, event, at) VALUES (:w, :'res', :'owner', :token, 'heartbeat', :'beat');
\endif
\endif
SELECT hc_lock_release(:'res', :'owner', :token) AS released \gset
INSERT INTO lk_log (worker, resource, owner, token, event) VALUES (:w, :'res', :'owner', :token, CASE WHEN :'released'::boolean THEN 'released' ELSE 'lost' END);
\endif
\endif
\else
INSERT INTO lk_busy VALUES (:w, :'res');
\endif
\endif
PSQL
}
{
    echo '\set ON_ERROR_STOP 0'
    echo '\set VERBOSITY sqlstate'
    for _ in $(seq 1 200); do iteration; done
} >"$work/worker.sql"

# One iteration of a worker in a transaction block: acquire, begin an
# attempt and heartbeat inside it (with a 5 ms statement_timeout a third of
# the time, and then retries of a busy lease), then end the block with ROLLBACK or COMMIT at random.  A call
# that failed sets nothing, and after a failed call the block is aborted.
# After the block: log what was seen, check that the session is usable,
# release in autocommit.
block_iteration() {
    cat <<'PSQL'
SELECT extract(epoch FROM clock_timestamp()) < :deadline OR :n < :min_blocks AS go, :n + 1 AS n,
       'lk-' || (1 + floor(random() * 5))::int AS res,
       'b' || :w || '-' || md5(random()::text) AS owner,
       random() < 0.5 AS roll_back, random() < 0.33 AS tight \gset
\if :go
\set got false
\set proceeded false
\set beat_ok false
\set usable false
BEGIN;
\if :tight
SET LOCAL statement_timeout = '5ms';
\set retries 3
\else
\set retries 0
\endif
SELECT t AS token, t > 0 AS got, clock_timestamp() AS got_at
  FROM coalesce(hc_lock_acquire(:'res', :'owner', '400 ms', :retries), 0) AS t \gset
\if :got
SELECT status = 'PROCEED' AS proceeded, marker
  FROM hc_attempt_begin(:'res', :'owner', :token, '0 seconds', 1000000) \gset
SELECT hc_lock_heartbeat(:'res', :'owner', :token) AS beat, true AS beat_ok \gset
\endif
\if :roll_back
ROLLBACK;
\else
COMMIT;
\endif
\if :ERROR
\echo END-FAILED :SQLSTATE
ROLLBACK;
\endif
SELECT true AS usable \gset
\if :usable
\else
\echo BROKEN-SESSION
\endif
\if :got
INSERT INTO lk_log (worker, resource, owner, token, event, logged_at) VALUES (:w, :'res', :'owner', :token, 'acquired', :'got_at');
\if :proceeded
INSERT INTO lk_log (worker, resource, owner, token, event, marker) VALUES (:w, :'res', :'owner', :token, 'proceed', :'marker');
\endif
\if :beat_ok
INSERT INTO lk_log (worker, resource, owner, token, event, at) VALUES (:w, :'res', :'owner', :token, 'heartbeat', :'beat');
\endif
SELECT hc_lock_release(:'res', :'owner', :token) AS released \gset
INSERT INTO lk_log (worker, resource, owner, token, event) VALUES (:w, :'res', :'owner', :token, CASE WHEN :'released'::boolean THEN 'released' ELSE 'lost' END);
\endif
\endif
PSQL
}
{
    echo '\set ON_ERROR_STOP 0'
    echo '\set VERBOSITY sqlstate'
    echo "\\set n 0"
    echo "\\set min_blocks $min_blocks"
    for _ in $(seq 1 200); do block_iteration; done
} >"$work/block.sql"
log_start=$( [ -f "$server_log" ] && wc -c <"$server_log" || echo 0)

deadline=$(q "SELECT extract(epoch FROM clock_timestamp()) + $seconds + 1")
t0=$(date +%s.%N)
pids=()
for w in $(seq 1 "$workers"); do
    kind=worker
    [ "$w" -gt $((workers - block_workers)) ] && kind=block
    psql -X -q -d "$db" -v w="$w" -v deadline="$deadline" -f "$work/$kind.sql" \
        >"$work/$kind-$w.out" 2>"$work/$kind-$w.err" &
    pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
t1=$(date +%s.%N)
check "$workers workers ran to the end" "$rc" "0"
unexpected=$(cat "$work"/worker-*.err | grep -v 'ERROR:  RS007$' | grep -c 'ERROR' || true)
check "workers met no error but RS007 (a fenced-off heartbeat or attempt)" "$unexpected" "0"
[ "$unexpected" != "0" ] && cat "$work"/worker-*.err | grep -v 'ERROR:  RS007$' | sed 's/^psql:[^ ]* //' | sort | uniq -c | head -5 | sed 's/^/#   /'
unexpected=$(cat "$work"/block-*.err | grep -vE 'ERROR:  (RS007|57014|25P02)$' | grep -c 'ERROR' || true)
check "workers in blocks met no error but RS007, 57014 (their 5 ms timeout) and 25P02 (in a block a timeout aborted)" "$unexpected" "0"
[ "$unexpected" != "0" ] && cat "$work"/block-*.err | grep -vE 'ERROR:  (RS007|57014|25P02)$' | sed 's/^psql:[^ ]* //' | sort | uniq -c | head -5 | sed 's/^/#   /'
# The 5 ms timeout may strike the COMMIT or ROLLBACK itself on a loaded machine, before it ends
# the block: the worker then rolls back, as an application would; any other failure to end a
# block counts.
check "no session was left in an aborted state after its block" \
    "$(cat "$work"/block-*.out | grep -e BROKEN-SESSION -e END-FAILED | grep -vc 'END-FAILED 57014$')" "0"
echo "# blocks whose end the 5 ms timeout struck, then rolled back: $(cat "$work"/block-*.out | grep -c 'END-FAILED 57014')"
timeouts=$(cat "$work"/block-*.err | grep -c 'ERROR:  57014$')
check "the 5 ms statement timeouts struck some calls" "$([ "$timeouts" -gt 0 ] && echo yes)" "yes"
if [ -f "$server_log" ]; then
    check "nothing in the server log at FATAL or PANIC meanwhile" \
        "$(tail -c +$((log_start + 1)) "$server_log" | grep -cE '(FATAL|PANIC):')" "0"
fi

# The interval of each token, in the ledger's order: from its grant (the
# acquire's or takeover's ledger row) to the last attempt or release that the
# database confirmed with that owner and token.  Every one of those rows is
# written under the lease row's lock, so their order is the order in which
# the database saw the calls; their times are not: a call reads the clock
# once, when it starts, and a loaded machine may run its statement long after
# (an acquire can be granted with a time earlier than the release before it).
# A heartbeat writes no ledger row: its time is checked against a takeover,
# which needs the last heartbeat to be stale_after old by its own clock.
q "
CREATE TABLE lk_interval AS
WITH acquired AS (
    SELECT g.entity_id AS resource, g.detail::jsonb ->> 'owner' AS owner,
           (g.detail::jsonb ->> 'token')::bigint AS token, g.seq, g.at AS start_at, g.event
      FROM hc_ledger g
     WHERE g.kind = 'resource' AND g.event IN ('acquire', 'takeover')),
confirmed AS (
    SELECT entity_id AS resource, detail::jsonb ->> 'owner' AS owner,
           (detail::jsonb ->> 'token')::bigint AS token, seq
      FROM hc_ledger WHERE kind = 'resource' AND event IN ('attempt', 'release'))
SELECT a.resource, a.owner, a.token, a.seq, a.start_at, a.event,
       greatest(a.seq, max(c.seq)) AS end_seq
  FROM acquired a LEFT JOIN confirmed c USING (resource, owner, token)
 GROUP BY a.resource, a.owner, a.token, a.seq, a.start_at, a.event;
" >/dev/null

check "at every point of the ledger at most one worker held each resource with a valid token" \
    "$(q "SELECT count(*) FROM lk_interval x JOIN lk_interval y
             ON y.resource = x.resource AND y.token > x.token AND y.seq < x.end_seq")" "0"
check "tokens strictly increase per resource, in ledger order" \
    "$(q "SELECT count(*) FROM (
            SELECT token, lag(token) OVER (PARTITION BY resource ORDER BY seq) AS prev_token
              FROM lk_interval) s
           WHERE token <= prev_token")" "0"
check "every token a worker was given is one the ledger handed to that worker, once" \
    "$(q "SELECT count(*) FILTER (WHERE i.token IS NULL) || '/' ||
                 (SELECT count(*) - count(DISTINCT (resource, token)) FROM lk_log WHERE event = 'acquired')
            FROM lk_log l LEFT JOIN lk_interval i USING (resource, owner, token)
           WHERE l.event = 'acquired'")" "0/0"
check "a heartbeat confirmed by the database came before the takeover of its token" \
    "$(q "SELECT count(*) FROM lk_log l JOIN lk_interval n
             ON n.resource = l.resource AND n.token = l.token + 1 AND n.event = 'takeover'
           WHERE l.event = 'heartbeat' AND l.at >= n.start_at")" "0"
check "no attempt marker lost: every PROCEED a worker saw is in the ledger" \
    "$(q "SELECT count(*) FROM lk_log l
           WHERE l.event = 'proceed' AND NOT EXISTS (
                 SELECT FROM hc_ledger g WHERE g.kind = 'resource' AND g.entity_id = l.resource
                    AND g.event = 'attempt' AND g.detail::jsonb ->> 'marker' = l.marker)")" "0"
check "attempts recorded = markers in the ledger; each PROCEED a worker saw is one of them, once" \
    "$(q "SELECT (SELECT coalesce(sum(total_attempts), 0) FROM hc_attempts) =
                 (SELECT count(*) FROM hc_ledger WHERE kind = 'resource' AND event = 'attempt')
             AND (SELECT count(*) FROM lk_log WHERE event = 'proceed') =
                 (SELECT count(DISTINCT marker) FROM lk_log WHERE event = 'proceed')")" "t"
check "PROCEEDs the workers in autocommit saw = their markers in the ledger" \
    "$(q "SELECT count(*) FROM hc_ledger g WHERE g.kind = 'resource' AND g.event = 'attempt'
             AND g.detail::jsonb ->> 'owner' LIKE 'w%'")" \
    "$(q "SELECT count(*) FROM lk_log WHERE event = 'proceed' AND owner LIKE 'w%'")"
check "crashed workers' leases were taken over" \
    "$(q "SELECT (SELECT count(*) FROM hc_ledger WHERE kind = 'resource' AND event = 'takeover') > 0")" "t"
check "hc_check() is empty" "$(q "SELECT count(*) FROM hc_check()")" "0"

# Tokens keep growing after a dump and restore: the lease rows (released or
# not) and the ledger are the extension's data, kept by pg_dump.
restored=${db}_restored
psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $restored" -c "CREATE DATABASE $restored" >/dev/null 2>&1
"$bin/pg_dump" -d "$db" | psql -X -q -d "$restored" >/dev/null 2>&1
rq() { psql -X -qAt -d "$restored" -c "$1"; }
check "after a dump and restore the leases and markers are all there" \
    "$(rq "SELECT count(*) || '/' || sum(token) || '/' || (SELECT sum(total_attempts) FROM hc_attempts) FROM hc_locks")" \
    "$(q "SELECT count(*) || '/' || sum(token) || '/' || (SELECT sum(total_attempts) FROM hc_attempts) FROM hc_locks")"
rq "SELECT hc_lock_release(resource, owner, token) FROM hc_locks WHERE resource = 'lk-1' AND owner IS NOT NULL" >/dev/null
check "after a dump and restore the next token is higher than every earlier one" \
    "$(rq "SELECT hc_lock_acquire('lk-1', 'after-restore', '1 minute', 0) > $(q "SELECT token FROM hc_locks WHERE resource = 'lk-1'")")" "t"
check "after a dump and restore hc_check() is empty" "$(rq "SELECT count(*) FROM hc_check()")" "0"
psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $restored WITH (FORCE)" >/dev/null 2>&1

echo "# calls in blocks that timed out after 5 ms: $timeouts"
echo "# $workers workers ($block_workers in blocks), 5 resources, stale_after 400 ms: $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s"
echo "# $(q "SELECT string_agg(format('%s %s', event, n), ', ' ORDER BY event)
              FROM (SELECT event, count(*) n FROM hc_ledger WHERE kind = 'resource' GROUP BY event) s") (ledger)"
echo "# $(q "SELECT string_agg(format('%s %s', event, n), ', ' ORDER BY event)
              FROM (SELECT event, count(*) n FROM lk_log GROUP BY event) s"), busy $(q "SELECT count(*) FROM lk_busy") (workers' log)"
echo "# highest token per resource: $(q "SELECT string_agg(format('%s=%s', resource, token), ' ' ORDER BY resource) FROM hc_locks")"
exit 0
