"""holdcommit.aio: the calls on an AsyncConnection, their errors and transactions, async_lease."""
import asyncio
import time
import unittest
from datetime import timedelta

import psycopg

import holdcommit as hc
import holdcommit.aio as aio
from support import APP, OPS, conninfo, uid


class Aio(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.conn = await psycopg.AsyncConnection.connect(conninfo(APP), autocommit=True)
        self.ops = await psycopg.AsyncConnection.connect(conninfo(OPS), autocommit=True)

    async def asyncTearDown(self):
        await self.conn.close()
        await self.ops.close()

    async def test_holds(self):
        """hold, commit, release, extend; AssetUnavailable; the session usable after it"""
        a = (await aio.asset_add(self.ops, uid("asset"))).id
        h = await aio.hold(self.conn, a, "b1", uid("key"), timedelta(minutes=1))
        self.assertIsInstance(h, hc.Hold)
        with self.assertRaises(hc.AssetUnavailable) as raised:
            await aio.hold(self.conn, a, "b2", uid("key"))
        self.assertTrue(raised.exception.detail)
        await (await self.conn.execute("SELECT 1")).fetchone()
        self.assertEqual((await aio.extend(self.conn, h.reservation_id, timedelta(minutes=2))).status, "HELD")
        self.assertEqual((await aio.commit(self.conn, h.reservation_id)).status, "COMMITTED")
        with self.assertRaises(hc.ReservationNotActive):
            await aio.release(self.conn, h.reservation_id)

    async def test_stock(self):
        """stock_set, reserve, reserve_items, finalize, unreserve; InsufficientStock; float qty"""
        p = (await aio.stock_set(self.ops, uid("product"), 3)).product_id
        self.assertEqual((await aio.stock_adjust(self.ops, p, 2, "restock")).stock, 5)
        r = await aio.reserve(self.conn, p, 2, "b1", uid("key"))
        self.assertEqual(r.items, (hc.Item(p, 2),))
        o = await aio.reserve_items(self.conn, [(p, 1)], "b1", uid("key"))
        with self.assertRaises(hc.InsufficientStock):
            await aio.reserve(self.conn, p, 3, "b2", uid("key"))
        with self.assertRaises(hc.InvalidArgument):
            await aio.reserve(self.conn, p, 1.0, "b2", uid("key"))
        self.assertEqual((await aio.finalize(self.conn, r.reservation_id)).status, "FINALIZED")
        self.assertEqual((await aio.unreserve(self.conn, o.reservation_id)).status, "RELEASED")

    async def test_in_a_transaction(self):
        """in a transaction: a refusal rolls back only itself"""
        a = (await aio.asset_add(self.ops, uid("asset"))).id
        taken = (await aio.asset_add(self.ops, uid("asset"))).id
        await aio.hold(self.ops, taken, "someone", uid("key"))
        async with self.conn.transaction():
            await aio.hold(self.conn, a, "b1", uid("key"))
            with self.assertRaises(hc.AssetUnavailable):
                await aio.hold(self.conn, taken, "b1", uid("key"))
        cur = await self.ops.execute("SELECT status FROM holdcommit.hc_assets WHERE id = %s", [a])
        self.assertEqual((await cur.fetchone())[0], "HELD")

    async def test_leases_and_attempts(self):
        """lock_*, attempt_*, check, sweep"""
        r = uid("pay")
        lease = await aio.lock_acquire(self.conn, r, "w1", timedelta(seconds=30))
        self.assertEqual(lease.token, 1)
        self.assertIsNone(await aio.lock_acquire(self.conn, r, "w2"))
        await aio.lock_heartbeat(self.conn, r, "w1", 1)
        with self.assertRaises(hc.LeaseLost):
            await aio.lock_heartbeat(self.conn, r, "w2", 1)
        a = await aio.attempt_begin(self.conn, r, "w1", 1, timedelta(0), 1)
        self.assertEqual(a.status, "PROCEED")
        self.assertEqual((await aio.attempt_begin(self.conn, r, "w1", 1, timedelta(0), 1)).status, "MANUAL_REVIEW")
        self.assertEqual((await aio.attempt_reset(self.ops, r, "checked")).attempt, 0)
        self.assertEqual((await aio.attempt_complete(self.conn, r, "w1", 1, "INV-9")).status, "COMPLETED")
        self.assertTrue(await aio.lock_release(self.conn, r, "w1", 1))
        self.assertEqual(await aio.check(self.conn), [])
        self.assertIsInstance(await aio.sweep(self.ops), hc.Sweep)

    async def test_async_lease(self):
        """async_lease: heartbeaten past its ttl by a task, released at the end"""
        r = uid("res")
        async with aio.async_lease(conninfo(APP), r, "w1", ttl=timedelta(seconds=1),
                                   heartbeat=timedelta(milliseconds=200)) as lease:
            self.assertIsInstance(lease.lost, asyncio.Event)
            await asyncio.sleep(2.0)
            lease.check()
            self.assertIsNone(await aio.lock_acquire(self.conn, r, "w2", timedelta(seconds=1)))
        self.assertTrue(lease.released)

    async def test_async_lease_busy(self):
        """async_lease of a lease another owner holds: Busy"""
        r = uid("res")
        await aio.lock_acquire(self.conn, r, "w1")
        with self.assertRaises(hc.Busy):
            async with aio.async_lease(conninfo(APP), r, "w2"):
                self.fail("the block ran")

    async def test_async_lease_lost_mid_block(self):
        """async_lease taken over mid-block: lost is set, the block stops on it"""
        r = uid("res")
        async with aio.async_lease(conninfo(APP), r, "w1", ttl=timedelta(milliseconds=500),
                                   heartbeat=timedelta(seconds=2)) as lease:
            await asyncio.sleep(0.8)
            self.assertEqual((await aio.lock_acquire(self.conn, r, "w2", timedelta(seconds=5))).token, 2)
            work = asyncio.create_task(asyncio.sleep(30))        # the block's long work
            start = time.monotonic()
            await asyncio.wait([work, asyncio.create_task(lease.lost.wait())],
                               return_when=asyncio.FIRST_COMPLETED)
            work.cancel()                                         # it learned: it stops
            self.assertLess(time.monotonic() - start, 5)
            self.assertIn("heartbeat refused", lease.reason)
            with self.assertRaises(hc.LeaseLost):
                lease.check()
        self.assertFalse(lease.released)

    async def test_fenced(self):
        """aio.fenced: the write commits under the token; after a takeover LeaseLost (RS007)"""
        r, t = uid("res"), uid("invoices").replace("-", "_")
        async with await psycopg.AsyncConnection.connect(conninfo(), autocommit=True) as su:
            await su.execute(f"CREATE TABLE {t} (order_id text PRIMARY KEY, fenced_by bigint NOT NULL)")
            await su.execute(f"GRANT SELECT, INSERT ON {t} TO {APP}")
            async with aio.async_lease(conninfo(APP), r, "w1", ttl=timedelta(seconds=60),
                                       heartbeat=timedelta(seconds=60)) as lease:
                async with aio.fenced(lease, self.conn) as conn:
                    await conn.execute(f"INSERT INTO {t} VALUES ('o-1', %s)", [lease.token])
                await su.execute("UPDATE holdcommit.hc_locks SET heartbeat_at = heartbeat_at - interval '1 hour'"
                                 " WHERE resource = %s", [r])
                self.assertEqual((await aio.lock_acquire(self.conn, r, "w2", timedelta(seconds=5))).token, 2)
                with self.assertRaises(hc.LeaseLost) as raised:
                    async with aio.fenced(lease, self.conn) as conn:
                        await conn.execute(f"INSERT INTO {t} VALUES ('o-2', %s)", [lease.token])
                self.assertEqual(raised.exception.sqlstate, "RS007")
                self.assertTrue(lease.lost.is_set())
            rows = await (await self.conn.execute(f"SELECT order_id, fenced_by FROM {t}")).fetchall()
            self.assertEqual(rows, [("o-1", 1)])

    async def test_async_lease_released_when_the_block_raises(self):
        """async_lease: the block raises, the lease is released"""
        r = uid("res")
        with self.assertRaises(KeyError):
            async with aio.async_lease(conninfo(APP), r, "w1") as lease:
                raise KeyError(r)
        self.assertTrue(lease.released)
