"""reserve, reserve_items, finalize, unreserve, stock_set, stock_adjust: answers and refusals."""
import time
from datetime import timedelta

import holdcommit as hc
from support import APP, OPS, Case, uid

SHORT = timedelta(milliseconds=200)


class Stock(Case):
    CONNECTIONS = {"conn": APP, "ops": OPS}

    def product(self, stock=10):
        return hc.stock_set(self.ops, uid("product"), stock).product_id

    def reservation(self, product, qty=2, *ttl):
        """buyer-1's reservation of qty units of product, with a new key."""
        return hc.reserve(self.conn, product, qty, "buyer-1", uid("key"), *ttl)

    def expired(self, product):
        """A reservation of one unit of product, its ttl (SHORT) over."""
        s = self.reservation(product, 1, SHORT)
        time.sleep(0.3)
        return s

    def test_stock_set_and_adjust(self):
        """stock_set, stock_adjust (operator), their refusals"""
        p = uid("product")
        inv = hc.stock_set(self.ops, p, 5)
        self.assertIsInstance(inv, hc.Inventory)
        self.assertEqual((inv.stock, inv.reserved, inv.available), (5, 0, 5))
        self.assertEqual(hc.stock_adjust(self.ops, p, 3, "restock").stock, 8)
        ops = lambda call: (lambda c, *a: call(self.ops, *a))  # noqa: E731
        with self.subTest("22023 negative stock (server)"):
            self.refused(hc.InvalidArgument, "22023", ops(hc.stock_set), p, -1)
        with self.subTest("22023 delta zero (server)"):
            self.refused(hc.InvalidArgument, "22023", ops(hc.stock_adjust), p, 0, "none")
        with self.subTest("RS006 NotFound"):
            self.refused(hc.NotFound, "RS006", ops(hc.stock_adjust), uid("nothing"), 1, "restock")
        with self.subTest("22003 stock out of range (client)"):
            self.refused(hc.InvalidArgument, "22003", ops(hc.stock_set), p, 2**31)
        with self.subTest("42501 PermissionDenied for the application"):
            self.refused(hc.PermissionDenied, "42501", hc.stock_set, p, 1)

    def test_reserve(self):
        p, key = self.product(10), uid("key")
        r = hc.reserve(self.conn, p, 3, "buyer-1", key)
        self.assertIsInstance(r, hc.StockReservation)
        self.assertEqual((r.status, r.items, r.replayed), ("RESERVED", (hc.Item(p, 3),), False))
        with self.subTest("replay"):
            again = hc.reserve(self.conn, p, 3, "buyer-1", key)
            self.assertEqual((again.reservation_id, again.replayed), (r.reservation_id, True))
        with self.subTest("RS005 KeyReused"):
            self.refused(hc.KeyReused, "RS005", hc.reserve, p, 4, "buyer-1", key)
        with self.subTest("RS002 InsufficientStock, with detail"):
            e = self.refused(hc.InsufficientStock, "RS002", hc.reserve, p, 8, "buyer-2", uid("key"))
            self.assertIn("7", e.detail)
            self.assertEqual(e.http_status, 409)
        with self.subTest("RS006 NotFound"):
            self.refused(hc.NotFound, "RS006", hc.reserve, uid("nothing"), 1, "buyer-2", uid("key"))
        with self.subTest("22023 qty not positive (server)"):
            self.refused(hc.InvalidArgument, "22023", hc.reserve, p, 0, "buyer-2", uid("key"))
        with self.subTest("qty = 2.0 refused before the call, not 42883"):
            e = self.refused(hc.InvalidArgument, "22023", hc.reserve, p, 2.0, "buyer-2", uid("key"))
            self.assertIn("int", e.message)
            self.assertIsNone(e.__cause__)
        with self.subTest("qty = True refused before the call"):
            self.refused(hc.InvalidArgument, "22023", hc.reserve, p, True, "buyer-2", uid("key"))
        with self.subTest("qty = 2**31 refused before the call"):
            self.refused(hc.InvalidArgument, "22003", hc.reserve, p, 2**31, "buyer-2", uid("key"))

    def test_reserve_items(self):
        p, q = sorted([self.product(10), self.product(10)])
        for label, items in [("a dict", {q: 1, p: 2}),
                             ("mappings", [{"product_id": q, "qty": 1}, {"product_id": p, "qty": 2}]),
                             ("pairs", [(q, 1), (p, 2)]),
                             ("Items", [hc.Item(q, 1), hc.Item(p, 2)])]:
            with self.subTest(f"items as {label}, sent as jsonb"):
                r = hc.reserve_items(self.conn, items, "buyer-1", uid("key"))
                self.assertEqual(r.items, (hc.Item(p, 2), hc.Item(q, 1)))
        with self.subTest("RS002 InsufficientStock: nothing reserved"):
            self.refused(hc.InsufficientStock, "RS002", hc.reserve_items, {p: 1, q: 100}, "b", uid("key"))
            inv = self.conn.execute("SELECT reserved FROM holdcommit.hc_inventory WHERE product_id = %s",
                                    [p]).fetchone()
            self.assertEqual(inv[0], 8)
        with self.subTest("RS006 NotFound"):
            self.refused(hc.NotFound, "RS006", hc.reserve_items, {uid("nothing"): 1}, "b", uid("key"))
        with self.subTest("22023 empty order (server)"):
            e = self.refused(hc.InvalidArgument, "22023", hc.reserve_items, [], "b", uid("key"))
            self.assertIn("invalid items", e.message)
        with self.subTest("22023 more than max_items lines (server)"):
            self.refused(hc.InvalidArgument, "22023", hc.reserve_items, [(p, 1)] * 101, "b", uid("key"))
        with self.subTest("a float qty refused before the call"):
            e = self.refused(hc.InvalidArgument, "22023", hc.reserve_items, {p: 1.0}, "b", uid("key"))
            self.assertIn("items[0].qty", e.message)
        with self.subTest("a line that is not a line refused before the call"):
            self.refused(hc.InvalidArgument, "22023", hc.reserve_items, ["ab"], "b", uid("key"))
        with self.subTest("a str for items refused before the call"):
            self.refused(hc.InvalidArgument, "22023", hc.reserve_items, '[{"product_id": "x"}]', "b", uid("key"))

    def test_finalize(self):
        p = self.product(10)
        self.ends_once(lambda: self.reservation(p), hc.finalize, "FINALIZED", hc.unreserve, "released")
        with self.subTest("RS003 ReservationExpired, then late_ok"):
            s = self.expired(p)
            self.refused(hc.ReservationExpired, "RS003", hc.finalize, s.reservation_id)
            self.assertEqual(hc.finalize(self.conn, s.reservation_id, True).status, "FINALIZED")
        with self.subTest("by product (the routing form)"):
            t = self.reservation(p, 1)
            self.refused(hc.NotFound, "RS006", hc.finalize, t.reservation_id, product_id=self.product())
            self.assertEqual(hc.finalize(self.conn, t.reservation_id, product_id=p).status, "FINALIZED")

    def test_unreserve(self):
        p = self.product(10)
        self.ends_once(lambda: self.reservation(p), hc.unreserve, "RELEASED", hc.finalize, "finalized")
        with self.subTest("expired: EXPIRED, replayed"):
            s = self.expired(p)
            x = hc.unreserve(self.conn, s.reservation_id, product_id=p)
            self.assertEqual((x.status, x.replayed), ("EXPIRED", True))
