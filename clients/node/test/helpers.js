// What the tests share: the pools of the suite's database (made by ../test.sh), a client of
// one for a block, unique names, and an assertion on the class, SQLSTATE and HTTP status of a refusal.
import assert from 'node:assert/strict';
import pg from 'pg';

export const database = process.env.HC_NODE_DB;
if (!database) throw new Error('run by clients/node/test.sh (HC_NODE_DB and the roles are set there)');
// The application role: granted with hc_grant_app, search_path = public (qualified calls).
export const app = new pg.Pool({ database, user: process.env.HC_NODE_APP_ROLE, max: 4 });
// Another one whose search_path has the extension's schema (unqualified calls).
export const appOnPath = new pg.Pool({ database, user: process.env.HC_NODE_PATH_ROLE, max: 2 });
// The superuser: assets, stock, resets, pg_terminate_backend.
export const admin = new pg.Pool({ database, max: 2 });
for (const pool of [app, appOnPath, admin]) pool.on('error', () => {});

export async function endPools() {
  await Promise.all([app.end(), appOnPath.end(), admin.end()]);
}

let n = 0;
export const uid = (prefix) => `${prefix}-${process.pid}-${++n}`;

export async function asset(prefix = 'SEAT') {
  const id = uid(prefix);
  await admin.query('SELECT holdcommit.hc_asset_add($1)', [id]);
  return id;
}
export async function product(stock, prefix = 'SKU') {
  const id = uid(prefix);
  await admin.query('SELECT holdcommit.hc_stock_set($1, $2)', [id, stock]);
  return id;
}

export async function refused(promise, Cls, sqlstate, httpStatus) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof Cls, `expected ${Cls.name}, got ${e && e.name}: ${e && e.message}`);
    assert.equal(e.name, Cls.name);
    assert.equal(e.sqlstate, sqlstate);
    if (httpStatus !== undefined) assert.equal(e.httpStatus, httpStatus);
    return true;
  });
}

// fn(client) on a client of pool, released after.
export async function withClient(pool, fn) {
  const client = await pool.connect();
  try {
    return await fn(client);
  } finally {
    client.release();
  }
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
