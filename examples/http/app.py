"""The checkout API of a web shop on top of holdcommit (FastAPI, psycopg 3, a connection pool,
and holdcommit's Python package, clients/python).

It serves the hold-and-commit API of the seed article: hold a unique asset with an
Idempotency-Key, commit it after payment, release or extend it; reserve counted stock (one
product or a multi-item order), finalize or unreserve it; read a reservation; list what is
available.  Every decision is the database's: the service makes one call of the package
(holdcommit.aio) per request, in autocommit mode, and turns its result or its error into an
HTTP answer: the status is the error's http_status (clients/sqlstates.json), and every error
is an RFC 9457 problem (application/problem+json) with the SQLSTATE and the hint.  It
connects as an application role set up as doc/application.md prints (hc_grant_app, the
extension's schema on its search_path, a lock_timeout), never as a superuser.

Run it with Debian's python3 (python3-fastapi, python3-uvicorn, python3-psycopg,
python3-psycopg-pool) in a venv that has the package (doc/application.md):

    HC_DATABASE_URL='host=/tmp/holdcommit-54320 port=54320 dbname=shop user=shop_app' \
        .venv/bin/python examples/http/app.py --port 8080

(`python -m uvicorn --app-dir examples/http app:app` serves the same API, but then a request
that is not HTTP, a NUL byte in a header say, is refused by uvicorn in plain text.)

Settings (environment): HC_DATABASE_URL (a libpq connection string; empty: the PG* variables),
HC_POOL_SIZE (connections, default 10), HC_PGBOUNCER=1 when HC_DATABASE_URL points at a
PgBouncer in transaction pooling mode (no server-side prepared statements then: PgBouncer
1.18 would hand them to another client's server connection), HC_MAX_BODY (bytes, default
65536), HC_MAX_ITEMS (lines of an order, default 100, holdcommit.max_items' default); and
those of the operators' page, /ops (ops.py): HC_OPS_DATABASE_URL, HC_OPS_USER, HC_OPS_PASSWORD.
"""

import argparse
import http
import json
import logging
import math
import os
import re
from datetime import timedelta, timezone
from urllib.parse import unquote_to_bytes

import holdcommit.aio as hc
import psycopg
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from holdcommit import Hold, Item, StockReservation
from holdcommit.errors import NAME, Busy, HoldcommitError, NotFound, error_from
from psycopg_pool import AsyncConnectionPool, PoolTimeout
from pydantic import BaseModel, StrictBool, StrictStr, conint, root_validator
from starlette.exceptions import HTTPException

import ops

log = logging.getLogger("holdcommit.example")

# The CONTEXT of an error in the wait for another call with the same idempotency key
# (doc/reference.md, Conventions): the request with that key is still in flight.
KEY_WAIT = "waiting for another call with the same idempotency key"

MAX_BODY = int(os.environ.get("HC_MAX_BODY", "65536"))
MAX_ITEMS = int(os.environ.get("HC_MAX_ITEMS", "100"))
DEFAULT_LIST_LIMIT = 100
MAX_LIST_LIMIT = 1000
INT4 = 2**31 - 1
# Every problem's type is this followed by its name (doc/application.md lists them).
PROBLEM = "urn:holdcommit:problem:"

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
# The operators' page, /ops (ops.py: its own settings, its own role, HTTP authentication).
app.include_router(ops.router)


# Problems (RFC 9457) ---------------------------------------------------------------------

def problem(status, name, title, detail=None, headers=None, **extensions):
    """An application/problem+json answer; name None is about:blank (the status says it all)."""
    body = {"type": PROBLEM + name if name else "about:blank", "title": title, "status": status}
    if detail:
        body["detail"] = detail
    body.update((k, v) for k, v in extensions.items() if v is not None)
    if status == 503 or name == "request_in_progress":
        headers = {**(headers or {}), "Retry-After": "1"}
    return JSONResponse(body, status_code=status, headers=headers, media_type="application/problem+json")


def bad_request(detail, headers=None):
    return problem(400, "invalid_request", "Invalid request", detail, headers)


def error_problem(e: HoldcommitError):
    """The answer for a holdcommit error: its status (sqlstates.json's, through the library),
    its SQLSTATE's name as the type, the database's words.  The words of a 500 stay in the
    log: an internal error is the service's, not the client's."""
    name = NAME.get(e.sqlstate) or ("invalid_argument" if e.http_status == 400 else "internal_error")
    text, hint = (f"{e.message}. {e.detail}" if e.detail else e.message), e.hint
    if e.http_status == 500:
        text, hint = "internal error", None
    return problem(e.http_status, name, name.replace("_", " ").capitalize(), text, sqlstate=e.sqlstate,
                   hint=hint)


class InProgress(Exception):
    """A call with this request's idempotency key is still running (the bounded wait ran out)."""


@app.exception_handler(InProgress)
async def in_progress(request: Request, e: InProgress):
    return problem(409, "request_in_progress", "Request in progress",
                   "A request with this Idempotency-Key is still being processed: retry it later,"
                   " with the same key, to get its answer.")


@app.exception_handler(HoldcommitError)
async def database_error(request: Request, e: HoldcommitError):
    """The outcomes of the contract go to the client with the database's words; a 500 (a bug,
    a broken invariant) is logged here, a 503 (busy, a lost connection) as a warning."""
    if e.http_status >= 500:
        (log.error if e.http_status == 500 else log.warning)("%s %s: %s", request.method, request.url.path,
                                                             str(e).replace("\n", " "))
    return error_problem(e)


@app.exception_handler(psycopg.Error)
async def psycopg_error(request: Request, e: psycopg.Error):
    return await database_error(request, error_from(e))


@app.exception_handler(PoolTimeout)
async def pool_timeout(request: Request, e: PoolTimeout):
    return problem(503, "service_unavailable", "Service unavailable", "no database connection was free")


@app.exception_handler(RequestValidationError)
async def invalid_request(request: Request, e: RequestValidationError):
    """A body that is not the JSON asked for is bad input, 400 like class 22 (FastAPI says 422,
    which this API keeps for a reused idempotency key)."""
    errors = [{"loc": list(err["loc"]), "msg": err["msg"]} for err in e.errors()]
    first = errors[0] if errors else {"loc": [], "msg": "malformed request"}
    where = ".".join(str(part) for part in first["loc"] if part != "__root__")
    return problem(400, "invalid_request", "Invalid request", f"{where}: {first['msg']}", errors=errors)


@app.exception_handler(HTTPException)
async def http_error(request: Request, e: HTTPException):
    """FastAPI's and Starlette's own answers: an unknown route (404), a method it does not
    serve (405), a body it could not parse (400)."""
    phrase = http.HTTPStatus(e.status_code).phrase
    if e.status_code == 400:
        return bad_request(e.detail)
    return problem(e.status_code, None, phrase, None if e.detail == phrase else e.detail, headers=e.headers)


@app.exception_handler(Exception)
async def internal_error(request: Request, e: Exception):
    return problem(500, "internal_error", "Internal error")


# The request's bytes, before FastAPI parses anything ---------------------------------------

class Guard:
    """ASGI middleware: refuse a request whose body's length is ambiguous (400, the connection
    closed): a proxy in front may have read another body than the one h11 reads, the shape of
    request smuggling; refuse a body larger than MAX_BODY (413) before reading it when its
    Content-Length says so, else as soon as it grows past it, so that a large body costs
    neither parsing nor memory; refuse a path or a query that is not UTF-8 once
    percent-decoded (400): decoded, %ff and %fe would both be U+FFFD, one id for two URLs;
    refuse a NUL byte in the path, the query, a header or the body (400): PostgreSQL's text
    cannot hold one."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        # h11 has refused conflicting Content-Lengths, two Transfer-Encodings and any coding
        # but chunked; it lets chunked override a Content-Length (RFC 9112 6.3 allows that, but
        # a proxy in front may have read the Content-Length) and takes chunked in HTTP/1.0 (RFC
        # 9112 6.1: faulty framing).  The connection closes: the rest of its bytes are unread.
        names = [name for name, _ in scope["headers"]]
        if b"transfer-encoding" in names and (b"content-length" in names or scope["http_version"] == "1.0"):
            return await bad_request("a body has a Content-Length or, in HTTP/1.1, Transfer-Encoding: chunked;"
                                     " never both", {"Connection": "close"})(scope, receive, send)
        length = dict(scope["headers"]).get(b"content-length", b"")  # digits: h11 refused any other
        if length.isdigit() and int(length) > MAX_BODY:
            return await too_large()(scope, receive, send)
        try:
            unquote_to_bytes(scope["raw_path"]).decode()
            unquote_to_bytes(scope["query_string"]).decode()
        except UnicodeDecodeError:
            return await bad_request("the path and the query must be UTF-8 once percent-decoded")(
                scope, receive, send)
        if ("\x00" in scope["path"] or b"\x00" in unquote_to_bytes(scope["query_string"])
                or any(b"\x00" in value for _, value in scope["headers"])):
            return await bad_request("NUL bytes are not allowed in the path, the query or a header")(
                scope, receive, send)
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client went away before it sent its request: nothing to answer
            body += message.get("body", b"")
            if len(body) > MAX_BODY:
                return await too_large()(scope, receive, send)
            if not message.get("more_body"):
                break
        if b"\x00" in body:
            return await bad_request("NUL bytes are not allowed in the body")(scope, receive, send)
        sent = False

        async def replay():
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        await self.app(scope, replay, send)


def too_large():
    return problem(413, "body_too_large", "Request body too large",
                   f"a request body has at most {MAX_BODY} bytes", max_body=MAX_BODY)


app.add_middleware(Guard)


# Request bodies --------------------------------------------------------------------------

def no_nul(value, where="body"):
    """A NUL written as \\u0000 in a JSON string, anywhere in the body; or a lone surrogate
    (\\ud800), which is not text in UTF-8: psycopg could not send it (a 500)."""
    if isinstance(value, str):
        if "\x00" in value:
            raise ValueError(f"NUL bytes are not allowed ({where})")
        if not value.isascii():
            try:
                value.encode()
            except UnicodeEncodeError:
                raise ValueError(f"a lone surrogate is not text ({where})") from None
    elif isinstance(value, dict):
        for k, v in value.items():
            no_nul(k, where)
            no_nul(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            no_nul(v, f"{where}[{i}]")


class Body(BaseModel):
    @root_validator(pre=True)
    def _no_nul(cls, values):
        no_nul(values)
        return values


# Strict types: a quantity of 2.5 or a buyer id of 42 is bad input (400), never silently made
# 2 or "42"; integers must fit PostgreSQL's integer and a ttl be a finite number of seconds
# that fits it too (the function refuses more than holdcommit.max_ttl); a missing field goes
# to the function as NULL, which refuses it with 22004 (400) like any other bad argument.
Int4 = conint(strict=True, ge=-INT4 - 1, le=INT4)
Limit = conint(ge=-INT4 - 1, le=INT4)  # a query parameter: a string of digits, not strict


class Seconds(float):
    """A JSON number of seconds, integer or not; finite, at most INT4 either way."""

    @classmethod
    def __get_validators__(cls):
        yield cls.check

    @classmethod
    def check(cls, v):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError("a number of seconds is a JSON number")
        if not math.isfinite(v) or abs(v) > INT4:
            raise ValueError(f"a number of seconds is finite and at most {INT4}")
        return v


class HoldBody(Body):
    buyer_id: StrictStr | None = None
    ttl_seconds: Seconds | None = None


class ReserveBody(Body):
    buyer_id: StrictStr | None = None
    qty: Int4 | None = None
    ttl_seconds: Seconds | None = None


class OrderBody(Body):
    buyer_id: StrictStr | None = None
    items: list | None = None
    ttl_seconds: Seconds | None = None


class BestBody(Body):
    pool: StrictStr | None = None
    n: Int4 | None = None


class HoldTokenBody(Body):
    """A hold token: the hold of these objects (asset ids), or of the n best of a pool."""
    buyer_id: StrictStr | None = None
    objects: list | None = None
    best: BestBody | None = None
    ttl_seconds: Seconds | None = None


class CommitBody(Body):
    late_ok: StrictBool = False


class ExtendBody(Body):
    ttl_seconds: Seconds | None = None


# The Idempotency-Key header: a structured-field string (RFC 8941 sf-string, as the IETF
# draft has it: printable ASCII in quotes, \" and \\ escaped), or the same characters bare
# (visible ASCII without quotes, backslashes or spaces: a UUID as most clients send it).
SF_STRING = re.compile(r'"((?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\])*)"')
BARE_KEY = re.compile(r'[\x21\x23-\x5b\x5d-\x7e]+')


def idempotency_key(request: Request):
    values = request.headers.getlist("idempotency-key")
    if not values:
        raise KeyProblem("idempotency_key_required", "Idempotency-Key header required",
                         "this request needs an Idempotency-Key header: a new key for a new request,"
                         " the same key for its retries")
    if len(values) > 1:
        raise KeyProblem("invalid_idempotency_key", "Invalid Idempotency-Key", "more than one Idempotency-Key")
    value = values[0]  # Starlette decoded the bytes as Latin-1: a byte over 0x7e fails below
    if m := SF_STRING.fullmatch(value):
        return re.sub(r'\\(["\\])', r"\1", m.group(1))
    if BARE_KEY.fullmatch(value):
        return value
    raise KeyProblem("invalid_idempotency_key", "Invalid Idempotency-Key",
                     'an Idempotency-Key is a string of printable ASCII: "..." (RFC 8941), or bare'
                     " without quotes, backslashes or spaces")


class KeyProblem(Exception):
    def __init__(self, name, title, detail):
        self.name, self.title, self.detail = name, title, detail


@app.exception_handler(KeyProblem)
async def key_problem(request: Request, e: KeyProblem):
    return problem(400, e.name, e.title, e.detail)


@app.on_event("startup")
async def open_pool():
    await pool.open(wait=True, timeout=30)
    (bound,) = await read_one("SELECT pg_catalog.current_setting('lock_timeout')", [])
    if bound == "0":
        log.warning("the role has no lock_timeout: a request whose key is in flight waits as long as"
                    " the first call takes (doc/application.md: the set-up)")


@app.on_event("shutdown")
async def close_pool():
    await pool.close()


# Calls -----------------------------------------------------------------------------------

def utc(ts):
    return None if ts is None else ts.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def hold_body(h: Hold):
    """A hold as the API shows it.  replayed is not in the body but in the status (201 new,
    200 replay) and a header, so a retry gets byte for byte the body of the first."""
    return {"reservation_id": h.reservation_id, "asset_id": h.asset_id, "buyer_id": h.buyer_id,
            "status": h.status, "expires_at": utc(h.expires_at), "created_at": utc(h.created_at)}


def stock_body(r: StockReservation):
    """A stock reservation as the API shows it (replayed likewise left out)."""
    return {"reservation_id": r.reservation_id, "buyer_id": r.buyer_id, "status": r.status,
            "items": [{"product_id": i.product_id, "qty": i.qty} for i in r.items],
            "expires_at": utc(r.expires_at), "created_at": utc(r.created_at)}


def ttl_arg(ttl_seconds):
    """The ttl argument when the client gave one; none, and the call's default applies."""
    return {} if ttl_seconds is None else {"ttl": timedelta(seconds=ttl_seconds)}


async def call(function, *args, keyed=False, **kwargs):
    """One call of the library, in autocommit mode (one statement: nothing for PgBouncer to
    keep).  The role's lock_timeout (the set-up sets it) bounds its waits; a keyed call whose
    wait ran out while it waited for another call with the same key (its CONTEXT says so)
    is InProgress."""
    async with pool.connection() as conn:
        try:
            return await function(conn, *args, **kwargs)
        except Busy as e:
            cause = e.__cause__
            if (keyed and e.sqlstate == "55P03" and isinstance(cause, psycopg.Error)
                    and KEY_WAIT in (cause.diag.context or "")):
                raise InProgress() from e
            raise


def answer(result, body, created_status=201):
    """201 for what this request created, 200 for a replay (the stored result) or a transition."""
    return JSONResponse(body(result), status_code=200 if result.replayed else created_status,
                        headers={"Idempotent-Replayed": "true" if result.replayed else "false"})


# Unique assets ---------------------------------------------------------------------------

@app.post("/v1/assets/{asset_id}/reservations")
async def hold(asset_id: str, body: HoldBody, request: Request):
    key = idempotency_key(request)
    return answer(await call(hc.hold, asset_id, body.buyer_id, key, keyed=True, **ttl_arg(body.ttl_seconds)),
                  hold_body)


@app.post("/v1/reservations/{reservation_id}/commit")
async def commit(reservation_id: str, body: CommitBody | None = None):
    return answer(await call(hc.commit, reservation_id, body.late_ok if body else False), hold_body, 200)


@app.post("/v1/reservations/{reservation_id}/release")
async def release(reservation_id: str):
    return answer(await call(hc.release, reservation_id), hold_body, 200)


@app.post("/v1/reservations/{reservation_id}/extend")
async def extend(reservation_id: str, body: ExtendBody):
    ttl = None if body.ttl_seconds is None else timedelta(seconds=body.ttl_seconds)
    return answer(await call(hc.extend, reservation_id, ttl), hold_body, 200)


# Hold tokens: many seats, one hold, in the shape of seats.io's (a token, its objects, its
# expiry).  The token is the group hold's reservation id; book, release and extend act on
# every object of it.

def token_body(holds):
    """A group hold as the API shows it: its token, its objects (asset ids) and its expiry."""
    h = holds[0]
    return {"hold_token": h.reservation_id, "objects": sorted(x.asset_id for x in holds),
            "buyer_id": h.buyer_id, "status": h.status, "expires_at": utc(h.expires_at),
            "created_at": utc(h.created_at)}


def tokens_answer(holds, created_status=201):
    replayed = holds[0].replayed
    return JSONResponse(token_body(holds), status_code=200 if replayed else created_status,
                        headers={"Idempotent-Replayed": "true" if replayed else "false"})


@app.post("/v1/hold-tokens")
async def hold_token(body: HoldTokenBody, request: Request):
    key = idempotency_key(request)
    if (body.objects is None) == (body.best is None):
        return bad_request("give either objects (asset ids) or best ({pool, n})")
    if body.objects is not None:
        holds = await call(hc.hold_many, body.objects, body.buyer_id, key, keyed=True,
                           **ttl_arg(body.ttl_seconds))
    else:
        holds = await call(hc.hold_best, body.best.pool, body.best.n, body.buyer_id, key, keyed=True,
                           **ttl_arg(body.ttl_seconds))
    return tokens_answer(holds)


async def token_now(token):
    """The token's hold as it stands, every object (RS006 if there is none)."""
    rows = await read_all(HOLD_SELECT, [token])
    if not rows:
        raise NotFound(f'hold token "{token}" does not exist', "RS006")
    return [Hold(*r, replayed=False) for r in rows]


@app.get("/v1/hold-tokens/{token}")
async def get_hold_token(token: str):
    return token_body(await token_now(token))


async def token_call(function, token, *args):
    """book, release or extend of a hold token: the call on its id, then its objects as they are."""
    done = await call(function, token, *args)
    holds = await token_now(token)
    return JSONResponse(token_body(holds), status_code=200,
                        headers={"Idempotent-Replayed": "true" if done.replayed else "false"})


@app.post("/v1/hold-tokens/{token}/book")
async def book_hold_token(token: str, body: CommitBody | None = None):
    return await token_call(hc.commit, token, body.late_ok if body else False)


@app.post("/v1/hold-tokens/{token}/release")
async def release_hold_token(token: str):
    return await token_call(hc.release, token)


@app.post("/v1/hold-tokens/{token}/extend")
async def extend_hold_token(token: str, body: ExtendBody):
    ttl = None if body.ttl_seconds is None else timedelta(seconds=body.ttl_seconds)
    return await token_call(hc.extend, token, ttl)


# A reservation as it stands now, read from the tables (never idempotency_key or fingerprint:
# an application role may not read them).  A hold or reservation past its expires_at reads
# EXPIRED, as the next call on it finds it, even before a reclaim or the sweeper marks it.
HOLD_SELECT = """
    SELECT id, asset_id, buyer_id,
           CASE WHEN status = 'HELD' AND expires_at <= pg_catalog.clock_timestamp() THEN 'EXPIRED'
                ELSE status END,
           expires_at, created_at
      FROM hc_reservations WHERE id = %s"""
STOCK_SELECT = """
    SELECT r.id, r.buyer_id,
           CASE WHEN r.status = 'RESERVED' AND r.expires_at <= pg_catalog.clock_timestamp() THEN 'EXPIRED'
                ELSE r.status END,
           (SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object('product_id', l.product_id, 'qty', l.qty)
                                        ORDER BY l.product_id)
              FROM hc_stock_reservation_lines l WHERE l.reservation_id = r.id),
           r.expires_at, r.created_at
      FROM hc_stock_reservations r WHERE r.id = %s"""


async def read_all(sql, args):
    async with pool.connection() as conn:
        try:
            return await (await conn.execute(sql, args)).fetchall()
        except psycopg.Error as e:
            raise error_from(e) from e


async def read_one(sql, args):
    """The row of a statement that selects at most one, or None."""
    rows = await read_all(sql, args)
    return rows[0] if rows else None


def not_found(message):
    return error_problem(NotFound(message, "RS006"))


async def one(select_sql, id_, kind, body):
    """GET of one thing by its id: its body, or a 404 that names it."""
    row = await read_one(select_sql, [id_])
    if row is None:
        return not_found(f'{kind} "{id_}" does not exist')
    return body(row)


async def page(select_sql, args, limit, name, body):
    """GET of a list: select_sql (the rows after the cursor, in order of their id) cut to the
    limit, which is clamped to 1..MAX_LIST_LIMIT, as {name: [body, ...]}."""
    rows = await read_all(f"{select_sql} LIMIT %s", [*args, max(1, min(limit, MAX_LIST_LIMIT))])
    return {name: [body(r) for r in rows]}


@app.get("/v1/reservations/{reservation_id}")
async def get_reservation(reservation_id: str):
    """A hold or a stock reservation (their ids share one space)."""
    row = await read_one(HOLD_SELECT, [reservation_id])
    if row is not None:
        return hold_body(Hold(*row, replayed=False))
    return await get_stock_reservation(reservation_id)


@app.get("/v1/stock-reservations/{reservation_id}")
async def get_stock_reservation(reservation_id: str):
    return await one(STOCK_SELECT, reservation_id, "reservation", stock_row_body)


def stock_row_body(row):
    items = tuple(Item(line["product_id"], line["qty"]) for line in row[3])
    return stock_body(StockReservation(row[0], row[1], row[2], items, row[4], row[5], replayed=False))


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
async def list_assets(after: str = "", limit: Limit = DEFAULT_LIST_LIMIT, available: bool | None = None):
    return await page(f"SELECT * FROM ({ASSET_SELECT} WHERE id > %s) a"
                      " WHERE %s::boolean IS NULL OR a.available = %s ORDER BY a.id",
                      [after, available, available], limit, "assets", asset_body)


@app.get("/v1/assets/{asset_id}")
async def get_asset(asset_id: str):
    return await one(f"{ASSET_SELECT} WHERE id = %s", asset_id, "asset", asset_body)


# Counted stock ---------------------------------------------------------------------------

@app.post("/v1/products/{product_id}/reservations")
async def reserve(product_id: str, body: ReserveBody, request: Request):
    key = idempotency_key(request)
    return answer(await call(hc.reserve, product_id, body.qty, body.buyer_id, key, keyed=True,
                             **ttl_arg(body.ttl_seconds)), stock_body)


@app.post("/v1/orders")
async def order(body: OrderBody, request: Request):
    key = idempotency_key(request)
    # Counted here, before the database: an order of too many lines costs no call (the
    # function would refuse more than holdcommit.max_items with 22023: 400 as well).
    if body.items is not None and len(body.items) > MAX_ITEMS:
        return problem(400, "too_many_items", "Too many items",
                       f"an order has at most {MAX_ITEMS} lines; this one has {len(body.items)}",
                       max_items=MAX_ITEMS)
    return answer(await call(hc.reserve_items, body.items, body.buyer_id, key, keyed=True,
                             **ttl_arg(body.ttl_seconds)), stock_body)


@app.post("/v1/stock-reservations/{reservation_id}/finalize")
async def finalize(reservation_id: str, body: CommitBody | None = None):
    return answer(await call(hc.finalize, reservation_id, body.late_ok if body else False), stock_body, 200)


@app.post("/v1/stock-reservations/{reservation_id}/unreserve")
async def unreserve(reservation_id: str):
    return answer(await call(hc.unreserve, reservation_id), stock_body, 200)


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
async def list_products(after: str = "", limit: Limit = DEFAULT_LIST_LIMIT):
    return await page(f"{PRODUCT_SELECT} WHERE i.product_id > %s ORDER BY i.product_id",
                      [after], limit, "products", product_body)


@app.get("/v1/products/{product_id}")
async def get_product(product_id: str):
    return await one(f"{PRODUCT_SELECT} WHERE i.product_id = %s", product_id, "product", product_body)


@app.get("/healthz")
async def healthz():
    await read_one("SELECT 1", [])
    return {"ok": True}


# Serving: uvicorn, with its refusal of a request that is not HTTP as a problem too --------

def serve():
    import uvicorn
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class Protocol(H11Protocol):
        """uvicorn's own 400, for bytes h11 refuses (a NUL or a control byte in the request
        line or a header), in the one error shape."""

        def send_400_response(self, msg):
            body = json.dumps({"type": PROBLEM + "invalid_request", "title": "Invalid request",
                               "status": 400, "detail": "not a valid HTTP/1.1 request"},
                              separators=(",", ":")).encode()
            self.transport.write(b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/problem+json\r\n"
                                 b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
            self.transport.close()

    class OneLine(logging.Filter):
        """A client's malformed request is its error, not the service's: no traceback."""

        def filter(self, record):
            if record.msg == "Invalid HTTP request received.":
                record.exc_info = record.exc_text = None
            return True

    ap = argparse.ArgumentParser(description="the holdcommit example shop")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--log-level", default="warning")
    args = ap.parse_args()
    logging.basicConfig(format="%(levelname)s:  %(name)s: %(message)s")  # the service's own log lines
    logging.getLogger("uvicorn.error").addFilter(OneLine())
    uvicorn.run(app, host=args.host, port=args.port, http=Protocol, log_level=args.log_level,
                access_log=False)


if __name__ == "__main__":
    serve()
