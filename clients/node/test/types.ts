// A typed use of the package, compiled by `tsc --noEmit -p .` (never run): the calls accept
// pg's own Client, PoolClient and Pool, and give typed results.
import pg from 'pg';
import {
  hold, holdMany, holdBest, commit, reserveItems, lockAcquire, lockRelease, lockCheck, attemptBegin, sweep, check, forSchema, withLease,
  HoldcommitError, AssetUnavailable, LeaseLost, httpStatus, errorFrom,
  type Reservation, type StockReservation, type Lease,
} from 'holdcommit';

export async function usage(): Promise<void> {
  const pool = new pg.Pool();
  const client = new pg.Client();
  const pooled: pg.PoolClient = await pool.connect();

  const r: Reservation = await hold(pool, 'SEAT-1', 'alice', 'k1', { ttl: '10 minutes' });
  const when: Date = r.expiresAt;
  const fresh: boolean = !r.replayed;
  await commit(client, r.reservationId, { lateOk: true });
  const seats: Reservation[] = await holdMany(pool, ['SEAT-2', 'SEAT-3'], 'alice', 'k4');
  const best: Reservation[] = await holdBest(pool, 'cat-1', 2, 'alice', 'k5', { ttl: 900 });
  console.log(seats[0].reservationId, best.length);
  const o: StockReservation = await reserveItems(pooled, [{ productId: 'SKU-1', qty: 2 }], 'bob', 'k2', { ttl: 60 });
  const qty: number = o.items[0].qty;
  // @ts-expect-error items are objects, not JSON text
  await reserveItems(pool, '[{"product_id": "SKU-1", "qty": 2}]', 'bob', 'k3');

  const token = await lockAcquire(pool, 'PAY-1', 'worker', { staleAfter: 30 });
  if (token !== null) {
    const big: bigint = token;
    // @ts-expect-error a token is a bigint, never the string node-postgres gives for int8
    if (token === '10') throw new Error();
    const a = await attemptBegin(pool, 'PAY-1', 'worker', big, { maxAttempts: 3 });
    if (a.status === 'PROCEED') console.log(a.marker);
    const released: boolean = await lockRelease(pool, 'PAY-1', 'worker', token);
    console.log(released);
  }
  const s = await sweep(pool, { batchSize: 100 });
  const n: bigint = s.expiredHolds + s.purgedKeys;
  const v = await check(forSchema(null).schema === null ? pool : client);
  console.log(when, fresh, qty, n, v.length > 0 && v[0].invariant);

  const result: number = await withLease(pool, { resource: 'PAY-2', owner: 'w', ttl: 30 }, async (lease: Lease) => {
    const t: bigint = lease.token;
    lease.check();
    const signal: AbortSignal = lease.signal;
    const written: string = await lease.fenced(pool, async (c) => {
      await c.query('INSERT INTO invoices VALUES ($1, $2)', ['o-1', t]);
      return 'o-1';
    });
    await lockCheck(pool, 'PAY-2', 'w', t);
    console.log(written);
    return lease.lost || signal.aborted ? 0 : Number(t);
  });
  await withLease({ host: '/tmp', port: 5432 }, { resource: 'PAY-3', owner: 'w' }, () => 1);
  // @ts-expect-error a Client is not a pool: the lease needs a connection of its own
  await withLease(client, { resource: 'PAY-4', owner: 'w' }, () => 1);

  try {
    await hold(pool, 'SEAT-1', 'carol', 'k4');
  } catch (e) {
    if (e instanceof AssetUnavailable) {
      const status: number = e.httpStatus;
      const detail: string | null = e.detail;
      console.log(status, detail, e.sqlstate, httpStatus['RS001']);
    } else if (e instanceof LeaseLost || e instanceof HoldcommitError) {
      console.log(e.hint);
    }
    console.log(errorFrom(e), result);
  }
  pooled.release();
}
