"""The calls: each builds one query (its arguments checked here first), run on a psycopg Connection.

Every call names the functions with their schema (holdcommit.hc_hold), so it works whatever
the role's search_path, and casts every argument to the SQL type, so that a Python int of
any size or a str always reaches the one function meant.

Transactions: a call made while no transaction is open is committed when it returns (in
autocommit mode and in psycopg's default mode alike); a call made inside a transaction runs
in a savepoint of it: a refusal (RS001, ...) rolls back only the call and leaves the
transaction usable, with what it did before; the call commits or rolls back with it.
"""
from __future__ import annotations

import functools
import inspect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Any, Callable, Concatenate, Generic, Optional, ParamSpec, TypeVar, Union

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.types.json import Jsonb

from .errors import InvalidArgument, error_from
from .results import (Asset, Attempt, Hold, Inventory, Item, Lease, StockReservation, Sweep,
                      Violation)

R = TypeVar("R")
P = ParamSpec("P")

SCHEMA = "holdcommit"
TEN_MINUTES = timedelta(minutes=10)
THREE_MINUTES = timedelta(minutes=3)
INT4 = (-2**31, 2**31 - 1)
INT8 = (-2**63, 2**63 - 1)


@dataclass(frozen=True)
class Query(Generic[R]):
    """One call: its SQL, its parameters, and how its rows become the result."""
    sql: str
    params: tuple
    convert: Callable[[list], R]


# -- argument checks: the errors the server would raise, before a round trip, and the ones
# -- a driver would turn into a confusing 42883 ("function does not exist") or a DataError.

def _text(name: str, value: Any) -> str:
    if value is None:
        raise InvalidArgument(f"{name} must not be null", "22004")
    if not isinstance(value, str):
        raise InvalidArgument(f"{name} must be a str, not {type(value).__name__}", "22023")
    if "\x00" in value:
        raise InvalidArgument(f"{name} must not contain NUL characters", "22021")
    return value


def _int(name: str, value: Any, bounds: tuple[int, int] = INT4) -> int:
    if value is None:
        raise InvalidArgument(f"{name} must not be null", "22004")
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{name} must be an int, not {type(value).__name__}", "22023")
    if not bounds[0] <= value <= bounds[1]:
        raise InvalidArgument(f"{name} is out of range: {value}", "22003",
                              f"{name} must be between {bounds[0]} and {bounds[1]}")
    return value


def _interval(name: str, value: Any) -> timedelta:
    if value is None:
        raise InvalidArgument(f"{name} must not be null", "22004")
    if not isinstance(value, timedelta):
        raise InvalidArgument(f"{name} must be a datetime.timedelta, not {type(value).__name__}",
                              "22023", None, f"for instance {name}=timedelta(minutes=10)")
    return value


def _bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidArgument(f"{name} must be a bool, not {type(value).__name__}", "22023")
    return value


def _ids(name: str, value: Any) -> list[str]:
    if value is None:
        raise InvalidArgument(f"{name} must not be null", "22004")
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise InvalidArgument(f"{name} must be a list of ids, not {type(value).__name__}", "22023")
    return [_text(f"{name}[{i}]", v) for i, v in enumerate(value)]


ItemsArg = Union[Mapping[str, int], Iterable[Union[Item, Mapping[str, Any], tuple]]]


def _items(value: Any) -> Jsonb:
    """items as the jsonb array hc_reserve_items takes: from {product_id: qty}, or from
    Item objects, {"product_id": ..., "qty": ...} mappings or (product_id, qty) pairs."""
    if value is None:
        raise InvalidArgument("items must not be null", "22004")
    if isinstance(value, Mapping):
        pairs = list(value.items())
    elif isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise InvalidArgument(f"items must be a list of lines, not {type(value).__name__}", "22023")
    else:
        pairs = []
        for i, line in enumerate(value):
            if isinstance(line, Item):
                pairs.append((line.product_id, line.qty))
            elif isinstance(line, Mapping):
                pairs.append((line.get("product_id"), line.get("qty")))
            elif isinstance(line, tuple) and len(line) == 2:
                pairs.append(line)
            else:
                raise InvalidArgument("invalid items: an item is not a line", "22023",
                                      f"items[{i}] is a {type(line).__name__}")
    return Jsonb([{"product_id": _text(f"items[{i}].product_id", p), "qty": _int(f"items[{i}].qty", q)}
                  for i, (p, q) in enumerate(pairs)])


def _columns(cls: type) -> str:
    return ", ".join(f.name for f in fields(cls))


def _one(cls: Callable[..., R]) -> Callable[[list], R]:
    return lambda rows: cls(*rows[0])


def _all(cls: Callable[..., R]) -> Callable[[list], list[R]]:
    return lambda rows: [cls(*row) for row in rows]


def _stock(rows: list) -> StockReservation:
    r = rows[0]
    items = tuple(Item(line["product_id"], line["qty"]) for line in r[3])
    return StockReservation(r[0], r[1], r[2], items, r[4], r[5], r[6])


def _select(cls: type, function: str, casts: str, params: tuple, convert=None) -> Query:
    return Query(f"SELECT {_columns(cls)} FROM {SCHEMA}.{function}({casts})", params,
                 convert or _one(cls))


def _routed(cls: type, function: str, route: tuple, casts: str, params: tuple, convert=None) -> Query:
    """A call that has a routing form: route is (name, value); a value that is not None goes
    first, as the routing form's first argument."""
    name, value = route
    if value is not None:
        casts, params = "%s::text, " + casts, (_text(name, value),) + params
    return _select(cls, function, casts, params, convert)


# -- the builders, one per call: arguments as the SQL function takes them, checked

def _hold(asset_id: str, buyer_id: str, idempotency_key: str, ttl: timedelta = TEN_MINUTES) -> Query[Hold]:
    """hc_hold: hold a unique asset for a buyer until now + ttl (RS001 if it is not available)."""
    return _select(Hold, "hc_hold", "%s::text, %s::text, %s::text, %s::interval",
                   (_text("asset_id", asset_id), _text("buyer_id", buyer_id),
                    _text("idempotency_key", idempotency_key), _interval("ttl", ttl)))


def _hold_many(asset_ids: Sequence[str], buyer_id: str, idempotency_key: str,
               ttl: timedelta = TEN_MINUTES) -> Query[list[Hold]]:
    """hc_hold_many: hold every asset or none, as one reservation: a Hold per asset, one id
    (RS001 names those not available; nothing is held)."""
    return _select(Hold, "hc_hold_many", "%s::text[], %s::text, %s::text, %s::interval",
                   (_ids("asset_ids", asset_ids), _text("buyer_id", buyer_id),
                    _text("idempotency_key", idempotency_key), _interval("ttl", ttl)), _all(Hold))


def _hold_best(pool: str, n: int, buyer_id: str, idempotency_key: str,
               ttl: timedelta = TEN_MINUTES) -> Query[list[Hold]]:
    """hc_hold_best: hold the n best available assets of a pool, adjacent where they can be,
    as one reservation (RS002 if fewer are available; nothing is held)."""
    return _select(Hold, "hc_hold_best", "%s::text, %s::integer, %s::text, %s::text, %s::interval",
                   (_text("pool", pool), _int("n", n), _text("buyer_id", buyer_id),
                    _text("idempotency_key", idempotency_key), _interval("ttl", ttl)), _all(Hold))


def _commit(reservation_id: str, late_ok: bool = False, *, asset_id: Optional[str] = None) -> Query[Hold]:
    """hc_commit: the payment went through; the asset is SOLD. asset_id: the routing form."""
    return _routed(Hold, "hc_commit", ("asset_id", asset_id), "%s::text, %s::boolean",
                   (_text("reservation_id", reservation_id), _bool("late_ok", late_ok)))


def _release(reservation_id: str, *, asset_id: Optional[str] = None) -> Query[Hold]:
    """hc_release: the buyer cancels; the asset is AVAILABLE at once."""
    return _routed(Hold, "hc_release", ("asset_id", asset_id), "%s::text",
                   (_text("reservation_id", reservation_id),))


def _extend(reservation_id: str, ttl: timedelta, *, asset_id: Optional[str] = None) -> Query[Hold]:
    """hc_extend: keep a live hold until now + ttl (never shorter, never past max_hold)."""
    return _routed(Hold, "hc_extend", ("asset_id", asset_id), "%s::text, %s::interval",
                   (_text("reservation_id", reservation_id), _interval("ttl", ttl)))


def _reserve(product_id: str, qty: int, buyer_id: str, idempotency_key: str,
             ttl: timedelta = TEN_MINUTES) -> Query[StockReservation]:
    """hc_reserve: reserve qty of one product until now + ttl (RS002 if not enough)."""
    return _select(StockReservation, "hc_reserve", "%s::text, %s::integer, %s::text, %s::text, %s::interval",
                   (_text("product_id", product_id), _int("qty", qty), _text("buyer_id", buyer_id),
                    _text("idempotency_key", idempotency_key), _interval("ttl", ttl)), _stock)


def _reserve_items(items: ItemsArg, buyer_id: str, idempotency_key: str,
                   ttl: timedelta = TEN_MINUTES) -> Query[StockReservation]:
    """hc_reserve_items: reserve every line of an order, or none."""
    return _select(StockReservation, "hc_reserve_items", "%s::jsonb, %s::text, %s::text, %s::interval",
                   (_items(items), _text("buyer_id", buyer_id),
                    _text("idempotency_key", idempotency_key), _interval("ttl", ttl)), _stock)


def _finalize(reservation_id: str, late_ok: bool = False, *,
              product_id: Optional[str] = None) -> Query[StockReservation]:
    """hc_finalize: the order is paid; its stock leaves. product_id: the routing form."""
    return _routed(StockReservation, "hc_finalize", ("product_id", product_id), "%s::text, %s::boolean",
                   (_text("reservation_id", reservation_id), _bool("late_ok", late_ok)), _stock)


def _unreserve(reservation_id: str, *, product_id: Optional[str] = None) -> Query[StockReservation]:
    """hc_unreserve: the buyer cancels the order; its units are available again."""
    return _routed(StockReservation, "hc_unreserve", ("product_id", product_id), "%s::text",
                   (_text("reservation_id", reservation_id),), _stock)


def _lock_acquire(resource: str, owner: str, stale_after: timedelta = THREE_MINUTES,
                  retries: int = 0, *, bind_session: bool = False) -> Query[Optional[Lease]]:
    """hc_lock_acquire: take the lease, or None if another owner holds it.

    retries defaults to 0 (try once), not the SQL default of 5, which can block for 5.4 s.
    bind_session: hc_lock_acquire_session, the lease ends with this connection's session.
    """
    function = "hc_lock_acquire_session" if _bool("bind_session", bind_session) else "hc_lock_acquire"
    params = (_text("resource", resource), _text("owner", owner),
              _interval("stale_after", stale_after), _int("retries", retries))

    def convert(rows: list) -> Optional[Lease]:
        token = rows[0][0]
        return None if token is None else Lease(resource, owner, token, stale_after)
    return Query(f"SELECT {SCHEMA}.{function}(%s::text, %s::text, %s::interval, %s::integer)", params, convert)


def _scalar(rows: list) -> Any:
    return rows[0][0]


def _lock_heartbeat(resource: str, owner: str, token: int) -> Query[datetime]:
    """hc_lock_heartbeat: keep the lease fresh; LeaseLost (RS007) if it is no longer ours."""
    return Query(f"SELECT {SCHEMA}.hc_lock_heartbeat(%s::text, %s::text, %s::bigint)",
                 (_text("resource", resource), _text("owner", owner), _int("token", token, INT8)), _scalar)


def _lock_check(resource: str, owner: str, token: int) -> Query[None]:
    """hc_lock_check, in the transaction of the writes it fences: LeaseLost (RS007) unless
    owner holds the lease with token; then no takeover until that transaction ends.
    ActiveLease.fenced opens that transaction and calls it first."""
    return Query(f"SELECT {SCHEMA}.hc_lock_check(%s::text, %s::text, %s::bigint)",
                 (_text("resource", resource), _text("owner", owner), _int("token", token, INT8)),
                 lambda rows: None)


def _lock_release(resource: str, owner: str, token: int) -> Query[bool]:
    """hc_lock_release: free the lease; False if it was not ours (any more)."""
    return Query(f"SELECT {SCHEMA}.hc_lock_release(%s::text, %s::text, %s::bigint)",
                 (_text("resource", resource), _text("owner", owner), _int("token", token, INT8)), _scalar)


def _attempt_begin(resource: str, owner: str, token: int, cooldown: timedelta = TEN_MINUTES,
                   max_attempts: int = 5, *, request_key: Optional[str] = None) -> Query[Attempt]:
    """hc_attempt_begin: the point of no return before an external call; call out only on PROCEED.

    request_key: made once for this begin and used again only to ask for the same begin after
    its answer was lost (a timeout, a dropped connection): within the cooldown that attempt
    comes back; any other begin gets COOLDOWN."""
    casts = "%s::text, %s::text, %s::bigint, %s::interval, %s::integer"
    params = (_text("resource", resource), _text("owner", owner), _int("token", token, INT8),
              _interval("cooldown", cooldown), _int("max_attempts", max_attempts))
    if request_key is not None:
        casts += ", %s::text"
        params += (_text("request_key", request_key),)
    return _select(Attempt, "hc_attempt_begin", casts, params)


def _attempt_complete(resource: str, owner: str, token: int, external_ref: str) -> Query[Attempt]:
    """hc_attempt_complete: the external call succeeded with external_ref: COMPLETED for good."""
    return _select(Attempt, "hc_attempt_complete", "%s::text, %s::text, %s::bigint, %s::text",
                   (_text("resource", resource), _text("owner", owner), _int("token", token, INT8),
                    _text("external_ref", external_ref)))


def _attempt_reset(resource: str, note: str) -> Query[Attempt]:
    """hc_attempt_reset (operators): clear MANUAL_REVIEW after checking the external system."""
    return _select(Attempt, "hc_attempt_reset", "%s::text, %s::text",
                   (_text("resource", resource), _text("note", note)))


def _check() -> Query[list[Violation]]:
    """hc_check(): the invariants that do not hold; an empty list when all hold."""
    return Query(f"SELECT {_columns(Violation)} FROM {SCHEMA}.hc_check()", (),
                 lambda rows: [Violation(*r) for r in rows])


def _sweep(batch_size: int = 1000) -> Query[Sweep]:
    """hc_sweep (operators): expire what is due and forget old keys, now."""
    return _select(Sweep, "hc_sweep", "%s::integer", (_int("batch_size", batch_size),))


def _asset_add(id: str, name: str = "", *, pool: Optional[str] = None, rank: Optional[int] = None,
               grp: Optional[str] = None, pos: Optional[int] = None) -> Query[Asset]:
    """hc_asset_add (operators): a new AVAILABLE asset (AlreadyExists if it exists); with a
    pool, its place there for hold_best (rank: lower is better; grp: its row; pos: its seat)."""
    if pool is None:
        return _select(Asset, "hc_asset_add", "%s::text, %s::text", (_text("id", id), _text("name", name)))
    return _select(Asset, "hc_asset_add", "%s::text, %s::text, %s::text, %s::integer, %s::text, %s::integer",
                   (_text("id", id), _text("name", name), _text("pool", pool),
                    None if rank is None else _int("rank", rank), None if grp is None else _text("grp", grp),
                    None if pos is None else _int("pos", pos)))


def _stock_set(product_id: str, stock: int) -> Query[Inventory]:
    """hc_stock_set (operators): create a product with that stock, or set its stock."""
    return _select(Inventory, "hc_stock_set", "%s::text, %s::integer",
                   (_text("product_id", product_id), _int("stock", stock)))


def _stock_adjust(product_id: str, delta: int, reason: str) -> Query[Inventory]:
    """hc_stock_adjust (operators): restock or shrink a product, with the reason in the ledger."""
    return _select(Inventory, "hc_stock_adjust", "%s::text, %s::integer, %s::text",
                   (_text("product_id", product_id), _int("delta", delta), _text("reason", reason)))


# -- running a query on a connection

def run(conn: psycopg.Connection, query: Query[R]) -> R:
    """Run one call on conn; a psycopg error becomes the holdcommit error of its SQLSTATE."""
    try:
        if conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE:
            rows = conn.execute(query.sql, query.params).fetchall()
        else:
            # A savepoint inside a transaction; outside one (psycopg's default mode, idle),
            # a transaction of its own, committed when the call returns.
            with conn.transaction():
                rows = conn.execute(query.sql, query.params).fetchall()
    except psycopg.Error as e:
        raise error_from(e) from e
    return query.convert(rows)


def _with_conn(build: Callable, conn_type: str, awaitable: bool = False) -> inspect.Signature:
    """The builder's signature with the connection first and the call's own result type."""
    sig = inspect.signature(build)
    conn = inspect.Parameter("conn", inspect.Parameter.POSITIONAL_ONLY, annotation=conn_type)
    result = str(sig.return_annotation).removeprefix("Query[").removesuffix("]")
    return sig.replace(parameters=[conn, *sig.parameters.values()],
                       return_annotation=f"Awaitable[{result}]" if awaitable else result)


def sync_call(build: Callable[P, Query[R]]) -> Callable[Concatenate[psycopg.Connection, P], R]:
    """The call of a builder: the same arguments after the connection, the builder's result type."""
    def call(conn: psycopg.Connection, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return run(conn, build(*args, **kwargs))
    functools.update_wrapper(call, build)
    call.__name__ = call.__qualname__ = build.__name__.lstrip("_")
    call.__signature__ = _with_conn(build, "psycopg.Connection")  # type: ignore[attr-defined]
    del call.__wrapped__  # type: ignore[attr-defined]
    return call


hold = sync_call(_hold)
hold_many = sync_call(_hold_many)
hold_best = sync_call(_hold_best)
commit = sync_call(_commit)
release = sync_call(_release)
extend = sync_call(_extend)
reserve = sync_call(_reserve)
reserve_items = sync_call(_reserve_items)
finalize = sync_call(_finalize)
unreserve = sync_call(_unreserve)
lock_acquire = sync_call(_lock_acquire)
lock_heartbeat = sync_call(_lock_heartbeat)
lock_release = sync_call(_lock_release)
lock_check = sync_call(_lock_check)
attempt_begin = sync_call(_attempt_begin)
attempt_complete = sync_call(_attempt_complete)
attempt_reset = sync_call(_attempt_reset)
check = sync_call(_check)
sweep = sync_call(_sweep)
asset_add = sync_call(_asset_add)
stock_set = sync_call(_stock_set)
stock_adjust = sync_call(_stock_adjust)

__all__ = ["Query", "run", "hold", "hold_many", "hold_best", "commit", "release", "extend", "reserve",
           "reserve_items", "finalize", "unreserve", "lock_acquire", "lock_heartbeat",
           "lock_release", "lock_check", "attempt_begin", "attempt_complete", "attempt_reset", "check", "sweep",
           "asset_add", "stock_set", "stock_adjust"]
