"""holdcommit for Python: typed calls of the holdcommit PostgreSQL extension on psycopg 3.

    import psycopg, holdcommit
    with psycopg.connect(autocommit=True) as conn:
        hold = holdcommit.hold(conn, "LOCO-0042", "buyer-1", "key-1")

Calls: holdcommit.calls (here too); errors: holdcommit.errors (here too); the lease helper:
holdcommit.lease; coroutines on an AsyncConnection: holdcommit.aio. doc/clients.md tells it all.
"""
from .calls import (asset_add, attempt_begin, attempt_complete, attempt_reset, check, commit, extend,
                    finalize, hold, hold_best, hold_many, lock_acquire, lock_check, lock_heartbeat, lock_release, release,
                    reserve, reserve_items, stock_adjust, stock_set, sweep, unreserve)
from .errors import (HTTP_STATUS, AlreadyExists, AssetUnavailable, Busy, HoldcommitError,
                     InsufficientStock, InternalError, InvalidArgument, KeyReused, LeaseLost, NotFound,
                     NotReady, NotSupported, PermissionDenied, ReadOnly, ReservationExpired,
                     ReservationNotActive, RetryLater, WrongIsolation, error_from)
from .lease import ActiveLease, lease
from .results import (Asset, Attempt, Hold, Inventory, Item, Lease, StockReservation, Sweep,
                      Violation)

__version__ = "0.3.0"

__all__ = [
    "asset_add", "attempt_begin", "attempt_complete", "attempt_reset", "check", "commit", "extend",
    "finalize", "hold", "hold_best", "hold_many", "lock_acquire", "lock_check", "lock_heartbeat", "lock_release", "release",
    "reserve", "reserve_items", "stock_adjust", "stock_set", "sweep", "unreserve",
    "HTTP_STATUS", "AlreadyExists", "AssetUnavailable", "Busy", "HoldcommitError",
    "InsufficientStock", "InternalError", "InvalidArgument", "KeyReused", "LeaseLost", "NotFound",
    "NotReady", "NotSupported", "PermissionDenied", "ReadOnly", "ReservationExpired",
    "ReservationNotActive", "RetryLater", "WrongIsolation", "error_from",
    "ActiveLease", "lease",
    "Asset", "Attempt", "Hold", "Inventory", "Item", "Lease", "StockReservation", "Sweep", "Violation",
]
