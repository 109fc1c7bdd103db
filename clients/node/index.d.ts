// Types of holdcommit for node-postgres (hand-written; checked by `tsc --noEmit -p .`).

/** What the calls run on: a pg Client, PoolClient or Pool (anything with pg's query(config)). */
export interface Queryable {
  query(config: { text: string; values?: unknown[]; types?: unknown }): Promise<{ rows: any[] }>;
}

/** An interval: PostgreSQL's text ('10 minutes') or a number of seconds. */
export type Interval = string | number;
/** A fencing token: bigint as the calls return it; a safe integer is accepted too. */
export type Token = bigint | number;

export interface Reservation {
  reservationId: string;
  assetId: string;
  buyerId: string;
  status: 'HELD' | 'COMMITTED' | 'RELEASED' | 'EXPIRED';
  expiresAt: Date;
  createdAt: Date;
  /** true: nothing changed, a stored or earlier outcome (HTTP 200); false: new (201). */
  replayed: boolean;
}

export interface Item {
  productId: string;
  qty: number;
}

export interface StockReservation {
  reservationId: string;
  buyerId: string;
  status: 'RESERVED' | 'FINALIZED' | 'RELEASED' | 'EXPIRED';
  items: Item[];
  expiresAt: Date;
  createdAt: Date;
  replayed: boolean;
}

export interface Attempt {
  resource: string;
  status: 'PROCEED' | 'COOLDOWN' | 'MANUAL_REVIEW' | 'COMPLETED';
  attempt: number;
  marker: string | null;
  externalRef: string | null;
  lastAttemptAt: Date | null;
}

export interface Violation {
  invariant: string;
  subject: string;
  detail: string;
}

export interface SweepResult {
  expiredHolds: bigint;
  expiredReservations: bigint;
  purgedKeys: bigint;
}

export interface Calls {
  /** The schema the calls are qualified with; null: unqualified (the search_path decides). */
  readonly schema: string | null;
  hold(db: Queryable, assetId: string, buyerId: string, idempotencyKey: string, options?: { ttl?: Interval }): Promise<Reservation>;
  /** Every asset or none, as one reservation: a Reservation per asset, one reservationId. */
  holdMany(db: Queryable, assetIds: readonly string[], buyerId: string, idempotencyKey: string,
    options?: { ttl?: Interval }): Promise<Reservation[]>;
  /** The n best available assets of a pool, adjacent where they can be, as one reservation. */
  holdBest(db: Queryable, pool: string, n: number, buyerId: string, idempotencyKey: string,
    options?: { ttl?: Interval }): Promise<Reservation[]>;
  commit(db: Queryable, reservationId: string, options?: { lateOk?: boolean }): Promise<Reservation>;
  release(db: Queryable, reservationId: string): Promise<Reservation>;
  extend(db: Queryable, reservationId: string, ttl: Interval): Promise<Reservation>;
  reserve(db: Queryable, productId: string, qty: number, buyerId: string, idempotencyKey: string,
    options?: { ttl?: Interval }): Promise<StockReservation>;
  reserveItems(db: Queryable, items: readonly Item[], buyerId: string, idempotencyKey: string,
    options?: { ttl?: Interval }): Promise<StockReservation>;
  finalize(db: Queryable, reservationId: string, options?: { lateOk?: boolean }): Promise<StockReservation>;
  unreserve(db: Queryable, reservationId: string): Promise<StockReservation>;
  /** The fencing token, or null if the lease is held by another owner (after maxRetries
   * retries: default 0, try once; the SQL's own default, 5, can block for seconds). */
  lockAcquire(db: Queryable, resource: string, owner: string,
    options?: { staleAfter?: Interval; maxRetries?: number }): Promise<bigint | null>;
  /** The heartbeat's time; LeaseLost if owner and token no longer hold the lease. */
  lockHeartbeat(db: Queryable, resource: string, owner: string, token: Token): Promise<Date>;
  /** true if released; false if owner and token did not hold it (nothing changed). */
  lockRelease(db: Queryable, resource: string, owner: string, token: Token): Promise<boolean>;
  /** In the transaction of the writes it fences (Lease.fenced opens one): LeaseLost unless
   * owner holds the lease with token; then no takeover until that transaction ends. */
  lockCheck(db: Queryable, resource: string, owner: string, token: Token): Promise<void>;
  /**
   * requestKey: made once for this begin, used again only to ask for the same begin after its
   * answer was lost: within the cooldown that attempt comes back; any other begin gets COOLDOWN.
   */
  attemptBegin(db: Queryable, resource: string, owner: string, token: Token,
    options?: { cooldown?: Interval; maxAttempts?: number; requestKey?: string }): Promise<Attempt>;
  attemptComplete(db: Queryable, resource: string, owner: string, token: Token, externalRef: string): Promise<Attempt>;
  attemptReset(db: Queryable, resource: string, note: string): Promise<Attempt>;
  /** The violated invariants: none when all hold. */
  check(db: Queryable): Promise<Violation[]>;
  sweep(db: Queryable, options?: { batchSize?: number }): Promise<SweepResult>;
}

/** The calls qualified with another schema than 'holdcommit' (null: unqualified). */
export function forSchema(schema?: string | null): Calls;

export const hold: Calls['hold'];
export const holdMany: Calls['holdMany'];
export const holdBest: Calls['holdBest'];
export const commit: Calls['commit'];
export const release: Calls['release'];
export const extend: Calls['extend'];
export const reserve: Calls['reserve'];
export const reserveItems: Calls['reserveItems'];
export const finalize: Calls['finalize'];
export const unreserve: Calls['unreserve'];
export const lockAcquire: Calls['lockAcquire'];
export const lockHeartbeat: Calls['lockHeartbeat'];
export const lockRelease: Calls['lockRelease'];
export const lockCheck: Calls['lockCheck'];
export const attemptBegin: Calls['attemptBegin'];
export const attemptComplete: Calls['attemptComplete'];
export const attemptReset: Calls['attemptReset'];
export const check: Calls['check'];
export const sweep: Calls['sweep'];

// Errors: one class per "class" of sqlstates.json.
export interface ErrorOptions {
  sqlstate?: string | null;
  detail?: string | null;
  hint?: string | null;
  httpStatus?: number;
  cause?: unknown;
}
export class HoldcommitError extends Error {
  constructor(message: string, options?: ErrorOptions);
  /** The SQLSTATE (RS001, 22023, ...); null for none. */
  readonly sqlstate: string | null;
  readonly detail: string | null;
  readonly hint: string | null;
  /** The HTTP status of the SQLSTATE (clients/sqlstates.json); 500 for an unknown one. */
  readonly httpStatus: number;
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

/** The classes by name, as sqlstates.json names them. */
export const errorClasses: Readonly<Record<string, typeof HoldcommitError>>;
/** SQLSTATE -> HTTP status, as clients/sqlstates.json says. */
export const httpStatus: Readonly<Record<string, number>>;
/** A node-postgres error as the HoldcommitError of its SQLSTATE (with `cause` the original);
 * anything else (a connection error, a HoldcommitError) unchanged. */
export function errorFrom(err: unknown): unknown;

// withLease.
export interface LeaseOptions {
  resource: string;
  /** This process's or this delivery's own name, never a role's such as 'webhook' (doc/locking.md). */
  owner: string;
  /** Seconds without a heartbeat after which the lease is stale (stale_after): default 30. */
  ttl?: number;
  /** Seconds between heartbeats: default ttl / 3. */
  heartbeatEvery?: number;
  /** Retries of the acquire while another owner holds it: default 0 (Busy at once). */
  maxRetries?: number;
  /** The extension's schema: default 'holdcommit'; null: unqualified. */
  schema?: string | null;
}
export interface Lease {
  readonly resource: string;
  readonly owner: string;
  /** The fencing token: write it with the work the lease protects. */
  readonly token: bigint;
  /** true once the lease is lost (taken over or released, its connection failed, or no heartbeat for ttl). */
  readonly lost: boolean;
  /** Aborted when the lease is lost, with the LeaseLost as its reason: pass it to fetch() and the like. */
  readonly signal: AbortSignal;
  /** Throws the LeaseLost if the lease is lost: call it before each step that needs the lease. */
  check(): void;
  /** A transaction on db (the application's Client, or a Pool: one of its clients) whose
   * writes commit only under the token: hc_lock_check first (LeaseLost, and the lease lost,
   * if the token is not current), then work(client), COMMIT; ROLLBACK if anything throws.
   * No takeover until it ends.  A client already in a transaction: no BEGIN or COMMIT, and
   * the fence lasts until that transaction ends. */
  fenced<T>(db: Queryable | LeasePool, work: (client: any) => Promise<T> | T): Promise<T>;
}
/** A pg Pool (the lease borrows one client of it for its whole run). */
export interface LeasePool {
  connect(): Promise<any>;
  readonly totalCount: number;
}
/** Acquire (Busy if another owner holds it), heartbeat on a connection of its own while fn
 * runs, release in finally.  Resolves with fn's value; rejects with fn's error, or with
 * LeaseLost if the lease was lost while fn ran. */
export function withLease<T>(poolOrConfig: LeasePool | string | { [key: string]: unknown },
  options: LeaseOptions, fn: (lease: Lease) => Promise<T> | T): Promise<T>;
