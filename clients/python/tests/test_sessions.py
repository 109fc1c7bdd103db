"""Transactions and sessions: autocommit, psycopg's default mode, a transaction of the caller's,
the session after an error, the isolation and read-only refusals, lock waits, the install."""
import threading
from datetime import timedelta

import psycopg

import holdcommit as hc
from support import APP, NOBODY, OPS, Case, connect, uid


def committed_holds(asset):
    with connect() as c:
        return c.execute("SELECT count(*) FROM holdcommit.hc_reservations WHERE asset_id = %s",
                         [asset]).fetchone()[0]


class Sessions(Case):
    CONNECTIONS = {"ops": OPS}

    def asset(self):
        return hc.asset_add(self.ops, uid("asset")).id

    def test_autocommit_usable_after_an_error(self):
        """autocommit: a refusal, then SELECT 1 and the next call work"""
        with connect(APP) as conn:
            a = self.asset()
            hc.hold(conn, a, "b1", uid("key"))
            with self.assertRaises(hc.AssetUnavailable):
                hc.hold(conn, a, "b2", uid("key"))
            self.assertEqual(conn.execute("SELECT 1").fetchone()[0], 1)
            self.assertEqual(committed_holds(a), 1)

    def test_default_mode_commits_a_call_outside_a_transaction(self):
        """psycopg's default mode, no transaction open: the call is committed when it returns"""
        conn = connect(APP, autocommit=False)
        try:
            a = self.asset()
            h = hc.hold(conn, a, "b1", uid("key"))
            self.assertEqual(conn.info.transaction_status, psycopg.pq.TransactionStatus.IDLE)
            conn.rollback()
            self.assertEqual(committed_holds(a), 1, h)
            with self.assertRaises(hc.AssetUnavailable):
                hc.hold(conn, a, "b2", uid("key"))
            self.assertEqual(conn.execute("SELECT 1").fetchone()[0], 1)
        finally:
            conn.close()

    def test_in_a_transaction_a_refusal_keeps_the_transaction(self):
        """in the caller's transaction: a refusal rolls back only itself (a savepoint)"""
        for autocommit in (True, False):
            with self.subTest(autocommit=autocommit):
                conn = connect(APP, autocommit=autocommit)
                try:
                    a, b = self.asset(), self.asset()
                    hc.hold(self.ops, b, "someone", uid("key"))
                    with conn.transaction():
                        hc.hold(conn, a, "b1", uid("key"))
                        with self.assertRaises(hc.AssetUnavailable):
                            hc.hold(conn, b, "b1", uid("key"))
                        self.assertEqual(conn.execute("SELECT 1").fetchone()[0], 1)
                        self.assertEqual(committed_holds(a), 0)   # not yet: the caller commits
                    self.assertEqual(committed_holds(a), 1)
                finally:
                    conn.close()

    def test_in_a_transaction_rolled_back(self):
        """in the caller's transaction rolled back: the hold goes with it (the lease stays)"""
        conn = connect(APP, autocommit=False)
        try:
            a, r = self.asset(), uid("res")
            conn.execute("SELECT 1")                     # psycopg opens the transaction
            hc.hold(conn, a, "b1", uid("key"))
            token = hc.lock_acquire(conn, r, "worker").token
            conn.rollback()
            self.assertEqual(committed_holds(a), 0)
            self.assertTrue(hc.lock_release(conn, r, "worker", token))   # committed on its own
            conn.commit()
        finally:
            conn.close()

    def test_wrong_isolation(self):
        """REPEATABLE READ: WrongIsolation (25000)"""
        with connect(APP) as conn:
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            with self.assertRaises(hc.WrongIsolation) as raised:
                with conn.transaction():
                    hc.hold(conn, self.asset(), "b1", uid("key"))
            self.assertEqual((raised.exception.sqlstate, raised.exception.http_status), ("25000", 500))
            self.assertEqual(conn.execute("SELECT 1").fetchone()[0], 1)

    def test_read_only(self):
        """a read-only transaction: ReadOnly (25006)"""
        with connect(APP) as conn:
            conn.execute("SET default_transaction_read_only = on")
            with self.assertRaises(hc.ReadOnly) as raised:
                hc.lock_acquire(conn, uid("res"), "worker")
            self.assertEqual((raised.exception.sqlstate, raised.exception.http_status), ("25006", 503))
            with self.assertRaises(hc.ReadOnly):
                with conn.transaction():
                    hc.hold(conn, self.asset(), "b1", uid("key"))
            self.assertEqual(conn.execute("SELECT 1").fetchone()[0], 1)

    def test_lock_timeout(self):
        """a commit waiting for a locked asset row past lock_timeout: Busy (55P03)"""
        a = self.asset()
        with connect(APP) as conn, connect() as locker:
            h = hc.hold(conn, a, "b1", uid("key"))
            conn.execute("SET lock_timeout = '100ms'")
            with locker.transaction():
                locker.execute("SELECT 1 FROM holdcommit.hc_assets WHERE id = %s FOR UPDATE", [a])
                with self.assertRaises(hc.Busy) as raised:
                    hc.commit(conn, h.reservation_id)
            self.assertEqual((raised.exception.sqlstate, raised.exception.http_status), ("55P03", 503))
            self.assertEqual(hc.commit(conn, h.reservation_id).status, "COMMITTED")

    def test_statement_timeout(self):
        """an acquire cancelled by statement_timeout during its backoff: Busy (57014)"""
        r = uid("res")
        with connect(APP) as conn:
            hc.lock_acquire(conn, r, "worker-1")
            conn.execute("SET statement_timeout = '300ms'")
            with self.assertRaises(hc.Busy) as raised:
                hc.lock_acquire(conn, r, "worker-2", retries=5)
            self.assertEqual(raised.exception.sqlstate, "57014")
            self.assertEqual(conn.execute("SELECT 1").fetchone()[0], 1)

    def test_install_without_search_path(self):
        """the recommended install: an app role (hc_grant_app) whose search_path lacks holdcommit"""
        with connect(APP) as conn:
            self.assertEqual(conn.execute("SHOW search_path").fetchone()[0], "public")
            with self.assertRaises(psycopg.errors.UndefinedFunction):
                conn.execute("SELECT hc_check()")      # unqualified SQL needs the search_path
            self.assertEqual(hc.check(conn), [])        # the package qualifies its calls

    def test_role_without_grants(self):
        """a role not granted: PermissionDenied (42501)"""
        with connect(NOBODY) as conn:
            with self.assertRaises(hc.PermissionDenied) as raised:
                hc.hold(conn, self.asset(), "b1", uid("key"))
            self.assertEqual(raised.exception.http_status, 403)

    def test_threads_share_nothing(self):
        """ten threads, each its own connection, race for one asset: one hold"""
        a, results = self.asset(), []

        def buy(n):
            with connect(APP) as conn:
                try:
                    results.append(hc.hold(conn, a, f"b{n}", uid("key"), timedelta(minutes=1)).status)
                except hc.AssetUnavailable:
                    results.append("refused")
        threads = [threading.Thread(target=buy, args=(n,)) for n in range(10)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(sorted(results), ["HELD"] + ["refused"] * 9)
