#!/usr/bin/env python3
"""The clients, the killer and the verifier of test/load/crash.sh.

    crash.py client --dir D --epoch E --client C [--mix all|lease]
        One client of the mixed load: it says it is connected by creating
        D/eE-cC.ready, and goes on until D/eE.stop exists and it has been
        answered for a second by the recovered server ("abort" in the file:
        at once).  The calls: holds, commits, releases, extends, reserves,
        multi-item orders, finalizes, unreserves, stock adjustments, sweeps,
        lease cycles (acquire, heartbeat, attempt, complete, release).  It
        appends to D/eE-cC.jsonl, on the client side, a line before each call
        ("sent": the call and its arguments) and one after it: "ok" with the
        result exactly as the client saw it (every column as text), "err"
        with the SQLSTATE the server answered, or "lost" when the answer
        never came (the connection broke, or 08006: the lease worker ended
        before it answered).  A lost connection is reopened and the load goes
        on; the calls on a connection to the recovered server have "g": 1.
    crash.py kill --what backend|worker|sweeper
        kill -9 one client backend running a holdcommit call, one holdcommit
        worker running a lease or attempt call, or one holdcommit sweeper run
        (they last milliseconds: watched every few ms); prints its pid.
    crash.py tail --dir D --epoch E
        With synchronous_commit = off: four holds, a lease and an attempt, three
        holds (more if the last one's WAL is written out already), then kill -9
        of its own backend at once; prints its pid and the WAL positions written
        and inserted.
    crash.py verify --dir D --epoch E [--expect-loss PREFIX]
        After crash E has been recovered, with the clients stopped: TAP lines.
        Every call acknowledged since the previous crash is still there: a
        keyed call replays with its key exactly as recorded, a commit,
        release, finalize or unreserve answers again as recorded (replayed),
        an extend's expiry, a stock adjustment, a token, a heartbeat, a
        marker, a completion are in the tables and the ledger.  Every call
        that was not acknowledged is retried with its key (its arguments):
        success or an SQLSTATE its contract allows, and a second retry
        replays the first.  Over every call of the run: a fencing token is
        never handed to two owners, and a lease taken after a crash has a
        higher token than every one acknowledged before it; an attempt number
        never has two markers, and an attempt made after a crash counts on
        from every one acknowledged before it.  With --expect-loss, the
        acknowledged holds whose key starts with PREFIX may be lost (they
        were made with synchronous_commit = off): counted, not failed.

Connects with libpq's environment (PGHOST, PGPORT, PGUSER) to the database
hc_crash (HC_CRASH_DB), holdcommit in its own schema, calls schema-qualified.
"""
import argparse
import glob
import json
import os
import random
import signal
import sys
import time

import psycopg

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
from tap import check  # noqa: E402  (test/harness/tap.py)

DB = os.environ.get("HC_CRASH_DB", "hc_crash")
ASSETS = 3000
PRODUCTS = ["P-1", "P-2", "P-3", "P-4", "P-5", "P-6"]   # P-6 is scarce (crash.sh)
SHARED = ["S-1", "S-2", "S-3", "S-4"]                  # leases the clients compete for
STALE = "60 seconds"                                    # no takeover during a run: the
                                                        # verifier releases what a crash left

HOLD_COLS = "reservation_id, asset_id, buyer_id, status, expires_at::text, created_at::text, replayed::text"
STOCK_COLS = "reservation_id, buyer_id, status, items::text, expires_at::text, created_at::text, replayed::text"
ATTEMPT_COLS = "resource, status, attempt::text, marker, external_ref, last_attempt_at::text"
SQL = {
    "hold": f"SELECT {HOLD_COLS} FROM holdcommit.hc_hold(%s, %s, %s, %s::interval)",
    "commit": f"SELECT {HOLD_COLS} FROM holdcommit.hc_commit(%s)",
    "release": f"SELECT {HOLD_COLS} FROM holdcommit.hc_release(%s)",
    "extend": f"SELECT {HOLD_COLS} FROM holdcommit.hc_extend(%s, %s::interval)",
    "reserve": f"SELECT {STOCK_COLS} FROM holdcommit.hc_reserve(%s, %s::int, %s, %s, %s::interval)",
    "items": f"SELECT {STOCK_COLS} FROM holdcommit.hc_reserve_items(%s::jsonb, %s, %s, %s::interval)",
    "finalize": f"SELECT {STOCK_COLS} FROM holdcommit.hc_finalize(%s)",
    "unreserve": f"SELECT {STOCK_COLS} FROM holdcommit.hc_unreserve(%s)",
    "adjust": "SELECT product_id, stock::text, reserved::text FROM holdcommit.hc_stock_adjust(%s, %s::int, %s)",
    "sweep": "SELECT expired_holds::text, expired_reservations::text, purged_keys::text FROM holdcommit.hc_sweep()",
    "acquire": "SELECT holdcommit.hc_lock_acquire(%s, %s, %s::interval, 0)::text",
    "heartbeat": "SELECT holdcommit.hc_lock_heartbeat(%s, %s, %s::bigint)::text",
    "begin": f"SELECT {ATTEMPT_COLS} FROM holdcommit.hc_attempt_begin(%s, %s, %s::bigint, %s::interval, %s::int, %s)",
    "complete": f"SELECT {ATTEMPT_COLS} FROM holdcommit.hc_attempt_complete(%s, %s, %s::bigint, %s)",
    "unlock": "SELECT holdcommit.hc_lock_release(%s, %s, %s::bigint)::text",
}
# The SQLSTATEs that each call may answer with in this load, by its contract
# (doc/reference.md, doc/locking.md).  Anything else is a failure.
CONTRACT = {
    "hold": {"RS001"},
    "commit": {"RS003", "RS004"},
    "release": {"RS004"},
    "extend": {"RS003", "RS004"},
    "reserve": {"RS002"},
    "items": {"RS002"},
    "finalize": {"RS003", "RS004"},
    "unreserve": {"RS004"},
    "adjust": {"22023"},
    "sweep": set(),
    "acquire": set(),
    "heartbeat": {"RS007"},
    "begin": {"RS007"},
    "complete": {"RS007", "RS004"},
    "unlock": set(),
}
KEYED = {"hold", "reserve", "items"}


def connect(timeout=3):
    return psycopg.connect(dbname=DB, autocommit=True, connect_timeout=timeout,
                           options="-c statement_timeout=30s")


def after_crash(conn):
    """Is this a connection to the server recovered from this scenario's crash?
    Crash recovery empties every unlogged table, crash_mark among them; the
    driver writes its row again before each scenario.  (Counting reconnections
    is not enough: a client may reconnect to the dying server before the
    postmaster has noticed the crash.)"""
    return conn.execute("SELECT count(*) = 0 FROM public.crash_mark").fetchone()[0]


def unanswered(err):
    """No answer from the server: the call may or may not have committed."""
    state = getattr(err, "sqlstate", None)
    return state is None or state.startswith("08") or state in ("57P01", "57P02", "57P03")


class Recorder:
    def __init__(self, path, epoch, client):
        self.f = open(path, "a", buffering=1)
        self.epoch, self.client, self.n, self.gen = epoch, client, 0, 0

    def call(self, conn, op, args):
        """Make the call; return ("ok", row), ("err", sqlstate) or ("lost", None)."""
        self.n += 1
        base = {"e": self.epoch, "c": self.client, "n": self.n, "g": self.gen}
        self.f.write(json.dumps(dict(base, t="sent", op=op, a=args)) + "\n")
        try:
            row = conn.execute(SQL[op], args).fetchone()
        except psycopg.Error as err:
            if unanswered(err):
                self.f.write(json.dumps(dict(base, t="lost", m=str(err).strip()[:200])) + "\n")
                return "lost", None
            self.f.write(json.dumps(dict(base, t="err", s=err.sqlstate, m=str(err).strip()[:200])) + "\n")
            return "err", err.sqlstate
        row = list(row)
        self.f.write(json.dumps(dict(base, t="ok", r=row)) + "\n")
        return "ok", row


def ttl(rnd):
    return f"{rnd.randint(300, 1500)} milliseconds"


def run_client(opts):
    rnd = random.Random(f"{opts.epoch}-{opts.client}-{os.getpid()}")
    rec = Recorder(os.path.join(opts.dir, f"e{opts.epoch}-c{opts.client}.jsonl"), opts.epoch, opts.client)
    tag = f"e{opts.epoch}c{opts.client}"
    conn = connect()
    if after_crash(conn):
        print("crash_mark is empty before the crash", file=sys.stderr)
        return 2
    # The driver crashes the server once every client is connected, and asks
    # them to stop once it has recovered: each goes on until it has been
    # answered for a second by the recovered server.
    stop_file = os.path.join(opts.dir, f"e{opts.epoch}.stop")
    back_since = None
    stop_seen = None
    open(os.path.join(opts.dir, f"e{opts.epoch}-c{opts.client}.ready"), "w").close()
    holds, orders, keyed = [], [], []     # acknowledged, for the calls that follow
    cycle = None                          # the lease cycle under way: [kind, res, owner, token, steps]
    seq = 0

    def next_lease_step():
        nonlocal cycle, seq
        if cycle is None:
            seq += 1
            owner = f"{tag}-o{seq}"
            if rnd.random() < 0.7:
                cycle = ["S", rnd.choice(SHARED), owner, None, ["heartbeat", "begin", "heartbeat", "unlock"]]
            else:
                steps = ["begin", "complete", "unlock"] if rnd.random() < 0.5 else ["begin", "unlock"]
                cycle = ["J", f"J-{tag}-{seq}", owner, None, steps]
            return "acquire", [cycle[1], owner, STALE]
        kind, res, owner, token, steps = cycle
        step = steps.pop(0)
        if step == "begin":
            # Each begin its own request key; a retry presents it again.
            return "begin", ([res, owner, token, "0 seconds", 1000000, f"{owner}-b{len(steps)}"] if kind == "S"
                             else [res, owner, token, "1 hour", 3, f"{owner}-b{len(steps)}"])
        if step == "complete":
            return "complete", [res, owner, token, f"INV-{owner}"]
        return step, [res, owner, token]

    while True:
        if stop_seen is None and os.path.exists(stop_file):
            stop_seen = time.time()
            with open(stop_file) as f:
                if f.read().strip() == "abort":
                    return 0
        if stop_seen is not None and back_since is not None and time.time() - back_since >= 1.0:
            return 0
        if stop_seen is not None and time.time() - stop_seen > 60:
            print(f"client {tag}: never answered after a crash", file=sys.stderr)
            return 3
        p = rnd.random()
        if opts.mix == "lease":
            p = 0.9 if p < 0.97 else 0.74
        if p < 0.16:
            seq += 1
            op, args = "hold", [f"A-{rnd.randint(1, ASSETS):04d}", f"buyer-{tag}", f"h-{tag}-{seq}", ttl(rnd)]
        elif p < 0.19 and keyed:
            op, args = rnd.choice(keyed)           # a retry of an acknowledged keyed call
        elif p < 0.35 and holds:
            h = rnd.choice(holds)
            q = rnd.random()
            if q < 0.5:
                op, args = "commit", [h]
            elif q < 0.8:
                op, args = "release", [h]
            else:
                op, args = "extend", [h, ttl(rnd)]
        elif p < 0.43:
            seq += 1
            op, args = "reserve", [rnd.choice(PRODUCTS), rnd.randint(1, 3), f"buyer-{tag}", f"r-{tag}-{seq}", ttl(rnd)]
        elif p < 0.51:
            seq += 1
            lines = [{"product_id": pid, "qty": rnd.randint(1, 3)} for pid in rnd.sample(PRODUCTS, rnd.randint(1, 3))]
            op, args = "items", [json.dumps(lines), f"buyer-{tag}", f"i-{tag}-{seq}", ttl(rnd)]
        elif p < 0.62 and orders:
            op, args = ("finalize" if rnd.random() < 0.6 else "unreserve"), [rnd.choice(orders)]
        elif p < 0.63:
            seq += 1
            op, args = "adjust", [rnd.choice(PRODUCTS), rnd.choice([-2, -1, 1, 2, 5]), f"adj-{tag}-{seq}"]
        elif p < 0.65 or (p < 0.75 and opts.mix == "lease"):
            op, args = "sweep", []
        else:
            op, args = next_lease_step()
        outcome, row = rec.call(conn, op, args)

        if outcome == "ok":
            if op in KEYED and row[-1] == "false":
                keyed = (keyed + [(op, args)])[-10:]
            if op == "hold" and row[-1] == "false":
                holds = (holds + [row[0]])[-8:]
            elif op in ("commit", "release") and row[0] in holds:
                holds.remove(row[0])
            elif op in ("reserve", "items") and row[-1] == "false":
                orders = (orders + [row[0]])[-8:]
            elif op in ("finalize", "unreserve") and row[0] in orders:
                orders.remove(row[0])
            elif op == "acquire":
                if row[0] is None:
                    cycle = None                   # busy: try another time
                else:
                    cycle[3] = int(row[0])
            elif op == "begin" and row[1] != "PROCEED":
                cycle[4] = ["unlock"]
        elif outcome == "err":
            if op in ("commit", "release", "extend") and args[0] in holds:
                holds.remove(args[0])
            elif op in ("finalize", "unreserve") and args[0] in orders:
                orders.remove(args[0])
            elif cycle is not None and op in ("heartbeat", "begin", "complete"):
                cycle[4] = ["unlock"]
        else:
            # The answer is lost: what the call did is for the verifier to find
            # out.  This client forgets its lease and goes on with new work.
            cycle = None
            if conn.broken or conn.closed:
                conn = None
                give_up = time.time() + 90
                while conn is None and time.time() < give_up:
                    try:
                        conn = connect()
                        rec.gen = 1 if after_crash(conn) else 0
                    except psycopg.Error:
                        conn = None
                        time.sleep(0.05)
                if conn is None:
                    print(f"client {tag}: the server did not come back", file=sys.stderr)
                    return 3
        if outcome == "ok" and rec.gen and back_since is None:
            back_since = time.time()
        if cycle is not None and not cycle[4] and outcome != "lost":
            cycle = None
        time.sleep(rnd.uniform(0, 0.004))
    return 0


def run_kill(opts):
    """kill -9 one process of the kind asked for, found in pg_stat_activity."""
    if opts.what == "backend":
        where = ("backend_type = 'client backend' AND datname = %s AND state = 'active' "
                 "AND query LIKE '%%holdcommit.hc\\_%%' AND pid <> pg_backend_pid()")
        args = [DB]
        title = DB
    elif opts.what == "worker":
        where = "backend_type = 'holdcommit worker' AND state = 'active'"
        args = []
        title = "holdcommit worker"
    else:
        where = "backend_type = 'holdcommit sweeper'"
        args = []
        title = "holdcommit sweeper"
    conn = psycopg.connect(dbname="postgres", autocommit=True)
    until = time.time() + 20
    polls = 0
    while time.time() < until:
        polls += 1
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(f"SELECT pid, coalesce(query, '') FROM pg_stat_activity WHERE {where} "
                           "ORDER BY random() LIMIT 1", args).fetchone()
        if row:
            pid, query = row
            try:
                # The process is still the one pg_stat_activity named (it may have
                # just ended: a sweeper run lasts milliseconds).
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmdline = f.read().decode(errors="replace")
                if title in cmdline:
                    os.kill(pid, signal.SIGKILL)
                    print(pid, query.split("FROM")[-1].strip()[:60].replace("\n", " "))
                    return 0
            except (FileNotFoundError, ProcessLookupError):
                pass
        time.sleep(0.002)
    seen = conn.execute("SELECT string_agg(format('%s %s %s', backend_type, datname, state), ', ') "
                        "FROM pg_stat_activity").fetchone()[0]
    print(f"no {opts.what} found in {polls} looks; now: {seen}")
    return 1


def run_tail(opts):
    """Acknowledged calls with synchronous_commit = off, then a crash at once."""
    rec = Recorder(os.path.join(opts.dir, f"e{opts.epoch}-ctail.jsonl"), opts.epoch, "tail")
    conn = connect()
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    state = conn.execute("SHOW synchronous_commit").fetchone()[0]
    if state != "off":
        print(f"synchronous_commit is {state}", file=sys.stderr)
        return 1
    assets = [r[0] for r in conn.execute(
        "SELECT id FROM holdcommit.hc_assets WHERE status = 'AVAILABLE' ORDER BY id DESC LIMIT 14")]
    for i in range(4):
        if rec.call(conn, "hold", [assets[i], "buyer-tail", f"t{opts.epoch}-before-{i}", "10 minutes"])[0] != "ok":
            return 1
    res = f"T-{opts.epoch}"
    outcome, token = rec.call(conn, "acquire", [res, "tail-owner", STALE])
    if outcome != "ok" or token[0] is None:
        return 1
    if rec.call(conn, "begin", [res, "tail-owner", int(token[0]), "1 hour", 3, "tail-begin"])[0] != "ok":
        return 1
    # Three holds, and more until the WAL of the last one is not written out
    # yet (its commit record ending exactly on a page boundary would have let
    # the WAL writer write the whole page).  Reading the positions writes nothing.
    for i in range(10):
        if rec.call(conn, "hold", [assets[4 + i], "buyer-tail", f"t{opts.epoch}-after-{i}", "10 minutes"])[0] != "ok":
            return 1
        written, inserted = conn.execute(
            "SELECT pg_current_wal_lsn()::text, pg_current_wal_insert_lsn()::text").fetchone()
        if i >= 2 and written != inserted:
            break
    os.kill(pid, signal.SIGKILL)
    print(pid, written, inserted)
    return 0


##############################################################################
# verify
##############################################################################

def load_calls(directory):
    """Every call of the run: (epoch, client, n) -> the call, with its outcome."""
    calls = {}
    for path in sorted(glob.glob(os.path.join(directory, "e*-c*.jsonl"))):
        with open(path) as f:
            for line in f:
                r = json.loads(line)
                k = (r["e"], r["c"], r["n"])
                if r["t"] == "sent":
                    calls[k] = {"e": r["e"], "c": r["c"], "n": r["n"], "g": r["g"], "op": r["op"],
                                "a": r["a"], "t": None, "replay": r.get("replay", False)}
                else:
                    calls[k].update(t=r["t"], r=r.get("r"), s=r.get("s"), m=r.get("m"))
    for c in calls.values():
        if c["t"] is None:
            c["t"] = "lost"           # sent, never answered
        # the crashes this call came after: crash E ends the generation 0 of epoch E
        c["era"] = c["e"] - 1 + (1 if c["g"] > 0 else 0)
    return calls


class Verifier:
    def __init__(self, opts):
        self.opts = opts
        self.k = opts.epoch
        self.conn = connect(timeout=10)
        self.out = open(os.path.join(opts.dir, f"e{self.k}-cverify.jsonl"), "a", buffering=1)
        self.n = 0
        self.calls = []

    def q(self, sql, args=None):
        return self.conn.execute(sql, args).fetchall()

    def call(self, op, args, replay=False):
        """A call of the verifier, recorded like a client's (era: after crash k).
        A replay of an acknowledged call is not checked again after the next
        crash: it changed nothing."""
        self.n += 1
        base = {"e": self.k, "c": "verify", "n": self.n, "g": 1, "replay": replay}
        self.out.write(json.dumps(dict(base, t="sent", op=op, a=args)) + "\n")
        try:
            row = list(self.conn.execute(SQL[op], args).fetchone())
        except psycopg.Error as err:
            self.out.write(json.dumps(dict(base, t="err", s=err.sqlstate, m=str(err).strip()[:200])) + "\n")
            return "err", err.sqlstate
        self.out.write(json.dumps(dict(base, t="ok", r=row)) + "\n")
        if replay:
            self.calls.append({"c": "verify", "op": op})
        return "ok", row


def same_but_replayed(first, again):
    """A replay: the same row, with replayed = true."""
    return again[:-1] == first[:-1] and again[-1] == "true"


def went_back(first):
    """first: {(resource, who): (era, number)}, a token or attempt number and
    the crash era it was first acknowledged in.  The ones that are not above
    every number of the same resource acknowledged in an earlier era."""
    by_res = {}
    for (res, who), (era, n) in first.items():
        by_res.setdefault(res, []).append((era, n, who))
    back = []
    for res, lst in by_res.items():
        for era, n, who in lst:
            before = [m for e, m, _ in lst if e < era]
            if before and n <= max(before):
                back.append((res, who, era, n, max(before)))
    return back


def numbers_kept(label, v, what, noun, given, first, stored_sql, promises):
    """The three promises of a fencing token and of an attempt number, checked
    alike.  given: {(resource, number): {whom it was given to}}; first: as
    went_back takes it; stored_sql: each resource and its number in its table."""
    twice = sorted(f"{r} {noun} {n}: {sorted(w)}" for (r, n), w in given.items() if len(w) > 1)
    check(f"{label}: {what}: {promises[0]}", twice[:3], [])
    check(f"{label}: {what}: {promises[1]}", went_back(first)[:3], [])
    stored = dict(v.q(stored_sql))
    below = [(r, n, stored.get(r)) for (r, n) in given if stored.get(r) is None or stored[r] < n]
    check(f"{label}: {what}: {promises[2]}", below[:3], [])


def run_verify(opts):
    v = Verifier(opts)
    k = v.k
    label = opts.label
    calls = load_calls(opts.dir)
    # What crash k may have taken back: the calls acknowledged since crash k - 1
    # (the verifier's replays aside, which only read what was there), and
    # the calls whose answer crash k took.
    mine = [c for c in calls.values() if c["era"] == k - 1 and not c.get("replay")]
    acked = [c for c in mine if c["t"] == "ok"]
    unacked = [c for c in mine if c["t"] == "lost"]
    loss_prefix = opts.expect_loss
    expected_lost = [c for c in acked if loss_prefix and c["op"] == "hold" and c["a"][2].startswith(loss_prefix)]
    acked = [c for c in acked if c not in expected_lost]
    ops = {}
    for c in acked:
        ops[c["op"]] = ops.get(c["op"], 0) + 1
    started = time.time()
    own = [c for c in calls.values() if c["e"] == k and c["c"] != "verify"]
    # An error needs no crash to be judged: this scenario's, before and after its crash.
    answered_err = [c for c in own if c["t"] == "err"]
    print(f"# {label}: the clients' calls: {sum(c['t'] == 'ok' and c['g'] == 0 for c in own)} acknowledged before "
          f"the crash, {sum(c['t'] == 'ok' and c['g'] > 0 for c in own)} after it, "
          f"{sum(c['t'] == 'err' for c in own)} answered with an error, {sum(c['t'] == 'lost' for c in own)} not acknowledged")
    print(f"# {label}: to check, acknowledged since the previous crash: {len(acked)} calls ("
          + ", ".join(f"{o} {n}" for o, n in sorted(ops.items())) + ")")
    clients = {c["c"] for c in own if c["c"] != "tail"}
    if opts.mix:
        # Nothing below holds for want of calls: every kind was acknowledged before the crash.
        kinds = set(SQL) if opts.mix == "all" else {"acquire", "heartbeat", "begin", "complete", "unlock", "sweep"}
        check(f"{label}: the clients' calls acknowledged before the crash are of every kind",
              sorted(kinds - {c["op"] for c in own if c["t"] == "ok" and c["g"] == 0}), [])
    if clients:
        back = {c["c"] for c in own if c["t"] == "ok" and c["g"] > 0}
        check(f"{label}: each of the {len(clients)} clients reconnected after the crash and was answered again",
              sorted(clients - back), [])

    # Only the SQLSTATEs each call's contract allows.
    bad = [(c["op"], c["s"]) for c in answered_err if c["s"] not in CONTRACT[c["op"]]]
    check(f"{label}: the calls answered with an error gave only their contract's SQLSTATEs", bad[:5], [])

    # hc_check() with the clients stopped.
    check(f"{label}: hc_check() is empty after the recovery, the clients stopped",
          v.q("SELECT invariant, subject, detail FROM holdcommit.hc_check() LIMIT 5"), [])

    ##########################################################################
    # acknowledged calls survived: replay or find each
    ##########################################################################
    wrong = {}

    def fail(what, c, got):
        wrong.setdefault(what, []).append((c["op"], c["a"], c.get("r"), got))

    # keyed calls: the same key and arguments replay exactly what was acknowledged
    for c in acked:
        op = c["op"]
        if op in KEYED:
            outcome, row = v.call(op, c["a"], replay=True)
            if outcome != "ok" or not same_but_replayed(c["r"], row):
                fail("keyed", c, row)
        elif op in ("commit", "release", "finalize", "unreserve"):
            # the transition is there: the same call answers with the same row, replayed
            outcome, row = v.call(op, c["a"], replay=True)
            if outcome != "ok" or not same_but_replayed(c["r"], row):
                fail("transition", c, row)
        elif op == "extend":
            got = v.q("SELECT expires_at::text, expires_at >= %s::timestamptz FROM holdcommit.hc_reservations WHERE id = %s",
                      [c["r"][4], c["a"][0]])
            if not got or got[0][1] is not True:
                fail("extend", c, got)
        elif op == "adjust":
            got = v.q("SELECT stock_delta FROM holdcommit.hc_ledger WHERE kind = 'product' AND entity_id = %s "
                      "AND event = 'stock_adjust' AND detail = %s", [c["a"][0], c["a"][2]])
            if got != [(c["a"][1],)]:
                fail("adjust", c, got)
    check(f"{label}: every acknowledged hold, reserve and order replays with its key exactly as acknowledged",
          len(wrong.get("keyed", [])), 0)
    check(f"{label}: every acknowledged commit, release, finalize and unreserve answers again as acknowledged (replayed)",
          len(wrong.get("transition", [])), 0)
    check(f"{label}: every acknowledged extend kept its expiry, every acknowledged stock adjustment is in the ledger once",
          len(wrong.get("extend", [])) + len(wrong.get("adjust", [])), 0)

    # what the state tables say of them
    sold = [c for c in acked if c["op"] == "commit"]
    got = v.q("""SELECT count(*) FROM holdcommit.hc_reservations r JOIN holdcommit.hc_assets a ON a.id = r.asset_id
                  WHERE r.id = ANY(%s) AND r.status = 'COMMITTED' AND a.status = 'SOLD' AND a.current_reservation_id = r.id""",
              [[c["a"][0] for c in sold]])[0][0]
    released = [c for c in acked if c["op"] == "release"]
    got2 = v.q("""SELECT count(*) FROM holdcommit.hc_reservations r, unnest(%s::text[], %s::text[]) x(id, status)
                   WHERE r.id = x.id AND r.status = x.status""",
               [[c["a"][0] for c in released], [c["r"][3] for c in released]])[0][0]
    check(f"{label}: every acknowledged commit's asset is still SOLD to it, every released hold still so",
          (got, got2), (len({c["a"][0] for c in sold}), len(released)))
    fin = [c for c in acked if c["op"] in ("finalize", "unreserve")]
    got = v.q("""SELECT count(*) FROM holdcommit.hc_stock_reservations r, unnest(%s::text[], %s::text[]) x(id, status)
                  WHERE r.id = x.id AND r.status = x.status
                    AND NOT EXISTS (SELECT FROM holdcommit.hc_stock_reservation_lines l
                                     WHERE l.reservation_id = r.id AND l.status <> x.status)""",
              [[c["a"][0] for c in fin], [c["r"][2] for c in fin]])[0][0]
    check(f"{label}: every acknowledged finalize and unreserve left its order and its lines so", got, len(fin))

    # a keyed call that was answered with an error stored nothing
    keys = [c["a"][2 if c["op"] != "reserve" else 3] for c in answered_err if c["op"] in KEYED]
    check(f"{label}: a keyed call answered with an error stored no key",
          v.q("SELECT count(*) FROM holdcommit.hc_idempotency_keys WHERE key = ANY(%s)", [keys])[0][0], 0)

    # leases and attempts: every token, marker and outcome acknowledged is
    # recorded (one join of each kind with the ledger)
    def missing(events, key, rows):
        """The rows (resource, detail key 1, detail key 2) without exactly one
        ledger row of those events."""
        return v.q(f"""WITH l AS (SELECT entity_id AS res, detail::jsonb ->> '{key[0]}' AS k1,
                                         detail::jsonb ->> '{key[1]}' AS k2, count(*) AS n
                                    FROM holdcommit.hc_ledger
                                   WHERE kind = 'resource' AND event = ANY(%s) GROUP BY 1, 2, 3)
                       SELECT x.res, x.k1, x.k2, l.n FROM unnest(%s::text[], %s::text[], %s::text[]) x(res, k1, k2)
                         LEFT JOIN l USING (res, k1, k2) WHERE l.n IS DISTINCT FROM 1 LIMIT 3""",
                   [events] + [list(col) for col in zip(*rows)] if rows else [events, [], [], []])

    lease_wrong = []
    lease_wrong += missing(["acquire", "takeover"], ("owner", "token"),
                           [(c["a"][0], c["a"][1], c["r"][0]) for c in acked
                            if c["op"] == "acquire" and c["r"][0] is not None])
    lease_wrong += missing(["attempt"], ("marker", "attempt"),
                           [(c["a"][0], c["r"][3], c["r"][2]) for c in acked
                            if c["op"] == "begin" and c["r"][1] == "PROCEED"])
    lease_wrong += missing(["release"], ("owner", "token"),
                           [(c["a"][0], c["a"][1], str(c["a"][2])) for c in acked
                            if c["op"] == "unlock" and c["r"][0] == "true"])
    beats = [c for c in acked if c["op"] == "heartbeat"]
    lease_wrong += v.q("""SELECT x.res, x.owner, x.beat FROM unnest(%s::text[], %s::text[], %s::bigint[], %s::timestamptz[])
                                 x(res, owner, token, beat)
                            JOIN holdcommit.hc_locks l ON l.resource = x.res AND l.owner = x.owner AND l.token = x.token
                           WHERE l.heartbeat_at < x.beat LIMIT 3""",
                       [[c["a"][0] for c in beats], [c["a"][1] for c in beats], [c["a"][2] for c in beats],
                        [c["r"][0] for c in beats]])
    for c in acked:
        if c["op"] == "complete":
            outcome, row = v.call("complete", c["a"], replay=True)
            if outcome != "ok" or row != c["r"]:
                lease_wrong.append(("complete", c["a"], c["r"], row))
    check(f"{label}: every acknowledged token, heartbeat, attempt marker, completion and release is recorded",
          lease_wrong[:3], [])
    # replays of the leases still held and of their attempts (1 hour cooldown)
    replay_wrong = []
    holders = {res: (owner, str(token)) for res, owner, token in
               v.q("SELECT resource, owner, token FROM holdcommit.hc_locks WHERE owner IS NOT NULL")}
    attempts = {res: (marker, status) for res, marker, status in
                v.q("SELECT resource, last_marker, status FROM holdcommit.hc_attempts")}
    for c in acked:
        op, a, r = c["op"], c["a"], c["r"]
        if op == "acquire" and r[0] is not None and holders.get(a[0]) == (a[1], r[0]):
            outcome, row = v.call("acquire", a, replay=True)
            if row != r:
                replay_wrong.append((op, a, r, row))
        elif (op == "begin" and a[3] == "1 hour" and r[1] == "PROCEED" and holders.get(a[0]) == (a[1], str(a[2]))
              and attempts.get(a[0]) == (r[3], "OPEN")):
            outcome, row = v.call("begin", a, replay=True)
            if row != r:
                replay_wrong.append((op, a, r, row))
    print(f"# {label}: {sum(c['c'] == 'verify' and c['op'] in ('acquire', 'begin') for c in v.calls)} "
          "leases and attempts still held replayed")
    check(f"{label}: a lease still held answers its owner's acquire with the acknowledged token, "
          "and an attempt its holder's begin with the acknowledged marker", replay_wrong[:3], [])
    for what in sorted(wrong):
        for w in wrong[what][:3]:
            print(f"#   {what}: {w}")

    if loss_prefix:
        lost = 0
        for c in expected_lost:
            outcome, row = v.call("hold", c["a"])
            if outcome == "ok" and not same_but_replayed(c["r"], row):
                lost += 1
                # A retry of a lost hold is a new hold, and then replays as usual.
                if row[-1] != "false" or not same_but_replayed(row, v.call("hold", c["a"])[1]):
                    lost = -1000
        print(f"# {label}: {lost} of the {len(expected_lost)} holds acknowledged after the last lease call were lost"
              " (each made again by its retry)")
        check(f"{label}: with synchronous_commit = off a crash takes back acknowledged holds, which the replay "
              "check sees (the holds after the last synchronous commit; a retry makes a new hold)",
              lost >= 1, True)

    ##########################################################################
    # calls not acknowledged: retried with their keys, twice
    ##########################################################################
    retry_bad, again_bad, committed, adjust_bad = [], [], 0, []

    def replays(op, a, first, second):
        """Does the second call answer as the contract says after the first?"""
        row = first[1]
        if op in KEYED or op in ("commit", "release", "finalize", "unreserve"):
            return second[0] == "ok" and same_but_replayed(row, second[1])
        if op == "acquire":
            return second == first            # the same owner again: the same token (or still busy)
        if op == "begin" and a[3] == "0 seconds":
            # Without a cooldown every begin is a new attempt (doc/locking.md).
            return second[0] == "ok" and second[1][1] == "PROCEED" and int(second[1][2]) == int(row[2]) + 1
        if op in ("begin", "complete"):
            return second == first            # within the cooldown / the same external_ref
        if op == "unlock":
            return second == ("ok", ["false"])
        return second[0] == "ok"              # heartbeat, extend, sweep: answered again, not replays

    for c in sorted(unacked, key=lambda c: (c["e"], str(c["c"]), c["n"])):
        op, a = c["op"], c["a"]
        if op == "adjust":
            # Not a replayable call: it was made at most once, and the stock
            # arithmetic below counts it from the ledger either way.
            n = v.q("SELECT count(*) FROM holdcommit.hc_ledger WHERE kind = 'product' AND entity_id = %s "
                    "AND event = 'stock_adjust' AND detail = %s", [a[0], a[2]])[0][0]
            if n > 1:
                adjust_bad.append((a, n))
            continue
        first = v.call(op, a)
        if first[0] == "err":
            # A call that failed stored nothing: the next one runs afresh.
            if first[1] not in CONTRACT[op]:
                retry_bad.append((op, a, first))
            second = v.call(op, a)
            if second[0] == "err":
                if second[1] not in CONTRACT[op]:
                    retry_bad.append((op, a, second))
                continue
            first = second
        elif op in KEYED and first[1][-1] == "true":
            committed += 1
        second = v.call(op, a)
        if not replays(op, a, first, second):
            again_bad.append((op, a, first, second))
    print(f"# {label}: {len(unacked)} calls not acknowledged, retried; {committed} of them keyed calls "
          "that had committed before the crash (the retry replayed them)")
    check(f"{label}: every call not acknowledged, retried with its key, succeeds or gives its contract's SQLSTATE",
          retry_bad[:3], [])
    check(f"{label}: and the next retry replays the one that succeeded (without a cooldown: the next attempt, as documented)",
          again_bad[:3], [])
    check(f"{label}: a stock adjustment not acknowledged was made at most once", adjust_bad, [])

    ##########################################################################
    # after the crash: tokens and attempts count on; the leases are freed
    ##########################################################################
    # Free what the crash left held (the clients forgot their leases), then
    # take each shared lease once more and make an attempt.
    for res, owner, token in v.q("SELECT resource, owner, token FROM holdcommit.hc_locks WHERE owner IS NOT NULL"):
        v.call("unlock", [res, owner, token])
    fresh_bad = []
    for res in SHARED + [r for (r,) in v.q("SELECT resource FROM holdcommit.hc_locks WHERE resource LIKE %s", ["T-%"])]:
        outcome, row = v.call("acquire", [res, f"verify-{k}-{res}", STALE])
        if outcome != "ok" or row[0] is None:
            fresh_bad.append((res, outcome, row))
            continue
        token = int(row[0])
        outcome, att = v.call("begin", [res, f"verify-{k}-{res}", token, "0 seconds", 1000000, f"verify-{k}-{res}"])
        if outcome != "ok" or att[1] not in ("PROCEED", "COMPLETED", "MANUAL_REVIEW"):
            fresh_bad.append((res, outcome, att))
        v.call("unlock", [res, f"verify-{k}-{res}", token])
    check(f"{label}: after the recovery each shared lease is taken again and an attempt made", fresh_bad, [])

    calls = load_calls(opts.dir)
    token_owners, eras = {}, {}
    for c in calls.values():
        if c["t"] == "ok" and c["op"] == "acquire" and c["r"][0] is not None:
            res, owner, token = c["a"][0], c["a"][1], int(c["r"][0])
            token_owners.setdefault((res, token), set()).add(owner)
            eras.setdefault((res, owner), []).append((c["era"], token))
    # an owner keeps its token (no takeover here: stale_after is 60 s)
    moved = sorted(f"{r} {o}: {sorted(set(t for _, t in lst))}" for (r, o), lst in eras.items()
                   if len(set(t for _, t in lst)) > 1)
    check(f"{label}: tokens: an owner that acquires again gets its token back, never another", moved[:3], [])
    numbers_kept(label, v, "tokens", "token", token_owners, {ro: min(lst) for ro, lst in eras.items()},
                 "SELECT resource, token FROM holdcommit.hc_locks",
                 ("no fencing token was ever handed to two owners",
                  "every lease taken after a crash has a higher token than every one acknowledged before it",
                  "hc_locks keeps for every lease a token at least as high as every one acknowledged"))

    markers, first_seen = {}, {}
    for c in calls.values():
        if c["t"] == "ok" and c["op"] in ("begin", "complete") and c["r"][3] is not None:
            res, n, marker = c["a"][0], int(c["r"][2]), c["r"][3]
            markers.setdefault((res, n), set()).add(marker)
            first_seen[(res, marker)] = min(first_seen.get((res, marker), (c["era"], n)), (c["era"], n))
    numbers_kept(label, v, "attempts", "attempt", markers, first_seen,
                 "SELECT resource, attempts FROM holdcommit.hc_attempts",
                 ("no attempt number was ever given two markers",
                  "every attempt made after a crash counts on from every one acknowledged before it",
                  "hc_attempts counts for every resource at least every attempt acknowledged"))

    ##########################################################################
    # the stock arithmetic, and hc_check() again
    ##########################################################################
    check(f"{label}: stock = stock set + adjustments in the ledger - finalized lines, per product",
          v.q("""SELECT i.product_id, i.stock, s.set_and_adjusted, f.finalized
                   FROM holdcommit.hc_inventory i
                   CROSS JOIN LATERAL (SELECT coalesce(sum(stock_delta), 0) AS set_and_adjusted FROM holdcommit.hc_ledger
                                        WHERE kind = 'product' AND entity_id = i.product_id
                                          AND event IN ('stock_set', 'stock_adjust')) s
                   CROSS JOIN LATERAL (SELECT coalesce(sum(qty), 0) AS finalized FROM holdcommit.hc_stock_reservation_lines
                                        WHERE product_id = i.product_id AND status = 'FINALIZED') f
                  WHERE i.stock <> s.set_and_adjusted - f.finalized"""), [])
    check(f"{label}: reserved = the RESERVED lines, and 0 <= reserved <= stock, per product",
          v.q("""SELECT i.product_id FROM holdcommit.hc_inventory i
                  WHERE NOT (0 <= i.reserved AND i.reserved <= i.stock)
                     OR i.reserved <> (SELECT coalesce(sum(qty), 0) FROM holdcommit.hc_stock_reservation_lines l
                                        WHERE l.product_id = i.product_id AND l.status = 'RESERVED')"""), [])
    check(f"{label}: hc_check() is empty after the replays and retries",
          v.q("SELECT invariant, subject, detail FROM holdcommit.hc_check() LIMIT 5"), [])
    print(f"# {label}: {v.n} calls of the verifier, {time.time() - started:.1f} s")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("command", choices=["client", "kill", "tail", "verify"])
    ap.add_argument("--dir")
    ap.add_argument("--epoch", type=int)
    ap.add_argument("--client")
    ap.add_argument("--mix", default="")
    ap.add_argument("--what")
    ap.add_argument("--label", default="")
    ap.add_argument("--expect-loss", default="")
    opts = ap.parse_args()
    return {"client": run_client, "kill": run_kill, "tail": run_tail, "verify": run_verify}[opts.command](opts)


if __name__ == "__main__":
    sys.exit(main())
