"""hold, commit, release, extend: every answer and every refusal, as the application role."""
import time
from datetime import timedelta

import holdcommit as hc
from support import APP, OPS, Case, uid

SHORT = timedelta(milliseconds=200)


class Holds(Case):
    CONNECTIONS = {"conn": APP, "ops": OPS}

    def asset(self):
        return hc.asset_add(self.ops, uid("asset"), "a locomotive").id

    def hold(self):
        return hc.hold(self.conn, self.asset(), "buyer-1", uid("key"))

    def test_hold(self):
        a = self.asset()
        h = hc.hold(self.conn, a, "buyer-1", uid("key"), timedelta(minutes=5))
        self.assertIsInstance(h, hc.Hold)
        self.assertEqual((h.asset_id, h.buyer_id, h.status, h.replayed), (a, "buyer-1", "HELD", False))
        self.assertTrue(h.reservation_id.startswith("res_"))
        self.assertAlmostEqual((h.expires_at - h.created_at).total_seconds(), 300, places=3)

    def test_hold_replayed_and_refused(self):
        a, key = self.asset(), uid("key")
        first = hc.hold(self.conn, a, "buyer-1", key)
        with self.subTest("replay"):
            again = hc.hold(self.conn, a, "buyer-1", key)
            self.assertEqual((again.reservation_id, again.replayed), (first.reservation_id, True))
        with self.subTest("RS005 KeyReused"):
            e = self.refused(hc.KeyReused, "RS005", hc.hold, a, "buyer-2", key)
            self.assertEqual(e.http_status, 422)
        with self.subTest("RS001 AssetUnavailable, with detail and hint"):
            e = self.refused(hc.AssetUnavailable, "RS001", hc.hold, a, "buyer-2", uid("key"))
            self.assertIn("held by another buyer", e.detail)
            self.assertTrue(e.hint)
            self.assertEqual(e.http_status, 409)
        with self.subTest("RS006 NotFound"):
            e = self.refused(hc.NotFound, "RS006", hc.hold, uid("nothing"), "buyer-2", uid("key"))
            self.assertEqual(e.http_status, 404)
        with self.subTest("22023 empty id (server)"):
            self.refused(hc.InvalidArgument, "22023", hc.hold, "", "buyer-2", uid("key"))
        with self.subTest("22001 id too long (server)"):
            self.refused(hc.InvalidArgument, "22001", hc.hold, "x" * 65, "buyer-2", uid("key"))
        with self.subTest("22023 ttl over max_ttl (server)"):
            self.refused(hc.InvalidArgument, "22023", hc.hold, a, "b", uid("key"), timedelta(days=400))
        with self.subTest("22023 ttl not a timedelta (client)"):
            e = self.refused(hc.InvalidArgument, "22023", hc.hold, a, "b", uid("key"), 600)
            self.assertIn("timedelta", e.message)
        with self.subTest("22004 null argument (client)"):
            self.refused(hc.InvalidArgument, "22004", hc.hold, a, None, uid("key"))
        with self.subTest("a NUL in an id (client)"):
            e = self.refused(hc.InvalidArgument, "22021", hc.hold, "a\x00b", "b", uid("key"))
            self.assertEqual(e.http_status, 400)

    def test_commit(self):
        h = self.ends_once(self.hold, hc.commit, "COMMITTED", hc.release, "released")
        with self.subTest("late_ok must be a bool (client)"):
            self.refused(hc.InvalidArgument, "22023", hc.commit, h.reservation_id, "yes")

    def test_commit_expired_and_late(self):
        a = self.asset()
        h = hc.hold(self.conn, a, "buyer-1", uid("key"), SHORT)
        time.sleep(0.3)
        e = self.refused(hc.ReservationExpired, "RS003", hc.commit, h.reservation_id)
        self.assertEqual(e.http_status, 410)
        late = hc.commit(self.conn, h.reservation_id, late_ok=True)
        self.assertEqual(late.status, "COMMITTED")

    def test_commit_by_asset(self):
        """commit, release and extend given the asset (the routing forms)"""
        a = self.asset()
        h = hc.hold(self.conn, a, "buyer-1", uid("key"))
        self.refused(hc.NotFound, "RS006", hc.commit, h.reservation_id, asset_id=self.asset())
        self.refused(hc.NotFound, "RS006", hc.release, h.reservation_id, asset_id=self.asset())
        self.refused(hc.NotFound, "RS006", hc.extend, h.reservation_id, timedelta(minutes=1),
                     asset_id=self.asset())
        self.assertEqual(hc.extend(self.conn, h.reservation_id, timedelta(minutes=20), asset_id=a).status, "HELD")
        self.assertEqual(hc.commit(self.conn, h.reservation_id, asset_id=a).status, "COMMITTED")
        self.refused(hc.ReservationNotActive, "RS004", hc.release, h.reservation_id, asset_id=a)

    def test_release(self):
        self.ends_once(self.hold, hc.release, "RELEASED", hc.commit, "committed")

    def test_extend(self):
        h = hc.hold(self.conn, self.asset(), "buyer-1", uid("key"), timedelta(minutes=1))
        e = hc.extend(self.conn, h.reservation_id, timedelta(minutes=30))
        self.assertGreater(e.expires_at, h.expires_at)
        with self.subTest("22023 ttl not positive (server)"):
            self.refused(hc.InvalidArgument, "22023", hc.extend, h.reservation_id, timedelta(0))
        with self.subTest("RS006 NotFound"):
            self.refused(hc.NotFound, "RS006", hc.extend, "res_nothing", timedelta(minutes=1))
        with self.subTest("RS003 ReservationExpired"):
            s = hc.hold(self.conn, self.asset(), "buyer-1", uid("key"), SHORT)
            time.sleep(0.3)
            self.refused(hc.ReservationExpired, "RS003", hc.extend, s.reservation_id, timedelta(minutes=1))
        with self.subTest("RS004 ReservationNotActive"):
            hc.commit(self.conn, h.reservation_id)
            self.refused(hc.ReservationNotActive, "RS004", hc.extend, h.reservation_id, timedelta(minutes=1))

    def test_asset_add(self):
        """asset_add (operator): an asset, then AlreadyExists (23505); PermissionDenied for the app"""
        a = hc.asset_add(self.ops, uid("asset"), "name")
        self.assertIsInstance(a, hc.Asset)
        self.assertEqual((a.status, a.name, a.version), ("AVAILABLE", "name", 1))
        e = self.refused(hc.AlreadyExists, "23505", lambda c, *x: hc.asset_add(self.ops, *x), a.id)
        self.assertTrue(e.hint)
        e = self.refused(hc.PermissionDenied, "42501", hc.asset_add, uid("asset"))
        self.assertEqual(e.http_status, 403)

    def test_hold_many(self):
        """hold_many: a Hold per asset, one id; a replay in another order; RS001 names the seats"""
        a, b = self.asset(), self.asset()
        key = uid("key")
        holds = hc.hold_many(self.conn, [b, a], "buyer-1", key)
        self.assertEqual(sorted(h.asset_id for h in holds), sorted([a, b]))
        self.assertEqual(len({h.reservation_id for h in holds}), 1)
        self.assertFalse(any(h.replayed for h in holds))
        again = hc.hold_many(self.conn, (a, b), "buyer-1", key)
        self.assertTrue(all(h.replayed for h in again))
        e = self.refused(hc.AssetUnavailable, "RS001", hc.hold_many, [self.asset(), a], "buyer-2", uid("key"))
        self.assertIn(f'"{a}"', e.detail)
        self.refused(hc.InvalidArgument, "22023", hc.hold_many, [a, a], "buyer-2", uid("key"))
        self.refused(hc.InvalidArgument, "22023", hc.hold_many, a, "buyer-2", uid("key"))
        self.refused(hc.InvalidArgument, "22004", hc.hold_many, [a, None], "buyer-2", uid("key"))
        sold = hc.commit(self.conn, holds[0].reservation_id)
        self.assertEqual(sold.status, "COMMITTED")

    def test_hold_best(self):
        """hold_best: two adjacent seats of a pool as one hold; RS002 with what is left"""
        pool = uid("pool")
        for pos in range(1, 5):
            hc.asset_add(self.ops, uid("seat"), "a seat", pool=pool, rank=1, grp="A", pos=pos)
        holds = hc.hold_best(self.conn, pool, 2, "buyer-1", uid("key"))
        self.assertEqual(len(holds), 2)
        self.assertEqual(len({h.reservation_id for h in holds}), 1)
        e = self.refused(hc.InsufficientStock, "RS002", hc.hold_best, pool, 3, "buyer-2", uid("key"))
        self.assertEqual(e.detail, "2 left.")
        self.refused(hc.NotFound, "RS006", hc.hold_best, uid("pool"), 2, "buyer-2", uid("key"))
        self.assertEqual(hc.release(self.conn, holds[0].reservation_id).status, "RELEASED")
