"""The checkout API of a web shop on top of holdcommit (FastAPI, psycopg 3, a connection pool).

It serves the hold-and-commit API of the seed article: hold a unique asset with an
Idempotency-Key, commit it after payment, release or extend it; reserve counted stock (one
product or a multi-item order), finalize or unreserve it; list what is available.  Every
decision is the database's: the service calls one hc_* function per request in autocommit
mode and turns its result or its SQLSTATE into an HTTP answer (ERRORS below, the README's
table).  It connects as an application role that was given hc_grant_app(), never as a
superuser.

Run it with Debian's python3 (python3-fastapi, python3-uvicorn, python3-psycopg,
python3-psycopg-pool):

    HC_DATABASE_URL='host=/tmp/holdcommit-54320 port=54320 dbname=shop user=shop_app' \
        /usr/bin/python3 -m uvicorn --app-dir examples/http app:app --port 8080

Settings (environment): HC_DATABASE_URL (a libpq connection string; empty: the PG* variables),
HC_POOL_SIZE (connections, default 10), HC_PGBOUNCER=1 when HC_DATABASE_URL points at a
PgBouncer in transaction pooling mode (no server-side prepared statements then: PgBouncer
1.18 would hand them to another client's server connection).
"""

import logging
import os
from datetime import timezone

import psycopg
from fastapi import FastAPI, Header, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool, PoolTimeout
from pydantic import BaseModel, StrictBool, StrictFloat, StrictInt, StrictStr

log = logging.getLogger("holdcommit.example")

# SQLSTATE -> (HTTP status, error_code): the README's "Errors and HTTP statuses" table, and
# the only place the service decides a status from an error.  Any other SQLSTATE of class 22
# (data exception: a number out of range, say) is bad input as well: CLASS_22.
ERRORS = {
    "RS001": (409, "ASSET_UNAVAILABLE"),
    "RS002": (409, "INSUFFICIENT_STOCK"),
    "RS003": (410, "RESERVATION_EXPIRED"),
    "RS004": (409, "RESERVATION_NOT_ACTIVE"),
    "RS005": (422, "IDEMPOTENCY_KEY_REUSED"),
    "RS006": (404, "NOT_FOUND"),
    "RS007": (409, "LOCK_NOT_HELD"),
    "22004": (400, "INVALID_INPUT"),
    "22023": (400, "INVALID_INPUT"),
    "22001": (400, "INVALID_INPUT"),
}
CLASS_22 = (400, "INVALID_INPUT")

DEFAULT_LIST_LIMIT = 100
MAX_LIST_LIMIT = 1000

pool = AsyncConnectionPool(
    os.environ.get("HC_DATABASE_URL", ""),
    min_size=int(os.environ.get("HC_POOL_SIZE", "10")),
    max_size=int(os.environ.get("HC_POOL_SIZE", "10")),
    kwargs={
        "autocommit": True,
        "prepare_threshold": None if os.environ.get("HC_PGBOUNCER") == "1" else 5,
    },
    open=False,
)

app = FastAPI(title="holdcommit example shop")


# Request bodies.  Strict types: a quantity of 2.5 or a buyer id of 42 is bad input (400),
# never silently made 2 or "42"; a missing field goes to the function as NULL, which refuses
# it with 22004 (400) like any other bad argument.
Seconds = StrictInt | StrictFloat


class HoldBody(BaseModel):
    buyer_id: StrictStr | None = None
    ttl_seconds: Seconds | None = None


class ReserveBody(BaseModel):
    buyer_id: StrictStr | None = None
    qty: StrictInt | None = None
    ttl_seconds: Seconds | None = None


class OrderBody(BaseModel):
    buyer_id: StrictStr | None = None
    items: list | None = None
    ttl_seconds: Seconds | None = None


class CommitBody(BaseModel):
    late_ok: StrictBool = False


class ExtendBody(BaseModel):
    ttl_seconds: Seconds | None = None


@app.on_event("startup")
async def open_pool():
    await pool.open(wait=True, timeout=30)


@app.on_event("shutdown")
async def close_pool():
    await pool.close()


def error_response(sqlstate, message, detail=None, hint=None):
    """The HTTP answer for a SQLSTATE: its status from ERRORS, the database's words in the body."""
    status, code = ERRORS.get(sqlstate) or (CLASS_22 if sqlstate.startswith("22") else (500, "INTERNAL"))
    body = {"error_code": code, "sqlstate": sqlstate, "message": message}
    if detail:
        body["detail"] = detail
    if hint:
        body["hint"] = hint
    return JSONResponse(body, status_code=status)


@app.exception_handler(psycopg.Error)
async def database_error(request: Request, e: psycopg.Error):
    """The outcomes of the contract go to the client with the database's words; anything else
    (a lost connection, a bug) is logged here and answered 500 without its details."""
    if e.sqlstate is None or not (e.sqlstate in ERRORS or e.sqlstate.startswith("22")):
        log.error("%s %s: %s %s", request.method, request.url.path, e.sqlstate, e)
        return error_response(e.sqlstate or "XX000", "internal error")
    return error_response(e.sqlstate, e.diag.message_primary, e.diag.message_detail, e.diag.message_hint)


@app.exception_handler(PoolTimeout)
async def pool_timeout(request: Request, e: PoolTimeout):
    return JSONResponse({"error_code": "UNAVAILABLE", "message": str(e)}, status_code=503)


@app.exception_handler(RequestValidationError)
async def bad_request(request: Request, e: RequestValidationError):
    """A body that is not the JSON asked for is bad input, 400 like class 22 (FastAPI says 422,
    which this API keeps for a reused idempotency key)."""
    return JSONResponse({"error_code": "INVALID_INPUT", "message": "malformed request body",
                         "detail": e.errors()}, status_code=400)


def utc(ts):
    return None if ts is None else ts.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def hold_body(r):
    """An hc_reservation as the API shows it.  replayed is not in the body but in the status
    (201 new, 200 replay) and a header, so a retry gets byte for byte the body of the first."""
    return {"reservation_id": r[0], "asset_id": r[1], "buyer_id": r[2], "status": r[3],
            "expires_at": utc(r[4]), "created_at": utc(r[5])}


def stock_body(r):
    """An hc_stock_reservation as the API shows it (replayed likewise left out)."""
    return {"reservation_id": r[0], "buyer_id": r[1], "status": r[2], "items": r[3],
            "expires_at": utc(r[4]), "created_at": utc(r[5])}


def ttl_arg(ttl_seconds):
    """A named ttl argument when the client gave one; none, and the function's default applies."""
    if ttl_seconds is None:
        return "", []
    return ", ttl => pg_catalog.make_interval(secs => %s)", [ttl_seconds]


async def call(sql, args):
    """Run one hc_* call in autocommit mode and return its single row."""
    async with pool.connection() as conn:
        cur = await conn.execute(sql, args)
        return await cur.fetchone()


def answer(row, body, created_status=201):
    """201 for what this request created, 200 for a replay (the stored result) or a transition."""
    replayed = row[6]
    return JSONResponse(body(row), status_code=200 if replayed else created_status,
                        headers={"Idempotent-Replayed": "true" if replayed else "false"})


HOLD_COLUMNS = "reservation_id, asset_id, buyer_id, status, expires_at, created_at, replayed"
STOCK_COLUMNS = "reservation_id, buyer_id, status, items, expires_at, created_at, replayed"


# Unique assets ---------------------------------------------------------------------------

@app.post("/v1/assets/{asset_id}/reservations")
async def hold(asset_id: str, body: HoldBody, idempotency_key: str | None = Header(None)):
    ttl_sql, ttl = ttl_arg(body.ttl_seconds)
    row = await call(f"SELECT {HOLD_COLUMNS} FROM hc_hold(%s, %s, %s{ttl_sql})",
                     [asset_id, body.buyer_id, idempotency_key] + ttl)
    return answer(row, hold_body)


@app.post("/v1/reservations/{reservation_id}/commit")
async def commit(reservation_id: str, body: CommitBody | None = None):
    row = await call(f"SELECT {HOLD_COLUMNS} FROM hc_commit(%s, late_ok => %s)",
                     [reservation_id, body.late_ok if body else False])
    return answer(row, hold_body, created_status=200)


@app.post("/v1/reservations/{reservation_id}/release")
async def release(reservation_id: str):
    row = await call(f"SELECT {HOLD_COLUMNS} FROM hc_release(%s)", [reservation_id])
    return answer(row, hold_body, created_status=200)


@app.post("/v1/reservations/{reservation_id}/extend")
async def extend(reservation_id: str, body: ExtendBody):
    row = await call(f"SELECT {HOLD_COLUMNS} FROM hc_extend(%s, pg_catalog.make_interval(secs => %s))",
                     [reservation_id, body.ttl_seconds])
    return answer(row, hold_body, created_status=200)


ASSET_SELECT = """
    SELECT id, name, status, hold_expires_at,
           status = 'AVAILABLE' OR (status = 'HELD' AND hold_expires_at <= pg_catalog.clock_timestamp())
               AS available
      FROM hc_assets"""


def asset_body(r):
    """An asset and whether a hold would take it now (an expired hold counts as available:
    the next hold reclaims it inline)."""
    return {"asset_id": r[0], "name": r[1], "status": r[2], "hold_expires_at": utc(r[3]),
            "available": r[4]}


@app.get("/v1/assets")
async def list_assets(after: str = "", limit: int = DEFAULT_LIST_LIMIT, available: bool | None = None):
    limit = max(1, min(limit, MAX_LIST_LIMIT))
    async with pool.connection() as conn:
        cur = await conn.execute(
            f"SELECT * FROM ({ASSET_SELECT} WHERE id > %s) a"
            " WHERE %s::boolean IS NULL OR a.available = %s ORDER BY a.id LIMIT %s",
            [after, available, available, limit])
        return {"assets": [asset_body(r) for r in await cur.fetchall()]}


@app.get("/v1/assets/{asset_id}")
async def get_asset(asset_id: str):
    async with pool.connection() as conn:
        row = await (await conn.execute(f"{ASSET_SELECT} WHERE id = %s", [asset_id])).fetchone()
    if row is None:
        return error_response("RS006", f'asset "{asset_id}" does not exist')
    return asset_body(row)


# Counted stock ---------------------------------------------------------------------------

@app.post("/v1/products/{product_id}/reservations")
async def reserve(product_id: str, body: ReserveBody, idempotency_key: str | None = Header(None)):
    ttl_sql, ttl = ttl_arg(body.ttl_seconds)
    row = await call(f"SELECT {STOCK_COLUMNS} FROM hc_reserve(%s, %s, %s, %s{ttl_sql})",
                     [product_id, body.qty, body.buyer_id, idempotency_key] + ttl)
    return answer(row, stock_body)


@app.post("/v1/orders")
async def order(body: OrderBody, idempotency_key: str | None = Header(None)):
    ttl_sql, ttl = ttl_arg(body.ttl_seconds)
    row = await call(f"SELECT {STOCK_COLUMNS} FROM hc_reserve_items(%s, %s, %s{ttl_sql})",
                     [None if body.items is None else Jsonb(body.items), body.buyer_id,
                      idempotency_key] + ttl)
    return answer(row, stock_body)


@app.post("/v1/stock-reservations/{reservation_id}/finalize")
async def finalize(reservation_id: str, body: CommitBody | None = None):
    row = await call(f"SELECT {STOCK_COLUMNS} FROM hc_finalize(%s, late_ok => %s)",
                     [reservation_id, body.late_ok if body else False])
    return answer(row, stock_body, created_status=200)


@app.post("/v1/stock-reservations/{reservation_id}/unreserve")
async def unreserve(reservation_id: str):
    row = await call(f"SELECT {STOCK_COLUMNS} FROM hc_unreserve(%s)", [reservation_id])
    return answer(row, stock_body, created_status=200)


# What a reserve would see now: the stored available plus the units of expired lines that the
# next reserve of the product reclaims inline (never select idempotency_key: an application
# role may not read it).
PRODUCT_SELECT = """
    SELECT i.product_id, i.stock, i.reserved,
           i.available + COALESCE((SELECT pg_catalog.sum(l.qty)::integer
                                     FROM hc_stock_reservation_lines l
                                    WHERE l.product_id = i.product_id AND l.status = 'RESERVED'
                                      AND l.expires_at <= pg_catalog.clock_timestamp()), 0)
      FROM hc_inventory i"""


def product_body(r):
    return {"product_id": r[0], "stock": r[1], "reserved": r[2], "available": r[3]}


@app.get("/v1/products")
async def list_products(after: str = "", limit: int = DEFAULT_LIST_LIMIT):
    limit = max(1, min(limit, MAX_LIST_LIMIT))
    async with pool.connection() as conn:
        cur = await conn.execute(f"{PRODUCT_SELECT} WHERE i.product_id > %s ORDER BY i.product_id LIMIT %s",
                                 [after, limit])
        return {"products": [product_body(r) for r in await cur.fetchall()]}


@app.get("/v1/products/{product_id}")
async def get_product(product_id: str):
    async with pool.connection() as conn:
        row = await (await conn.execute(f"{PRODUCT_SELECT} WHERE i.product_id = %s", [product_id])).fetchone()
    if row is None:
        return error_response("RS006", f'product "{product_id}" does not exist')
    return product_body(row)


@app.get("/healthz")
async def healthz():
    async with pool.connection() as conn:
        await conn.execute("SELECT 1")
    return {"ok": True}
