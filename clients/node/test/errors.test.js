// The error classes and the SQLSTATE -> HTTP map against clients/sqlstates.json.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import * as hc from 'holdcommit';

const source = JSON.parse(readFileSync(process.env.HC_SQLSTATES, 'utf8'));
const fake = (code) => Object.assign(new Error(`message of ${code}`), { code, severity: 'ERROR', detail: 'd', hint: 'h' });

test('the package carries its own sqlstates.json, equal to clients/sqlstates.json', () => {
  const path = createRequire(import.meta.url).resolve('holdcommit/sqlstates.json');
  assert.match(path, /node_modules\/holdcommit\/sqlstates\.json$/);
  assert.deepEqual(JSON.parse(readFileSync(path, 'utf8')), source);
});

test('httpStatus maps every SQLSTATE of sqlstates.json to its status, and nothing else', () => {
  assert.deepEqual(hc.httpStatus, Object.fromEntries(source.sqlstates.map((s) => [s.sqlstate, s.http])));
  assert.ok(Object.isFrozen(hc.httpStatus));
});

test('every class of sqlstates.json is exported, a subclass of HoldcommitError and of Error', () => {
  for (const name of new Set(source.sqlstates.map((s) => s.class))) {
    assert.equal(typeof hc[name], 'function', name);
    assert.equal(hc[name], hc.errorClasses[name]);
    assert.ok(new hc[name]('m') instanceof hc.HoldcommitError, name);
    assert.ok(new hc[name]('m') instanceof Error, name);
  }
});

test('errorFrom maps every SQLSTATE of sqlstates.json to its class, status, detail and hint', () => {
  for (const s of source.sqlstates) {
    const pgError = fake(s.sqlstate);
    const e = hc.errorFrom(pgError);
    assert.ok(e instanceof hc[s.class], `${s.sqlstate} -> ${s.class}`);
    assert.equal(e.name, s.class);
    assert.deepEqual([e.sqlstate, e.httpStatus, e.message, e.detail, e.hint, e.cause],
      [s.sqlstate, s.http, pgError.message, 'd', 'h', pgError]);
  }
});

test('errorFrom: another SQLSTATE of class 22 is InvalidArgument (400), an unknown one HoldcommitError (500)', () => {
  const e = hc.errorFrom(fake('22P02'));
  assert.deepEqual([e.constructor, e.sqlstate, e.httpStatus], [hc.InvalidArgument, '22P02', 400]);
  const u = hc.errorFrom(fake('42883'));
  assert.deepEqual([u.constructor, u.sqlstate, u.httpStatus], [hc.HoldcommitError, '42883', 500]);
});

test('errorFrom leaves what is not a server error alone (ECONNREFUSED, EPIPE, a TypeError)', () => {
  for (const err of [Object.assign(new Error('x'), { code: 'ECONNREFUSED' }), Object.assign(new Error('x'), { code: 'EPIPE' }),
    new TypeError('x'), null, 'text']) {
    assert.equal(hc.errorFrom(err), err);
  }
  const mapped = hc.errorFrom(fake('RS001'));
  assert.equal(hc.errorFrom(mapped), mapped);
});

test('index.d.ts declares exactly what the package exports', async () => {
  const dts = readFileSync(createRequire(import.meta.url).resolve('holdcommit/package.json').replace(/package\.json$/, 'index.d.ts'), 'utf8');
  const declared = [...dts.matchAll(/^export (?:const|function|class) (\w+)/gm)].map((m) => m[1]).sort();
  assert.deepEqual(declared, Object.keys(hc).sort());
});
