"""Writes fenced by the token under real parallel load (test/load/fence.sh makes the database).

16 workers race for 4 resources for SECONDS (default 15), with a stale_after of 300 ms and no
heartbeat.  A holder writes a row under its token in a transaction of its own that begins with
hc_lock_check and stays open until the lease is stale, so that the others try to take it over
while only the fence keeps them out; its next check, the lease stale, is refused.  Each row
also records the resource's token as the transaction's last statement saw it.  Audited
afterwards:

  - every committed row was written under the token that was current when it committed
    (token_at_end = token): no takeover committed while a checked transaction was open;
  - the tokens of a resource's rows never go down in the order they were written;
  - takeovers happened, acquires found the lease busy (held live, or fenced by an open check),
    checks were refused (RS007: taken over, or stale);
  - every refused worker's session was usable (SELECT 1), hc_check() is empty, and the
    ledger's takeovers are the tokens handed out.
"""
import os
import random
import sys
import threading
import time

import psycopg

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "harness"))
from tap import check  # noqa: E402

DB = os.environ["HC_FENCE_DB"]
SECONDS = float(os.environ.get("HC_FENCE_SECONDS", "15"))
WORKERS, RESOURCES = 16, 4


def connect():
    return psycopg.connect(dbname=DB, autocommit=True, application_name="fence-load")


with connect() as c:
    c.execute("CREATE TABLE fenced_writes (n bigserial PRIMARY KEY, resource text NOT NULL,"
              " owner text NOT NULL, token bigint NOT NULL, token_at_end bigint NOT NULL)")

counts = {"taken": 0, "busy": 0, "written": 0, "refused": 0, "unusable": 0, "errors": 0}
lock = threading.Lock()
seen_errors = []


def count(what, n=1):
    with lock:
        counts[what] += n


def hold_until_stale(conn, resource):
    """Keep the checked transaction open until its lease is stale, when the others may take it
    over and only the fence keeps them out (at most 5 s; each statement reads the latest)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if conn.execute("SELECT heartbeat_at + stale_after <= clock_timestamp() FROM hc_locks"
                        " WHERE resource = %s", [resource]).fetchone()[0]:
            return
        time.sleep(0.02)
    count("errors")
    seen_errors.append(f"{resource}: not stale within 5 s")


def worker(i):
    conn = connect()
    rng = random.Random(i)
    deadline = time.monotonic() + SECONDS
    while time.monotonic() < deadline:
        resource, owner = f"F-{rng.randrange(RESOURCES)}", f"w{i}-{rng.getrandbits(32):08x}"
        try:
            token = conn.execute("SELECT hc_lock_acquire(%s, %s, '300 milliseconds', 0)",
                                 [resource, owner]).fetchone()[0]
        except psycopg.Error as e:
            count("errors")
            seen_errors.append(f"acquire: {e.sqlstate} {e}")
            continue
        if token is None:
            count("busy")
            time.sleep(0.01)
            continue
        count("taken")
        for _ in range(rng.randint(1, 3)):
            try:
                with conn.transaction():
                    conn.execute("SELECT hc_lock_check(%s, %s, %s)", [resource, owner, token])
                    hold_until_stale(conn, resource)
                    conn.execute("INSERT INTO fenced_writes (resource, owner, token, token_at_end)"
                                 " SELECT %s, %s, %s, token FROM hc_locks WHERE resource = %s",
                                 [resource, owner, token, resource])
                count("written")
            except psycopg.Error as e:
                if e.sqlstate != "RS007":
                    count("errors")
                    seen_errors.append(f"write: {e.sqlstate} {e}")
                count("refused")
                if conn.execute("SELECT 1").fetchone()[0] != 1:
                    count("unusable")
                break
    conn.close()


threads = [threading.Thread(target=worker, args=(i,)) for i in range(WORKERS)]
for t in threads:
    t.start()
for t in threads:
    t.join()

print("# " + ", ".join(f"{k} {v}" for k, v in counts.items()), flush=True)
for e in seen_errors[:5]:
    print(f"#   {e}", flush=True)
with connect() as c:
    def one(sql):
        return c.execute(sql).fetchone()[0]

    check("fence: no error but RS007 and busy acquires", counts["errors"], 0)
    check("fence: every committed write was made under the token current at its commit",
          one("SELECT count(*) FROM fenced_writes WHERE token_at_end <> token"), 0)
    check("fence: a resource's tokens never go down in the order its rows were written",
          one("SELECT count(*) FROM (SELECT token < max(token) OVER (PARTITION BY resource ORDER BY n"
              " ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS down FROM fenced_writes) w WHERE down"), 0)
    check("fence: the race ran (writes, takeovers, busy takeovers, refused checks)",
          (counts["written"] > 50, one("SELECT count(*) FROM hc_ledger WHERE event = 'takeover'") > 10,
           counts["busy"] > 10, counts["refused"] > 0), (True, True, True, True))
    check("fence: every refused worker's session was usable afterwards", counts["unusable"], 0)
    check("fence: the ledger's grants are the tokens handed out, each once",
          one("SELECT count(*) FROM hc_ledger WHERE kind = 'resource' AND event IN ('acquire', 'takeover')"),
          one("SELECT sum(token) FROM hc_locks"))
    check("fence: hc_check() is empty", one("SELECT count(*) FROM hc_check()"), 0)
