// holdcommit for node-postgres: the calls (calls.js), the errors (errors.js), withLease (lease.js).
import { forSchema } from './calls.js';

export {
  HoldcommitError, AssetUnavailable, InsufficientStock, ReservationExpired, ReservationNotActive,
  KeyReused, NotFound, LeaseLost, InvalidArgument, AlreadyExists, WrongIsolation, PermissionDenied,
  NotSupported, NotReady, Busy, RetryLater, ReadOnly, InternalError, errorClasses, httpStatus, errorFrom,
} from './errors.js';
export { forSchema } from './calls.js';
export { withLease } from './lease.js';

export const {
  hold, holdMany, holdBest, commit, release, extend, reserve, reserveItems, finalize, unreserve,
  lockAcquire, lockHeartbeat, lockRelease, lockCheck, attemptBegin, attemptComplete, attemptReset, check, sweep,
} = forSchema('holdcommit');
