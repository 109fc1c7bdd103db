"""The operators' page of the example shop: /ops, a sale as it happens.

Sold per minute, holds and reservations by state, stock and availability per product, the
background sweeper's state in every database, leases and attempts awaiting review: the views
of a monitoring role (hc_grant_monitor: hc_metrics, hc_ops_products, hc_ops_sales,
hc_ops_sweeper), which hold no idempotency key, buyer or owner.

However many people watch, the service keeps two connections of that role: one that LISTENs
on holdcommit (its calls notify when holdcommit.notify is on for the shop's role) and one that
reads a snapshot after each burst of notifications, and every HC_OPS_POLL seconds anyway.
Every viewer's EventSource on /ops/events gets the same snapshots; /ops/data is the latest,
as JSON.  The two connections are opened when the first viewer comes and closed after the
last one leaves; a connection that fails is opened again.

Settings (environment):
  HC_OPS_DATABASE_URL  a libpq connection string for the monitoring role, straight to
                       PostgreSQL: LISTEN needs a session of its own, which PgBouncer in
                       transaction mode does not give.  Unset: /ops is not served (404).
  HC_OPS_USER, HC_OPS_PASSWORD   HTTP Basic authentication; both must be set, and every
                       /ops request without them is 401 (and opens no connection).
  HC_OPS_SCHEMA        the extension's schema (default holdcommit)
  HC_OPS_POLL          seconds between snapshots when nothing is notified (default 2, at least 0.5)
  HC_OPS_MAX_VIEWERS   open event streams at most (default 20); one more is 503
"""
import asyncio
import base64
import binascii
import hashlib
import hmac
import json
import logging
import os
import re
from pathlib import Path

import psycopg
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from psycopg import sql

log = logging.getLogger("holdcommit.example.ops")


def _number(name, default, least):
    try:
        return max(float(os.environ.get(name, default)), least)
    except ValueError:
        log.warning("%s is not a number: %s used", name, default)
        return default


DSN = os.environ.get("HC_OPS_DATABASE_URL")
USER = os.environ.get("HC_OPS_USER", "")
PASSWORD = os.environ.get("HC_OPS_PASSWORD", "")
SCHEMA = os.environ.get("HC_OPS_SCHEMA", "holdcommit")
POLL = _number("HC_OPS_POLL", 2.0, 0.5)
MAX_VIEWERS = int(_number("HC_OPS_MAX_VIEWERS", 20, 1))
# A burst of notifications (a sale) makes one snapshot, this long after the first.
SETTLE = 0.25
# A failed connection is opened again this long after.
RETRY = 1.0
PRODUCTS_SHOWN = 50

PAGE = (Path(__file__).parent / "ops.html").read_text(encoding="utf-8")


def _hashes(tag):
    return " ".join("'sha256-%s'" % base64.b64encode(hashlib.sha256(m.encode()).digest()).decode()
                    for m in re.findall(rf"<{tag}>(.*?)</{tag}>", PAGE, re.S))


# The page's own script and style, and its connection back here: nothing else.
HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": f"default-src 'none'; script-src {_hashes('script')}; "
                               f"style-src {_hashes('style')}; connect-src 'self'; img-src data:; "
                               "frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}

# What the page shows, each a query of the monitoring role's views.  Products: the least
# available first (the sold out at the top), PRODUCTS_SHOWN of them, and how many there are.
QUERIES = {
    "products": "SELECT product_id, stock, reserved, available FROM {s}.hc_ops_products"
                f" ORDER BY available, product_id LIMIT {PRODUCTS_SHOWN}",
    "product_count": "SELECT count(*) AS products FROM {s}.hc_ops_products",
    "metrics": "SELECT metric, label, value FROM {s}.hc_metrics"
               " WHERE metric IN ('assets', 'holds', 'group_holds', 'stock', 'leases', 'attempts')",
    "sales": "SELECT minute, assets_sold, units_sold FROM {s}.hc_ops_sales ORDER BY minute",
    "sweeper": "SELECT database, state, reason, last_end, runs, failures FROM {s}.hc_ops_sweeper"
               " ORDER BY database",
}

router = APIRouter()


def authorized(request: Request) -> bool:
    """HTTP Basic with HC_OPS_USER and HC_OPS_PASSWORD, compared in constant time."""
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    if not (USER and PASSWORD) or scheme.lower() != "basic":
        return False
    try:
        user, _, password = base64.b64decode(value, validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return False
    return hmac.compare_digest(user.encode(), USER.encode()) & hmac.compare_digest(password.encode(),
                                                                                   PASSWORD.encode())


def refused(request: Request):
    """None when the request may see the page; else its answer (before any connection)."""
    if not DSN:
        return Response(status_code=404)
    if not authorized(request):
        return Response(status_code=401, headers={"WWW-Authenticate": 'Basic realm="holdcommit ops"'})
    return None


async def connect(name):
    return await psycopg.AsyncConnection.connect(DSN, autocommit=True, application_name=name)


async def snapshot(conn) -> dict:
    """Every query's rows, read in one snapshot, as JSON-ready values."""
    out = {}
    async with conn.transaction():
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        for name, text in QUERIES.items():
            cur = await conn.execute(sql.SQL(text).format(s=sql.Identifier(SCHEMA)))
            columns = [c.name for c in cur.description]
            out[name] = [dict(zip(columns, row)) for row in await cur.fetchall()]
        (out["at"],) = await (await conn.execute("SELECT pg_catalog.now()")).fetchone()
    out["product_count"] = out["product_count"][0]["products"]
    return json.loads(json.dumps(out, default=str))


class Hub:
    """The two connections every viewer shares, and the latest snapshot."""

    def __init__(self):
        self.viewers: set[asyncio.Queue] = set()
        self.task = None
        self.latest = None
        self.listening = False
        self.changed = asyncio.Event()

    def join(self):
        """A queue of snapshots for a new viewer; None if MAX_VIEWERS watch already."""
        if len(self.viewers) >= MAX_VIEWERS:
            return None
        queue = asyncio.Queue(maxsize=1)
        self.viewers.add(queue)
        if self.latest is not None:
            queue.put_nowait(self.latest)
        if self.task is None or self.task.done():
            self.task = asyncio.create_task(self.run())
        return queue

    def leave(self, queue):
        self.viewers.discard(queue)
        if not self.viewers:
            self.changed.set()  # the reader notices at once, and closes its connections

    def publish(self, data):
        self.latest = data
        for queue in self.viewers:
            if queue.full():
                queue.get_nowait()  # a slow viewer gets the newest snapshot, not every one
            queue.put_nowait(data)

    async def listen(self):
        """LISTEN holdcommit; each notification sets changed.  Opened again after a failure."""
        while True:
            try:
                async with await connect("holdcommit ops: listen") as conn:
                    await conn.execute("LISTEN holdcommit")
                    self.listening = True
                    self.changed.set()  # a snapshot that says so
                    async for _ in conn.notifies():
                        self.changed.set()
            except psycopg.Error as e:
                log.warning("ops: LISTEN holdcommit failed, polling every %s s meanwhile: %s", POLL, e)
            finally:
                if self.listening:
                    self.listening = False
                    self.changed.set()
            await asyncio.sleep(RETRY)

    async def run(self):
        listener = asyncio.create_task(self.listen())
        try:
            while self.viewers:
                try:
                    async with await connect("holdcommit ops: read") as conn:
                        while self.viewers:
                            data = await snapshot(conn)
                            data["updates"] = "notify" if self.listening else "polling"
                            self.publish(data)
                            try:
                                await asyncio.wait_for(self.changed.wait(), POLL)
                                await asyncio.sleep(SETTLE)
                            except asyncio.TimeoutError:
                                pass
                            self.changed.clear()
                except psycopg.errors.UndefinedTable as e:
                    self.publish({"error": "this database's holdcommit has no view of the page:"
                                           " ALTER EXTENSION holdcommit UPDATE (0.4.0)"})
                    log.warning("ops: %s", e)
                    await asyncio.sleep(POLL)
                except psycopg.Error as e:
                    self.publish({"error": "the database cannot be read: " + str(e).strip()})
                    log.warning("ops: reading the page's views failed: %s", e)
                    await asyncio.sleep(RETRY)
        finally:
            listener.cancel()
            await asyncio.gather(listener, return_exceptions=True)
            self.latest = None
            if self.viewers:  # one came while this run was ending
                self.task = asyncio.create_task(self.run())


hub = Hub()


def event(data: dict) -> str:
    return f"data: {json.dumps(data, separators=(',', ':'))}\n\n"


@router.get("/ops")
async def page(request: Request):
    return refused(request) or HTMLResponse(PAGE, headers=HEADERS)


@router.get("/ops/data")
async def data(request: Request):
    """The latest snapshot (the first one, if nobody watches)."""
    if (answer := refused(request)) is not None:
        return answer
    queue = hub.join()
    if queue is None:
        return Response(status_code=503, headers={"Retry-After": "5"})
    try:
        latest = await asyncio.wait_for(queue.get(), 10)
    except asyncio.TimeoutError:
        return Response(status_code=503, headers={"Retry-After": "5"})
    finally:
        hub.leave(queue)
    return JSONResponse(latest, status_code=503 if "error" in latest else 200,
                        headers={"Cache-Control": "no-store"})


@router.get("/ops/events")
async def events(request: Request):
    if (answer := refused(request)) is not None:
        return answer
    queue = hub.join()
    if queue is None:
        return Response(status_code=503, headers={"Retry-After": "5"})

    async def stream():
        try:
            while True:
                try:
                    yield event(await asyncio.wait_for(queue.get(), 15))
                except asyncio.TimeoutError:
                    yield ": still here\n\n"  # a proxy keeps a quiet stream open
        finally:
            hub.leave(queue)

    return StreamingResponse(stream(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})
