// The error classes, one per "class" of sqlstates.json (the one source of the
// SQLSTATE -> HTTP map, of which this package carries a copy), and the mapping
// of node-postgres errors onto them.
import { readFileSync } from 'node:fs';

const table = JSON.parse(readFileSync(new URL('./sqlstates.json', import.meta.url), 'utf8'));

export class HoldcommitError extends Error {
  constructor(message, { sqlstate = null, detail = null, hint = null, httpStatus = 500, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = new.target.name;
    this.sqlstate = sqlstate;
    this.detail = detail;
    this.hint = hint;
    this.httpStatus = httpStatus;
  }
}

export class AssetUnavailable extends HoldcommitError {}
export class InsufficientStock extends HoldcommitError {}
export class ReservationExpired extends HoldcommitError {}
export class ReservationNotActive extends HoldcommitError {}
export class KeyReused extends HoldcommitError {}
export class NotFound extends HoldcommitError {}
export class LeaseLost extends HoldcommitError {}
export class InvalidArgument extends HoldcommitError {}
export class AlreadyExists extends HoldcommitError {}
export class WrongIsolation extends HoldcommitError {}
export class PermissionDenied extends HoldcommitError {}
export class NotSupported extends HoldcommitError {}
export class NotReady extends HoldcommitError {}
export class Busy extends HoldcommitError {}
export class RetryLater extends HoldcommitError {}
export class ReadOnly extends HoldcommitError {}
export class InternalError extends HoldcommitError {}

export const errorClasses = Object.freeze({
  HoldcommitError, AssetUnavailable, InsufficientStock, ReservationExpired, ReservationNotActive,
  KeyReused, NotFound, LeaseLost, InvalidArgument, AlreadyExists, WrongIsolation,
  PermissionDenied, NotSupported, NotReady, Busy, RetryLater, ReadOnly, InternalError,
});

// sqlstate -> HTTP status, and sqlstate -> class, as sqlstates.json says.
export const httpStatus = Object.freeze(Object.fromEntries(table.sqlstates.map((s) => [s.sqlstate, s.http])));
const classOf = new Map();
for (const s of table.sqlstates) {
  const cls = errorClasses[s.class];
  // A class added to sqlstates.json must be added here too: fail at import, not at the first error.
  if (!cls) throw new Error(`holdcommit: sqlstates.json names class ${s.class}, which errors.js does not define`);
  classOf.set(s.sqlstate, cls);
}

/** The class and HTTP status of a SQLSTATE: any other of class 22 is an InvalidArgument (400),
 * an unknown one the base class (500). */
export function classify(sqlstate) {
  if (classOf.has(sqlstate)) return [classOf.get(sqlstate), httpStatus[sqlstate]];
  if (typeof sqlstate === 'string' && sqlstate.startsWith('22')) return [InvalidArgument, 400];
  return [HoldcommitError, 500];
}

/** An error of node-postgres (a DatabaseError: it has a SQLSTATE in `code` and a `severity`) as
 * the HoldcommitError of its SQLSTATE, with `cause` the original; anything else (a connection
 * error, ECONNREFUSED, a HoldcommitError already) unchanged. */
export function errorFrom(err) {
  if (err instanceof HoldcommitError) return err;
  if (!err || typeof err !== 'object' || typeof err.severity !== 'string' ||
      typeof err.code !== 'string' || !/^[0-9A-Z]{5}$/.test(err.code)) return err;
  const [Cls, status] = classify(err.code);
  return new Cls(err.message, {
    sqlstate: err.code, detail: err.detail ?? null, hint: err.hint ?? null, httpStatus: status, cause: err,
  });
}

// An argument refused before the call, as the server would refuse it.
export function invalid(message, sqlstate = '22023') {
  return new InvalidArgument(message, { sqlstate, httpStatus: 400 });
}
