"""The operators' page of the example shop: /ops, a sale as it happens.

Stock and availability per product, holds and reservations by state, sold per minute, the
background sweeper's state, leases and attempts awaiting review: the views of a monitoring
role (hc_grant_monitor: hc_metrics, hc_ops_products, hc_ops_sales, hc_ops_sweeper), which
hold no idempotency key, buyer or owner.  The page (ops.html) keeps an EventSource on
/ops/events, which sends a new snapshot whenever holdcommit notifies (LISTEN holdcommit, when
holdcommit.notify is on) and every HC_OPS_POLL seconds anyway; /ops/data is one snapshot.

Settings (environment):
  HC_OPS_DATABASE_URL  a libpq connection string for the monitoring role, straight to
                       PostgreSQL: LISTEN needs a session of its own, which PgBouncer in
                       transaction mode does not give.  Unset: /ops is not served (404).
  HC_OPS_USER, HC_OPS_PASSWORD   HTTP Basic authentication; both must be set, and every
                       /ops request without them is 401.
  HC_OPS_SCHEMA        the extension's schema (default holdcommit)
  HC_OPS_POLL          seconds between snapshots when nothing is notified (default 2)
"""
import asyncio
import base64
import binascii
import hmac
import json
import os
from pathlib import Path

import psycopg
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from psycopg import sql

DSN = os.environ.get("HC_OPS_DATABASE_URL")
USER = os.environ.get("HC_OPS_USER", "")
PASSWORD = os.environ.get("HC_OPS_PASSWORD", "")
SCHEMA = os.environ.get("HC_OPS_SCHEMA", "holdcommit")
POLL = float(os.environ.get("HC_OPS_POLL", "2"))
# A burst of notifications (a sale) makes one snapshot, this long after the first.
SETTLE = 0.25
PAGE = (Path(__file__).parent / "ops.html").read_text(encoding="utf-8")

router = APIRouter()

# What the page shows, each a query of the monitoring role's views.
QUERIES = {
    "products": "SELECT product_id, stock, reserved, available FROM {s}.hc_ops_products"
                " ORDER BY product_id LIMIT 50",
    "metrics": "SELECT metric, label, value FROM {s}.hc_metrics"
               " WHERE metric IN ('assets', 'holds', 'group_holds', 'stock', 'leases', 'attempts')",
    "sales": "SELECT minute, assets_sold, units_sold FROM {s}.hc_ops_sales ORDER BY minute",
    "sweeper": "SELECT database, state, last_end, next_run, runs, total_expired_holds,"
               " total_expired_reservations FROM {s}.hc_ops_sweeper",
}


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
    """None when the request may see the page; else its answer."""
    if not DSN:
        return Response(status_code=404)
    if not authorized(request):
        return Response(status_code=401, headers={"WWW-Authenticate": 'Basic realm="holdcommit ops"'})
    return None


async def snapshot(conn) -> dict:
    """Every query's rows, read in one transaction (one snapshot), as JSON-ready dicts."""
    out = {}
    async with conn.transaction():
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        for name, text in QUERIES.items():
            cur = await conn.execute(sql.SQL(text).format(s=sql.Identifier(SCHEMA)))
            columns = [c.name for c in cur.description]
            out[name] = [dict(zip(columns, row)) for row in await cur.fetchall()]
        (out["at"],) = await (await conn.execute("SELECT pg_catalog.now()")).fetchone()
    return out


def event(data: dict) -> str:
    return f"data: {json.dumps(data, default=str, separators=(',', ':'))}\n\n"


@router.get("/ops")
async def page(request: Request):
    return refused(request) or HTMLResponse(PAGE, headers={"Cache-Control": "no-store"})


@router.get("/ops/data")
async def data(request: Request):
    if (answer := refused(request)) is not None:
        return answer
    async with await psycopg.AsyncConnection.connect(DSN, autocommit=True) as conn:
        return JSONResponse(json.loads(json.dumps(await snapshot(conn), default=str)))


async def listen(notified: asyncio.Event) -> None:
    """Set notified at each notification of holdcommit, on a connection of its own."""
    async with await psycopg.AsyncConnection.connect(DSN, autocommit=True) as conn:
        await conn.execute("LISTEN holdcommit")
        async for _ in conn.notifies():
            notified.set()


@router.get("/ops/events")
async def events(request: Request):
    if (answer := refused(request)) is not None:
        return answer
    conn = await psycopg.AsyncConnection.connect(DSN, autocommit=True)
    (notify,) = await (await conn.execute(
        "SELECT pg_catalog.current_setting('holdcommit.notify', true) IS NOT DISTINCT FROM 'on'")).fetchone()

    async def stream():
        notified = asyncio.Event()
        listener = asyncio.create_task(listen(notified)) if notify else None
        try:
            while not await request.is_disconnected():
                data = await snapshot(conn)
                data["updates"] = "notify" if notify else "polling"
                yield event(data)
                try:
                    await asyncio.wait_for(notified.wait(), POLL)
                    await asyncio.sleep(SETTLE)
                except asyncio.TimeoutError:
                    pass
                notified.clear()
        finally:
            if listener is not None:
                listener.cancel()
                await asyncio.gather(listener, return_exceptions=True)
            await conn.close()

    return StreamingResponse(stream(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})
