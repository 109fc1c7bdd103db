"""Bounded history under real parallel load (test/load/history.sh makes the database).

Eight workers hold, release, sell and let expire 2,000 assets, and reserve, finalize, unreserve
and let expire stock of four products (one spread over four parts, and orders of two
products), for SECONDS (default 60), each call with lock_timeout 2 s.  A fifth of their calls
are followed, within 50 ms, by the same call again with the same key: a retry.  Keys are
kept 3 s, history 5 s; the background sweeper runs every second, and an auditor calls
hc_sweep() and then hc_check() in a loop beside it.  Audited:

  - every retry within retention got exactly the answer of the first call (but `replayed`);
  - no call waited out its lock_timeout (55P03), no call failed otherwise;
  - hc_check() was empty after every sweep of the auditor, and at the end;
  - the live tables level off: the rows in them over the last third of the run are at most
    1.5 times those of the middle third, while the calls went on at the same pace;
  - at the end, once history has passed: no order and no released or expired hold is left,
    every sale is (committed holds are never pruned), and each product's stock is its first
    stock less the units finalized, as the workers counted them.
"""
import os
import random
import sys
import threading
import time

import psycopg
from psycopg.types.json import Jsonb

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "harness"))
from tap import check  # noqa: E402

DB = os.environ["HC_HISTORY_DB"]
SECONDS = float(os.environ.get("HC_HISTORY_SECONDS", "60"))
WORKERS, ASSETS, STOCK = 8, 2000, 1000000
PRODUCTS = ["HOT", "P1", "P2", "P3"]
KEY_RETENTION = 3.0

stats = {"calls": 0, "retries": 0, "mismatches": 0, "lock_timeouts": 0, "errors": 0,
         "commits": 0, "audits": 0, "audit_failures": 0}
finalized = {p: 0 for p in PRODUCTS}
sizes = []          # (seconds since start, rows in the live tables, calls so far)
errors_seen = []
lock = threading.Lock()
stop = threading.Event()


def bump(what, n=1):
    with lock:
        stats[what] += n


def connect():
    c = psycopg.connect(dbname=DB, autocommit=True, application_name="history-load")
    c.execute("SET lock_timeout = '2s'")
    return c


with connect() as c:
    c.execute("SELECT count(hc_asset_add('A-' || i)) FROM generate_series(1, %s) i", (ASSETS,))
    for p in PRODUCTS:
        c.execute("SELECT hc_stock_set(%s, %s)", (p, STOCK))
    c.execute("SELECT hc_stock_spread('HOT', 4)")


def call(conn, sql, args, retry):
    """Run a call; with retry, run it again with the same key within a second and compare."""
    row = conn.execute(sql, args).fetchone()
    bump("calls")
    first = time.monotonic()
    if retry:
        time.sleep(random.random() * 0.05)
        again = conn.execute(sql, args).fetchone()
        bump("calls")
        if time.monotonic() - first < KEY_RETENTION - 1.0:
            bump("retries")
            if again[:-1] != row[:-1] or not again[-1]:
                bump("mismatches")
                with lock:
                    errors_seen.append(f"retry {args}: {row} then {again}")
    return row


def worker(n):
    try:
        work(n)
    except Exception as e:  # a worker that dies is a failure, not a quieter run
        bump("errors")
        with lock:
            errors_seen.append(f"worker {n} died: {e!r}")


def work(n):
    conn = connect()
    rnd = random.Random(n)
    k = 0
    while not stop.is_set():
        k += 1
        key = f"w{n}-{k}"
        retry = rnd.random() < 0.2
        try:
            what = rnd.random()
            if what < 0.4:
                asset = f"A-{rnd.randint(1, ASSETS)}"
                try:
                    r = call(conn, "SELECT reservation_id, asset_id, buyer_id, status, expires_at,"
                             " created_at, replayed FROM hc_hold(%s, %s, %s, %s)",
                             (asset, f"b{n}", key, "1 second"), retry)
                except psycopg.Error as e:
                    if e.sqlstate != "RS001":  # taken: the flash-sale answer
                        raise
                    bump("calls")
                    continue
                fate = rnd.random()
                if fate < 0.6:
                    conn.execute("SELECT hc_release(%s)", (r[0],))
                elif fate < 0.62:
                    conn.execute("SELECT hc_commit(%s)", (r[0],))
                    bump("commits")
                bump("calls")  # else it expires, and the sweep ends it
            else:
                if what < 0.85:
                    product, qty = rnd.choice(PRODUCTS), rnd.randint(1, 3)
                    items = [(product, qty)]
                    r = call(conn, "SELECT reservation_id, buyer_id, status, items, expires_at,"
                             " created_at, replayed FROM hc_reserve(%s, %s, %s, %s, %s)",
                             (product, qty, f"b{n}", key, "1 second"), retry)
                else:
                    items = [("P1", 1), (rnd.choice(["P2", "P3"]), 2)]
                    r = call(conn, "SELECT reservation_id, buyer_id, status, items, expires_at,"
                             " created_at, replayed FROM hc_reserve_items(%s, %s, %s, %s)",
                             (Jsonb([{"product_id": p, "qty": q} for p, q in items]),
                              f"b{n}", key, "1 second"), retry)
                fate = rnd.random()
                if fate < 0.5:
                    try:
                        conn.execute("SELECT hc_finalize(%s)", (r[0],))
                        with lock:
                            for p, q in items:
                                finalized[p] += q
                    except psycopg.Error as e:
                        if e.sqlstate != "RS003":  # it ran out meanwhile: it expires
                            raise
                elif fate < 0.8:
                    conn.execute("SELECT hc_unreserve(%s)", (r[0],))
                bump("calls")
        except psycopg.errors.LockNotAvailable as e:
            bump("lock_timeouts")
            with lock:
                errors_seen.append(str(e).splitlines()[0])
        except psycopg.Error as e:
            bump("errors")
            with lock:
                errors_seen.append(f"{e.sqlstate}: {str(e).splitlines()[0]}")
            conn.execute("SELECT 1")
    conn.close()


def auditor():
    conn = connect()
    conn.execute("SET lock_timeout = 0")
    start = time.monotonic()
    last_size = -1.0
    while not stop.is_set():
        conn.execute("SELECT * FROM hc_sweep(500)")
        broken = conn.execute("SELECT invariant, subject, detail FROM hc_check()").fetchall()
        bump("audits")
        if broken:
            bump("audit_failures")
            with lock:
                errors_seen.append(f"hc_check after a sweep: {broken[:3]}")
        now = time.monotonic() - start
        if now - last_size >= 1.0:
            last_size = now
            rows = conn.execute(
                "SELECT (SELECT count(*) FROM hc_reservations) + (SELECT count(*) FROM hc_stock_orders)"
                " + (SELECT count(*) FROM hc_stock_order_lines) + (SELECT count(*) FROM hc_ledger)"
            ).fetchone()[0]
            with lock:
                sizes.append((now, rows, stats["calls"]))
        time.sleep(0.2)
    conn.close()


threads = [threading.Thread(target=worker, args=(n,)) for n in range(WORKERS)]
threads.append(threading.Thread(target=auditor))
for t in threads:
    t.start()
time.sleep(SECONDS)
stop.set()
for t in threads:
    t.join()

print(f"# {stats['calls']} calls, {stats['retries']} retries within retention,"
      f" {stats['commits']} sales, {stats['audits']} audited sweeps", flush=True)
for e in errors_seen[:5]:
    print(f"#   {e}", flush=True)
check("retries within retention answered exactly as the first call", stats["mismatches"], 0)
check("retries within retention happened", stats["retries"] > 100, True)
check("no call waited out its lock_timeout", stats["lock_timeouts"], 0)
check("no call failed otherwise", stats["errors"], 0)
check("hc_check() empty after every sweep of the auditor", stats["audit_failures"], 0)
check("the auditor swept and checked, again and again", stats["audits"] > 20, True)


def third(i):
    n = len(sizes)
    part = sizes[n * i // 3:n * (i + 1) // 3]
    rows = sum(s[1] for s in part) / max(len(part), 1)
    calls = (part[-1][2] - part[0][2]) if len(part) > 1 else 0
    return rows, calls


(mid_rows, mid_calls), (last_rows, last_calls) = third(1), third(2)
print(f"# live rows: {mid_rows:.0f} on average in the middle third ({mid_calls} calls),"
      f" {last_rows:.0f} in the last ({last_calls} calls);"
      f" at most {max(s[1] for s in sizes)} of the {stats['calls']} calls' rows", flush=True)
check("the live tables level off (last third at most 1.5 times the middle one)",
      last_rows <= 1.5 * mid_rows, True)
check("while the calls went on at the same pace (last third at least half the middle one's)",
      last_calls >= mid_calls / 2 and mid_calls > 0, True)

# History passes: the last orders end (the sweeps expire them) and, 5 s later, are pruned;
# waited for (at most 30 s), sweeping twice a second.
with connect() as c:
    c.execute("SET lock_timeout = 0")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        c.execute("SELECT * FROM hc_sweep()")
        left = c.execute("SELECT (SELECT count(*) FROM hc_stock_orders)"
                         " + (SELECT count(*) FROM hc_reservations WHERE status <> 'COMMITTED')").fetchone()[0]
        if left == 0:
            break
        time.sleep(0.5)
    print(f"# pruned to the end {30 - (deadline - time.monotonic()):.1f} s after the load", flush=True)
    c.execute("SELECT * FROM hc_sweep()")
    check("hc_check() empty at the end", c.execute("SELECT count(*) FROM hc_check()").fetchone()[0], 0)
    check("no order is left once history has passed",
          c.execute("SELECT count(*) FROM hc_stock_orders").fetchone()[0], 0)
    check("no released or expired hold is left",
          c.execute("SELECT count(*) FROM hc_reservations WHERE status <> 'COMMITTED'").fetchone()[0], 0)
    check("every sale is kept",
          c.execute("SELECT count(*) FROM hc_reservations WHERE status = 'COMMITTED'").fetchone()[0],
          stats["commits"])
    check("every sold asset is SOLD",
          c.execute("SELECT count(*) FROM hc_assets WHERE status = 'SOLD'").fetchone()[0], stats["commits"])
    for p in PRODUCTS:
        check(f"{p}: stock is the first stock less the units finalized",
              c.execute("SELECT sum(stock) FROM hc_stock_parts WHERE product_id = %s", (p,)).fetchone()[0],
              STOCK - finalized[p])
    left = c.execute("SELECT event, count(*) FROM hc_ledger GROUP BY event ORDER BY event").fetchall()
    print(f"# the ledger left: {left}", flush=True)
    check("the product ledger is the stock set and the carried rows only",
          c.execute("SELECT count(*) FROM hc_ledger WHERE kind = 'product'"
                    " AND event NOT IN ('stock_set', 'carry')").fetchone()[0], 0)
