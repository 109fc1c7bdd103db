// withLease: its own connection, heartbeats while the callback runs, release in finally, and
// what the callback learns when the lease is lost.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import pg from 'pg';
import * as hc from 'holdcommit';
import { admin, app, database, endPools, refused, sleep, uid } from './helpers.js';

after(endPools);
const user = process.env.HC_NODE_APP_ROLE;
const holder = async (res) => (await admin.query('SELECT owner, token FROM holdcommit.hc_locks WHERE resource = $1', [res])).rows[0];
// Waits for the lease to be lost (the signal), at most ms.
const lostWithin = (lease, ms) => delay(ms, null, { signal: lease.signal }).then(() => false, () => true);

test('withLease: acquires, heartbeats while the callback runs, releases after it, returns its value', async () => {
  const res = uid('JOB');
  const value = await hc.withLease(app, { resource: res, owner: 'node', ttl: 30, heartbeatEvery: 0.2 }, async (lease) => {
    assert.equal(lease.token, 1n);
    assert.equal(typeof lease.token, 'bigint');
    const first = (await admin.query('SELECT heartbeat_at FROM holdcommit.hc_locks WHERE resource = $1', [res])).rows[0].heartbeat_at;
    await sleep(700);
    const later = (await admin.query('SELECT heartbeat_at FROM holdcommit.hc_locks WHERE resource = $1', [res])).rows[0].heartbeat_at;
    assert.ok(later > first, 'heartbeats moved heartbeat_at');
    assert.deepEqual([lease.lost, lease.signal.aborted], [false, false]);
    lease.check();
    return 'done';
  });
  assert.equal(value, 'done');
  assert.deepEqual(await holder(res), { owner: null, token: '1' });
  assert.equal(app.totalCount - app.idleCount, 0, 'the pool got its client back');
  const clients = await Promise.all([app.connect(), app.connect(), app.connect(), app.connect()]);
  const timeouts = await Promise.all(clients.map((c) => c.query('SHOW statement_timeout')));
  clients.forEach((c) => c.release());
  assert.deepEqual(timeouts.map((t) => t.rows[0].statement_timeout), ['0', '0', '0', '0'], 'and as it lent it');
});

test('withLease: a resource another owner holds is Busy (503) at once, and the callback never runs', async () => {
  const res = uid('JOB');
  await hc.lockAcquire(app, res, 'someone');
  let ran = false;
  const start = Date.now();
  await refused(hc.withLease(app, { resource: res, owner: 'node' }, () => { ran = true; }), hc.Busy, '55P03', 503);
  assert.ok(Date.now() - start < 1000 && !ran);
});

test('withLease: the callback throws: the lease is released in finally, the error is the callback\'s', async () => {
  const res = uid('JOB');
  const boom = new Error('boom');
  await assert.rejects(hc.withLease(app, { resource: res, owner: 'node', ttl: 30 }, async () => { throw boom; }), (e) => e === boom);
  assert.deepEqual(await holder(res), { owner: null, token: '1' });
  assert.equal(await hc.lockAcquire(app, res, 'next'), 2n);
});

test('withLease: lost mid-callback (no heartbeat within ttl, another owner takes over): the callback learns it', async () => {
  const res = uid('JOB');
  let seen;
  // heartbeatEvery > ttl: the heartbeat is prevented, as by a stalled event loop or a hung connection
  const outcome = hc.withLease(app, { resource: res, owner: 'node', ttl: 0.5, heartbeatEvery: 10 }, async (lease) => {
    await sleep(700);
    const taken = await hc.lockAcquire(app, res, 'other');   // stale: a takeover
    assert.equal(taken, 2n);
    seen = { lost: lease.lost, aborted: lease.signal.aborted, reason: lease.signal.reason };
    assert.throws(() => lease.check(), hc.LeaseLost);
    return 'finished anyway';
  });
  await assert.rejects(outcome, (e) => e instanceof hc.LeaseLost && e.sqlstate === 'RS007' && e.httpStatus === 409);
  assert.equal(seen.lost, true);
  assert.equal(seen.aborted, true);
  assert.ok(seen.reason instanceof hc.LeaseLost);
  assert.deepEqual(await holder(res), { owner: 'other', token: '2' }, 'the late release changed nothing');
});

test('withLease: taken over while heartbeating: the next heartbeat\'s RS007 aborts lease.signal, with the server\'s detail', async () => {
  const res = uid('JOB');
  let reason;
  const outcome = hc.withLease(app, { resource: res, owner: 'node', ttl: 30, heartbeatEvery: 0.2 }, async (lease) => {
    // Someone frees the lease from elsewhere (an operator, a bug) and another owner takes it.
    await admin.query('SELECT holdcommit.hc_lock_release($1, $2, $3)', [res, 'node', String(lease.token)]);
    assert.equal(await hc.lockAcquire(app, res, 'other'), 2n);
    // The callback's own I/O, given the signal, is cut short when the lease is lost.
    await assert.rejects(delay(5000, null, { signal: lease.signal }), (e) => e.name === 'AbortError');
    reason = lease.signal.reason;
  });
  await assert.rejects(outcome, hc.LeaseLost);
  assert.ok(reason instanceof hc.LeaseLost);
  assert.equal(reason.sqlstate, 'RS007');
  assert.match(reason.detail ?? '', /other/);
  assert.deepEqual(await holder(res), { owner: 'other', token: '2' });
});

test('withLease: its connection terminated: the lease counts as lost at once, no crash, the client is not reused', async () => {
  const res = uid('JOB');
  const name = uid('lease-conn');
  const pool = new pg.Pool({ database, user, application_name: name, max: 1 });
  pool.on('error', () => {});
  try {
    let lostAfter;
    const outcome = hc.withLease(pool, { resource: res, owner: 'node', ttl: 3, heartbeatEvery: 0.2 }, async (lease) => {
      const killed = await admin.query('SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE application_name = $1', [name]);
      assert.equal(killed.rows[0].n, 1);
      const start = Date.now();
      assert.equal(await lostWithin(lease, 5000), true);
      lostAfter = Date.now() - start;
    });
    await assert.rejects(outcome, (e) => e instanceof hc.LeaseLost && /its connection failed/.test(e.message));
    assert.ok(lostAfter < 1000, `lost after ${lostAfter} ms`);
    assert.equal(pool.totalCount, 0, 'the broken client was not given back to the pool');
    assert.equal(await hc.lockAcquire(app, res, 'next'), null, 'not released: still fresh');
    await sleep(3100);
    assert.equal(await hc.lockAcquire(app, res, 'next'), 2n, 'stale after ttl: taken over');
  } finally {
    await pool.end();
  }
});

test('withLease: a heartbeat that hangs (its row locked): lost after ttl, and withLease does not wait for it', async () => {
  const res = uid('JOB');
  const blocker = await admin.connect();
  try {
    const outcome = hc.withLease(app, { resource: res, owner: 'node', ttl: 1, heartbeatEvery: 0.2 }, async (lease) => {
      await blocker.query('BEGIN');
      await blocker.query('SELECT 1 FROM holdcommit.hc_locks WHERE resource = $1 FOR UPDATE', [res]);
      assert.equal(await lostWithin(lease, 5000), true);
      return 'finished';
    }).catch((e) => e);
    const start = Date.now();
    const e = await outcome;
    assert.ok(e instanceof hc.LeaseLost && /no heartbeat/.test(e.message), String(e));
    assert.ok(Date.now() - start < 4000, `withLease returned after ${Date.now() - start} ms`);
  } finally {
    await blocker.query('ROLLBACK');
    blocker.release();
  }
});

test('lease.fenced: the write commits under the token, a takeover waits for it, and after one LeaseLost', async () => {
  const res = uid('JOB');
  const table = uid('invoices').replace(/-/g, '_');
  await admin.query(`CREATE TABLE ${table} (order_id text PRIMARY KEY, fenced_by bigint NOT NULL)`);
  await admin.query(`GRANT SELECT, INSERT ON ${table} TO ${user}`);
  // Its last heartbeat an hour old: stale, anyone may take it over.
  const lapse = () => admin.query("UPDATE holdcommit.hc_locks SET heartbeat_at = heartbeat_at - interval '1 hour' WHERE resource = $1", [res]);
  await refused(hc.withLease(app, { resource: res, owner: 'node', ttl: 60 }, async (lease) => {
    const order = await lease.fenced(app, async (client) => {
      await client.query(`INSERT INTO ${table} VALUES ('o-1', $1)`, [lease.token]);
      await lapse();
      assert.equal(await hc.lockAcquire(admin, res, 'other', { staleAfter: 60 }), null, 'no takeover while it is open');
      return 'o-1';
    });
    assert.equal(order, 'o-1');
    assert.equal(await hc.lockAcquire(admin, res, 'other', { staleAfter: 60 }), 2n);
    await refused(lease.fenced(app, (client) => client.query(`INSERT INTO ${table} VALUES ('o-2', $1)`, [lease.token])),
      hc.LeaseLost, 'RS007', 409);
    assert.equal(lease.lost, true);
  }), hc.LeaseLost, 'RS007');
  const { rows } = await admin.query(`SELECT order_id, fenced_by FROM ${table}`);
  assert.deepEqual(rows, [{ order_id: 'o-1', fenced_by: '1' }]);
  assert.equal((await app.query('SELECT 1 AS one')).rows[0].one, 1);
  assert.equal(app.totalCount - app.idleCount, 0, 'the pool got its clients back');
  // A statement of the callback that failed and was caught: the commit is a rollback, and says so.
  await hc.withLease(app, { resource: uid('JOB'), owner: 'node', ttl: 60 }, async (lease) => {
    await assert.rejects(lease.fenced(app, async (client) => {
      await client.query(`INSERT INTO ${table} VALUES ('o-3', $1)`, [lease.token]);
      await client.query(`INSERT INTO ${table} VALUES ('o-3', $1)`, [lease.token]).catch(() => {});
    }), (e) => e.code === '25P02');
  });
  assert.equal((await admin.query(`SELECT count(*)::int AS n FROM ${table} WHERE order_id = 'o-3'`)).rows[0].n, 0);
});

test('withLease: a connection config opens its own connection and closes it', async () => {
  const res = uid('JOB');
  const name = uid('lease-conn');
  const count = async () => (await admin.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1', [name])).rows[0].n;
  const token = await hc.withLease({ database, user, application_name: name }, { resource: res, owner: 'node' }, async (lease) => {
    assert.equal(await count(), 1);
    return lease.token;
  });
  assert.equal(token, 1n);
  await sleep(100);
  assert.equal(await count(), 0);
  assert.equal((await holder(res)).owner, null);
});

test('withLease refuses a Client (InvalidArgument): its one connection is the application\'s', async () => {
  const client = new pg.Client({ database, user });
  await refused(hc.withLease(client, { resource: uid('JOB'), owner: 'node' }, () => 1), hc.InvalidArgument, '22023', 400);
  await refused(hc.withLease(app, { resource: uid('JOB'), owner: 'node', ttl: 0 }, () => 1), hc.InvalidArgument, '22023');
});
