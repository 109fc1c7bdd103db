"""The lease helper: hold a lease while a block runs, heartbeating on a connection of its own.

    owner = f"webhook-{delivery_id}"    # this delivery's own name, never a role's (doc/locking.md)
    with holdcommit.lease(conninfo, "PAY-7781", owner, ttl=timedelta(seconds=30)) as lease:
        lease.check()                                   # raises LeaseLost once it is lost
        a = holdcommit.attempt_begin(conn, "PAY-7781", lease.owner, lease.token)
        ...

A helper cannot stop the block it guards. It tells the block instead, three ways:
``lease.lost`` (an Event, set when a heartbeat is refused with RS007, when the lease's
connection dies, or when no heartbeat has succeeded for ``ttl``), ``lease.check()``, which
raises LeaseLost then, and the token: every fenced write the block makes with
``lease.token`` (hc_attempt_begin, hc_attempt_complete) is refused once another holder has a
higher one. The application's own writes are fenced in a transaction of ``lease.fenced(conn)``
(``holdcommit.aio.fenced(lease, conn)``), which begins with hc_lock_check:

    with lease.fenced(conn):        # LeaseLost if the token is not current any more
        conn.execute("INSERT INTO invoices VALUES (%s, %s)", [order_id, lease.token])
    # committed under the token: no takeover could happen before this commit
"""
from __future__ import annotations

import logging
import threading
import time
from contextlib import contextmanager
from datetime import timedelta
from typing import Any, Iterator, Optional

import psycopg

from . import calls
from .errors import Busy, HoldcommitError, InvalidArgument, LeaseLost

log = logging.getLogger("holdcommit")


class ActiveLease:
    """A lease held while a ``with lease(...)`` (or ``async with async_lease(...)``) block runs."""

    def __init__(self, resource: str, owner: str, token: int, ttl: timedelta,
                 lost: Any, acquired_at: float):   # a threading.Event, or an asyncio.Event
        self.resource = resource
        self.owner = owner
        self.token = token          #: the fencing token: pass it to every fenced call
        self.ttl = ttl
        self.lost = lost            #: set once the lease is lost (never cleared)
        self.reason: Optional[str] = None      #: why it was lost
        self.released: Optional[bool] = None   #: after the block: hc_lock_release's answer
        # When the lease may go stale, by this process's clock: the last successful
        # heartbeat's send time + ttl (the server's heartbeat_at is later, never earlier).
        self.deadline = acquired_at + ttl.total_seconds()

    def _lose(self, reason: str) -> None:
        if not self.lost.is_set():
            self.reason = reason
            self.lost.set()

    def _expired(self) -> bool:
        if not self.lost.is_set() and time.monotonic() >= self.deadline:
            self._lose(f"no heartbeat succeeded for {self.ttl}: another owner may have taken it over")
        return self.lost.is_set()

    @property
    def held(self) -> bool:
        """True while the lease is known to be ours."""
        return not self._expired()

    def check(self) -> None:
        """Raise LeaseLost if the lease is lost; call it before each step that needs it."""
        if self._expired():
            raise LeaseLost(f'lease "{self.resource}" of owner "{self.owner}" is lost', "RS007",
                            self.reason, "stop the work it protects; the token "
                            f"{self.token} is fenced off")

    @contextmanager
    def fenced(self, conn: psycopg.Connection) -> Iterator[psycopg.Connection]:
        """A transaction on conn (the application's connection, not the lease's) whose writes
        commit only under this lease's token: it begins with hc_lock_check (LeaseLost, and the
        lease marked lost, if the token is not current any more), and no takeover can happen
        until it ends. Inside a transaction already, a savepoint: the fence lasts until that
        transaction ends, or goes if the savepoint is rolled back."""
        if isinstance(conn, psycopg.AsyncConnection):
            raise InvalidArgument("lease.fenced takes a psycopg.Connection: use"
                                  " holdcommit.aio.fenced(lease, conn) for an AsyncConnection", "22023")
        self.check()
        with conn.transaction():
            _fence(self, conn)
            yield conn

    def __repr__(self) -> str:
        state = f"lost: {self.reason}" if self.lost.is_set() else "held"
        return f"<ActiveLease {self.resource!r} {self.owner!r} token={self.token} {state}>"


def _fence_refused(lease: ActiveLease, error: LeaseLost) -> None:
    lease._lose(f"hc_lock_check refused: {error.message}" + (f" ({error.detail})" if error.detail else ""))


def _fence(lease: ActiveLease, conn: psycopg.Connection) -> None:
    try:
        calls.lock_check(conn, lease.resource, lease.owner, lease.token)
    except LeaseLost as e:
        _fence_refused(lease, e)
        raise


def _interval(ttl: timedelta, heartbeat: Optional[timedelta]) -> float:
    if not isinstance(ttl, timedelta) or ttl <= timedelta(0):
        raise InvalidArgument("ttl must be a positive datetime.timedelta", "22023")
    every = heartbeat if heartbeat is not None else ttl / 3
    if not isinstance(every, timedelta) or every <= timedelta(0):
        raise InvalidArgument("heartbeat must be a positive datetime.timedelta", "22023")
    return every.total_seconds()


def _busy(resource: str, owner: str) -> Busy:
    return Busy(f'lease "{resource}" is held by another owner', "55P03",
                f'owner "{owner}" did not get it', "try again later, or pass retries=N to wait")


def _beat_answered(lease: ActiveLease, conn, sent: float, error: Optional[HoldcommitError]) -> bool:
    """After a heartbeat sent at sent (time.monotonic()), answered or refused with error: True
    when the beating ends, the lease lost for good or past its deadline."""
    if error is None:
        lease.deadline = sent + lease.ttl.total_seconds()
    elif isinstance(error, LeaseLost):
        lease._lose(f"heartbeat refused: {error.message}" + (f" ({error.detail})" if error.detail else ""))
    elif conn.closed or conn.broken:
        lease._lose(f"the lease's connection died: {error.message}")
    # Anything else (a timeout, no free worker) is tried again at the next beat, until
    # the deadline passes.
    return lease._expired()


def _beat(conn: psycopg.Connection, lease: ActiveLease, every: float, stop: threading.Event) -> None:
    while not stop.wait(every):
        sent, error = time.monotonic(), None
        try:
            calls.lock_heartbeat(conn, lease.resource, lease.owner, lease.token)
        except HoldcommitError as e:
            error = e
        if _beat_answered(lease, conn, sent, error):
            return


def _release(conn, conninfo: str, lease: ActiveLease) -> bool:
    try:
        if conn.closed or conn.broken:
            with psycopg.connect(conninfo, autocommit=True) as fresh:
                return calls.lock_release(fresh, lease.resource, lease.owner, lease.token)
        return calls.lock_release(conn, lease.resource, lease.owner, lease.token)
    except (HoldcommitError, psycopg.Error) as e:
        # Not raised over the block's own exception: the lease goes stale after ttl anyway.
        log.warning("holdcommit: could not release lease %r of %r: %s", lease.resource, lease.owner, e)
        return False


def _timeout_ms(every: float) -> str:
    # A heartbeat blocked longer than a beat (a row lock, a busy pool) gives up and tries
    # again, so the deadline is noticed on time.
    return str(max(int(every * 1000), 100))


@contextmanager
def lease(conninfo: str, resource: str, owner: str, ttl: timedelta = timedelta(seconds=30), *,
          heartbeat: Optional[timedelta] = None, retries: int = 0,
          bind_session: bool = False) -> Iterator[ActiveLease]:
    """Acquire the lease on a connection of its own, heartbeat every ``heartbeat`` (default
    ttl / 3) from a background thread while the block runs, release it when the block ends,
    however it ends. ``owner``: this process's or this delivery's own name, never a role's.

    ttl is the lease's stale_after: a holder silent that long can be taken over; keep the
    heartbeat well below it (a heartbeat that takes longer than one interval gives up and is
    tried again, and none succeeding for ttl sets lease.lost). Raises Busy
    (55P03) at once if another owner holds a live lease (``retries=N``: the acquire retries
    with the server's backoff, up to about 2 s per retry).
    """
    every = _interval(ttl, heartbeat)
    conn = psycopg.connect(conninfo, autocommit=True)
    try:
        sent = time.monotonic()
        got = calls.lock_acquire(conn, resource, owner, ttl, retries, bind_session=bind_session)
        if got is None:
            raise _busy(resource, owner)
        active = ActiveLease(resource, owner, got.token, ttl, threading.Event(), sent)
        stop = threading.Event()
        beater = threading.Thread(target=_beat, args=(conn, active, every, stop), daemon=True,
                                  name=f"holdcommit-lease-{resource}")
        try:
            conn.execute("SELECT set_config('statement_timeout', %s, false)", [_timeout_ms(every)])
            beater.start()
            yield active
        finally:
            stop.set()
            if beater.ident is not None:
                beater.join()
            active.released = _release(conn, conninfo, active)
    finally:
        conn.close()
