"""Drive the example service with real HTTP requests and audit the database after.

    /usr/bin/python3 examples/http/check.py --url http://127.0.0.1:PORT --admin-dsn DSN \
        --app-role ROLE --service-pid PID [--lock-timeout S] [--prefix P] [--sqlstates FILE]

Prints "ok - ..." / "not ok - ..." per assertion and "# ..." figures (run by examples/http/test.sh,
counted by make test).  --admin-dsn is a superuser's connection to the service's database, for
setting up assets and stock, aging a reservation instead of waiting for it to expire, and the
audit (hc_check()); it names the extension's schema (holdcommit.hc_check()), as a script of an
operator's does whose search_path has not got it.  --service-pid: the service's process, whose
CPU time and memory a large body must not cost.  --lock-timeout: the service's HC_LOCK_TIMEOUT,
the bound on a wait for an in-flight key.  --prefix keeps the ids of one run apart from
another's in the same database.
"""

import argparse
import http.client
import io
import json
import os
import socket
import sys
import threading
import time
from urllib.parse import urlsplit

import psycopg

sys.dont_write_bytecode = True

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "..", "test", "harness")]
import tap  # noqa: E402  (test/harness/tap.py)
from tap import check  # noqa: E402


PROBLEM = "urn:holdcommit:problem:"
# Every answer of a status >= 400, for the check that each is a problem (RFC 9457).
errors_seen = []


class Client:
    """One keep-alive HTTP connection to the service."""

    def __init__(self, url):
        u = urlsplit(url)
        self.host, self.port = u.hostname, u.port
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=120)

    def request(self, method, path, body=None, key=None, raw=None, headers=None):
        """(status, parsed body, raw body, headers) of one request.  key: the Idempotency-Key
        (str, or bytes sent as they are)."""
        headers = dict(headers or {})
        if key is not None:
            headers["Idempotency-Key"] = key
        data = raw if raw is not None else (None if body is None else json.dumps(body))
        if data is not None:
            headers["Content-Type"] = "application/json"
        self.conn.request(method, path, body=data, headers=headers)
        return answer_of(self.conn.getresponse())

    def post(self, path, body=None, key=None, raw=None, headers=None):
        return self.request("POST", path, body, key, raw, headers)

    def get(self, path):
        return self.request("GET", path)

    def close(self):
        self.conn.close()


def answer_of(resp):
    payload = resp.read()
    try:
        parsed = json.loads(payload)
    except ValueError:
        parsed = None
    r = (resp.status, parsed, payload, {k.lower(): v for k, v in resp.getheaders()})
    if r[0] >= 400:
        errors_seen.append(r)
    return r


def raw_exchange(url, data, chunks=()):
    """Send DATA on a bare socket (then CHUNKS, until the service closes), return the answer."""
    u = urlsplit(url)
    with socket.create_connection((u.hostname, u.port), timeout=60) as s:
        s.sendall(data)
        try:
            for chunk in chunks:
                s.sendall(chunk)
        except OSError:  # the service answered and closed before the whole body was sent
            pass
        resp = http.client.HTTPResponse(s)
        resp.begin()
        return answer_of(resp)


def outcome(r):
    """status and SQLSTATE of an answer, e.g. (409, 'RS001') or (201, None)."""
    return r[0], r[1].get("sqlstate") if isinstance(r[1], dict) else None


def kind(r):
    """status and problem type (its name) of an answer, e.g. (400, 'invalid_request')."""
    t = r[1].get("type", "") if isinstance(r[1], dict) else ""
    return r[0], t[len(PROBLEM):] if t.startswith(PROBLEM) else t or None


def test_mapping(sqlstates):
    """The service answers each error of the package with clients/sqlstates.json's status, and
    its name as the problem type; a SQLSTATE unknown to it is 400 in class 22, else 500."""
    import app
    from holdcommit.errors import CLASS, HoldcommitError, InvalidArgument
    table = json.load(open(sqlstates, encoding="utf-8"))["sqlstates"]
    answers = {e["sqlstate"]: json.loads(app.error_problem(CLASS[e["sqlstate"]]("m", e["sqlstate"])).body)
               for e in table}
    check("the service's SQLSTATE -> HTTP map is clients/sqlstates.json's",
          {code: a["status"] for code, a in answers.items()}, {e["sqlstate"]: e["http"] for e in table})
    check("... and each problem's type is its SQLSTATE's name", {code: a["type"] for code, a in answers.items()},
          {e["sqlstate"]: PROBLEM + e["name"] for e in table})
    check("another SQLSTATE of class 22 is 400, anything else 500",
          (app.error_problem(InvalidArgument("m", "22003")).status_code,
           app.error_problem(HoldcommitError("m", "42883")).status_code), (400, 500))


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
    missing = c.post(hold, {"buyer_id": "bob"})
    check("no Idempotency-Key: 400 idempotency_key_required, \"Idempotency-Key header required\"",
          (kind(missing), missing[1]["title"]), ((400, "idempotency_key_required"), "Idempotency-Key header required"))
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
    check("GET /v1/reservations/{id} of a new hold: 200, the body of the hold",
          (c.get(f"/v1/reservations/{rid}")[0], c.get(f"/v1/reservations/{rid}")[2]), (200, first[2]))
    committed = c.post(f"/v1/reservations/{rid}/commit")
    check("GET it after commit: the body commit answered, COMMITTED", c.get(f"/v1/reservations/{rid}")[2],
          committed[2])
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
    check("GET a released hold: RELEASED, the body release answered", c.get(f"/v1/reservations/{rid2}")[2],
          released[2])
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
    check("GET a hold past its expires_at: EXPIRED, before anything reclaimed it",
          c.get(f"/v1/reservations/{rid3}")[1]["status"], "EXPIRED")
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
    check("GET an unknown reservation: 404 RS006",
          outcome(c.get("/v1/reservations/res_01ARZ3NDEKTSV4RRFFQ69G5FAV")), (404, "RS006"))
    check("GET /v1/stock-reservations/{id} of a hold: 404 RS006",
          outcome(c.get(f"/v1/stock-reservations/{rid}")), (404, "RS006"))


def test_hold_tokens(c, admin, p):
    """Hold tokens: many seats, one hold (seats.io's shape): these objects, or the best of a pool."""
    admin.execute("SELECT holdcommit.hc_asset_add(%s || 'R' || i, '', %s || 'hall', 1, 'R', i)"
                  "  FROM generate_series(1, 4) i", [p, p])
    seats = [f"{p}R3", f"{p}R1"]
    first = c.post("/v1/hold-tokens", {"buyer_id": "alice", "objects": seats}, key=p + "t-1")
    check("hold token of two objects: 201, its objects, HELD",
          (first[0], first[1].get("objects"), first[1].get("status")), (201, sorted(seats), "HELD"))
    token = first[1].get("hold_token", "")
    again = c.post("/v1/hold-tokens", {"buyer_id": "alice", "objects": seats[::-1]}, key=p + "t-1")
    check("the same objects in another order, the same key: 200, the same body", (again[0], again[2]),
          (200, first[2]))
    check("objects of which one is held: 409 RS001 naming it",
          (outcome(c.post("/v1/hold-tokens", {"buyer_id": "bob", "objects": [f"{p}R2", f"{p}R3"]},
                          key=p + "t-2")),
           f'"{p}R3"' in c.post("/v1/hold-tokens", {"buyer_id": "bob", "objects": [f"{p}R2", f"{p}R3"]},
                                key=p + "t-2")[1].get("detail", "")),
          ((409, "RS001"), True))
    check("objects and best at once: 400",
          c.post("/v1/hold-tokens", {"buyer_id": "bob", "objects": [f"{p}R2"], "best": {"pool": p + "hall", "n": 1}},
                 key=p + "t-3")[0], 400)
    check("an object twice: 400 22023",
          outcome(c.post("/v1/hold-tokens", {"buyer_id": "bob", "objects": [f"{p}R2", f"{p}R2"]}, key=p + "t-4")),
          (400, "22023"))
    best = c.post("/v1/hold-tokens", {"buyer_id": "bob", "best": {"pool": p + "hall", "n": 2}}, key=p + "t-5")
    check("the best 2 of the pool: R1 and R3 held, so none adjacent: R2 and R4",
          (best[0], best[1].get("objects")), (201, [f"{p}R2", f"{p}R4"]))
    check("the best 2 again, none left: 409 RS002",
          outcome(c.post("/v1/hold-tokens", {"buyer_id": "carol", "best": {"pool": p + "hall", "n": 2}},
                         key=p + "t-6")), (409, "RS002"))
    check("GET the token: its objects, HELD",
          (c.get(f"/v1/hold-tokens/{token}")[1].get("objects"), c.get(f"/v1/hold-tokens/{token}")[1].get("status")),
          (sorted(seats), "HELD"))
    extended = c.post(f"/v1/hold-tokens/{token}/extend", {"ttl_seconds": 1800})
    check("extend the token: 200, a later expires_at",
          (extended[0], extended[1].get("expires_at", "") > first[1]["expires_at"]), (200, True))
    booked = c.post(f"/v1/hold-tokens/{token}/book")
    check("book the token: 200, every object COMMITTED", (booked[0], booked[1].get("status")), (200, "COMMITTED"))
    check("book it again: 200, the same body", c.post(f"/v1/hold-tokens/{token}/book")[2], booked[2])
    check("release after book: 409 RS004", outcome(c.post(f"/v1/hold-tokens/{token}/release")), (409, "RS004"))
    released = c.post(f"/v1/hold-tokens/{best[1].get('hold_token', '')}/release")
    check("release the best: 200, RELEASED", (released[0], released[1].get("status")), (200, "RELEASED"))
    check("an unknown token: 404 RS006", outcome(c.get(f"/v1/hold-tokens/{p}nope")), (404, "RS006"))
    check("the sold objects are SOLD, the released AVAILABLE",
          admin.execute("SELECT string_agg(status, ',' ORDER BY id) FROM holdcommit.hc_assets WHERE pool = %s",
                        [p + "hall"]).fetchone()[0], "SOLD,AVAILABLE,SOLD,AVAILABLE")


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
    check("GET /v1/reservations/{id} of a stock reservation: 200, the body of the reserve",
          c.get(f"/v1/reservations/{rid}")[2], first[2])
    check("GET /v1/stock-reservations/{id}: the same", c.get(f"/v1/stock-reservations/{rid}")[2], first[2])
    final = c.post(f"/v1/stock-reservations/{rid}/finalize")
    check("GET it after finalize: the body finalize answered, FINALIZED",
          c.get(f"/v1/stock-reservations/{rid}")[2], final[2])
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
    check("GET the order: its lines as the order answered them",
          c.get(f"/v1/reservations/{order[1]['reservation_id']}")[2], order[2])
    too_many = [{"product_id": p + "SKU-2", "qty": 1}, {"product_id": p + "SKU-3", "qty": 3}]
    check("order one line cannot fill: 409 RS002",
          outcome(c.post("/v1/orders", {"buyer_id": "heidi", "items": too_many}, key=p + "o-2")), (409, "RS002"))
    check("... and nothing of it was reserved",
          [c.get(f"/v1/products/{p}SKU-{i}")[1]["reserved"] for i in (2, 3)], [1, 3])
    check("an item without a product_id: 400 22004",
          outcome(c.post("/v1/orders", {"buyer_id": "heidi", "items": [{"qty": 1}]}, key=p + "o-3")),
          (400, "22004"))
    check("an item that is not an object: 400 22023",
          outcome(c.post("/v1/orders", {"buyer_id": "heidi", "items": [7]}, key=p + "o-3")), (400, "22023"))
    check("an order finalizes", c.post(f"/v1/stock-reservations/{order[1]['reservation_id']}/finalize")[0], 200)
    check("unknown product: GET 404 RS006", outcome(c.get(f"/v1/products/{p}NOPE")), (404, "RS006"))


def usage(pid):
    """(CPU seconds, resident MB) of the service's process so far."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    rss = next(line for line in open(f"/proc/{pid}/status") if line.startswith("VmRSS:")).split()[1]
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), int(rss) / 1024


def post_head(url, path, key, extra=""):
    u = urlsplit(url)
    return (f"POST {path} HTTP/1.1\r\nHost: {u.hostname}\r\nContent-Type: application/json\r\n"
            f"Idempotency-Key: {key}\r\n{extra}").encode()


def test_limits(url, c, admin, p, pid):
    """A large body is refused before it is read or parsed; an order's lines are counted by
    the service before it calls the database."""
    admin.execute("SELECT holdcommit.hc_stock_set(%s, 1000)", [p + "BIG-SKU"])
    line = {"product_id": p + "BIG-SKU", "qty": 1}
    big = json.dumps({"buyer_id": "big", "items": [line] * (16 * 2**20 // 40)}).encode()
    before = usage(pid)
    t0 = time.monotonic()
    r = raw_exchange(url, post_head(url, "/v1/orders", p + "big-1", f"Content-Length: {len(big)}\r\n\r\n"),
                     [big[i:i + 2**16] for i in range(0, len(big), 2**16)])
    took = time.monotonic() - t0
    after = usage(pid)
    check(f"an order of {len(big) / 2**20:.0f} MB (Content-Length): 413 body_too_large", kind(r),
          (413, "body_too_large"))
    print(f"# the {len(big) / 2**20:.0f} MB body: answered in {took * 1000:.0f} ms; the service's CPU"
          f" {before[0]:.2f} -> {after[0]:.2f} s, RSS {before[1]:.0f} -> {after[1]:.0f} MB")
    check("... it cost the service under 0.3 s of CPU and 20 MB of memory",
          (after[0] - before[0] < 0.3, after[1] - before[1] < 20), (True, True))
    before = usage(pid)
    r = raw_exchange(url, post_head(url, "/v1/orders", p + "big-2", "Transfer-Encoding: chunked\r\n\r\n"),
                     [b"%x\r\n%s\r\n" % (len(big[i:i + 2**16]), big[i:i + 2**16])
                      for i in range(0, len(big), 2**16)] + [b"0\r\n\r\n"])
    after = usage(pid)
    check("the same chunked, without a Content-Length: 413 body_too_large, as cheaply",
          (kind(r), after[0] - before[0] < 0.3, after[1] - before[1] < 20), ((413, "body_too_large"), True, True))
    check("the service still answers", c.get("/healthz")[0], 200)

    hundred = c.post("/v1/orders", {"buyer_id": "big", "items": [line] * 100}, key=p + "big-3")
    check("an order of 100 lines (the limit): 201, summed into one", (hundred[0], hundred[1]["items"]),
          (201, [{"product_id": p + "BIG-SKU", "qty": 100}]))
    # Of products that do not exist: the database would answer 404 or 22023, the service answers first.
    many = c.post("/v1/orders", {"buyer_id": "big", "items": [{"product_id": f"{p}NO-{i}", "qty": 1}
                                                                for i in range(101)]}, key=p + "big-4")
    check("an order of 101 lines: 400 too_many_items, from the service, not the database",
          (kind(many), many[1].get("sqlstate"), many[1].get("max_items")), ((400, "too_many_items"), None, 100))
    padded = json.dumps({"buyer_id": "big", "items": [line]}) + " " * 60000
    check("a body of 60,000 bytes, under the limit of 64 KiB: served (201)",
          c.post("/v1/orders", raw=padded, key=p + "big-5")[0], 201)


def test_nul(url, c, p):
    """PostgreSQL's text cannot hold a NUL: every way of sending one is a 400 problem."""
    hold = f"/v1/assets/{p}EQ-1/reservations"
    cases = [
        ("in the path (%00)", lambda: c.post(f"/v1/assets/{p}EQ%001/reservations", {"buyer_id": "n"}, key=p + "n-1")),
        ("in the query (%00)", lambda: c.get("/v1/assets?after=%00")),
        ("in the body, as \\u0000 in a value", lambda: c.post(hold, {"buyer_id": "a\x00b"}, key=p + "n-2")),
        ("in the body, in an item", lambda: c.post("/v1/orders", {"buyer_id": "n", "items": [
            {"product_id": "x\x00", "qty": 1}]}, key=p + "n-3")),
        ("in the body, in a member's name", lambda: c.post(hold, {"buyer_id": "n", "x\x00": 1}, key=p + "n-4")),
        ("in the body, as a raw byte", lambda: c.post(hold, raw=b'{"buyer_id": "a\x00"}', key=p + "n-5")),
        ("in the Idempotency-Key, as a raw byte", lambda: raw_exchange(
            url, post_head(url, hold, f"{p}n-6\x00") + b"Content-Length: 2\r\n\r\n{}")),
        ("in another header, as a raw byte", lambda: raw_exchange(
            url, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Trace: a\x00b\r\n\r\n")),
    ]
    for what, send in cases:
        check(f"a NUL {what}: 400 invalid_request", kind(send()), (400, "invalid_request"))


class Replay(io.BytesIO):
    """Bytes already received, for http.client to parse as a socket's (and not close)."""

    def makefile(self, mode):
        return self

    def close(self):
        pass


def raw_answers(url, data):
    """Send DATA on a bare socket and read until the service closes it: its first answer, and
    the bytes it sent after that answer (another request's answer, say)."""
    u = urlsplit(url)
    got = b""
    with socket.create_connection((u.hostname, u.port), timeout=60) as s:
        s.sendall(data)
        while chunk := s.recv(65536):
            got += chunk
    stream = Replay(got)
    resp = http.client.HTTPResponse(stream)
    resp.begin()
    return answer_of(resp), stream.read()


def test_framing(url, admin, p):
    """A body whose length two readers may read apart (the shape of request smuggling) is
    400 invalid_request, the connection closed, before any call of the database."""
    assets = [f"{p}SMUG-{i}" for i in range(1, 5)]
    admin.execute("SELECT holdcommit.hc_asset_add(a) FROM unnest(%s::text[]) a", [assets])
    body = b'{"buyer_id": "smuggler"}'
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)

    def head(asset, key, framing, version="1.1"):
        return post_head(url, f"/v1/assets/{asset}/reservations", key).replace(
            b"HTTP/1.1", b"HTTP/" + version.encode()) + framing.encode() + b"\r\n"

    # A proxy that reads the Content-Length sees one request; h11, reading the chunks, two.
    smuggled = head(assets[1], p + "sm-2", f"Content-Length: {len(body)}\r\n") + body
    payload = chunked + smuggled
    r, after = raw_answers(url, head(assets[0], p + "sm-1", f"Content-Length: {len(payload)}\r\n"
                                     "Transfer-Encoding: chunked\r\n") + payload)
    check("Content-Length and Transfer-Encoding: chunked: 400 invalid_request, Connection: close",
          (kind(r), r[3].get("connection")), ((400, "invalid_request"), "close"))
    check("... and the request smuggled after its chunks is never read: nothing more on the connection",
          after[:80], b"")
    cases = [
        ("Transfer-Encoding: chunked then Content-Length", "1.1",
         f"Transfer-Encoding: chunked\r\nContent-Length: {len(chunked)}\r\n", chunked),
        ("Transfer-Encoding: chunked in HTTP/1.0", "1.0", "Transfer-Encoding: chunked\r\n", chunked),
        # Refused by h11 before the service sees them:
        ("two Content-Lengths that differ", "1.1", f"Content-Length: {len(body)}\r\nContent-Length: 3\r\n", body),
        ("a Content-Length listing two lengths", "1.1", f"Content-Length: {len(body)}, 3\r\n", body),
        ("Transfer-Encoding: gzip", "1.1", "Transfer-Encoding: gzip\r\n", chunked),
        ("Transfer-Encoding: gzip, chunked", "1.1", "Transfer-Encoding: gzip, chunked\r\n", chunked),
        ("two Transfer-Encoding: chunked", "1.1", "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
         chunked),
    ]
    for i, (what, version, framing, data) in enumerate(cases):
        r, after = raw_answers(url, head(assets[2], f"{p}sm-{i + 3}", framing, version) + data)
        check(f"{what}: 400 invalid_request, the connection closed",
              (kind(r), r[3].get("connection"), after), ((400, "invalid_request"), "close", b""))
    check("none of these requests held an asset", admin.execute(
        "SELECT count(*) FROM holdcommit.hc_reservations WHERE asset_id = ANY(%s)", [assets[:3]]).fetchone()[0], 0)
    check("... all still AVAILABLE", admin.execute(
        "SELECT array_agg(DISTINCT status) FROM holdcommit.hc_assets WHERE id = ANY(%s)", [assets[:3]]).fetchone()[0],
        ["AVAILABLE"])
    # Not ambiguous (RFC 9110 8.6): h11 folds the two into one length before the service sees them.
    r = raw_exchange(url, head(assets[3], p + "sm-20", f"Content-Length: {len(body)}\r\n" * 2) + body)
    check("two Content-Lengths that agree: one length, served (201)", r[0], 201)


def test_utf8(c, admin, p):
    """A path or a query that is not UTF-8 once percent-decoded is 400 invalid_request: decoded
    with replacement, %ff and %fe would both name the product U+FFFD."""
    admin.execute("SELECT holdcommit.hc_stock_set(%s, 5), holdcommit.hc_stock_set(%s, 5)",
                  [p + "U-\ufffd", p + "U-\u00e9"])
    for what, enc in [("%ff", "%ff"), ("%fe", "%fe"), ("%c3 (a sequence cut short)", "%c3"),
                      ("%c0%ae (an overlong '.')", "%c0%ae"), ("%ed%a0%80 (a surrogate)", "%ed%a0%80")]:
        check(f"a reserve of product U-{what}: 400 invalid_request",
              kind(c.post(f"/v1/products/{p}U-{enc}/reservations", {"buyer_id": "uma", "qty": 1},
                          key=f"{p}u-{enc}")), (400, "invalid_request"))
    check("a GET of product U-%fe: 400 invalid_request", kind(c.get(f"/v1/products/{p}U-%fe")),
          (400, "invalid_request"))
    for path in ["/v1/products?after=%ff", "/v1/assets?after=%fe", "/v1/assets?limit=1&after=x%c3"]:
        check(f"GET {path}: 400 invalid_request", kind(c.get(path)), (400, "invalid_request"))
    for what, path, raw in [
            ("\\ud800 in a value", f"/v1/products/{p}U-%c3%a9/reservations", '{"buyer_id": "u\\ud800", "qty": 1}'),
            ("\\udcff in an item", "/v1/orders", '{"buyer_id": "u", "items": [{"product_id": "\\udcff", "qty": 1}]}')]:
        check(f"a lone surrogate, {what}: 400 invalid_request", kind(c.post(path, raw=raw, key=f"{p}u-s")),
              (400, "invalid_request"))
    check("U+FFFD itself (%ef%bf%bd) and U+00E9 (%c3%a9) are valid UTF-8: both products answer, nothing reserved",
          [c.get(f"/v1/products/{p}U-{enc}")[1] for enc in ("%ef%bf%bd", "%c3%a9")],
          [{"product_id": p + name, "stock": 5, "reserved": 0, "available": 5} for name in ("U-\ufffd", "U-\u00e9")])
    check("... and no reservation line was made for them", admin.execute(
        "SELECT count(*) FROM holdcommit.hc_stock_reservation_lines WHERE product_id = ANY(%s)",
        [[p + "U-\ufffd", p + "U-\u00e9"]]).fetchone()[0], 0)


def test_keys(c, admin, p):
    """The Idempotency-Key is a structured-field string (RFC 8941) of printable ASCII, quoted,
    or bare without quotes, backslashes or spaces."""
    admin.execute("SELECT holdcommit.hc_stock_set(%s, 100)", [p + "KEY-SKU"])
    path = f"/v1/products/{p}KEY-SKU/reservations"
    body = {"buyer_id": "kim", "qty": 1}
    quoted = c.post(path, body, key=f'"{p}key-1"')
    bare = c.post(path, body, key=f"{p}key-1")
    check('a quoted key "K" and the bare K are one key: 201, then 200 with the same body',
          (quoted[0], bare[0], bare[2]), (201, 200, quoted[2]))
    escaped = c.post(path, body, key=f'"{p}key \\"2\\" \\\\"')
    check('a quoted key with a space, \\" and \\\\: 201', escaped[0], 201)
    check("... stored as its value, unescaped", admin.execute(
        "SELECT idempotency_key FROM holdcommit.hc_stock_reservations WHERE id = %s",
        [escaped[1]["reservation_id"]]).fetchone()[0], f'{p}key "2" \\')
    check("... and its retry replays", c.post(path, body, key=f'"{p}key \\"2\\" \\\\"')[2], escaped[2])
    for what, key in [("\\xff\\xfe (Latin-1 bytes)", b"\xff\xfe"), ("UTF-8 (\u043a\u043b\u044e\u0447)", "ключ".encode()),
                      ("a UTF-8 byte inside quotes", b'"k\xc3\xa9"'), ("an unclosed quote", f'"{p}k'),
                      ("text after the closing quote", f'"{p}k"x'), ("a bare key with a space", f"{p}k 3"),
                      ("a bare key with a quote", f'{p}k"3'), ("a backslash not escaping", f'"{p}\\k"'),
                      ("a tab", f'"{p}\tk"')]:
        check(f"an Idempotency-Key of {what}: 400 invalid_idempotency_key", kind(c.post(path, body, key=key)),
              (400, "invalid_idempotency_key"))
    check("two Idempotency-Key headers: 400 invalid_idempotency_key",
          kind(c.post(path, body, key=f"{p}k-4", headers={"idempotency-key": f"{p}k-5"})),
          (400, "invalid_idempotency_key"))
    check('an empty quoted key "": 400 from the database (22023)', outcome(c.post(path, body, key='""')),
          (400, "22023"))
    check("no key was stored for any refused one: 2 reservations", admin.execute(
        "SELECT count(*) FROM holdcommit.hc_stock_reservation_lines WHERE product_id = %s",
        [p + "KEY-SKU"]).fetchone()[0], 2)


def test_integers(c, admin, p):
    """Integers out of PostgreSQL's integer, and seconds that are not a finite number, are 400
    from the service; inside it the database decides."""
    admin.execute("SELECT holdcommit.hc_asset_add(%s), holdcommit.hc_stock_set(%s, 10)", [p + "INT-1", p + "INT-SKU"])
    path = f"/v1/products/{p}INT-SKU/reservations"
    for what, extra in [("qty 2^31", {"qty": 2**31}), ("qty -2^31 - 1", {"qty": -(2**31) - 1}),
                        ("qty 2^63", {"qty": 2**63}), ("qty true", {"qty": True}), ("qty \"1\"", {"qty": "1"}),
                        ("qty 2.0", {"qty": 2.0}), ("ttl_seconds 2^31", {"qty": 1, "ttl_seconds": 2**31}),
                        ("ttl_seconds 1e300", {"qty": 1, "ttl_seconds": 1e300}),
                        ("ttl_seconds 2^70", {"qty": 1, "ttl_seconds": 2**70}),
                        ("ttl_seconds \"60\"", {"qty": 1, "ttl_seconds": "60"})]:
        check(f"{what}: 400 invalid_request", kind(c.post(path, {"buyer_id": "ian", **extra}, key=p + "i-1")),
              (400, "invalid_request"))
    for what, raw in [("NaN", "NaN"), ("Infinity", "Infinity"), ("-Infinity", "-Infinity")]:
        check(f"ttl_seconds {what}: 400 invalid_request",
              kind(c.post(path, raw=f'{{"buyer_id": "ian", "qty": 1, "ttl_seconds": {raw}}}', key=p + "i-1")),
              (400, "invalid_request"))
    check("qty 2^31 - 1: the database's answer, 409 RS002",
          outcome(c.post(path, {"buyer_id": "ian", "qty": 2**31 - 1}, key=p + "i-2")), (409, "RS002"))
    check("ttl_seconds 2^31 - 1: the database's answer, 400 22023 (over holdcommit.max_ttl)",
          outcome(c.post(f"/v1/assets/{p}INT-1/reservations", {"buyer_id": "ian", "ttl_seconds": 2**31 - 1},
                         key=p + "i-3")), (400, "22023"))
    check("an item's qty 2^31: 400 22003 (numeric_value_out_of_range, from the package)",
          outcome(c.post("/v1/orders", {"buyer_id": "ian", "items": [{"product_id": p + "INT-SKU", "qty": 2**31}]},
                         key=p + "i-4")), (400, "22003"))
    check("a limit of 2^31 in the query: 400 invalid_request", kind(c.get(f"/v1/assets?limit={2**31}")),
          (400, "invalid_request"))
    check("a limit of 2^31 - 1: 200 (at most 1000 listed)", c.get(f"/v1/products?limit={2**31 - 1}")[0], 200)


def test_errors(c, p):
    """FastAPI's and Starlette's own answers are problems too."""
    r = c.get("/v1/nowhere")
    check("an unknown route: 404 about:blank, \"Not Found\"", (r[0], r[1]["type"], r[1]["title"]),
          (404, "about:blank", "Not Found"))
    r = c.request("DELETE", f"/v1/assets/{p}EQ-1")
    check("a method the route does not serve: 405 about:blank, with Allow", (r[0], r[1]["type"], r[3].get("allow")),
          (405, "about:blank", "GET"))
    r = c.post(f"/v1/assets/{p}EQ-1/reservations", raw="[1, 2]", key=p + "e-1")
    check("a body that is not an object: 400 invalid_request, the validation error listed",
          (kind(r), r[1]["errors"][0]["loc"]), ((400, "invalid_request"), ["body"]))
    r = c.post(f"/v1/assets/{p}EQ-1/reservations", raw="{" * 50000, key=p + "e-2")
    check("a body nested 50,000 deep: 400 invalid_request", kind(r), (400, "invalid_request"))


def test_problem_shape():
    """Every answer of a status >= 400 that the run got: application/problem+json, with type,
    title and status (the HTTP status), and the SQLSTATE for the database's errors."""
    bad = [(r[0], r[3].get("content-type"), r[2][:120]) for r in errors_seen
           if r[3].get("content-type") != "application/problem+json" or not isinstance(r[1], dict)
           or not isinstance(r[1].get("type"), str) or not isinstance(r[1].get("title"), str)
           or r[1].get("status") != r[0]]
    check(f"each of the {len(errors_seen)} error answers was application/problem+json with type, title, status",
          bad, [])
    db = [r for r in errors_seen if isinstance(r[1], dict) and "sqlstate" in r[1]]
    check(f"... the {len(db)} from the database with their SQLSTATE, a detail, and no FastAPI 422",
          ([r[2][:120] for r in db if not r[1].get("detail")], [r[2][:120] for r in errors_seen if r[0] == 422
                                                                    and outcome(r)[1] != "RS005"]), ([], []))


def test_in_flight(url, admin, p, bound):
    """A request whose key is in flight waits at most the bound: replayed when the first ends
    within it, else 409 request_in_progress; a wait for a locked row is 503 lock_not_available."""
    admin.execute("SELECT holdcommit.hc_stock_set(%s, 10)", [p + "FLY-SKU"])
    path = f"/v1/products/{p}FLY-SKU/reservations"
    c = Client(url)
    first = psycopg.connect(admin.info.dsn)  # a transaction that keeps its call in flight
    made = first.execute("SELECT reservation_id FROM holdcommit.hc_reserve(%s, 1, 'fay', %s)",
                         [p + "FLY-SKU", p + "fly-1"]).fetchone()[0]
    t0 = time.monotonic()
    r = c.post(path, {"buyer_id": "fay", "qty": 1}, key=p + "fly-1")
    waited = time.monotonic() - t0
    check("the same key while its first call is in flight: 409 request_in_progress, Retry-After",
          (kind(r), r[3].get("retry-after")), ((409, "request_in_progress"), "1"))
    check(f"... after the bound of {bound} s, not longer", bound - 0.1 <= waited < bound + 2, True)
    first.commit()
    r = c.post(path, {"buyer_id": "fay", "qty": 1}, key=p + "fly-1")
    check("its retry once the first ended: 200, the first call's reservation",
          (r[0], r[1]["reservation_id"]), (200, made))

    made = first.execute("SELECT reservation_id FROM holdcommit.hc_reserve(%s, 1, 'fay', %s)",
                         [p + "FLY-SKU", p + "fly-2"]).fetchone()[0]
    threading.Timer(0.5, first.commit).start()
    r = c.post(path, {"buyer_id": "fay", "qty": 1}, key=p + "fly-2")
    check("the same key, whose first call ends within the bound: waits, then 200 with its reservation",
          (r[0], r[1].get("reservation_id")), (200, made))

    first.execute("SELECT 1 FROM holdcommit.hc_stock_parts WHERE product_id = %s FOR UPDATE", [p + "FLY-SKU"])
    r = c.post(path, {"buyer_id": "gus", "qty": 1}, key=p + "fly-3")
    check("a new key whose product row stays locked past the bound: 503 lock_not_available 55P03, Retry-After",
          (kind(r), r[1].get("sqlstate"), r[3].get("retry-after")), ((503, "lock_not_available"), "55P03", "1"))
    first.rollback()
    check("... and its retry then: 201", c.post(path, {"buyer_id": "gus", "qty": 1}, key=p + "fly-3")[0], 201)
    first.close()
    c.close()


def test_same_key(url, admin, p):
    """200 concurrent requests with one key: one made it, the others replay it."""
    admin.execute("SELECT holdcommit.hc_asset_add(%s, 'one key')", [p + "SAME-1"])
    jobs = [lambda c: c.post(f"/v1/assets/{p}SAME-1/reservations", {"buyer_id": "sam"}, key=p + "same-1")] * 200
    results, took = concurrent(url, 200, jobs)
    check("200 concurrent requests with one key: one 201, 199 200",
          count([r[0] for r in results]), {201: 1, 200: 199})
    check("... all 200 bodies byte for byte the same", len({r[2] for r in results}), 1)
    print(f"# one key, 200 concurrent requests: {took * 1000:.0f} ms")


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
    # Ten reserves at once start the product's spread: those that would queue on its locked
    # part 0 wait for the spread (wait event Extension) until it gives up, then for the lock.
    waiting_sql = ("SELECT count(*) FROM pg_stat_activity WHERE usename = %s AND state = 'active'"
                   " AND wait_event_type IN ('Lock', 'Extension')")
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
    ap.add_argument("--service-pid", type=int, required=True)
    ap.add_argument("--lock-timeout", type=float, default=3, help="the service's HC_LOCK_TIMEOUT")
    ap.add_argument("--prefix", default="")
    ap.add_argument("--sqlstates", help="clients/sqlstates.json: check the service's map against it")
    args = ap.parse_args()
    p = args.prefix

    if args.sqlstates:
        test_mapping(args.sqlstates)
    admin = psycopg.connect(args.admin_dsn, autocommit=True)
    c = Client(args.url)
    test_holds(c, admin, p)
    test_hold_tokens(c, admin, p)
    test_stock(c, admin, p)
    test_keys(c, admin, p)
    test_integers(c, admin, p)
    test_nul(args.url, c, p)
    test_utf8(c, admin, p)
    test_errors(c, p)
    test_limits(args.url, c, admin, p, args.service_pid)
    c.close()
    test_framing(args.url, admin, p)
    test_in_flight(args.url, admin, p, args.lock_timeout)
    test_same_key(args.url, admin, p)
    test_flash_sales(args.url, admin, p)
    test_disconnects(args.url, admin, args.app_role, p)
    test_problem_shape()
    check("hc_check() is empty", admin.execute("SELECT * FROM holdcommit.hc_check()").fetchall(), [])
    admin.close()
    return 1 if tap.failures else 0


if __name__ == "__main__":
    sys.exit(main())
