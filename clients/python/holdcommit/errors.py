"""holdcommit's errors: one class per "class" of sqlstates.json, and the SQLSTATE -> HTTP map.

sqlstates.json here is the package's copy of clients/sqlstates.json, the one source of the map
(the tests check that they are equal).
"""
from __future__ import annotations

import json
from importlib import resources
from typing import Optional

import psycopg

_TABLE = json.loads(resources.files(__package__).joinpath("sqlstates.json").read_text("utf-8"))

#: SQLSTATE -> HTTP status, for every SQLSTATE holdcommit raises.
HTTP_STATUS: dict[str, int] = {row["sqlstate"]: row["http"] for row in _TABLE["sqlstates"]}
#: SQLSTATE -> PostgreSQL's condition name (RS00x: holdcommit's own).
NAME: dict[str, str] = {row["sqlstate"]: row["name"] for row in _TABLE["sqlstates"]}


class HoldcommitError(Exception):
    """An error of a holdcommit call: the server's SQLSTATE, message, detail and hint.

    ``http_status`` is the status an HTTP API answers with (sqlstates.json); 500 for a
    SQLSTATE the map does not know.
    """

    default_http = 500

    def __init__(self, message: str, sqlstate: Optional[str] = None,
                 detail: Optional[str] = None, hint: Optional[str] = None):
        super().__init__(message)
        self.message = message
        self.sqlstate = sqlstate
        self.detail = detail
        self.hint = hint
        self.http_status = HTTP_STATUS.get(sqlstate or "", self.default_http)

    def __str__(self) -> str:
        parts = [f"{self.sqlstate}: {self.message}" if self.sqlstate else self.message]
        if self.detail:
            parts.append(f"DETAIL: {self.detail}")
        if self.hint:
            parts.append(f"HINT: {self.hint}")
        return "\n".join(parts)


class AssetUnavailable(HoldcommitError):
    """RS001: the asset is held by another buyer, being held right now, or sold."""


class InsufficientStock(HoldcommitError):
    """RS002: less is available than asked for."""


class ReservationExpired(HoldcommitError):
    """RS003: commit, finalize or extend after expiry: refund the payment."""


class ReservationNotActive(HoldcommitError):
    """RS004: the reservation (or attempt) is in a state that refuses this call."""


class KeyReused(HoldcommitError):
    """RS005: the idempotency key was used for another request."""


class NotFound(HoldcommitError):
    """RS006: unknown asset, product, reservation or resource."""


class LeaseLost(HoldcommitError):
    """RS007: the lease is not held with this owner and token (taken over, released, never held)."""


class InvalidArgument(HoldcommitError):
    """22xxx: a bad argument, refused by the server or by this library before the call."""

    default_http = 400


class AlreadyExists(HoldcommitError):
    """23505: hc_asset_add of an asset that exists."""


class WrongIsolation(HoldcommitError):
    """25000: called inside a REPEATABLE READ or SERIALIZABLE transaction."""


class PermissionDenied(HoldcommitError):
    """42501: the role was not granted the function (hc_grant_app, hc_grant_operator)."""


class NotSupported(HoldcommitError):
    """0A000: not possible on Citus."""


class NotReady(HoldcommitError):
    """55000: the SQL installed is not the library's version: ALTER EXTENSION holdcommit UPDATE."""


class Busy(HoldcommitError):
    """55P03 / 57014: lock_timeout or statement_timeout; also a lease another owner holds."""


class RetryLater(HoldcommitError):
    """40001, 40P01, 53000, 08006: try again (with the same arguments: the calls allow it)."""


class ReadOnly(HoldcommitError):
    """25006: a standby or a read-only transaction: send the call to the primary."""


class InternalError(HoldcommitError):
    """XX000 / XX001: run hc_check()."""


#: SQLSTATE -> error class, from sqlstates.json's "class" column.
CLASS: dict[str, type[HoldcommitError]] = {row["sqlstate"]: globals()[row["class"]]
                                           for row in _TABLE["sqlstates"]}


def error_from(exc: psycopg.Error) -> HoldcommitError:
    """The holdcommit error for a psycopg error, with its SQLSTATE, detail and hint.

    A SQLSTATE of class 22 that the map does not name is InvalidArgument; any other unknown
    one is HoldcommitError itself (HTTP 500). A connection lost without a SQLSTATE is
    RetryLater with 08006: the call's outcome is unknown, and calling again is safe.
    """
    sqlstate = exc.sqlstate
    diag = exc.diag
    message = diag.message_primary or str(exc).strip()
    if sqlstate is None and isinstance(exc, psycopg.OperationalError):
        sqlstate = "08006"
    cls = CLASS.get(sqlstate or "")
    if cls is None:
        cls = InvalidArgument if sqlstate and sqlstate.startswith("22") else HoldcommitError
    return cls(message, sqlstate, diag.message_detail, diag.message_hint)
