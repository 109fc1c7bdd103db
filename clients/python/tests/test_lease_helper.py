"""holdcommit.lease: held and heartbeaten while the block runs, released in finally, and the
block told when the lease is lost (taken over, released from elsewhere, heartbeats blocked,
its connection killed)."""
import threading
import time
from datetime import timedelta

import holdcommit as hc
from support import APP, Case, conninfo, connect, uid, wait_until

S = timedelta(seconds=1)


def owner_of(resource):
    with connect() as c:
        row = c.execute("SELECT owner, token FROM holdcommit.hc_locks WHERE resource = %s",
                        [resource]).fetchone()
        return row and tuple(row)


class LeaseHelper(Case):
    app = conninfo(APP)

    def test_held_and_heartbeaten_then_released(self):
        """held past its ttl while the block runs (heartbeats), released at the end"""
        r = uid("res")
        with hc.lease(self.app, r, "worker-1", ttl=S, heartbeat=timedelta(milliseconds=200)) as lease:
            self.assertIsInstance(lease.token, int)
            self.assertEqual(lease.token, 1)
            self.assertIsInstance(lease.lost, threading.Event)
            time.sleep(2.0)                                  # twice the ttl
            lease.check()
            self.assertTrue(lease.held)
            self.assertIsNone(hc.lock_acquire(self.conn, r, "worker-2", S))   # still fresh
            self.assertEqual(hc.attempt_begin(self.conn, r, "worker-1", lease.token).status, "PROCEED")
        self.assertTrue(lease.released)
        self.assertFalse(lease.lost.is_set())
        self.assertEqual(owner_of(r), (None, 1))

    def test_busy(self):
        """another owner's live lease: Busy (55P03) at once, nothing to release"""
        r = uid("res")
        hc.lock_acquire(self.conn, r, "worker-1")
        start = time.monotonic()
        with self.assertRaises(hc.Busy) as raised:
            with hc.lease(self.app, r, "worker-2"):
                self.fail("the block ran")
        self.assertLess(time.monotonic() - start, 1.0)
        self.assertEqual((raised.exception.sqlstate, raised.exception.http_status), ("55P03", 503))
        self.assertEqual(owner_of(r), ("worker-1", 1))

    def test_released_when_the_block_raises(self):
        """the block raises: the exception propagates, the lease is released in finally"""
        r = uid("res")
        with self.assertRaises(ZeroDivisionError):
            with hc.lease(self.app, r, "worker-1", ttl=S) as lease:
                1 / 0
        self.assertTrue(lease.released)
        self.assertEqual(owner_of(r), (None, 1))

    def test_lost_to_a_takeover(self):
        """taken over mid-block: RS007 sets lost, check() raises, the old token is fenced off"""
        r = uid("res")
        with hc.lease(self.app, r, "worker-1", ttl=timedelta(milliseconds=500),
                      heartbeat=timedelta(seconds=2)) as lease:
            time.sleep(0.8)                                  # stale: no heartbeat yet
            self.assertEqual(hc.lock_acquire(self.conn, r, "worker-2", S).token, 2)
            self.assertTrue(lease.lost.wait(5))              # the next heartbeat is refused
            self.assertIn("heartbeat refused", lease.reason)
            with self.assertRaises(hc.LeaseLost) as raised:
                lease.check()
            self.assertEqual(raised.exception.sqlstate, "RS007")
            with self.assertRaises(hc.LeaseLost):
                hc.attempt_begin(self.conn, r, "worker-1", lease.token)
        self.assertFalse(lease.released)
        self.assertEqual(owner_of(r), ("worker-2", 2))

    def test_lost_when_released_elsewhere(self):
        """released behind its back: the next heartbeat (RS007) sets lost"""
        r = uid("res")
        with hc.lease(self.app, r, "worker-1", ttl=S, heartbeat=timedelta(milliseconds=200)) as lease:
            self.assertTrue(hc.lock_release(self.conn, r, "worker-1", lease.token))
            self.assertTrue(lease.lost.wait(3))
            self.assertFalse(lease.held)
        self.assertFalse(lease.released)

    def test_lost_when_heartbeats_are_blocked(self):
        """heartbeats blocked past the ttl (row locked): lost set by the deadline, then released"""
        r = uid("res")
        locked, done = threading.Event(), threading.Event()

        def lock_row():
            with connect() as c, c.transaction():
                c.execute("SELECT 1 FROM holdcommit.hc_locks WHERE resource = %s FOR UPDATE", [r])
                locked.set()
                done.wait(10)
        with hc.lease(self.app, r, "worker-1", ttl=S, heartbeat=timedelta(milliseconds=250)) as lease:
            locker = threading.Thread(target=lock_row)
            locker.start()
            locked.wait(5)
            start = time.monotonic()
            steps = 0
            while not lease.lost.is_set() and time.monotonic() - start < 5:   # the block's work
                steps += 1
                time.sleep(0.05)
            self.assertTrue(lease.lost.is_set())
            self.assertLess(time.monotonic() - start, 2.5)
            self.assertIn("no heartbeat succeeded", lease.reason)
            self.assertRaises(hc.LeaseLost, lease.check)
            done.set()
            locker.join()
        self.assertTrue(lease.released)                     # nobody had taken it: freed
        self.assertEqual(owner_of(r), (None, 1))

    def test_lost_when_its_connection_dies(self):
        """its connection terminated: lost is set; released over a new connection"""
        r, name = uid("res"), uid("hc-lease")
        with hc.lease(conninfo(APP, application_name=name), r, "worker-1", ttl=timedelta(seconds=3),
                      heartbeat=timedelta(milliseconds=200)) as lease:
            with connect() as c:
                c.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
                          [name])
            self.assertTrue(lease.lost.wait(3))
            self.assertIn("connection died", lease.reason)
        self.assertTrue(lease.released)
        self.assertTrue(wait_until(lambda: owner_of(r) == (None, 1)))

    def invoices(self):
        """the application's own table, which the app role writes"""
        t = uid("invoices").replace("-", "_")
        with connect() as c:
            c.execute(f"CREATE TABLE {t} (order_id text PRIMARY KEY, fenced_by bigint NOT NULL)")
            c.execute(f"GRANT SELECT, INSERT, UPDATE ON {t} TO {APP}")
        return t

    def test_fenced_write(self):
        """lease.fenced: the write commits under the token; a takeover gets it only after that

        While the fenced transaction is open, a takeover of the stale lease gets nothing."""
        r, t = uid("res"), self.invoices()
        long = timedelta(seconds=60)
        with hc.lease(self.app, r, "worker-1", ttl=long, heartbeat=long) as lease:
            with lease.fenced(self.conn) as conn:
                conn.execute(f"INSERT INTO {t} VALUES ('o-1', %s)", [lease.token])
                with connect() as su:                        # its heartbeat an hour old: stale
                    su.execute("UPDATE holdcommit.hc_locks SET heartbeat_at = heartbeat_at - interval '1 hour'"
                               " WHERE resource = %s", [r])
                with connect(APP) as other:
                    self.assertIsNone(hc.lock_acquire(other, r, "worker-2", S))
            with connect(APP) as other:
                self.assertEqual(hc.lock_acquire(other, r, "worker-2", S).token, 2)
        self.assertFalse(lease.released)
        self.assertEqual(self.conn.execute(f"SELECT fenced_by FROM {t}").fetchall(), [(1,)])

    def test_fenced_refused_after_a_takeover(self):
        """lease.fenced after a takeover: LeaseLost (RS007), nothing written, the session usable

        The lease is marked lost too."""
        r, t = uid("res"), self.invoices()
        long = timedelta(seconds=60)
        with hc.lease(self.app, r, "worker-1", ttl=long, heartbeat=long) as lease:
            with connect() as su:
                su.execute("UPDATE holdcommit.hc_locks SET heartbeat_at = heartbeat_at - interval '1 hour'"
                           " WHERE resource = %s", [r])
            self.assertEqual(hc.lock_acquire(self.conn, r, "worker-2", S).token, 2)
            with self.assertRaises(hc.LeaseLost) as raised:
                with lease.fenced(self.conn) as conn:
                    conn.execute(f"INSERT INTO {t} VALUES ('o-1', %s)", [lease.token])
            self.assertEqual(raised.exception.sqlstate, "RS007")
            self.assertTrue(lease.lost.is_set())
            self.assertIn("hc_lock_check refused", lease.reason)
            self.assertRaises(hc.LeaseLost, lease.check)
        self.assertEqual(self.conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0], 0)
        self.assertEqual(self.conn.execute("SELECT 1").fetchone()[0], 1)

    def test_fenced_refused_when_stale(self):
        """lease.fenced of a lease gone stale, nobody having taken it over: LeaseLost (RS007)

        Anyone may take it over from then on, so no check may keep them out."""
        r = uid("res")
        long = timedelta(seconds=60)
        with hc.lease(self.app, r, "worker-1", ttl=long, heartbeat=long) as lease:
            with connect() as su:
                su.execute("UPDATE holdcommit.hc_locks SET heartbeat_at = heartbeat_at - interval '1 hour'"
                           " WHERE resource = %s", [r])
            with self.assertRaises(hc.LeaseLost) as raised:
                with lease.fenced(self.conn):
                    pass
            self.assertIn("stale", raised.exception.detail)
            self.assertTrue(lease.lost.is_set())

    def test_bad_arguments(self):
        """a ttl or heartbeat that is not a positive timedelta: InvalidArgument before connecting"""
        for kwargs in ({"ttl": 30}, {"ttl": timedelta(0)}, {"heartbeat": timedelta(seconds=-1)}):
            with self.subTest(**{k: str(v) for k, v in kwargs.items()}):
                with self.assertRaises(hc.InvalidArgument):
                    with hc.lease(self.app, uid("res"), "worker-1", **kwargs):
                        pass
