"""The seed's story of make run (test/demo/erp-story.sh), driven through the Python package: one
payment must make exactly one invoice in a slow ERP, however the webhook and the scheduler
race and whatever the network does.  It prints what test/demo/erp-story.expected says.

    python3 erp_story.py [APP_CONNINFO [OPS_CONNINFO]]

APP_CONNINFO: the workers' role (hc_grant_app); OPS_CONNINFO: the operator's (hc_grant_operator
or a superuser), who also creates the simulated ERP in public. Both default to libpq's
environment (PGHOST, PGDATABASE, ...). Run it in a database where PAY-7781 is new.

The ERP is simulated in the same database: public.erp_create_invoice() takes its time
(pg_sleep) and then writes an invoice. The worker's client gives up after 3 seconds
(statement_timeout): a slower call is cancelled, and the worker cannot know whether an
invoice was made. Each worker holds the lease with holdcommit.lease() (heartbeats on its own
connection while the ERP call blocks the worker's), and guards the ERP call with
attempt_begin / attempt_complete, which take the lease's fencing token; the shop records the
invoice on its payment row in lease.fenced(), a transaction that begins with hc_lock_check, so
that a worker whose token is old cannot write it.

Each owner is the name of one process or one delivery, never a role's (doc/locking.md says
why); the output names them by role.
"""
import os
import re
import secrets
import socket
import sys
import threading
import time
from datetime import timedelta

import psycopg

import holdcommit as hc

PAY = "PAY-7781"
STALE = timedelta(seconds=2)          # the lease's stale_after
BEAT = timedelta(seconds=0.5)         # a heartbeat every half second, as the seed's setInterval
COOLDOWN = timedelta(seconds=30)      # outlasts the steps to the next begin on a loaded machine
CAP = 3

app_dsn = sys.argv[1] if len(sys.argv) > 1 else ""
ops_dsn = sys.argv[2] if len(sys.argv) > 2 else app_dsn
app = psycopg.connect(app_dsn, autocommit=True)
ops = psycopg.connect(ops_dsn, autocommit=True)


def marker(m):
    return re.sub(r"^ATTEMPTED-.*-r([0-9]+)-t[0-9]+$", r"ATTEMPTED-<owner>-r\1-t<unix ms>", m)


def show(a: hc.Attempt) -> str:
    return ", ".join([a.status, f"attempt {a.attempt}"] + ([marker(a.marker)] if a.marker else [])
                     + ([f"external_ref {a.external_ref}"] if a.external_ref else []))


def begin(lease) -> hc.Attempt:
    return hc.attempt_begin(app, PAY, lease.owner, lease.token, COOLDOWN, CAP)


def erp_call(takes: str):
    """The ERP call with the client's 3 s timeout: (invoice or None, what to print)."""
    with psycopg.connect(app_dsn, autocommit=True) as erp:
        erp.execute("SET statement_timeout = '3s'")
        try:
            no = erp.execute("SELECT public.erp_create_invoice(%s, %s::interval)", [PAY, takes]).fetchone()[0]
            return no, no
        except psycopg.errors.QueryCanceled as e:
            return None, f"ERROR:  {e.diag.message_primary}"


def after_cooldown():
    """Sleep until the cooldown's end that the row states, by the server's clock."""
    left = app.execute("SELECT extract(epoch FROM last_attempt_at + cooldown - clock_timestamp())"
                       " FROM holdcommit.hc_attempts WHERE resource = %s", [PAY]).fetchone()[0]
    time.sleep(max(float(left), 0))


def owner(role):
    """A new owner name: the webhook's is its delivery's (an id made when the request arrived),
    the scheduler's its run's: host, pid and a random suffix."""
    if role == "webhook":
        return f"webhook-{secrets.token_hex(8)}"
    return f"scheduler-{socket.gethostname()[:24]}-{os.getpid()}-{secrets.token_hex(4)}"


def lease(owner, retries=0):
    return hc.lease(app_dsn, PAY, owner, ttl=STALE, heartbeat=BEAT, retries=retries)


def take_over(owner):
    """Another worker tries to take the lease: its token, or NULL (busy)."""
    try:
        with lease(owner) as held:
            return str(held.token)
    except hc.Busy:
        return "NULL (busy)"


def retry(held):
    """A retry under a new lease: begin is refused for the cooldown, allowed after it, and the
    ERP call goes out (and times out) again."""
    print(f"   acquire: token {held.token}")
    print(f"   begin: {show(begin(held))}")
    after_cooldown()
    print(f"   after the cooldown, begin: {show(begin(held))}")
    held.check()
    print(f"   the ERP call: {erp_call('5 seconds')[1]}")


def released(held):
    return "true" if held.released else "false"


def roles(text):
    """The owners' names as the roles they play (the race decides who is the winner)."""
    for who, role in [(W, "<winner>"), (O, "<other>"), (O2, "<other, next run>"), (W2, "<webhook, next delivery>")]:
        text = text.replace(f'"{who}"', f'"{role}"')
    return text


def record(conn, invoice, token):
    """The shop records the invoice on its payment row: what it says."""
    no, by = conn.execute("UPDATE public.payments SET invoice_no = %s, fenced_by = %s WHERE id = %s"
                          " RETURNING invoice_no, fenced_by", [invoice, token, PAY]).fetchone()
    return f"written: {no} under token {by}"


def late_write(owner, token, invoice):
    """A worker writes under a token that may be old: in a transaction that begins with
    hc_lock_check, as lease.fenced does."""
    try:
        with app.transaction():
            hc.lock_check(app, PAY, owner, token)
            return record(app, invoice, token)
    except hc.LeaseLost as e:
        return roles(f"ERROR:  {e.message}")


# The ERP of make run's story (test/demo/erp.sql); the workers' role may call it.
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "test", "demo", "erp.sql"),
          encoding="utf-8") as f:
    ops.execute(f.read())
me = app.execute("SELECT current_user").fetchone()[0]
ops.execute(f'GRANT SELECT, INSERT ON public.erp_invoices TO "{me}"')
ops.execute(f'GRANT USAGE ON SEQUENCE public.erp_invoice_seq TO "{me}"')
ops.execute(f'GRANT SELECT, UPDATE ON public.payments TO "{me}"')
ops.execute("INSERT INTO public.payments (id) VALUES (%s)", [PAY])
O2 = W2 = "-none-"                        # the owners of the later runs, named when they come

print(f"== 1. The payment webhook and the inquiry scheduler race for {PAY}")
print("   each under a name of its own: webhook-<delivery id>, scheduler-<host>-<pid>-<random>")
name = {"webhook": owner("webhook"), "scheduler": owner("scheduler")}
got, start = {}, threading.Barrier(2)


def race(who):
    with psycopg.connect(app_dsn, autocommit=True) as conn:
        start.wait()
        got[who] = hc.lock_acquire(conn, PAY, name[who], STALE)


racers = [threading.Thread(target=race, args=(who,)) for who in ("webhook", "scheduler")]
for t in racers:
    t.start()
for t in racers:
    t.join()
winner, other = ("webhook", "scheduler") if got["webhook"] else ("scheduler", "webhook")
print(f"   one of them (the winner) got token {got[winner].token}, the other: "
      f"{got[other].token if got[other] else 'NULL (busy)'}")
W, O = name[winner], name[other]

print()
print("== 2. The winner marks the point of no return and calls the slow ERP, heartbeating")
with lease(W) as held:                   # the winner's own live lease: the same token, 1
    print(f"   begin: {show(begin(held))}")
    rival = {}
    late = threading.Timer(2.5, lambda: rival.setdefault("answer", take_over(O)))
    late.start()
    held.check()                          # the lease is still ours: call out
    _, said = erp_call("5 seconds")
    late.join()
    print(f"   2.5 s into the call (stale_after is 2 s) the other tries to take over: {rival['answer']}")
    print(f"   the ERP call: {said}")
    print("   -> the client gave up after 3 s: did the ERP make the invoice? Unknown.")
attempts, last = app.execute("SELECT attempts, last_marker FROM holdcommit.hc_attempts WHERE resource = %s",
                             [PAY]).fetchone()
print(f"   release: {released(held)}; the marker stays: {attempts} attempt(s), last {marker(last)}")

print()
print("== 3. The other retries: first the cooldown, then a second attempt, again unknown")
with lease(O) as held:
    retry(held)
print(f"   release: {released(held)}")

print()
print("== 4. The winner's retry: a third attempt, unknown again; then the cap of 3 holds")
with lease(W, retries=5) as held:
    retry(held)
    print(f"   begin: {show(begin(held))}")
print(f"   release: {released(held)}")
print("   what the operator sees in hc_attempt_status:")
print(ops.execute("""SELECT format('   %%s: %%s, %%s attempts (cap %%s), awaiting review: %%s, external_ref: %%s',
                                   resource, status, attempts, max_attempts, awaiting_review,
                                   coalesce(external_ref, '-'))
                       FROM holdcommit.hc_attempt_status WHERE resource = %s""", [PAY]).fetchone()[0])

print()
print(f"== 5. The operator checks the ERP, finds no invoice for {PAY}, and resets")
count = ops.execute("SELECT count(*) FROM public.erp_invoices WHERE payment_id = %s", [PAY]).fetchone()[0]
print(f"   invoices for {PAY} in the ERP: {count}")
reset = hc.attempt_reset(ops, PAY, f"ops: ERP has no invoice for {PAY}, retry allowed")
print(f"   reset: {reset.status}, attempt {reset.attempt}")

print()
print("== 6. The other's next run, under a name of its own: the ERP answers in time; the outcome is recorded")
O2 = owner(other)
with lease(O2, retries=5) as held:
    print(f"   acquire: token {held.token}")
    a = begin(held)
    print(f"   begin: {show(a)}")
    if a.status == "PROCEED":
        held.check()
        invoice, said = erp_call("1 second")
        print(f"   the ERP call: {said}")
        done = hc.attempt_complete(app, PAY, held.owner, held.token, invoice)
        print(f"   complete: {done.status}, external_ref {done.external_ref}")
        with held.fenced(app):            # the write commits only under the current token
            print(f"   the shop records it on the payment: {record(app, invoice, held.token)}")
        print("   the winner of step 4, its ERP call answered at last, writes with token 3: "
              + late_write(W, 3, "INV-late"))
        print("   the payment: {}".format(ops.execute(
            "SELECT invoice_no || ', fenced by token ' || fenced_by FROM public.payments WHERE id = %s",
            [PAY]).fetchone()[0]))
print(f"   release: {released(held)}")

print()
print("== 7. The payment gateway delivers its webhook once more, under a name of its own")
W2 = owner("webhook")
with lease(W2, retries=5) as held:
    print(f"   acquire: token {held.token}")
    a = begin(held)
    print(f"   begin: {show(a)}" + (" -> no ERP call" if a.status == "COMPLETED" else ""))
print(f"   release: {released(held)}")

print()
print("== The end")
print("   invoices in the ERP for {}: {}".format(PAY, ops.execute(
    "SELECT count(*) || ' (' || string_agg(invoice_no, ', ') || ')' FROM public.erp_invoices"
    " WHERE payment_id = %s", [PAY]).fetchone()[0]))
print(f"   hc_check(): {len(hc.check(ops))} violated invariant(s)")
print(f"   the ledger of {PAY}:")
for event, detail in ops.execute("SELECT event, detail FROM holdcommit.hc_ledger"
                                 " WHERE kind = 'resource' AND entity_id = %s ORDER BY seq", [PAY]):
    detail = re.sub(r'ATTEMPTED-.*-r([0-9]+)-t[0-9]+"', r'ATTEMPTED-<owner>-r\1-t<unix ms>"', detail)
    print(f"   {event:<8} {roles(detail)}")
