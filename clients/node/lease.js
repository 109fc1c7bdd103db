// withLease: a lease held on a connection of its own, heartbeated while a callback runs,
// released in finally.  It cannot stop the callback; it tells it (lease.lost, lease.signal,
// lease.check()) and rejects with LeaseLost if the lease was lost meanwhile.  lease.fenced
// runs the application's writes in a transaction that begins with hc_lock_check.
import pg from 'pg';
import { forSchema } from './calls.js';
import { Busy, LeaseLost, invalid } from './errors.js';

const isPool = (x) => !!x && typeof x.connect === 'function' && typeof x.totalCount === 'number';
const isConfig = (x) => typeof x === 'string' ||
  (!!x && typeof x === 'object' && typeof x.query !== 'function' && typeof x.connect !== 'function');

export async function withLease(poolOrConfig, options, fn) {
  const { resource, owner, ttl = 30, heartbeatEvery = ttl / 3, maxRetries = 0, schema = 'holdcommit' } = options ?? {};
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
  let broken = false, lose = () => {};
  // The connection failed (terminated, the network): no heartbeat can be sent any more.
  const onError = (err) => {
    broken = true;
    lose(new LeaseLost(`lease on "${resource}" lost: its connection failed: ${err.message}`,
      { sqlstate: 'RS007', httpStatus: 409, cause: err }));
  };
  client.on('error', onError);
  const finish = () => { client.removeListener('error', onError); done(broken); };

  let token;
  const acquiredAt = Date.now();
  try {
    token = await hc.lockAcquire(client, resource, owner, { staleAfter: ttl, maxRetries });
  } catch (err) {
    broken ||= !(err && err.sqlstate);
    finish();
    throw err;
  }
  if (token === null) {
    finish();
    throw new Busy(`lease "${resource}" is held by another owner`, {
      sqlstate: '55P03', httpStatus: 503, hint: 'Try again later, or pass maxRetries to wait for it.',
    });
  }

  const controller = new AbortController();
  let lostError = null, stopped = false, timer, watchdog, deadline, inFlight = null;
  lose = (err) => {
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
    deadline = since + ttl * 1000;
    watchdog = setTimeout(() => lose(new LeaseLost(
      `lease on "${resource}" lost: no heartbeat for ${ttl} s`, { sqlstate: 'RS007', httpStatus: 409 })),
    Math.max(0, deadline - Date.now()));
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
  try {
    // A heartbeat that waits (behind a row lock) gives up after one beat and tries again.
    await client.query("SELECT set_config('statement_timeout', $1, false)", [String(Math.max(100, Math.round(heartbeatEvery * 1000)))]);
  } catch (err) {
    broken = true;
  }
  arm(acquiredAt);
  schedule();

  const lease = Object.freeze({
    resource, owner, token, signal: controller.signal,
    get lost() { return lostError !== null; },
    check() { if (lostError) throw lostError; },
    async fenced(db, work) {
      if (lostError) throw lostError;
      const client = isPool(db) ? await db.connect() : db;
      const own = !(typeof client.getTransactionStatus === 'function' && client.getTransactionStatus() === 'T');
      let failed;
      try {
        if (own) await client.query('BEGIN');
        try {
          try {
            await hc.lockCheck(client, resource, owner, token);
          } catch (err) {
            if (err instanceof LeaseLost) lose(err);
            throw err;
          }
          const result = await work(client);
          // A statement of work that failed and was caught leaves the transaction aborted:
          // its COMMIT answers ROLLBACK, and nothing was written.
          if (own && (await client.query('COMMIT')).command === 'ROLLBACK') {
            throw Object.assign(new Error('lease.fenced: the transaction was rolled back (a statement in it failed)'),
              { code: '25P02' });
          }
          return result;
        } catch (err) {
          if (own) await client.query('ROLLBACK').catch(() => {});
          throw err;
        }
      } catch (err) {
        failed = err;
        throw err;
      } finally {
        // A client whose connection failed (an error without a SQLSTATE) goes back as broken.
        if (client !== db) client.release(failed && !(failed.sqlstate || failed.code) ? failed : undefined);
      }
    },
  });
  try {
    const result = await fn(lease);
    if (lostError) throw lostError;
    return result;
  } finally {
    stopped = true;
    clearTimeout(timer);
    // A heartbeat under way: wait for it, but not past the lease's deadline.  One that hangs
    // (behind a row lock, on a dead connection) takes the connection with it.
    if (inFlight) {
      let expire;
      const settled = await Promise.race([inFlight.then(() => true),
        new Promise((resolve) => { expire = setTimeout(resolve, lostError ? 0 : Math.max(0, deadline - Date.now()), false); })]);
      clearTimeout(expire);
      if (!settled) broken = true;
    }
    clearTimeout(watchdog);
    // A release that fails or cannot be sent (the connection is gone) leaves the lease to go
    // stale after ttl.
    if (!broken) {
      try {
        await hc.lockRelease(client, resource, owner, token);
        await client.query('RESET statement_timeout');   // a pool's client goes back as it came
      } catch (err) {
        broken = true;
      }
    }
    finish();
  }
}
