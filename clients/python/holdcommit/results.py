"""What the calls return: frozen dataclasses of holdcommit's composite types, field by field."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Optional


@dataclass(frozen=True)
class Hold:
    """hc_reservation: a hold of a unique asset (hold, commit, release, extend)."""
    reservation_id: str
    asset_id: str
    buyer_id: str
    status: str                 # HELD, COMMITTED, RELEASED, EXPIRED
    expires_at: datetime
    created_at: datetime
    replayed: bool              # True: nothing changed, an earlier outcome (HTTP 200)


@dataclass(frozen=True)
class Item:
    """One line of a stock reservation."""
    product_id: str
    qty: int


@dataclass(frozen=True)
class StockReservation:
    """hc_stock_reservation: an order of counted stock (reserve, reserve_items, finalize, unreserve)."""
    reservation_id: str
    buyer_id: str
    status: str                 # RESERVED, FINALIZED, RELEASED, EXPIRED
    items: tuple[Item, ...]     # sorted by product_id in byte order, one per product
    expires_at: datetime
    created_at: datetime
    replayed: bool


@dataclass(frozen=True)
class Lease:
    """A lease taken by lock_acquire: pass ``token`` to the fenced calls."""
    resource: str
    owner: str
    token: int
    stale_after: timedelta


@dataclass(frozen=True)
class Attempt:
    """hc_attempt: the attempt guard's answer (attempt_begin, attempt_complete, attempt_reset)."""
    resource: str
    status: str                 # PROCEED, COOLDOWN, MANUAL_REVIEW, COMPLETED
    attempt: int
    marker: Optional[str]       # the idempotency key to send with the external call
    external_ref: Optional[str]
    last_attempt_at: Optional[datetime]


@dataclass(frozen=True)
class Violation:
    """A row of hc_check(): an invariant that does not hold."""
    invariant: str
    subject: str
    detail: str


@dataclass(frozen=True)
class Sweep:
    """What hc_sweep() did."""
    expired_holds: int
    expired_reservations: int
    purged_keys: int


@dataclass(frozen=True)
class Asset:
    """A row of hc_assets (asset_add)."""
    id: str
    name: str
    status: str
    hold_expires_at: Optional[datetime]
    current_reservation_id: Optional[str]
    version: int
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class Inventory:
    """A row of hc_inventory (stock_set, stock_adjust)."""
    product_id: str
    stock: int
    reserved: int
    available: int
    version: int
    created_at: datetime
    updated_at: datetime
