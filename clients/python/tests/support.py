"""The tests' database and roles, and a few helpers.

The database is installed as the documents recommend: holdcommit in its own schema, an
application role granted with hc_grant_app and an operator role with hc_grant_operator, and
no search_path to the extension's schema for either (the package calls holdcommit.hc_*):
PGOPTIONS sets search_path = public for every connection, so that a server's own default
(the test server has holdcommit on it) cannot hide a missing schema.
"""
import os
import time
import unittest
import uuid

import psycopg

import holdcommit as hc

DB = os.environ.get("HC_PY_DB", "hc_py")
APP = f"{DB}_app"            # hc_grant_app
OPS = f"{DB}_ops"            # hc_grant_operator
NOBODY = f"{DB}_nobody"      # nothing granted
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
os.environ["PGOPTIONS"] = "-c search_path=public"


def conninfo(role=None, **extra):
    parts = [f"dbname={DB}"] + ([f"user={role}"] if role else [])
    parts += [f"{k}={v}" for k, v in extra.items()]
    return " ".join(parts)


def connect(role=None, autocommit=True, **extra):
    """A connection to the tests' database, as the superuser (PGUSER) or as role."""
    return psycopg.connect(conninfo(role, **extra), autocommit=autocommit)


def uid(prefix):
    """A name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def wait_until(predicate, timeout=10.0, step=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


class Case(unittest.TestCase):
    """A test class's connections, opened once for the class: CONNECTIONS maps an attribute to
    the role it connects as (None: the superuser)."""
    CONNECTIONS = {"conn": APP}

    @classmethod
    def setUpClass(cls):
        for attr, role in cls.CONNECTIONS.items():
            setattr(cls, attr, connect(role))

    @classmethod
    def tearDownClass(cls):
        for attr in cls.CONNECTIONS:
            getattr(cls, attr).close()

    def refused(self, cls, sqlstate, call, *args, conn=None, **kwargs):
        """call (on conn, by default self.conn) raises exactly cls with sqlstate."""
        with self.assertRaises(cls) as raised:
            call(conn or self.conn, *args, **kwargs)
        self.assertIs(type(raised.exception), cls)
        self.assertEqual(raised.exception.sqlstate, sqlstate)
        return raised.exception

    def ends_once(self, take, end, status, other, other_status):
        """end ends what take() made with status, once: a replay says replayed, an unknown id is
        RS006 NotFound, what other ended first (other_status) is RS004 ReservationNotActive.
        Returns what it ended."""
        r = take()
        e = end(self.conn, r.reservation_id)
        self.assertEqual((e.status, e.replayed), (status, False))
        with self.subTest("replay"):
            self.assertIs(end(self.conn, r.reservation_id).replayed, True)
        with self.subTest("RS006 NotFound"):
            self.refused(hc.NotFound, "RS006", end, "res_nothing")
        with self.subTest(f"RS004 ReservationNotActive ({other_status})"):
            o = take()
            other(self.conn, o.reservation_id)
            self.refused(hc.ReservationNotActive, "RS004", end, o.reservation_id)
        return r


def _admin(*statements):
    with psycopg.connect("dbname=postgres", autocommit=True) as conn:
        for s in statements:
            conn.execute(s)


def drop_database():
    _admin(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    for role in (APP, OPS, NOBODY):
        _admin(f"DROP ROLE IF EXISTS {role}")


def create_database():
    drop_database()
    _admin(f"CREATE DATABASE {DB}", *(f"CREATE ROLE {r} LOGIN" for r in (APP, OPS, NOBODY)))
    with connect() as conn:
        conn.execute("CREATE EXTENSION holdcommit")
        conn.execute("SELECT holdcommit.hc_grant_app(%s)", [APP])
        conn.execute("SELECT holdcommit.hc_grant_operator(%s)", [OPS])
