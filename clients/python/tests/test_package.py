"""The installed package: where it comes from, its copy of the map, its classes, its signatures."""
import dataclasses
import inspect
import json
import os
import unittest

import psycopg

import holdcommit
import holdcommit.aio
import holdcommit.errors as errors
from support import REPO, connect

CALLS = ["hold", "hold_many", "hold_best", "commit", "release", "extend", "reserve", "reserve_items", "finalize", "unreserve",
         "lock_acquire", "lock_heartbeat", "lock_release", "attempt_begin", "attempt_complete",
         "attempt_reset", "check", "sweep", "asset_add", "stock_set", "stock_adjust"]


class Package(unittest.TestCase):
    def test_installed_from_the_venv_not_the_source_tree(self):
        """imported from the installed package, not from clients/python"""
        self.assertFalse(os.path.abspath(holdcommit.__file__).startswith(os.path.join(REPO, "clients")),
                         holdcommit.__file__)
        self.assertIn("site-packages", holdcommit.__file__)

    def test_sqlstates_json_is_the_repository_s(self):
        """the package's sqlstates.json equals clients/sqlstates.json"""
        with open(os.path.join(REPO, "clients", "sqlstates.json"), encoding="utf-8") as f:
            source = json.load(f)
        self.assertEqual(errors._TABLE, source)

    def test_http_status_map(self):
        """HTTP_STATUS is the map of sqlstates.json, SQLSTATE by SQLSTATE"""
        want = {r["sqlstate"]: r["http"] for r in errors._TABLE["sqlstates"]}
        self.assertEqual(holdcommit.HTTP_STATUS, want)
        self.assertEqual(holdcommit.HTTP_STATUS["RS001"], 409)
        self.assertEqual(holdcommit.HTTP_STATUS["RS003"], 410)

    def test_one_class_per_class_of_the_map(self):
        """one exception class per "class" of sqlstates.json, each a HoldcommitError"""
        for row in errors._TABLE["sqlstates"]:
            with self.subTest(sqlstate=row["sqlstate"]):
                cls = getattr(holdcommit, row["class"])
                self.assertTrue(issubclass(cls, holdcommit.HoldcommitError))
                self.assertIs(errors.CLASS[row["sqlstate"]], cls)
                e = cls("m", row["sqlstate"], "d", "h")
                self.assertEqual((e.sqlstate, e.message, e.detail, e.hint, e.http_status),
                                 (row["sqlstate"], "m", "d", "h", row["http"]))

    def test_error_from_maps_any_sqlstate(self):
        """error_from: a mapped SQLSTATE, another of class 22, an unknown one"""
        with connect() as conn:
            for sql, cls, sqlstate, http in [
                    ("SELECT holdcommit.hc_lock_heartbeat('x', 'y', 1)", holdcommit.LeaseLost, "RS007", 409),
                    ("SELECT 1 / 0", holdcommit.InvalidArgument, "22012", 400),
                    ("SELECT * FROM no_such_table", holdcommit.HoldcommitError, "42P01", 500)]:
                with self.subTest(sqlstate=sqlstate):
                    with self.assertRaises(psycopg.Error) as raised:
                        conn.execute(sql)
                    e = holdcommit.error_from(raised.exception)
                    self.assertIs(type(e), cls)
                    self.assertEqual((e.sqlstate, e.http_status), (sqlstate, http))
                    self.assertEqual(e.message, raised.exception.diag.message_primary)

    def test_error_from_a_lost_connection(self):
        """error_from: a connection lost without a SQLSTATE is RetryLater (08006)"""
        conn = connect()
        conn.close()
        with self.assertRaises(psycopg.OperationalError) as raised:
            conn.execute("SELECT 1")
        e = holdcommit.error_from(raised.exception)
        self.assertIs(type(e), holdcommit.RetryLater)
        self.assertEqual((e.sqlstate, e.http_status), ("08006", 503))

    def test_calls_take_the_connection_first(self):
        """every call, sync and async, takes the connection first and keeps its argument names"""
        for name in CALLS:
            with self.subTest(call=name):
                sync, coro = getattr(holdcommit, name), getattr(holdcommit.aio, name)
                params = list(inspect.signature(sync).parameters)
                self.assertEqual(params[0], "conn")
                self.assertEqual(params, list(inspect.signature(coro).parameters))
                self.assertTrue(inspect.iscoroutinefunction(coro))
                self.assertTrue(sync.__doc__)

    def test_results_are_frozen(self):
        """the results are frozen dataclasses"""
        for cls in (holdcommit.Hold, holdcommit.StockReservation, holdcommit.Lease, holdcommit.Attempt,
                    holdcommit.Item, holdcommit.Violation, holdcommit.Sweep, holdcommit.Asset,
                    holdcommit.Inventory):
            with self.subTest(result=cls.__name__):
                self.assertTrue(dataclasses.is_dataclass(cls))
                self.assertTrue(cls.__dataclass_params__.frozen)
