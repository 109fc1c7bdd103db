"""Drive the example service with real HTTP requests and audit the database after.

    /usr/bin/python3 examples/http/check.py --url http://127.0.0.1:PORT --admin-dsn DSN --prefix P

Prints "ok - ..." / "not ok - ..." per assertion and "# ..." figures (run by examples/http/test.sh,
counted by make test).  --admin-dsn is a superuser's connection to the service's database, for
setting up assets and stock, aging a reservation instead of waiting for it to expire, and the
audit (hc_check()); it names the extension's schema (holdcommit.hc_check()), as a script of an
operator's does whose search_path has not got it.  --prefix keeps the ids of one run apart from
another's in the same database.
"""

import argparse
import http.client
import json
import os
import re
import socket
import sys
import threading
import time
from urllib.parse import urlsplit

import psycopg

sys.dont_write_bytecode = True

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "..", "test")]
import tap  # noqa: E402  (test/tap.py)
from tap import check  # noqa: E402


class Client:
    """One keep-alive HTTP connection to the service."""

    def __init__(self, url):
        u = urlsplit(url)
        self.host, self.port = u.hostname, u.port
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=120)

    def request(self, method, path, body=None, key=None, raw=None):
        """(status, parsed body, raw body, headers) of one request."""
        headers = {}
        if key is not None:
            headers["Idempotency-Key"] = key
        data = raw if raw is not None else (None if body is None else json.dumps(body))
        if data is not None:
            headers["Content-Type"] = "application/json"
        self.conn.request(method, path, body=data, headers=headers)
        resp = self.conn.getresponse()
        payload = resp.read()
        return resp.status, json.loads(payload), payload, dict(resp.getheaders())

    def post(self, path, body=None, key=None, raw=None):
        return self.request("POST", path, body, key, raw)

    def get(self, path):
        return self.request("GET", path)

    def close(self):
        self.conn.close()


def outcome(r):
    """status and SQLSTATE of an answer, e.g. (409, 'RS001') or (201, None)."""
    return r[0], r[1].get("sqlstate") if isinstance(r[1], dict) else None


def readme_table(path):
    """SQLSTATE -> HTTP status from the README's "Errors and HTTP statuses" table."""
    text = open(path, encoding="utf-8").read()
    section = text.split("## Errors and HTTP statuses", 1)[1].split("\n## ", 1)[0]
    table = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[2].isdigit():
            for code in re.findall(r"`([0-9A-Z]{5})`", cells[0]):
                table[code] = int(cells[2])
    return table


def test_mapping(readme):
    import app
    check("the service's SQLSTATE -> HTTP mapping is the README's table",
          {code: status for code, (status, _) in app.ERRORS.items()}, readme_table(readme))


def test_holds(c, admin, p):
    admin.execute("SELECT holdcommit.hc_asset_add(%s, 'Excavator'), holdcommit.hc_asset_add(%s, 'Crane'),"
                  " holdcommit.hc_asset_add(%s, 'Wagon')",
                  [p + "EQ-1", p + "EQ-2", p + "EQ-3"])
    hold = f"/v1/assets/{p}EQ-1/reservations"

    first = c.post(hold, {"buyer_id": "alice"}, key=p + "k-1")
    check("hold: 201 Created", first[0], 201)
    check("hold: the body has the reservation, HELD",
          (sorted(first[1]), first[1]["status"], first[1]["reservation_id"][:4]),
          (["asset_id", "buyer_id", "created_at", "expires_at", "reservation_id", "status"], "HELD", "res_"))
    again = c.post(hold, {"buyer_id": "alice"}, key=p + "k-1")
    check("hold retried with the same key: 200 OK", again[0], 200)
    check("hold retried: byte for byte the same body", again[2], first[2])
    check("hold retried: Idempotent-Replayed header", (first[3].get("idempotent-replayed"),
                                                       again[3].get("idempotent-replayed")), ("false", "true"))
    check("another buyer: 409 RS001", outcome(c.post(hold, {"buyer_id": "bob"}, key=p + "k-2")), (409, "RS001"))
    check("same key, other arguments: 422 RS005",
          outcome(c.post(hold, {"buyer_id": "mallory"}, key=p + "k-1")), (422, "RS005"))
    check("unknown asset: 404 RS006",
          outcome(c.post(f"/v1/assets/{p}NOPE/reservations", {"buyer_id": "bob"}, key=p + "k-3")), (404, "RS006"))
    check("no Idempotency-Key: 400 22004", outcome(c.post(hold, {"buyer_id": "bob"})), (400, "22004"))
    check("Idempotency-Key of 256 bytes: 400 22001",
          outcome(c.post(hold, {"buyer_id": "bob"}, key="k" * 256)), (400, "22001"))
    check("empty buyer_id: 400 22023", outcome(c.post(hold, {"buyer_id": ""}, key=p + "k-4")), (400, "22023"))
    check("ttl of 0: 400 22023",
          outcome(c.post(hold, {"buyer_id": "bob", "ttl_seconds": 0}, key=p + "k-5")), (400, "22023"))
    check("a body that is not JSON: 400",
          c.post(hold, raw='{"buyer_id":', key=p + "k-6")[0], 400)
    check("a buyer_id that is not a string: 400, not made one",
          c.post(hold, {"buyer_id": 42}, key=p + "k-6")[0], 400)
    check("no buyer_id: 400 22004", outcome(c.post(hold, {}, key=p + "k-6")), (400, "22004"))

    rid = first[1]["reservation_id"]
    committed = c.post(f"/v1/reservations/{rid}/commit")
    check("commit: 200, COMMITTED", (committed[0], committed[1]["status"]), (200, "COMMITTED"))
    twice = c.post(f"/v1/reservations/{rid}/commit")
    check("commit again (the webhook twice): 200, the same body", (twice[0], twice[2]), (200, committed[2]))
    check("release after commit: 409 RS004", outcome(c.post(f"/v1/reservations/{rid}/release")), (409, "RS004"))
    check("hold of a sold asset: 409 RS001",
          outcome(c.post(hold, {"buyer_id": "bob"}, key=p + "k-7")), (409, "RS001"))
    check("commit of an unknown reservation: 404 RS006",
          outcome(c.post("/v1/reservations/res_01ARZ3NDEKTSV4RRFFQ69G5FAV/commit")), (404, "RS006"))

    second = c.post(f"/v1/assets/{p}EQ-2/reservations", {"buyer_id": "carol", "ttl_seconds": 60}, key=p + "k-8")
    rid2 = second[1]["reservation_id"]
    extended = c.post(f"/v1/reservations/{rid2}/extend", {"ttl_seconds": 600})
    check("extend: 200, a later expires_at",
          (extended[0], extended[1]["expires_at"] > second[1]["expires_at"]), (200, True))
    released = c.post(f"/v1/reservations/{rid2}/release")
    check("release: 200, RELEASED", (released[0], released[1]["status"]), (200, "RELEASED"))
    check("release again: 200, the same body", c.post(f"/v1/reservations/{rid2}/release")[2], released[2])
    check("commit after release: 409 RS004", outcome(c.post(f"/v1/reservations/{rid2}/commit")), (409, "RS004"))
    check("the released asset is available at once",
          c.get(f"/v1/assets/{p}EQ-2")[1]["available"], True)

    third = c.post(f"/v1/assets/{p}EQ-3/reservations", {"buyer_id": "dave"}, key=p + "k-9")
    rid3 = third[1]["reservation_id"]
    # Time passes: the hold was made an hour ago (superuser), instead of a short ttl and a race.
    admin.execute("UPDATE holdcommit.hc_assets SET hold_expires_at = hold_expires_at - interval '1 hour'"
                  " WHERE current_reservation_id = %s", [rid3])
    admin.execute("UPDATE holdcommit.hc_reservations SET expires_at = expires_at - interval '1 hour',"
                  " created_at = created_at - interval '1 hour' WHERE id = %s", [rid3])
    late = c.post(f"/v1/reservations/{rid3}/commit")
    check("commit after expiry: 410 RS003 (refund)", outcome(late), (410, "RS003"))
    check("the 410 says what to do", "refund" in late[1].get("hint", "").lower(), True)
    check("extend after expiry: 410 RS003",
          outcome(c.post(f"/v1/reservations/{rid3}/extend", {"ttl_seconds": 60})), (410, "RS003"))
    check("an expired hold lists as available",
          c.get(f"/v1/assets/{p}EQ-3")[1]["available"], True)
    listed = {a["asset_id"] for a in c.get(f"/v1/assets?available=true&after={p}&limit=1000")[1]["assets"]}
    check("GET /v1/assets?available=true: the released and the expired, not the sold",
          sorted(a for a in listed if a.startswith(p + "EQ-")), [p + "EQ-2", p + "EQ-3"])
    check("unknown asset: GET 404 RS006", outcome(c.get(f"/v1/assets/{p}NOPE")), (404, "RS006"))


def test_stock(c, admin, p):
    admin.execute("SELECT holdcommit.hc_stock_set(%s, 3), holdcommit.hc_stock_set(%s, 10),"
                  " holdcommit.hc_stock_set(%s, 5)",
                  [p + "SKU-1", p + "SKU-2", p + "SKU-3"])
    reserve = f"/v1/products/{p}SKU-1/reservations"
    first = c.post(reserve, {"buyer_id": "erin", "qty": 2}, key=p + "s-1")
    check("reserve: 201, RESERVED", (first[0], first[1]["status"], first[1]["items"]),
          (201, "RESERVED", [{"product_id": p + "SKU-1", "qty": 2}]))
    again = c.post(reserve, {"buyer_id": "erin", "qty": 2}, key=p + "s-1")
    check("reserve retried: 200, the same body", (again[0], again[2]), (200, first[2]))
    check("reserve more than is left: 409 RS002",
          outcome(c.post(reserve, {"buyer_id": "frank", "qty": 2}, key=p + "s-2")), (409, "RS002"))
    check("reserve of an unknown product: 404 RS006",
          outcome(c.post(f"/v1/products/{p}NOPE/reservations", {"buyer_id": "frank", "qty": 1},
                         key=p + "s-3")), (404, "RS006"))
    check("qty 0: 400 22023", outcome(c.post(reserve, {"buyer_id": "frank", "qty": 0}, key=p + "s-4")),
          (400, "22023"))
    check("qty 1.5: 400, not truncated to 1",
          c.post(reserve, {"buyer_id": "frank", "qty": 1.5}, key=p + "s-4")[0], 400)
    rid = first[1]["reservation_id"]
    final = c.post(f"/v1/stock-reservations/{rid}/finalize")
    check("finalize: 200, FINALIZED", (final[0], final[1]["status"]), (200, "FINALIZED"))
    check("finalize again: 200, the same body", c.post(f"/v1/stock-reservations/{rid}/finalize")[2], final[2])
    check("unreserve after finalize: 409 RS004",
          outcome(c.post(f"/v1/stock-reservations/{rid}/unreserve")), (409, "RS004"))
    one = c.post(reserve, {"buyer_id": "frank", "qty": 1}, key=p + "s-5")
    cancel = c.post(f"/v1/stock-reservations/{one[1]['reservation_id']}/unreserve")
    check("unreserve: 200, RELEASED", (cancel[0], cancel[1]["status"]), (200, "RELEASED"))
    check("unreserve again: 200, the same body",
          c.post(f"/v1/stock-reservations/{one[1]['reservation_id']}/unreserve")[2], cancel[2])
    check("GET the product: 2 sold, 1 left, nothing reserved",
          c.get(f"/v1/products/{p}SKU-1")[1],
          {"product_id": p + "SKU-1", "stock": 1, "reserved": 0, "available": 1})

    items = [{"product_id": p + "SKU-3", "qty": 2}, {"product_id": p + "SKU-2", "qty": 1},
             {"product_id": p + "SKU-3", "qty": 1}]
    order = c.post("/v1/orders", {"buyer_id": "grace", "items": items}, key=p + "o-1")
    check("multi-item order: 201, lines sorted and summed", (order[0], order[1]["items"]),
          (201, [{"product_id": p + "SKU-2", "qty": 1}, {"product_id": p + "SKU-3", "qty": 3}]))
    check("order retried: 200, the same body",
          c.post("/v1/orders", {"buyer_id": "grace", "items": items}, key=p + "o-1")[2], order[2])
    too_many = [{"product_id": p + "SKU-2", "qty": 1}, {"product_id": p + "SKU-3", "qty": 3}]
    check("order one line cannot fill: 409 RS002",
          outcome(c.post("/v1/orders", {"buyer_id": "heidi", "items": too_many}, key=p + "o-2")), (409, "RS002"))
    check("... and nothing of it was reserved",
          [c.get(f"/v1/products/{p}SKU-{i}")[1]["reserved"] for i in (2, 3)], [1, 3])
    check("malformed items: 400 22023",
          outcome(c.post("/v1/orders", {"buyer_id": "heidi", "items": [{"qty": 1}]}, key=p + "o-3")),
          (400, "22023"))
    check("an order finalizes", c.post(f"/v1/stock-reservations/{order[1]['reservation_id']}/finalize")[0], 200)
    check("unknown product: GET 404 RS006", outcome(c.get(f"/v1/products/{p}NOPE")), (404, "RS006"))


def concurrent(url, n_clients, jobs):
    """Run jobs (callables taking a Client) on n_clients threads, each with its own connection,
    all starting at the same instant; their results and the seconds it took."""
    barrier = threading.Barrier(n_clients + 1)
    results = []
    lock = threading.Lock()
    share = [jobs[i::n_clients] for i in range(n_clients)]

    def worker(mine):
        c = Client(url)
        c.conn.connect()
        barrier.wait()
        out = [job(c) for job in mine]
        c.close()
        with lock:
            results.extend(out)

    threads = [threading.Thread(target=worker, args=(share[i],)) for i in range(n_clients)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.monotonic()
    for t in threads:
        t.join()
    return results, time.monotonic() - t0


def count(results):
    tally = {}
    for r in results:
        tally[r] = tally.get(r, 0) + 1
    return tally


def test_flash_sales(url, admin, p):
    admin.execute("SELECT holdcommit.hc_asset_add(%s, 'the one everybody wants')", [p + "FLASH-1"])
    jobs = [lambda c, i=i: outcome(c.post(f"/v1/assets/{p}FLASH-1/reservations", {"buyer_id": f"b{i}"},
                                          key=f"{p}flash-{i}")) for i in range(200)]
    results, took = concurrent(url, 200, jobs)
    check("flash sale of one asset, 200 concurrent requests: one 201, 199 409 RS001",
          count(results), {(201, None): 1, (409, "RS001"): 199})
    print(f"# one asset, 200 concurrent requests: {took * 1000:.0f} ms")

    admin.execute("SELECT holdcommit.hc_stock_set(%s, 100)", [p + "FLASH-SKU"])
    jobs = [lambda c, i=i: outcome(c.post(f"/v1/products/{p}FLASH-SKU/reservations",
                                          {"buyer_id": f"b{i}", "qty": 1}, key=f"{p}units-{i}"))
            for i in range(2000)]
    results, took = concurrent(url, 50, jobs)
    check("flash sale of 100 units, 2,000 requests from 50 clients: 100 201, 1,900 409 RS002",
          count(results), {(201, None): 100, (409, "RS002"): 1900})
    print(f"# 100 units, 2,000 requests from 50 clients: {took:.2f} s, {2000 / took:.0f} requests/s")
    check("... and the product has exactly 100 reserved",
          admin.execute("SELECT stock, reserved FROM holdcommit.hc_inventory WHERE product_id = %s",
                        [p + "FLASH-SKU"]).fetchone(), (100, 100))


def raw_request(url, path, body, key, send_all=True):
    """Send a POST on a bare socket and return the socket without reading the answer
    (send_all=False: only the headers and half the body, as a client that dies mid-upload)."""
    u = urlsplit(url)
    data = json.dumps(body).encode()
    head = (f"POST {path} HTTP/1.1\r\nHost: {u.hostname}\r\nContent-Type: application/json\r\n"
            f"Idempotency-Key: {key}\r\nContent-Length: {len(data)}\r\n\r\n").encode()
    s = socket.create_connection((u.hostname, u.port))
    s.sendall(head + (data if send_all else data[: len(data) // 2]))
    return s


def wait_for(admin, sql, args, want, seconds=30):
    deadline = time.monotonic() + seconds
    while True:
        got = admin.execute(sql, args).fetchone()[0]
        if got == want or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


def test_disconnects(url, admin, app_role, p):
    """Clients that go away mid-request leave each request done completely or not at all."""
    admin.execute("SELECT holdcommit.hc_stock_set(%s, 50)", [p + "DC-SKU"])
    path = f"/v1/products/{p}DC-SKU/reservations"

    # Gone before the body arrived: the service never calls the database.
    for i in range(10):
        raw_request(url, path, {"buyer_id": "gone", "qty": 1}, f"{p}half-{i}", send_all=False).close()

    # Gone while the call waits inside the database: an operator holds the product row, so the
    # ten reserves are in flight when their clients hang up.
    blocker = psycopg.connect(admin.info.dsn)
    blocker.execute("SELECT 1 FROM holdcommit.hc_stock_parts WHERE product_id = %s FOR UPDATE", [p + "DC-SKU"])
    socks = [raw_request(url, path, {"buyer_id": f"dc{i}", "qty": 2}, f"{p}dc-{i}") for i in range(10)]
    waiting_sql = ("SELECT count(*) FROM pg_stat_activity WHERE usename = %s AND state = 'active'"
                   " AND wait_event_type = 'Lock'")
    check("ten reserves wait on the locked product", wait_for(admin, waiting_sql, [app_role], 10), 10)
    for s in socks:
        s.close()
    time.sleep(0.2)
    blocker.rollback()
    blocker.close()
    check("after the hang-ups every call has finished",
          wait_for(admin, "SELECT count(*) FROM pg_stat_activity WHERE usename = %s AND state = 'active'",
                   [app_role], 0), 0)

    c = Client(url)
    retries = [outcome(c.post(path, {"buyer_id": f"dc{i}", "qty": 2}, key=f"{p}dc-{i}")) for i in range(10)]
    done = sum(1 for r in retries if r == (200, None))
    check("each hung-up request was done whole or not at all: its retry replays (200) or creates (201)",
          all(r in ((200, None), (201, None)) for r in retries), True)
    print(f"# of 10 requests whose client hung up inside the database, {done} had completed")
    halves = [outcome(c.post(path, {"buyer_id": "gone", "qty": 1}, key=f"{p}half-{i}")) for i in range(10)]
    check("the half-sent requests did nothing: their retries create (201)", count(halves), {(201, None): 10})
    check("reserved is 2 x 10 + 10 = 30",
          admin.execute("SELECT reserved FROM holdcommit.hc_inventory WHERE product_id = %s", [p + "DC-SKU"]).fetchone()[0],
          30)
    check("the service still answers", c.get("/healthz")[0], 200)
    c.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--admin-dsn", required=True)
    ap.add_argument("--app-role", required=True)
    ap.add_argument("--prefix", default="")
    ap.add_argument("--readme")
    args = ap.parse_args()
    p = args.prefix

    if args.readme:
        test_mapping(args.readme)
    admin = psycopg.connect(args.admin_dsn, autocommit=True)
    c = Client(args.url)
    test_holds(c, admin, p)
    test_stock(c, admin, p)
    c.close()
    test_flash_sales(args.url, admin, p)
    test_disconnects(args.url, admin, args.app_role, p)
    check("hc_check() is empty", admin.execute("SELECT * FROM holdcommit.hc_check()").fetchall(), [])
    admin.close()
    return 1 if tap.failures else 0


if __name__ == "__main__":
    sys.exit(main())
