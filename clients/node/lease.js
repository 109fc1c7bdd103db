// withLease: a lease held on a connection of its own, heartbeated while a callback runs,
// released in finally.  It cannot stop the callback; it tells it (lease.lost, lease.signal,
// lease.check()) and rejects with LeaseLost if the lease was lost meanwhile.
import pg from 'pg';
import { forSchema } from './calls.js';
import { Busy, LeaseLost, invalid } from './errors.js';

const isPool = (x) => !!x && typeof x.connect === 'function' && typeof x.totalCount === 'number';
const isConfig = (x) => typeof x === 'string' ||
  (!!x && typeof x === 'object' && typeof x.query !== 'function' && typeof x.connect !== 'function');

export async function withLease(poolOrConfig, options, fn) {
  const { resource, owner, ttl = 180, heartbeatEvery = ttl / 3, maxRetries = 0, schema = 'holdcommit' } = options ?? {};
  if (!Number.isFinite(ttl) || ttl <= 0) throw invalid('ttl must be a positive number of seconds');
  if (!Number.isFinite(heartbeatEvery) || heartbeatEvery <= 0) throw invalid('heartbeatEvery must be a positive number of seconds');
  if (typeof fn !== 'function') throw invalid('withLease needs a callback');
  const hc = forSchema(schema);

  // The lease's own connection: a Pool lends one, a config opens one.  A Client is refused:
  // its one connection is the application's, and a heartbeat must not queue behind its work.
  let client, done;
  if (isPool(poolOrConfig)) {
    client = await poolOrConfig.connect();
    done = (broken) => client.release(broken);
  } else if (isConfig(poolOrConfig)) {
    client = new pg.Client(poolOrConfig);
    await client.connect();
    done = () => client.end().catch(() => {});
  } else {
    throw invalid('withLease needs a pg Pool or a connection config, not a Client');
  }
  let broken = false;
  const onError = () => { broken = true; };   // a terminated connection: heartbeats fail, the watchdog decides
  client.on('error', onError);
  const finish = () => { client.removeListener('error', onError); done(broken); };

  let token;
  try {
    token = await hc.lockAcquire(client, resource, owner, { staleAfter: ttl, maxRetries });
  } catch (err) {
    broken ||= !(err && err.sqlstate);
    finish();
    throw err;
  }
  if (token === null) {
    finish();
    throw new Busy(`resource "${resource}" is leased by another owner`, {
      sqlstate: '55P03', httpStatus: 503, hint: 'Try again later, or pass maxRetries to wait for it.',
    });
  }

  const controller = new AbortController();
  let lostError = null, stopped = false, timer, watchdog, inFlight = null;
  const lose = (err) => {
    if (lostError || stopped) return;
    lostError = err;
    clearTimeout(timer);
    clearTimeout(watchdog);
    controller.abort(err);
  };
  // Without a heartbeat for ttl the lease is stale and another owner may take it over: from
  // then on it counts as lost, whatever the reason (a heartbeat that hangs, a dead connection).
  const arm = (since) => {
    clearTimeout(watchdog);
    watchdog = setTimeout(() => lose(new LeaseLost(
      `lease on "${resource}" lost: no heartbeat for ${ttl} s`, { sqlstate: 'RS007', httpStatus: 409 })),
    Math.max(0, since + ttl * 1000 - Date.now()));
  };
  const beat = async () => {
    const sent = Date.now();
    try {
      await hc.lockHeartbeat(client, resource, owner, token);
      if (!lostError) arm(sent);
    } catch (err) {
      if (err instanceof LeaseLost) lose(err);   // taken over or released: the server says who holds it
    }
  };
  const schedule = () => {
    if (stopped || lostError) return;
    timer = setTimeout(() => {
      inFlight = beat().finally(() => { inFlight = null; schedule(); });
    }, heartbeatEvery * 1000);
  };
  arm(Date.now());
  schedule();

  const lease = Object.freeze({
    resource, owner, token, signal: controller.signal,
    get lost() { return lostError !== null; },
    check() { if (lostError) throw lostError; },
  });
  try {
    const result = await fn(lease);
    if (lostError) throw lostError;
    return result;
  } finally {
    stopped = true;
    clearTimeout(timer);
    clearTimeout(watchdog);
    if (inFlight) await inFlight;
    // A release that fails (the connection is gone) leaves the lease to go stale after ttl.
    try {
      await hc.lockRelease(client, resource, owner, token);
    } catch {
      broken = true;
    }
    finish();
  }
}
