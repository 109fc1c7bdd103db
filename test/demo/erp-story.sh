#!/usr/bin/env bash
# The seed's story, end to end: one payment must make exactly one invoice in
# a slow ERP, however the webhook and the scheduler race and whatever the
# network does.  make run plays it after the sale demo; make test checks its
# output (test/load/erp-story.sh).
#
#   test/demo/erp-story.sh DB     (PGHOST, PGPORT, PGUSER for the server)
#
# The ERP is simulated in the same database: erp_create_invoice() takes its
# time (pg_sleep) and then writes an invoice.  The worker's client gives up
# after 3 seconds (statement_timeout); a slower ERP call is cancelled and the
# worker cannot know whether an invoice was made: the outcome is unknown.
# Every hc_* call is its own statement in autocommit mode, as the lock and
# attempt functions require.
# Each owner is the name of one process or one delivery, never a role's
# (doc/locking.md says why); the output names them by role.
set -uo pipefail
db=${1:?usage: erp-story.sh DATABASE}
pay=PAY-7781
sql() { psql -X -qAt -v ON_ERROR_STOP=1 -d "$db" -c "$1"; }
# try SQL: run SQL, print its result or its error message
try() { psql -X -qAt -v VERBOSITY=terse -d "$db" -c "$1" 2>&1 | sed 's/^psql:[^ ]* //'; }
say() { echo "$@"; }

# The ERP (test/demo/erp.sql, which the Python package's story loads too).
psql -X -q -v ON_ERROR_STOP=1 -d "$db" -f "$(dirname "$0")/erp.sql" >/dev/null

sql "INSERT INTO payments (id) VALUES ('$pay')"

# fenced OWNER TOKEN INVOICE: the shop records the invoice on its payment row in
# a transaction of its own that begins with hc_lock_check, so that the write
# commits only under the token that is current (doc/locking.md).
fenced() {
    try "BEGIN;
         SELECT hc_lock_check('$pay', '$1', $2);
         UPDATE payments SET invoice_no = '$3', fenced_by = $2 WHERE id = '$pay'
          RETURNING 'written: ' || invoice_no || ' under token ' || fenced_by;
         COMMIT;" | sed '/^$/d' | roles
}

# erp_call TAKES: the ERP call, with the client's 3 s timeout.
erp_call() {
    psql -X -qAt -v VERBOSITY=terse -d "$db" \
        -c "SET statement_timeout = '3s'" \
        -c "SELECT erp_create_invoice('$pay', '$1')" 2>&1 | sed 's/^psql:[^ ]* //'
}
# heartbeats OWNER TOKEN &: a heartbeat every half second until killed (the
# seed's setInterval), so that the lease outlives stale_after (2 s).
heartbeats() {
    while :; do
        sleep 0.5
        try "SELECT hc_lock_heartbeat('$pay', '$1', $2)" >/dev/null
    done
}
stop() { kill "$1"; wait "$1" 2>/dev/null; }
# owner ROLE: a new owner name.  The webhook's is its delivery's (an id made
# when the request arrived); the scheduler's its run's: host, pid and a
# random suffix.
hex() { od -An -N"$1" -tx1 /dev/urandom | tr -d ' \n'; }
owner() {
    case $1 in
    webhook) echo "webhook-$(hex 8)" ;;
    scheduler) echo "scheduler-${HOSTNAME:0:24}-$$-$(hex 4)" ;;
    esac
}
# roles: the race decides who is the winner; the output names roles only.
# (The owners of the later runs are named when they come.)
O2=-none- W2=-none-
roles() {
    sed "s/\"$W\"/\"<winner>\"/g; s/\"$O\"/\"<other>\"/g
         s/\"$O2\"/\"<other, next run>\"/g; s/\"$W2\"/\"<webhook, next delivery>\"/g"
}
marker="regexp_replace(marker, '^ATTEMPTED-.*-r([0-9]+)-t[0-9]+\$', 'ATTEMPTED-<owner>-r\\1-t<unix ms>')"
# begin OWNER TOKEN: hc_attempt_begin with a 30 s cooldown and a cap of 3.  The
# cooldown outlasts the steps from one attempt to the next begin (the ERP's 3 s
# and a few calls: up to 22 s measured on a heavily loaded machine), so that
# begin meets it however slow the machine.
begin() {
    try "SELECT status || ', attempt ' || attempt || coalesce(', ' || $marker, '')
           || coalesce(', external_ref ' || external_ref, '')
           FROM hc_attempt_begin('$pay', '$1', $2, '30 seconds', 3)"
}
# after_cooldown: sleep until the cooldown's end that the row states.
after_cooldown() {
    sql "SELECT pg_sleep(extract(epoch FROM last_attempt_at + cooldown - clock_timestamp()))
           FROM hc_attempts WHERE resource = '$pay'" >/dev/null
}
lease() { sql "SELECT coalesce(hc_lock_acquire('$pay', '$1', '2 seconds', $2)::text, 'NULL (busy)')"; }

say "== 1. The payment webhook and the inquiry scheduler race for $pay"
say "   each under a name of its own: webhook-<delivery id>, scheduler-<host>-<pid>-<random>"
declare -A name=([webhook]=$(owner webhook) [scheduler]=$(owner scheduler))
start=$(sql "SELECT extract(epoch FROM clock_timestamp()) + 1")
for who in webhook scheduler; do
    ( sql "SELECT pg_sleep($start - extract(epoch FROM clock_timestamp()))" >/dev/null
      lease "${name[$who]}" 0 >"/tmp/erp-story-$$-$who" ) &
done
wait
if [ "$(cat "/tmp/erp-story-$$-webhook")" = "1" ]; then winner=webhook other=scheduler; else winner=scheduler other=webhook; fi
W=${name[$winner]} O=${name[$other]}
say "   one of them (the winner) got token $(cat "/tmp/erp-story-$$-$winner"), the other: $(cat "/tmp/erp-story-$$-$other")"
rm -f "/tmp/erp-story-$$-webhook" "/tmp/erp-story-$$-scheduler"

say
say "== 2. The winner marks the point of no return and calls the slow ERP, heartbeating"
say "   begin: $(begin $W 1)"
heartbeats $W 1 & hb=$!
( sleep 2.5
  say "   2.5 s into the call (stale_after is 2 s) the other tries to take over: $(lease $O 0)" ) &
say "   the ERP call: $(erp_call '5 seconds')"
wait $!
say "   -> the client gave up after 3 s: did the ERP make the invoice? Unknown."
stop $hb
say "   release: $(try "SELECT hc_lock_release('$pay', '$W', 1)::text"); the marker stays:" \
    "$(sql "SELECT attempts || ' attempt(s), last ' || regexp_replace(last_marker, '^ATTEMPTED-.*-r([0-9]+)-t[0-9]+\$', 'ATTEMPTED-<owner>-r\\1-t<unix ms>') FROM hc_attempts WHERE resource = '$pay'")"

say
say "== 3. The other retries: first the cooldown, then a second attempt, again unknown"
say "   acquire: token $(lease $O 0)"
heartbeats $O 2 & hb=$!
say "   begin: $(begin $O 2)"
after_cooldown
say "   after the cooldown, begin: $(begin $O 2)"
say "   the ERP call: $(erp_call '5 seconds')"
stop $hb
say "   release: $(try "SELECT hc_lock_release('$pay', '$O', 2)::text")"

say
say "== 4. The winner's retry: a third attempt, unknown again; then the cap of 3 holds"
say "   acquire: token $(lease $W 5)"
heartbeats $W 3 & hb=$!
say "   begin: $(begin $W 3)"
after_cooldown
say "   after the cooldown, begin: $(begin $W 3)"
say "   the ERP call: $(erp_call '5 seconds')"
say "   begin: $(begin $W 3)"
stop $hb
say "   release: $(try "SELECT hc_lock_release('$pay', '$W', 3)::text")"
say "   what the operator sees in hc_attempt_status:"
sql "SELECT format('   %s: %s, %s attempts (cap %s), awaiting review: %s, external_ref: %s', resource, status, attempts,
                   max_attempts, awaiting_review, coalesce(external_ref, '-'))
       FROM hc_attempt_status WHERE resource = '$pay'"

say
say "== 5. The operator checks the ERP, finds no invoice for $pay, and resets"
say "   invoices for $pay in the ERP: $(sql "SELECT count(*) FROM erp_invoices WHERE payment_id = '$pay'")"
say "   reset: $(try "SELECT status || ', attempt ' || attempt FROM hc_attempt_reset('$pay', 'ops: ERP has no invoice for $pay, retry allowed')")"

say
say "== 6. The other's next run, under a name of its own: the ERP answers in time; the outcome is recorded"
O2=$(owner $other)
say "   acquire: token $(lease $O2 5)"
heartbeats $O2 4 & hb=$!
say "   begin: $(begin $O2 4)"
invoice=$(erp_call '1 second')
say "   the ERP call: $invoice"
say "   complete: $(try "SELECT status || ', external_ref ' || external_ref FROM hc_attempt_complete('$pay', '$O2', 4, '$invoice')")"
say "   the shop records it on the payment: $(fenced $O2 4 "$invoice")"
say "   the winner of step 4, its ERP call answered at last, writes with token 3: $(fenced $W 3 'INV-late')"
say "   the payment: $(sql "SELECT invoice_no || ', fenced by token ' || fenced_by FROM payments WHERE id = '$pay'")"
stop $hb
say "   release: $(try "SELECT hc_lock_release('$pay', '$O2', 4)::text")"

say
say "== 7. The payment gateway delivers its webhook once more, under a name of its own"
W2=$(owner webhook)
say "   acquire: token $(lease $W2 5)"
say "   begin: $(begin $W2 5) -> no ERP call"
say "   release: $(try "SELECT hc_lock_release('$pay', '$W2', 5)::text")"

say
say "== The end"
say "   invoices in the ERP for $pay: $(sql "SELECT count(*) || ' (' || string_agg(invoice_no, ', ') || ')' FROM erp_invoices WHERE payment_id = '$pay'")"
say "   hc_check(): $(sql "SELECT count(*) FROM hc_check()") violated invariant(s)"
say "   the ledger of $pay:"
sql "SELECT format('   %-8s %s', event, regexp_replace(detail, 'ATTEMPTED-.*-r([0-9]+)-t[0-9]+\"', 'ATTEMPTED-<owner>-r\\1-t<unix ms>\"'))
       FROM hc_ledger WHERE kind = 'resource' AND entity_id = '$pay' ORDER BY seq" | roles
