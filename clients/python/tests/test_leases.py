"""lock_*, attempt_*, check, sweep: answers and refusals; the safe default of lock_acquire."""
import time
from datetime import datetime, timedelta

import holdcommit as hc
from support import APP, OPS, Case, connect, uid


class Leases(Case):
    CONNECTIONS = {"conn": APP, "ops": OPS, "admin": None}

    def test_lock_acquire(self):
        r = uid("res")
        lease = hc.lock_acquire(self.conn, r, "worker-1", timedelta(seconds=30))
        self.assertEqual(lease, hc.Lease(r, "worker-1", 1, timedelta(seconds=30)))
        self.assertIsInstance(lease.token, int)
        with self.subTest("the same owner again: the same token"):
            self.assertEqual(hc.lock_acquire(self.conn, r, "worker-1", timedelta(seconds=30)).token, 1)
        with self.subTest("busy: None at once (retries default to 0, not the SQL's 5)"):
            start = time.monotonic()
            self.assertIsNone(hc.lock_acquire(self.conn, r, "worker-2"))
            self.assertLess(time.monotonic() - start, 1.0)
        with self.subTest("retries=2 waits with the server's backoff"):
            start = time.monotonic()
            self.assertIsNone(hc.lock_acquire(self.conn, r, "worker-2", retries=2))
            self.assertGreater(time.monotonic() - start, 0.3)
        with self.subTest("22023 empty resource (server)"):
            self.refused(hc.InvalidArgument, "22023", hc.lock_acquire, "", "worker-1")
        with self.subTest("22023 retries < 0 (server)"):
            self.refused(hc.InvalidArgument, "22023", hc.lock_acquire, r, "worker-1", retries=-1)
        with self.subTest("stale_after as seconds refused before the call"):
            self.refused(hc.InvalidArgument, "22023", hc.lock_acquire, r, "worker-1", 30)

    def test_takeover_after_stale(self):
        r = uid("res")
        hc.lock_acquire(self.conn, r, "worker-1", timedelta(milliseconds=200))
        time.sleep(0.3)
        taken = hc.lock_acquire(self.conn, r, "worker-2", timedelta(seconds=30))
        self.assertEqual(taken.token, 2)
        with self.subTest("the former holder's heartbeat: LeaseLost (RS007), with detail"):
            e = self.refused(hc.LeaseLost, "RS007", hc.lock_heartbeat, r, "worker-1", 1)
            self.assertTrue(e.detail)
            self.assertEqual(e.http_status, 409)
        with self.subTest("the former holder's release: False"):
            self.assertFalse(hc.lock_release(self.conn, r, "worker-1", 1))

    def test_bind_session(self):
        """lock_acquire(bind_session=True): the lease ends with its session"""
        r = uid("res")
        other = connect(APP)
        self.assertEqual(hc.lock_acquire(other, r, "worker-1", bind_session=True).token, 1)
        other.close()
        self.assertTrue(hc.lock_acquire(self.conn, r, "worker-2", retries=3))

    def test_heartbeat_and_release(self):
        r = uid("res")
        hc.lock_acquire(self.conn, r, "worker-1")
        at = hc.lock_heartbeat(self.conn, r, "worker-1", 1)
        self.assertIsInstance(at, datetime)
        self.assertTrue(hc.lock_release(self.conn, r, "worker-1", 1))
        with self.subTest("a second release: False"):
            self.assertFalse(hc.lock_release(self.conn, r, "worker-1", 1))
        with self.subTest("a heartbeat after the release: LeaseLost"):
            self.refused(hc.LeaseLost, "RS007", hc.lock_heartbeat, r, "worker-1", 1)
        with self.subTest("22023 token <= 0 (server)"):
            self.refused(hc.InvalidArgument, "22023", hc.lock_heartbeat, r, "worker-1", 0)
        with self.subTest("a float token refused before the call"):
            self.refused(hc.InvalidArgument, "22023", hc.lock_release, r, "worker-1", 1.0)
        with self.subTest("a token past bigint refused before the call"):
            self.refused(hc.InvalidArgument, "22003", hc.lock_release, r, "worker-1", 2**63)

    def test_attempts(self):
        """attempt_begin: PROCEED, COOLDOWN, MANUAL_REVIEW; complete; reset"""
        r = uid("pay")
        t = hc.lock_acquire(self.conn, r, "worker-1").token
        a = hc.attempt_begin(self.conn, r, "worker-1", t, timedelta(0), 2, request_key="req-1")
        self.assertIsInstance(a, hc.Attempt)
        self.assertEqual((a.status, a.attempt), ("PROCEED", 1))
        self.assertTrue(a.marker.startswith("ATTEMPTED-worker-1-r1-t"))
        with self.subTest("the same request (its request_key) within the cooldown: that attempt back"):
            c = hc.attempt_begin(self.conn, r, "worker-1", t, timedelta(minutes=5), 2, request_key="req-1")
            self.assertEqual((c.status, c.attempt, c.marker), ("PROCEED", 1, a.marker))
        with self.subTest("the same holder without the key within the cooldown: COOLDOWN"):
            c = hc.attempt_begin(self.conn, r, "worker-1", t, timedelta(minutes=5), 2)
            self.assertEqual((c.status, c.attempt), ("COOLDOWN", 1))
        with self.subTest("another holder within the cooldown: COOLDOWN"):
            hc.lock_release(self.conn, r, "worker-1", t)
            t = hc.lock_acquire(self.conn, r, "worker-2").token
            c = hc.attempt_begin(self.conn, r, "worker-2", t, timedelta(minutes=5), 2)
            self.assertEqual((c.status, c.marker), ("COOLDOWN", a.marker))
            hc.lock_release(self.conn, r, "worker-2", t)
            t = hc.lock_acquire(self.conn, r, "worker-1").token
        with self.subTest("PROCEED again, then MANUAL_REVIEW at the cap"):
            self.assertEqual(hc.attempt_begin(self.conn, r, "worker-1", t, timedelta(0), 2).attempt, 2)
            self.assertEqual(hc.attempt_begin(self.conn, r, "worker-1", t, timedelta(0), 2).status,
                             "MANUAL_REVIEW")
        with self.subTest("RS007 LeaseLost with a wrong token"):
            self.refused(hc.LeaseLost, "RS007", hc.attempt_begin, r, "worker-1", t + 1)
        with self.subTest("22023 max_attempts < 1 (server)"):
            self.refused(hc.InvalidArgument, "22023", hc.attempt_begin, r, "worker-1", t, timedelta(0), 0)
        with self.subTest("a float max_attempts refused before the call"):
            self.refused(hc.InvalidArgument, "22023", hc.attempt_begin, r, "worker-1", t, timedelta(0), 2.0)
        with self.subTest("attempt_reset (operator): PROCEED, attempt 0"):
            z = hc.attempt_reset(self.ops, r, "checked the ERP by hand")
            self.assertEqual((z.status, z.attempt), ("PROCEED", 0))
        with self.subTest("attempt_reset by the application: PermissionDenied"):
            self.refused(hc.PermissionDenied, "42501", hc.attempt_reset, r, "no")
        with self.subTest("attempt_reset of a resource without attempts: NotFound"):
            self.refused(hc.NotFound, "RS006", hc.attempt_reset, uid("pay"), "note", conn=self.ops)
        with self.subTest("attempt_reset with an empty note: InvalidArgument"):
            self.refused(hc.InvalidArgument, "22023", hc.attempt_reset, r, "", conn=self.ops)
        with self.subTest("attempt_complete: COMPLETED, replay"):
            done = hc.attempt_complete(self.conn, r, "worker-1", t, "INV-1")
            self.assertEqual((done.status, done.external_ref), ("COMPLETED", "INV-1"))
            self.assertEqual(hc.attempt_complete(self.conn, r, "worker-2", 99, "INV-1").status, "COMPLETED")
            self.assertEqual(hc.attempt_begin(self.conn, r, "worker-1", t).status, "COMPLETED")
        with self.subTest("attempt_complete with another external_ref: ReservationNotActive (RS004)"):
            e = self.refused(hc.ReservationNotActive, "RS004", hc.attempt_complete, r, "worker-1", t, "INV-2")
            self.assertIn("INV-2", e.detail)
        with self.subTest("attempt_reset of a COMPLETED resource: RS004"):
            self.refused(hc.ReservationNotActive, "RS004", hc.attempt_reset, r, "note", conn=self.ops)
        with self.subTest("attempt_complete without the lease: LeaseLost"):
            self.refused(hc.LeaseLost, "RS007", hc.attempt_complete, uid("pay"), "worker-1", 1, "INV-3")

    def test_check(self):
        """check(): empty; a broken invariant is a Violation"""
        self.assertEqual(hc.check(self.conn), [])
        r = uid("res")
        hc.lock_acquire(self.admin, r, "worker-1")
        with self.admin.transaction(force_rollback=True):
            self.admin.execute("UPDATE holdcommit.hc_locks SET token = 7 WHERE resource = %s", [r])
            found = hc.check(self.admin)
        self.assertTrue(found)
        self.assertIsInstance(found[0], hc.Violation)
        self.assertIn(r, [v.subject for v in found])
        self.assertEqual(hc.check(self.conn), [])

    def test_sweep(self):
        """sweep() (operator): the expired hold is swept; PermissionDenied for the application"""
        a = hc.asset_add(self.ops, uid("asset")).id
        hc.hold(self.conn, a, "buyer", uid("key"), timedelta(milliseconds=100))
        time.sleep(0.2)
        s = hc.sweep(self.ops)
        self.assertIsInstance(s, hc.Sweep)
        self.assertGreaterEqual(s.expired_holds, 1)
        self.assertEqual(hc.sweep(self.ops, 10).expired_holds, 0)
        self.refused(hc.InvalidArgument, "22023", hc.sweep, 1.5, conn=self.ops)
        self.refused(hc.PermissionDenied, "42501", hc.sweep)
