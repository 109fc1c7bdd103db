// The SQL functions as typed calls on a pg Client, PoolClient or Pool.
import { errorFrom, invalid } from './errors.js';

// Every column comes back as the server's text and is converted here, whatever pg.types
// parsers the application has set: int8 as BigInt, timestamps through to_json (ISO 8601 with
// its offset, whatever the session's DateStyle).
const rawText = { getTypeParser: () => (value) => value };

// Inside the caller's transaction block (pg 8.21 and later report it), each call runs in a
// savepoint of its own: a refusal rolls back that call only and the block stays usable, where
// it would otherwise be aborted and its COMMIT answered ROLLBACK without an error.
async function run(db, text, values) {
  if (!db || typeof db.query !== 'function') throw invalid('db must be a pg Client, PoolClient or Pool');
  const query = { text, values, types: rawText };
  try {
    if (typeof db.getTransactionStatus !== 'function' || db.getTransactionStatus() !== 'T') {
      return (await db.query(query)).rows;
    }
    await db.query('SAVEPOINT holdcommit_call');
    let rows;
    try {
      rows = (await db.query(query)).rows;
    } catch (err) {
      await db.query('ROLLBACK TO SAVEPOINT holdcommit_call; RELEASE SAVEPOINT holdcommit_call').catch(() => {});
      throw err;
    }
    await db.query('RELEASE SAVEPOINT holdcommit_call');
    return rows;
  } catch (err) {
    throw errorFrom(err);
  }
}

// "fn($1, $2, name => $3)": the required arguments by position, the optional ones given by
// name only when the caller gave them, so the SQL defaults stay the SQL's.
function sql(prefix, fn, required, optional = {}) {
  const values = [...required];
  const args = required.map((_, i) => `$${i + 1}`);
  for (const [name, value] of Object.entries(optional)) {
    if (value === undefined) continue;
    values.push(value);
    args.push(`${name} => $${values.length}`);
  }
  return [`${prefix}${fn}(${args.join(', ')})`, values];
}

// Argument checks: the server would refuse these too, but a JS value that is not what the
// SQL type needs (2.5, 2 ** 31, an array for jsonb, a string token) gives odd errors there.
function str(name, v) {
  if (v === undefined || v === null) throw invalid(`${name} must not be null`, '22004');
  if (typeof v !== 'string') throw invalid(`${name} must be a string`);
  return v;
}
function int(name, v, min, what) {
  if (v === undefined) return undefined;
  if (v === null) throw invalid(`${name} must not be null`, '22004');
  if (!Number.isSafeInteger(v) || v < min || v > 2147483647) throw invalid(`${name} must be ${what}`);
  return v;
}
function bool(name, v) {
  if (v === undefined) return undefined;
  if (v === null) throw invalid(`${name} must not be null`, '22004');
  if (typeof v !== 'boolean') throw invalid(`${name} must be a boolean`);
  return v;
}
// An interval: PostgreSQL's text ('10 minutes') or a number of seconds.
function interval(name, v) {
  if (v === undefined) return undefined;
  if (v === null) throw invalid(`${name} must not be null`, '22004');
  if (typeof v === 'number' && Number.isFinite(v)) return `${v} seconds`;
  if (typeof v === 'string') return v;
  throw invalid(`${name} must be an interval ('10 minutes') or a number of seconds`);
}
function token(v) {
  if (typeof v === 'number' && Number.isSafeInteger(v)) return String(v);
  if (typeof v === 'bigint' && v >= -(2n ** 63n) && v < 2n ** 63n) return String(v);
  throw invalid('token must be a bigint (or a safe integer)', v === undefined || v === null ? '22004' : '22023');
}
// A list of ids: a JS array of strings, which node-postgres sends as a PostgreSQL array.
function ids(name, v) {
  if (v === undefined || v === null) throw invalid(`${name} must not be null`, '22004');
  if (!Array.isArray(v)) throw invalid(`${name} must be an array of ids`);
  return v.map((id, i) => str(`${name}[${i}]`, id));
}
// items go as JSON text: a JS array would be sent as a PostgreSQL array literal (22P02).
function items(v) {
  if (!Array.isArray(v)) throw invalid('items must be an array of {productId, qty}');
  return JSON.stringify(v.map((item, i) => {
    if (!item || typeof item !== 'object') throw invalid(`items[${i}] must be an object {productId, qty}`);
    return {
      product_id: str(`items[${i}].productId`, item.productId),
      qty: int(`items[${i}].qty`, item.qty ?? null, 1, 'a positive integer'),
    };
  }));
}

const date = (s) => (s === null || s === undefined ? null : new Date(s));
const reservation = (r) => ({
  reservationId: r.reservation_id, assetId: r.asset_id, buyerId: r.buyer_id, status: r.status,
  expiresAt: date(r.expires_at), createdAt: date(r.created_at), replayed: r.replayed,
});
const stockReservation = (r) => ({
  reservationId: r.reservation_id, buyerId: r.buyer_id, status: r.status,
  items: r.items.map((i) => ({ productId: i.product_id, qty: i.qty })),
  expiresAt: date(r.expires_at), createdAt: date(r.created_at), replayed: r.replayed,
});
const attempt = (r) => ({
  resource: r.resource, status: r.status, attempt: r.attempt, marker: r.marker,
  externalRef: r.external_ref, lastAttemptAt: date(r.last_attempt_at),
});

/** The calls, qualified with `schema` (null: unqualified, resolved by the search_path). */
export function forSchema(schema = 'holdcommit') {
  if (schema !== null && (typeof schema !== 'string' || schema === '')) throw invalid('schema must be a name or null');
  const prefix = schema === null ? '' : `"${schema.replace(/"/g, '""')}".`;
  // One composite row, as JSON.
  const row = async (db, call, convert) => {
    const rows = await run(db, `SELECT to_json(r) AS r FROM ${call[0]} r`, call[1]);
    return convert(JSON.parse(rows[0].r));
  };
  // Every row of a set, as JSON.
  const rows = async (db, call, convert) =>
    (await run(db, `SELECT to_json(r) AS r FROM ${call[0]} r`, call[1])).map((x) => convert(JSON.parse(x.r)));
  const scalar = async (db, call) => (await run(db, `SELECT ${call[0]} AS v`, call[1]))[0].v;
  // The calls that end a reservation by its id: commit and finalize (lateOk), release and unreserve.
  const end = (fn, convert) => (db, reservationId) =>
    row(db, sql(prefix, fn, [str('reservationId', reservationId)]), convert);
  const endLate = (fn, convert) => (db, reservationId, { lateOk } = {}) =>
    row(db, sql(prefix, fn, [str('reservationId', reservationId)], { late_ok: bool('lateOk', lateOk) }), convert);

  const calls = {
    // Unique assets.
    hold: (db, assetId, buyerId, idempotencyKey, { ttl } = {}) =>
      row(db, sql(prefix, 'hc_hold', [str('assetId', assetId), str('buyerId', buyerId),
        str('idempotencyKey', idempotencyKey)], { ttl: interval('ttl', ttl) }), reservation),
    // Group holds: a reservation per asset, all with one id.
    holdMany: (db, assetIds, buyerId, idempotencyKey, { ttl } = {}) =>
      rows(db, sql(prefix, 'hc_hold_many', [ids('assetIds', assetIds), str('buyerId', buyerId),
        str('idempotencyKey', idempotencyKey)], { ttl: interval('ttl', ttl) }), reservation),
    holdBest: (db, pool, n, buyerId, idempotencyKey, { ttl } = {}) =>
      rows(db, sql(prefix, 'hc_hold_best', [str('pool', pool), int('n', n ?? null, 1, 'a positive integer'),
        str('buyerId', buyerId), str('idempotencyKey', idempotencyKey)], { ttl: interval('ttl', ttl) }), reservation),
    commit: endLate('hc_commit', reservation),
    release: end('hc_release', reservation),
    extend: (db, reservationId, ttl) =>
      row(db, sql(prefix, 'hc_extend', [str('reservationId', reservationId),
        interval('ttl', ttl ?? null)]), reservation),
    // Counted stock.
    reserve: (db, productId, qty, buyerId, idempotencyKey, { ttl } = {}) =>
      row(db, sql(prefix, 'hc_reserve', [str('productId', productId), int('qty', qty ?? null, 1, 'a positive integer'),
        str('buyerId', buyerId), str('idempotencyKey', idempotencyKey)], { ttl: interval('ttl', ttl) }), stockReservation),
    reserveItems: (db, itemList, buyerId, idempotencyKey, { ttl } = {}) =>
      row(db, sql(prefix, 'hc_reserve_items', [items(itemList), str('buyerId', buyerId),
        str('idempotencyKey', idempotencyKey)], { ttl: interval('ttl', ttl) }), stockReservation),
    finalize: endLate('hc_finalize', stockReservation),
    unreserve: end('hc_unreserve', stockReservation),
    // Leases. maxRetries defaults to 0 (the SQL's 5 can block a request for seconds).
    lockAcquire: async (db, resource, owner, { staleAfter, maxRetries = 0 } = {}) => {
      const v = await scalar(db, sql(prefix, 'hc_lock_acquire', [str('resource', resource), str('owner', owner)],
        { stale_after: interval('staleAfter', staleAfter), max_retries: int('maxRetries', maxRetries, 0, 'an integer >= 0') }));
      return v === null ? null : BigInt(v);
    },
    lockHeartbeat: async (db, resource, owner, tok) => {
      const [text, values] = sql(prefix, 'hc_lock_heartbeat', [str('resource', resource), str('owner', owner), token(tok)]);
      return date(JSON.parse(await scalar(db, [`to_json(${text})`, values])));
    },
    // In the transaction of the writes it fences (lease.fenced opens one): LeaseLost unless
    // owner holds the lease with the token; then no takeover until that transaction ends.
    lockCheck: async (db, resource, owner, tok) => {
      await scalar(db, sql(prefix, 'hc_lock_check', [str('resource', resource), str('owner', owner), token(tok)]));
    },
    lockRelease: async (db, resource, owner, tok) =>
      (await scalar(db, sql(prefix, 'hc_lock_release', [str('resource', resource), str('owner', owner), token(tok)]))) === 't',
    // Attempts.
    attemptBegin: (db, resource, owner, tok, { cooldown, maxAttempts, requestKey } = {}) =>
      row(db, sql(prefix, 'hc_attempt_begin', [str('resource', resource), str('owner', owner), token(tok)],
        { cooldown: interval('cooldown', cooldown), max_attempts: int('maxAttempts', maxAttempts, 1, 'a positive integer'),
          request_key: requestKey === undefined ? undefined : str('requestKey', requestKey) }), attempt),
    attemptComplete: (db, resource, owner, tok, externalRef) =>
      row(db, sql(prefix, 'hc_attempt_complete', [str('resource', resource), str('owner', owner), token(tok),
        str('externalRef', externalRef)]), attempt),
    attemptReset: (db, resource, note) =>
      row(db, sql(prefix, 'hc_attempt_reset', [str('resource', resource), str('note', note)]), attempt),
    // Checks and the sweep.
    check: async (db) => run(db, `SELECT invariant, subject, detail FROM ${prefix}hc_check()`, []),
    sweep: async (db, { batchSize } = {}) => {
      const [call, values] = sql(prefix, 'hc_sweep', [], { batch_size: int('batchSize', batchSize, 1, 'a positive integer') });
      const [r] = await run(db, `SELECT expired_holds, expired_reservations, purged_keys FROM ${call}`, values);
      return { expiredHolds: BigInt(r.expired_holds), expiredReservations: BigInt(r.expired_reservations), purgedKeys: BigInt(r.purged_keys) };
    },
  };
  // Every call returns a promise, argument errors included (a rejection, never a throw).
  const bound = { schema };
  for (const [name, fn] of Object.entries(calls)) bound[name] = async (...args) => fn(...args);
  return Object.freeze(bound);
}
