#!/usr/bin/env bash
# Leases through PgBouncer in transaction pooling mode, the reason the seed
# chose a lock table over advisory locks.  A private pgbouncer (3 server
# connections, used round robin) sits in front of the test server; each
# statement of a client may run on another server backend.
#   - acquire, heartbeat, attempt and release work across pooled connections
#     (different server backends, as pg_backend_pid() shows);
#   - beside it, a session advisory lock taken through the same pooler
#     protects nothing: another client, landing on the same server backend,
#     "takes" it too, and it outlives the client that took it.
# Needs PGHOST, PGPORT, PGUSER (a superuser) for a running server, and the
# pgbouncer package.  HC_LOCK_PGBOUNCER_PORT names its socket (default: the
# server port + 9; the socket lives in a private directory, no TCP port).
# Prints "ok - ..." / "not ok - ..." and "# ..." figures; exits 0.
. "$(dirname "$0")/lib.bash"
. "$(dirname "$0")/../harness/pgbouncer.bash"
load_setup hc_load_bouncer 10

bouncer=$(command -v pgbouncer || echo /usr/sbin/pgbouncer)
if [ ! -x "$bouncer" ]; then
    echo "not ok - pgbouncer is installed (test/harness/deps.sh installs it)"
    exit 0
fi
port=${HC_LOCK_PGBOUNCER_PORT:-$((PGPORT + 9))}
dir=$(mktemp -d)
trap 'bouncer_stop "$dir"; rm -rf "$dir"; load_cleanup' EXIT

q "CREATE EXTENSION holdcommit" >/dev/null || { echo "not ok - load database set up"; exit 0; }
if ! bouncer_start "$dir" "$port" "$PGUSER" "$db = host=$PGHOST port=$PGPORT dbname=$db user=$PGUSER" \
        "default_pool_size = 3" "min_pool_size = 3" "server_round_robin = 1" "max_client_conn = 50"; then
    echo "not ok - pgbouncer started"
    exit 0
fi
# pb SQL: one statement through the pooler, as a new client each time.
pb() { psql -X -qAt -h "$dir" -p "$port" -d "$db" -c "$1" 2>/dev/null; }
for _ in $(seq 1 50); do pb "SELECT 1" >/dev/null 2>&1 && break; sleep 0.1; done
check "pgbouncer is up in transaction pooling mode" "$(pb "SELECT 1")" "1"

# Warm the pool so that all 3 server connections exist.
for _ in 1 2 3 4 5 6; do pb "SELECT pg_sleep(0.05)" >/dev/null & done
wait

# The lease, one call per statement, each from a new client through the pooler.
out=$(pb "SELECT hc_lock_acquire('pay-1', 'webhook', '1 minute', 0) || ' ' || pg_backend_pid()")
token=${out% *}; pids=${out#* }
check "through the pooler: the webhook acquires the lease (token 1)" "$token" "1"
check "through the pooler: the scheduler is refused while the webhook holds it" \
    "$(pb "SELECT coalesce(hc_lock_acquire('pay-1', 'scheduler', '1 minute', 0)::text, 'busy')")" "busy"
for i in 1 2 3; do
    out=$(pb "SELECT (hc_lock_heartbeat('pay-1', 'webhook', 1) IS NOT NULL) || ' ' || pg_backend_pid()")
    [ "${out% *}" = "true" ] || echo "#   heartbeat $i: $out"
    pids="$pids ${out#* }"
done
check "through the pooler: 3 heartbeats with owner and token succeed" \
    "$(q "SELECT heartbeat_at > acquired_at FROM hc_locks WHERE resource = 'pay-1'")" "t"
out=$(pb "SELECT (hc_attempt_begin('pay-1', 'webhook', 1, '10 minutes', 5, 'req-1')).status || ' ' || pg_backend_pid()")
pids="$pids ${out#* }"
check "through the pooler: the attempt PROCEEDs and its marker is committed" \
    "${out% *}/$(q "SELECT attempts FROM hc_attempts WHERE resource = 'pay-1'")" "PROCEED/1"
check "through the pooler: the same request asking again (its request_key) gets that attempt back" \
    "$(pb "SELECT (hc_attempt_begin('pay-1', 'webhook', 1, '10 minutes', 5, 'req-1')).attempt")" "1"
check "through the pooler: complete records the invoice" \
    "$(pb "SELECT (hc_attempt_complete('pay-1', 'webhook', 1, 'INV-1')).status")" "COMPLETED"
out=$(pb "SELECT hc_lock_release('pay-1', 'webhook', 1) || ' ' || pg_backend_pid()")
pids="$pids ${out#* }"
check "through the pooler: the release frees the lease" "${out% *}" "true"
check "through the pooler: the scheduler then gets token 2" \
    "$(pb "SELECT hc_lock_acquire('pay-1', 'scheduler', '1 minute', 0)")" "2"
backends=$(echo "$pids" | tr ' ' '\n' | sort -u | grep -c .)
check "the lease calls ran on more than one server backend" "$([ "$backends" -gt 1 ] && echo yes)" "yes"
echo "# lease calls ran on $backends server backends (pids: $(echo "$pids" | tr ' ' '\n' | sort -u | xargs))"
check "hc_check() is empty" "$(q "SELECT count(*) FROM hc_check()")" "0"

# A session advisory lock through the same pooler: client A "locks" payment
# 42; clients B then try the same lock until one lands on A's server backend,
# where the lock is re-entrant: B "holds" it too.
out=$(pb "SELECT pg_try_advisory_lock(42) || ' ' || pg_backend_pid()")
a_locked=${out% *}; a_pid=${out#* }
check "advisory: client A takes session advisory lock 42" "$a_locked" "true"
both=no
for i in $(seq 1 30); do
    out=$(pb "SELECT pg_try_advisory_lock(42) || ' ' || pg_backend_pid()")
    if [ "${out% *}" = "true" ]; then
        both=yes
        echo "# advisory: client B (try $i) got lock 42 on backend ${out#* } while client A held it (backend $a_pid)"
        break
    fi
done
check "advisory: another client gets the same lock while A holds it (it protects nothing)" "$both" "yes"
check "advisory: the lock outlives client A: a server backend with no client still holds it" \
    "$(q "SELECT count(*) > 0 FROM pg_locks WHERE locktype = 'advisory' AND objid = 42 AND granted")" "t"
out=$(pb "SELECT pg_advisory_unlock(42) || ' ' || pg_backend_pid()")
echo "# advisory: client A's unlock ran on backend ${out##* } and returned ${out%% *}"
exit 0
