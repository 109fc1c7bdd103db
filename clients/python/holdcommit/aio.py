"""The same calls as coroutines on a psycopg AsyncConnection, and async_lease.

    async with await psycopg.AsyncConnection.connect(autocommit=True) as conn:
        hold = await holdcommit.aio.hold(conn, "LOCO-0042", "buyer-1", "key-1")
"""
from __future__ import annotations

import asyncio
import functools
import time
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import AsyncIterator, Awaitable, Callable, Concatenate, Optional, ParamSpec, TypeVar

import psycopg
from psycopg.pq import TransactionStatus

from . import calls
from .calls import Query
from .errors import HoldcommitError, LeaseLost, error_from
from .lease import ActiveLease, _beat_answered, _busy, _fence_refused, _interval, _timeout_ms, log

R = TypeVar("R")
P = ParamSpec("P")


async def run(conn: psycopg.AsyncConnection, query: Query[R]) -> R:
    """Run one call on conn, with the transaction rules of holdcommit.calls.run."""
    try:
        if conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE:
            cur = await conn.execute(query.sql, query.params)
        else:
            async with conn.transaction():
                cur = await conn.execute(query.sql, query.params)
        rows = await cur.fetchall()
    except psycopg.Error as e:
        raise error_from(e) from e
    return query.convert(rows)


def async_call(build: Callable[P, Query[R]]) -> Callable[Concatenate[psycopg.AsyncConnection, P], Awaitable[R]]:
    async def call(conn: psycopg.AsyncConnection, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await run(conn, build(*args, **kwargs))
    functools.update_wrapper(call, build)
    call.__name__ = call.__qualname__ = build.__name__.lstrip("_")
    call.__signature__ = calls._with_conn(build, "psycopg.AsyncConnection", True)  # type: ignore[attr-defined]
    del call.__wrapped__  # type: ignore[attr-defined]
    return call


hold = async_call(calls._hold)
hold_many = async_call(calls._hold_many)
hold_best = async_call(calls._hold_best)
commit = async_call(calls._commit)
release = async_call(calls._release)
extend = async_call(calls._extend)
reserve = async_call(calls._reserve)
reserve_items = async_call(calls._reserve_items)
finalize = async_call(calls._finalize)
unreserve = async_call(calls._unreserve)
lock_acquire = async_call(calls._lock_acquire)
lock_heartbeat = async_call(calls._lock_heartbeat)
lock_release = async_call(calls._lock_release)
lock_check = async_call(calls._lock_check)
attempt_begin = async_call(calls._attempt_begin)
attempt_complete = async_call(calls._attempt_complete)
attempt_reset = async_call(calls._attempt_reset)
check = async_call(calls._check)
sweep = async_call(calls._sweep)
asset_add = async_call(calls._asset_add)
stock_set = async_call(calls._stock_set)
stock_adjust = async_call(calls._stock_adjust)


async def _beat(conn: psycopg.AsyncConnection, lease: ActiveLease, every: float, stop: asyncio.Event) -> None:
    while True:
        try:
            await asyncio.wait_for(stop.wait(), every)
            return
        except asyncio.TimeoutError:
            pass
        sent, error = time.monotonic(), None
        try:
            await lock_heartbeat(conn, lease.resource, lease.owner, lease.token)
        except HoldcommitError as e:
            error = e
        if _beat_answered(lease, conn, sent, error):
            return


async def _release(conn: psycopg.AsyncConnection, conninfo: str, lease: ActiveLease) -> bool:
    try:
        if conn.closed or conn.broken:
            async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as fresh:
                return await lock_release(fresh, lease.resource, lease.owner, lease.token)
        return await lock_release(conn, lease.resource, lease.owner, lease.token)
    except (HoldcommitError, psycopg.Error) as e:
        log.warning("holdcommit: could not release lease %r of %r: %s", lease.resource, lease.owner, e)
        return False


@asynccontextmanager
async def async_lease(conninfo: str, resource: str, owner: str, ttl: timedelta = timedelta(seconds=30), *,
                      heartbeat: Optional[timedelta] = None, retries: int = 0,
                      bind_session: bool = False) -> AsyncIterator[ActiveLease]:
    """holdcommit.lease for asyncio: a task heartbeats on the lease's own AsyncConnection.

    ``lease.lost`` is an asyncio.Event here: ``await lease.lost.wait()`` can race the work
    (asyncio.wait(..., return_when=FIRST_COMPLETED)) to cancel it when the lease is lost.
    """
    every = _interval(ttl, heartbeat)
    conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
    try:
        sent = time.monotonic()
        got = await lock_acquire(conn, resource, owner, ttl, retries, bind_session=bind_session)
        if got is None:
            raise _busy(resource, owner)
        active = ActiveLease(resource, owner, got.token, ttl, asyncio.Event(), sent)
        stop = asyncio.Event()
        beater = None
        try:
            await conn.execute("SELECT set_config('statement_timeout', %s, false)", [_timeout_ms(every)])
            beater = asyncio.create_task(_beat(conn, active, every, stop))
            yield active
        finally:
            # Let a heartbeat in flight finish rather than cancel it mid-query.
            stop.set()
            if beater is not None:
                await beater
            active.released = await _release(conn, conninfo, active)
    finally:
        await conn.close()


@asynccontextmanager
async def fenced(lease: ActiveLease, conn: psycopg.AsyncConnection) -> AsyncIterator[psycopg.AsyncConnection]:
    """ActiveLease.fenced for asyncio: a transaction on conn whose writes commit only under
    the lease's token, beginning with hc_lock_check (LeaseLost if it is not current)."""
    lease.check()
    async with conn.transaction():
        try:
            await lock_check(conn, lease.resource, lease.owner, lease.token)
        except LeaseLost as e:
            _fence_refused(lease, e)
            raise
        yield conn


__all__ = ["run", "async_lease", "fenced", "hold", "hold_many", "hold_best", "commit", "release", "extend", "reserve", "reserve_items",
           "finalize", "unreserve", "lock_acquire", "lock_heartbeat", "lock_release",
           "lock_check", "attempt_begin", "attempt_complete", "attempt_reset", "check", "sweep", "asset_add",
           "stock_set", "stock_adjust"]
