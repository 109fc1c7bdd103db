// Every call against the make test server, as an application role granted with hc_grant_app
// whose search_path is public: the package's calls are schema-qualified.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import pg from 'pg';
import * as hc from 'holdcommit';
import { admin, app, appOnPath, asset, database, endPools, product, refused, sleep, uid, withClient } from './helpers.js';

after(endPools);

test('hold: a new hold is HELD, not replayed, with Date timestamps', async () => {
  const seat = await asset();
  const r = await hc.hold(app, seat, 'alice', uid('k'), { ttl: '10 minutes' });
  assert.match(r.reservationId, /^res_[0-9A-Z]{26}$/);
  assert.deepEqual([r.assetId, r.buyerId, r.status, r.replayed], [seat, 'alice', 'HELD', false]);
  assert.ok(r.expiresAt instanceof Date && r.createdAt instanceof Date);
  assert.equal(r.expiresAt - r.createdAt, 600000);
});

test('hold: the same key and request replay the hold (replayed true, same id and times)', async () => {
  const seat = await asset();
  const key = uid('k');
  const first = await hc.hold(app, seat, 'alice', key, { ttl: 60 });
  const again = await hc.hold(app, seat, 'alice', key, { ttl: '1 minute' });
  assert.deepEqual(again, { ...first, replayed: true });
});

test('hold: another buyer is refused with AssetUnavailable (RS001, 409) and a detail', async () => {
  const seat = await asset();
  await hc.hold(app, seat, 'alice', uid('k'));
  await refused(hc.hold(app, seat, 'bob', uid('k')), hc.AssetUnavailable, 'RS001', 409);
  await assert.rejects(hc.hold(app, seat, 'bob', uid('k')), (e) => /held by another buyer/.test(e.detail));
});

test('hold: a key used for another request is KeyReused (RS005, 422)', async () => {
  const key = uid('k');
  await hc.hold(app, await asset(), 'alice', key);
  await refused(hc.hold(app, await asset(), 'alice', key), hc.KeyReused, 'RS005', 422);
});

test('hold: an unknown asset is NotFound (RS006, 404)', async () => {
  await refused(hc.hold(app, uid('NOPE'), 'alice', uid('k')), hc.NotFound, 'RS006', 404);
});

test('commit: COMMITTED, a second commit replays, a release then is ReservationNotActive (RS004, 409)', async () => {
  const r = await hc.hold(app, await asset(), 'alice', uid('k'));
  const c = await hc.commit(app, r.reservationId);
  assert.deepEqual([c.status, c.replayed], ['COMMITTED', false]);
  assert.deepEqual([(await hc.commit(app, r.reservationId)).replayed], [true]);
  await refused(hc.release(app, r.reservationId), hc.ReservationNotActive, 'RS004', 409);
});

test('commit: after expiry ReservationExpired (RS003, 410); with lateOk it still commits', async () => {
  const r = await hc.hold(app, await asset(), 'alice', uid('k'), { ttl: 0.2 });
  await sleep(300);
  await refused(hc.commit(app, r.reservationId), hc.ReservationExpired, 'RS003', 410);
  const late = await hc.commit(app, r.reservationId, { lateOk: true });
  assert.equal(late.status, 'COMMITTED');
});

test('release: RELEASED, and the asset can be held again', async () => {
  const seat = await asset();
  const r = await hc.hold(app, seat, 'alice', uid('k'));
  assert.equal((await hc.release(app, r.reservationId)).status, 'RELEASED');
  assert.equal((await hc.hold(app, seat, 'bob', uid('k'))).status, 'HELD');
});

test('extend: a later expiresAt; an unknown reservation is NotFound (RS006)', async () => {
  const r = await hc.hold(app, await asset(), 'alice', uid('k'), { ttl: 60 });
  const e = await hc.extend(app, r.reservationId, '5 minutes');
  assert.ok(e.expiresAt > r.expiresAt);
  await refused(hc.extend(app, 'res_nope', 60), hc.NotFound, 'RS006', 404);
});

test('reserve: RESERVED with its one line; more than is left is InsufficientStock (RS002, 409)', async () => {
  const sku = await product(3);
  const o = await hc.reserve(app, sku, 2, 'bob', uid('k'));
  assert.deepEqual([o.status, o.replayed, o.items], ['RESERVED', false, [{ productId: sku, qty: 2 }]]);
  await refused(hc.reserve(app, sku, 2, 'carol', uid('k')), hc.InsufficientStock, 'RS002', 409);
});

test('reserveItems: a JS array goes as JSON text; lines of one product summed, sorted by product', async () => {
  const a = await product(10, 'A');
  const b = await product(10, 'B');
  const o = await hc.reserveItems(app, [{ productId: b, qty: 1 }, { productId: a, qty: 2 }, { productId: b, qty: 3 }], 'bob', uid('k'));
  assert.deepEqual(o.items, [{ productId: a, qty: 2 }, { productId: b, qty: 4 }]);
  await refused(hc.reserveItems(app, [{ productId: a, qty: 9 }], 'bob', uid('k')), hc.InsufficientStock, 'RS002');
  await refused(hc.reserveItems(app, [{ productId: uid('NOPE'), qty: 1 }], 'bob', uid('k')), hc.NotFound, 'RS006');
  await refused(hc.reserveItems(app, [], 'bob', uid('k')), hc.InvalidArgument, '22023', 400);
});

test('reserveItems: items are checked before the call (not an array, qty 2.5, no productId)', async () => {
  let queries = 0;
  const counting = { query: async () => { queries++; return { rows: [] }; } };
  await refused(hc.reserveItems(counting, '[{"product_id": "A", "qty": 1}]', 'b', 'k'), hc.InvalidArgument, '22023', 400);
  await refused(hc.reserveItems(counting, [{ productId: 'A', qty: 2.5 }], 'b', 'k'), hc.InvalidArgument, '22023');
  await refused(hc.reserveItems(counting, [{ product_id: 'A', qty: 1 }], 'b', 'k'), hc.InvalidArgument, '22004');
  await refused(hc.reserveItems(counting, [null], 'b', 'k'), hc.InvalidArgument, '22023');
  assert.equal(queries, 0);
});

test('the raw driver: a JS array for jsonb is 22P02, which errorFrom maps to InvalidArgument', async () => {
  const sku = await product(1);
  const e = await app.query('SELECT holdcommit.hc_reserve_items($1, $2, $3)', [[{ product_id: sku, qty: 1 }], 'b', uid('k')])
    .then(() => null, (err) => err);
  assert.equal(e.code, '22P02');
  assert.ok(hc.errorFrom(e) instanceof hc.InvalidArgument);
});

test('finalize: FINALIZED, replayed once more; unreserve then is ReservationNotActive (RS004)', async () => {
  const o = await hc.reserve(app, await product(2), 1, 'bob', uid('k'));
  assert.deepEqual([(await hc.finalize(app, o.reservationId)).status], ['FINALIZED']);
  assert.equal((await hc.finalize(app, o.reservationId)).replayed, true);
  await refused(hc.unreserve(app, o.reservationId), hc.ReservationNotActive, 'RS004', 409);
});

test('finalize: after expiry ReservationExpired (RS003); lateOk finalizes while the stock is there', async () => {
  const o = await hc.reserve(app, await product(2), 1, 'bob', uid('k'), { ttl: 0.2 });
  await sleep(300);
  await refused(hc.finalize(app, o.reservationId), hc.ReservationExpired, 'RS003', 410);
  assert.equal((await hc.finalize(app, o.reservationId, { lateOk: true })).status, 'FINALIZED');
});

test('unreserve: RELEASED, and the units are available again', async () => {
  const sku = await product(1);
  const o = await hc.reserve(app, sku, 1, 'bob', uid('k'));
  assert.equal((await hc.unreserve(app, o.reservationId)).status, 'RELEASED');
  assert.equal((await hc.reserve(app, sku, 1, 'carol', uid('k'))).status, 'RESERVED');
  await refused(hc.unreserve(app, 'res_nope'), hc.NotFound, 'RS006');
});

test('integers are checked before the call: 2.5, 0, 2**31, "2", NaN, 1n are InvalidArgument', async () => {
  let queries = 0;
  const counting = { query: async () => { queries++; return { rows: [] }; } };
  for (const qty of [2.5, 0, -1, 2 ** 31, '2', NaN, 1n]) {
    await refused(hc.reserve(counting, 'SKU', qty, 'b', 'k'), hc.InvalidArgument, '22023', 400);
  }
  await refused(hc.lockAcquire(counting, 'R', 'o', { maxRetries: -1 }), hc.InvalidArgument, '22023');
  await refused(hc.attemptBegin(counting, 'R', 'o', 1n, { maxAttempts: 0 }), hc.InvalidArgument, '22023');
  await refused(hc.sweep(counting, { batchSize: 1.5 }), hc.InvalidArgument, '22023');
  await refused(hc.lockHeartbeat(counting, 'R', 'o', '1'), hc.InvalidArgument, '22023');
  await refused(hc.lockHeartbeat(counting, 'R', 'o', 2 ** 53), hc.InvalidArgument, '22023');
  await refused(hc.hold(counting, 'A', 'b', 'k', { ttl: {} }), hc.InvalidArgument, '22023');
  await refused(hc.commit(counting, 'res_x', { lateOk: 'yes' }), hc.InvalidArgument, '22023');
  assert.equal(queries, 0);
});

test('null or missing arguments are InvalidArgument 22004, a number for an id 22023, before the call', async () => {
  let queries = 0;
  const counting = { query: async () => { queries++; return { rows: [] }; } };
  await refused(hc.hold(counting, null, 'b', 'k'), hc.InvalidArgument, '22004', 400);
  await refused(hc.hold(counting, 'A', 'b'), hc.InvalidArgument, '22004');
  await refused(hc.extend(counting, 'res_x'), hc.InvalidArgument, '22004');
  await refused(hc.lockRelease(counting, 'R', 'o'), hc.InvalidArgument, '22004');
  await refused(hc.hold(counting, 42, 'b', 'k'), hc.InvalidArgument, '22023');
  await refused(hc.hold(undefined, 'A', 'b', 'k'), hc.InvalidArgument, '22023');
  assert.equal(queries, 0);
});

test('the server refuses what only it checks: an empty id (22023), a too long one (22001), a bad ttl', async () => {
  await refused(hc.hold(app, '', 'b', uid('k')), hc.InvalidArgument, '22023', 400);
  await refused(hc.hold(app, 'x'.repeat(65), 'b', uid('k')), hc.InvalidArgument, '22001', 400);
  await refused(hc.hold(app, await asset(), 'b', uid('k'), { ttl: -5 }), hc.InvalidArgument, '22023');
  await refused(hc.hold(app, await asset(), 'b', uid('k'), { ttl: 'soon' }), hc.InvalidArgument, '22007', 400);
});

test('a Client, a PoolClient and a Pool all work; a Client stays usable after an error', async () => {
  const seat = await asset();
  const client = new pg.Client({ database, user: process.env.HC_NODE_APP_ROLE });
  await client.connect();
  try {
    const r = await hc.hold(client, seat, 'alice', uid('k'));
    await refused(hc.hold(client, seat, 'bob', uid('k')), hc.AssetUnavailable, 'RS001');
    await refused(hc.hold(client, '', 'bob', uid('k')), hc.InvalidArgument, '22023');
    assert.equal((await hc.commit(client, r.reservationId)).status, 'COMMITTED');
  } finally {
    await client.end();
  }
  await withClient(app, async (pooled) => {
    await refused(hc.hold(pooled, seat, 'bob', uid('k')), hc.AssetUnavailable, 'RS001');
    assert.deepEqual(await hc.check(pooled), []);
  });
});

test('a hold inside BEGIN is invisible to others until COMMIT, and ROLLBACK drops it', async () => {
  const seat = await asset();
  await withClient(app, async (client) => {
    await client.query('BEGIN');
    const r = await hc.hold(client, seat, 'alice', uid('k'));
    assert.equal(r.replayed, false);
    const seen = await app.query('SELECT count(*)::int AS n FROM holdcommit.hc_reservations WHERE id = $1', [r.reservationId]);
    assert.equal(seen.rows[0].n, 0, 'not committed: nobody else sees it');
    await client.query('ROLLBACK');
    const after = await admin.query('SELECT status FROM holdcommit.hc_assets WHERE id = $1', [seat]);
    assert.equal(after.rows[0].status, 'AVAILABLE', 'rolled back: the hold is gone');
    await client.query('BEGIN');
    const kept = await hc.hold(client, seat, 'alice', uid('k'));
    await client.query('COMMIT');
    const held = await admin.query('SELECT current_reservation_id FROM holdcommit.hc_assets WHERE id = $1', [seat]);
    assert.equal(held.rows[0].current_reservation_id, kept.reservationId);
  });
});

test('a refusal inside BEGIN rolls back that call only (a savepoint): the block goes on, COMMIT keeps the rest', async () => {
  const seat = await asset();
  const taken = await asset();
  await hc.hold(app, taken, 'carol', uid('k'));
  await withClient(app, async (client) => {
    await client.query('BEGIN');
    const first = await hc.hold(client, seat, 'alice', uid('k'));
    await refused(hc.hold(client, taken, 'alice', uid('k')), hc.AssetUnavailable, 'RS001');
    assert.equal(client.getTransactionStatus(), 'T', 'the block is not aborted');
    assert.deepEqual(await hc.check(client), []);
    await assert.rejects(client.query('ROLLBACK TO SAVEPOINT holdcommit_call'), (e) => e.code === '3B001');   // none left behind
    await client.query('ROLLBACK');
    await client.query('BEGIN');
    const again = await hc.hold(client, seat, 'alice', uid('k'));
    await refused(hc.hold(client, taken, 'alice', uid('k')), hc.AssetUnavailable, 'RS001');
    const end = await client.query('COMMIT');
    assert.equal(end.command, 'COMMIT');
    const held = await admin.query('SELECT current_reservation_id FROM holdcommit.hc_assets WHERE id = $1', [seat]);
    assert.equal(held.rows[0].current_reservation_id, again.reservationId);
    assert.notEqual(first.reservationId, again.reservationId);
  });
});

test('a block the application\'s own error aborted: the call is refused (25P02, the base class, 500)', async () => {
  const seat = await asset();
  await withClient(app, async (client) => {
    await client.query('BEGIN');
    await hc.hold(client, seat, 'alice', uid('k'));
    await client.query('SELECT 1 / 0').catch(() => {});
    await refused(hc.check(client), hc.HoldcommitError, '25P02', 500);
    const end = await client.query('COMMIT');
    assert.equal(end.command, 'ROLLBACK', 'the raw driver\'s trap: COMMIT resolves, and rolls back');
    const after = await admin.query('SELECT status FROM holdcommit.hc_assets WHERE id = $1', [seat]);
    assert.equal(after.rows[0].status, 'AVAILABLE');
    assert.deepEqual(await hc.check(client), [], 'the client is usable after the block');
  });
});

test('a hold in a REPEATABLE READ transaction is WrongIsolation (25000, 500)', async () => {
  await withClient(app, async (client) => {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
    await refused(hc.hold(client, await asset(), 'alice', uid('k')), hc.WrongIsolation, '25000', 500);
    await client.query('ROLLBACK');
  });
});

test('lockAcquire: a bigint token; another owner gets null at once (no retries unless asked)', async () => {
  const res = uid('PAY');
  const token = await hc.lockAcquire(app, res, 'webhook', { staleAfter: '3 minutes' });
  assert.equal(token, 1n);
  const start = Date.now();
  assert.equal(await hc.lockAcquire(app, res, 'scheduler'), null);
  assert.ok(Date.now() - start < 1000, `no backoff: ${Date.now() - start} ms`);
  assert.equal(await hc.lockAcquire(app, res, 'webhook'), 1n, 'the same owner gets its token back');
  const retried = Date.now();
  assert.equal(await hc.lockAcquire(app, res, 'scheduler', { maxRetries: 1 }), null);
  assert.ok(Date.now() - retried >= 200, 'maxRetries: 1 waits one backoff');
});

test('fencing tokens compare as bigints past 10 (node-postgres alone gives strings: "10" < "9")', async () => {
  const res = uid('PAY');
  let previous = 0n;
  for (let i = 1; i <= 11; i++) {
    const token = await hc.lockAcquire(app, res, `worker-${i}`);
    assert.equal(typeof token, 'bigint');
    assert.ok(token > previous, `${token} > ${previous}`);
    assert.equal(await hc.lockRelease(app, res, `worker-${i}`, token), true);
    previous = token;
  }
  assert.equal(previous, 11n);
  const raw = await app.query('SELECT token FROM holdcommit.hc_locks WHERE resource = $1', [res]);
  assert.equal(raw.rows[0].token, '11');
  assert.ok(raw.rows[0].token < '9', 'the trap the bigint avoids');
});

test('lockHeartbeat: a Date; a wrong token or owner is LeaseLost (RS007, 409) with a detail', async () => {
  const res = uid('PAY');
  const token = await hc.lockAcquire(app, res, 'webhook');
  const at = await hc.lockHeartbeat(app, res, 'webhook', token);
  assert.ok(at instanceof Date && Math.abs(at - Date.now()) < 60000);
  assert.ok(await hc.lockHeartbeat(app, res, 'webhook', Number(token)) instanceof Date, 'a safe integer is a token too');
  await refused(hc.lockHeartbeat(app, res, 'webhook', token + 1n), hc.LeaseLost, 'RS007', 409);
  await assert.rejects(hc.lockHeartbeat(app, res, 'other', token), (e) => e instanceof hc.LeaseLost && e.detail !== null);
});

test('lockRelease: true once, then false; the next holder gets the next token', async () => {
  const res = uid('PAY');
  const token = await hc.lockAcquire(app, res, 'webhook');
  assert.equal(await hc.lockRelease(app, res, 'webhook', token), true);
  assert.equal(await hc.lockRelease(app, res, 'webhook', token), false);
  assert.equal(await hc.lockAcquire(app, res, 'scheduler'), token + 1n);
});

test('attempts: PROCEED with a marker, COOLDOWN, COMPLETED, replayed complete; RS004 for another ref', async () => {
  const res = uid('PAY');
  const token = await hc.lockAcquire(app, res, 'webhook');
  const a = await hc.attemptBegin(app, res, 'webhook', token, { cooldown: '10 minutes', maxAttempts: 3, requestKey: 'req-1' });
  assert.deepEqual([a.status, a.attempt, a.externalRef], ['PROCEED', 1, null]);
  assert.match(a.marker, /^ATTEMPTED-webhook-r1-t\d+$/);
  assert.ok(a.lastAttemptAt instanceof Date);
  const again = await hc.attemptBegin(app, res, 'webhook', token, { cooldown: 600, maxAttempts: 3, requestKey: 'req-1' });
  assert.equal(again.marker, a.marker, 'the same request (its requestKey) gets its attempt back');
  const other = await hc.attemptBegin(app, res, 'webhook', token, { cooldown: 600, maxAttempts: 3 });
  assert.deepEqual([other.status, other.attempt], ['COOLDOWN', 1], 'the same holder without the key: COOLDOWN');
  const done = await hc.attemptComplete(app, res, 'webhook', token, 'INV-1');
  assert.deepEqual([done.status, done.externalRef], ['COMPLETED', 'INV-1']);
  assert.equal((await hc.attemptBegin(app, res, 'webhook', token)).status, 'COMPLETED');
  await refused(hc.attemptComplete(app, res, 'webhook', token, 'INV-2'), hc.ReservationNotActive, 'RS004', 409);
});

test('attempts: without the lease LeaseLost (RS007); COOLDOWN after an attempt by another holder', async () => {
  const res = uid('PAY');
  await refused(hc.attemptBegin(app, res, 'webhook', 1n), hc.LeaseLost, 'RS007', 409);
  const t1 = await hc.lockAcquire(app, res, 'webhook', { staleAfter: 60 });
  await hc.attemptBegin(app, res, 'webhook', t1);
  await hc.lockRelease(app, res, 'webhook', t1);
  const t2 = await hc.lockAcquire(app, res, 'scheduler');
  assert.equal((await hc.attemptBegin(app, res, 'scheduler', t2)).status, 'COOLDOWN');
});

test('attemptReset: the operator\'s (PermissionDenied 42501, 403, for the app); MANUAL_REVIEW cleared', async () => {
  const res = uid('PAY');
  const token = await hc.lockAcquire(app, res, 'webhook');
  await hc.attemptBegin(app, res, 'webhook', token, { cooldown: 0, maxAttempts: 1 });
  assert.equal((await hc.attemptBegin(app, res, 'webhook', token, { cooldown: 0, maxAttempts: 1 })).status, 'MANUAL_REVIEW');
  await refused(hc.attemptReset(app, res, 'checked the ERP'), hc.PermissionDenied, '42501', 403);
  const reset = await hc.attemptReset(admin, res, 'checked the ERP');
  assert.deepEqual([reset.status, reset.attempt], ['PROCEED', 0]);
  await refused(hc.attemptReset(admin, uid('NOPE'), 'note'), hc.NotFound, 'RS006', 404);
});

test('check: no violation; sweep: bigint counts of what it expired', async () => {
  assert.deepEqual(await hc.check(app), []);
  await withClient(admin, async (client) => {
    await hc.hold(app, await asset(), 'alice', uid('k'), { ttl: 0.1 });
    await sleep(200);
    const s = await hc.sweep(client, { batchSize: 10 });
    assert.equal(typeof s.expiredHolds, 'bigint');
    assert.ok(s.expiredHolds >= 1n);
    assert.equal(typeof s.purgedKeys, 'bigint');
    assert.deepEqual(await hc.sweep(client), { expiredHolds: 0n, expiredReservations: 0n, purgedKeys: 0n });
  });
  assert.deepEqual(await hc.check(admin), []);
});

test('sweep: in a REPEATABLE READ transaction WrongIsolation (25000); a batchSize of 0 InvalidArgument', async () => {
  await withClient(admin, async (client) => {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
    await refused(hc.sweep(client), hc.WrongIsolation, '25000', 500);
    await client.query('ROLLBACK');
    await refused(hc.sweep(client, { batchSize: 0 }), hc.InvalidArgument, '22023', 400);
  });
});

test('the recommended install: qualified calls need no search_path; unqualified ones are a 42883 there', async () => {
  const path = await app.query('SHOW search_path');
  assert.equal(path.rows[0].search_path, 'public');
  assert.equal(hc.forSchema().schema, 'holdcommit');
  await refused(hc.forSchema(null).check(app), hc.HoldcommitError, '42883', 500);
});

test('forSchema(null): unqualified calls for a role whose search_path has the schema', async () => {
  const unqualified = hc.forSchema(null);
  const r = await unqualified.hold(appOnPath, await asset(), 'alice', uid('k'));
  assert.equal(r.status, 'HELD');
  assert.deepEqual(await unqualified.check(appOnPath), []);
  await refused(hc.forSchema('elsewhere').check(appOnPath), hc.HoldcommitError, '3F000', 500);
});

test('the application\'s own pg.types parsers do not change the results', async () => {
  const saved = [20, 1184, 114, 16].map((oid) => [oid, pg.types.getTypeParser(oid)]);
  for (const [oid] of saved) pg.types.setTypeParser(oid, () => 'parsed by the app');
  try {
    const token = await hc.lockAcquire(app, uid('PAY'), 'w');
    assert.equal(token, 1n);
    const r = await hc.hold(app, await asset(), 'alice', uid('k'));
    assert.ok(r.expiresAt instanceof Date && r.replayed === false);
    const s = await hc.sweep(admin);
    assert.equal(typeof s.expiredHolds, 'bigint');
  } finally {
    for (const [oid, parser] of saved) pg.types.setTypeParser(oid, parser);
  }
});

test('holdMany: a reservation per asset, one id; a replay in another order; RS001 names the seats', async () => {
  const [a, b] = [await asset(), await asset()];
  const key = uid('k');
  const held = await hc.holdMany(app, [b, a], 'alice', key);
  assert.deepEqual(held.map((r) => r.assetId).sort(), [a, b].sort());
  assert.equal(new Set(held.map((r) => r.reservationId)).size, 1);
  const again = await hc.holdMany(app, [a, b], 'alice', key);
  assert.ok(again.every((r) => r.replayed));
  await refused(hc.holdMany(app, [await asset(), a], 'bob', uid('k')), hc.AssetUnavailable, 'RS001', 409);
  await refused(hc.holdMany(app, a, 'bob', uid('k')), hc.InvalidArgument, '22023', 400);
  await refused(hc.holdMany(app, [a, a], 'bob', uid('k')), hc.InvalidArgument, '22023', 400);
  assert.equal((await hc.commit(app, held[0].reservationId)).status, 'COMMITTED');
});

test('holdBest: the 2 best adjacent seats as one reservation; RS002 with what is left', async () => {
  const pool = uid('POOL');
  for (let pos = 1; pos <= 4; pos++) {
    await admin.query('SELECT holdcommit.hc_asset_add($1, $2, $3, 1, $4, $5)', [uid('SEAT'), '', pool, 'A', pos]);
  }
  const held = await hc.holdBest(app, pool, 2, 'alice', uid('k'));
  assert.equal(held.length, 2);
  assert.equal(new Set(held.map((r) => r.reservationId)).size, 1);
  await assert.rejects(hc.holdBest(app, pool, 3, 'bob', uid('k')),
    (e) => e instanceof hc.InsufficientStock && e.detail === '2 left.');
  await refused(hc.holdBest(app, uid('POOL'), 2, 'bob', uid('k')), hc.NotFound, 'RS006', 404);
});
