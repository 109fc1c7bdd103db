/*
 * idempotency.c
 *		Idempotency keys: one key space for every function that takes one,
 *		and keys past retention forgotten by the sweep.
 *
 * A key lives on the reservation it made (idempotency_key, with the
 * fingerprint of the request), so a new request writes no row of its own.
 *
 * Invariants:
 *   1. Two calls with the same key meet at a transaction-level lock on the
 *      key's hash, taken before anything else: the second waits for the
 *      first to end, then finds its reservation and replays it, or, if the
 *      first rolled back, goes ahead itself.
 *   2. A refused call writes nothing and stores nothing.
 *   3. On a standby a replay is answered as on the primary, and a key that
 *      made nothing there is refused (standby.c).
 *   4. A call with a scope (on Citus, call->scope: core/placement.h) sees
 *      the keys of its routing id only, through a statement; on a single
 *      node every key, through the point reads of fetch.c.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "common/cryptohash.h"
#include "common/hashfn.h"
#include "common/sha2.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/builtins.h"

#include "compat.h"
#include "common/errors.h"
#include "common/idempotency.h"
#include "common/settings.h"
#include "common/sweep.h"
#include "core/fetch.h"
#include "core/standby.h"
#include "core/version.h"

/*
 * Advisory locks of holdcommit keys use this in field 4 of the lock tag;
 * pg_advisory_lock() uses 1 and 2, so the two never meet.
 */
#define HC_KEY_LOCK_SPACE	0x4843

typedef enum HcKeyVerdict
{
	HC_KEY_NEW,					/* no call has used the key: go ahead */
	HC_KEY_REPLAY,				/* the same request: return what it made */
	HC_KEY_FORGOTTEN			/* past retention, now forgotten: run again */
} HcKeyVerdict;

static HcStatement forget_hold_key = {
	"UPDATE hc_reservations SET idempotency_key = NULL"
	" WHERE asset_id" EQ ":scope_id" " AND id" EQ ":reservation_id",
	{{"scope_id", TEXTOID}, {"reservation_id", TEXTOID}}
};

/*
 * The orders were hc_stock_reservations before 0.4.0 SQL: each statement
 * that reads them for holds too has a form for that table (the _03 ones),
 * chosen by the SQL installed (orders_table_03).
 */
#define FORGET_STOCK_KEY(orders) \
	"UPDATE " orders " SET idempotency_key = NULL" \
	" WHERE scope_id" EQ ":scope_id" " AND id" EQ ":reservation_id"
static HcStatement forget_stock_key = {
	FORGET_STOCK_KEY("hc_stock_orders"),
	{{"scope_id", TEXTOID}, {"reservation_id", TEXTOID}}
};
static HcStatement forget_stock_key_03 = {
	FORGET_STOCK_KEY("hc_stock_reservations"),
	{{"scope_id", TEXTOID}, {"reservation_id", TEXTOID}}
};

/* Does the SQL installed have 0.3.0's table of orders? */
static bool
orders_table_03(void)
{
	return !hc_sql_at_least("0.4.0");
}

/*
 * The sweeper's part for keys: forget the idempotency keys of reservations
 * of both kinds made at or before :retention_start, oldest first,
 * :batch_size of each kind at most, from where the last batch of this
 * sweep stopped (:holds_from, :stock_from): the keys it forgot stay in the
 * key-age index, invisible, until its transaction ends, and a batch that
 * started from the oldest again would walk over all of them.  Returns how
 * many of each kind, and the newest created_at of each (the next batch
 * starts there).
 */
#define FORGET_KEYS(orders) \
	"WITH h AS (" \
	"  UPDATE hc_reservations r SET idempotency_key = NULL" \
	"    FROM (SELECT asset_id, id, created_at FROM hc_reservations" \
	"           WHERE idempotency_key IS NOT NULL AND created_at" LE ":retention_start" \
	"             AND created_at" GE ":holds_from" \
	"           ORDER BY created_at LIMIT :batch_size FOR NO KEY UPDATE SKIP LOCKED) d" \
	"   WHERE r.asset_id" EQ "d.asset_id" " AND r.id" EQ "d.id" \
	"  RETURNING d.created_at)," \
	" s AS (" \
	"  UPDATE " orders " r SET idempotency_key = NULL" \
	"    FROM (SELECT scope_id, id, created_at FROM " orders \
	"           WHERE idempotency_key IS NOT NULL AND created_at" LE ":retention_start" \
	"             AND created_at" GE ":stock_from" \
	"           ORDER BY created_at LIMIT :batch_size FOR NO KEY UPDATE SKIP LOCKED) d" \
	"   WHERE r.scope_id" EQ "d.scope_id" " AND r.id" EQ "d.id" \
	"  RETURNING d.created_at)" \
	" SELECT (SELECT pg_catalog.count(*) FROM h) AS holds," \
	"        (SELECT pg_catalog.max(created_at) FROM h) AS holds_last," \
	"        (SELECT pg_catalog.count(*) FROM s) AS stock," \
	"        (SELECT pg_catalog.max(created_at) FROM s) AS stock_last"
#define FORGET_KEYS_PARAMS \
	{{"retention_start", TIMESTAMPTZOID}, {"batch_size", INT4OID}, \
	 {"holds_from", TIMESTAMPTZOID}, {"stock_from", TIMESTAMPTZOID}}
static HcStatement forget_keys = {FORGET_KEYS("hc_stock_orders"), FORGET_KEYS_PARAMS};
static HcStatement forget_keys_03 = {FORGET_KEYS("hc_stock_reservations"), FORGET_KEYS_PARAMS};

/*
 * The fingerprint is the function name and the arguments that define the
 * request, each length-prefixed so that no two argument lists collide.
 */
void
hc_fingerprint_init(HcFingerprint *fp, const char *function)
{
	fp->parts[0] = function;
	fp->nparts = 1;
	fp->buf.data = NULL;
	fp->digest = NULL;
}

/* "len:value;", without a format. */
static void
fingerprint_write(HcFingerprint *fp, const char *value)
{
	size_t		len = strlen(value);
	char		digits[MAXINT8LEN + 1];

	appendBinaryStringInfo(&fp->buf, digits, pg_ulltoa_n((uint64) len, digits));
	appendStringInfoChar(&fp->buf, ':');
	appendBinaryStringInfo(&fp->buf, value, (int) len);
	appendStringInfoChar(&fp->buf, ';');
}

/* The parts that wait, written. */
static void
fingerprint_flush(HcFingerprint *fp)
{
	int			i;

	if (fp->buf.data == NULL)
		initStringInfo(&fp->buf);
	for (i = 0; i < fp->nparts; i++)
		fingerprint_write(fp, fp->parts[i]);
	fp->nparts = 0;
}

void
hc_fingerprint_add(HcFingerprint *fp, const char *value)
{
	if (fp->nparts == HC_FINGERPRINT_PARTS)
		fingerprint_flush(fp);
	if (fp->buf.data == NULL)
		fp->parts[fp->nparts++] = value;
	else
		fingerprint_write(fp, value);
}

/* The same for a number, in decimal. */
void
hc_fingerprint_add_int64(HcFingerprint *fp, int64 value)
{
	char	   *digits = palloc(MAXINT8LEN + 1);

	pg_lltoa(value, digits);
	hc_fingerprint_add(fp, digits);
}

/*
 * The SHA-256 of the request, taken once and only for a call that stores or
 * compares it: a refusal never needs it (nor its text).
 */
bytea *
hc_fingerprint_digest(HcFingerprint *fp)
{
	bytea	   *digest;
	pg_cryptohash_ctx *ctx;

	if (fp->digest != NULL)
		return fp->digest;
	fingerprint_flush(fp);
	digest = palloc(VARHDRSZ + PG_SHA256_DIGEST_LENGTH);
	ctx = pg_cryptohash_create(PG_SHA256);

	if (pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (uint8 *) fp->buf.data, fp->buf.len) < 0 ||
		pg_cryptohash_final(ctx, (uint8 *) VARDATA(digest), PG_SHA256_DIGEST_LENGTH) < 0)
		elog(ERROR, "could not compute SHA-256: %s", pg_cryptohash_error(ctx));
	pg_cryptohash_free(ctx);
	SET_VARSIZE(digest, VARHDRSZ + PG_SHA256_DIGEST_LENGTH);
	fp->digest = digest;
	return digest;
}

/* What a lock_timeout or cancel in the key's wait says it interrupted. */
static void
key_wait_context(void *arg)
{
	errcontext("waiting for another call with the same idempotency key");
}

/*
 * Wait for any other transaction that is using the key, and keep others
 * waiting for ours.  Held until the transaction ends; in memory only.  An
 * error in the wait (lock_timeout, a cancel) names it in its CONTEXT, so
 * that a caller can tell a request in flight from a busy row.
 */
static void
hc_idempotency_lock(const char *key)
{
	LOCKTAG		tag;
	uint64		hash = hash_bytes_extended((const unsigned char *) key, strlen(key), 0);
	ErrorContextCallback wait;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) (hash >> 32), (uint32) hash,
						 HC_KEY_LOCK_SPACE);
	wait.callback = key_wait_context;
	wait.arg = NULL;
	wait.previous = error_context_stack;
	error_context_stack = &wait;
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
	error_context_stack = wait.previous;
}

/*
 * The reservation of either kind that holds a key, by its unique index.  A
 * database that has never had a stock order (an assets-only shop) does not
 * scan their index, which has no entry (maybe_empty): any order that made
 * this key made its entry before we got the key's lock.
 */
static HcFetch hold_key = {"hc_reservations", "idempotency_key", HC_FETCH_READ, 5,
{"id", "asset_id", "buyer_id", "fingerprint", "created_at"}};
static HcFetch stock_key = {"hc_stock_orders", "idempotency_key", HC_FETCH_READ, 5,
{"id", "scope_id", "buyer_id", "fingerprint", "created_at"}, NULL, true};
static HcFetch stock_key_03 = {"hc_stock_reservations", "idempotency_key", HC_FETCH_READ, 5,
{"id", "scope_id", "buyer_id", "fingerprint", "created_at"}, NULL, true};

/* What a domain statement read with HC_KNOWN_KEY_COLUMNS, in its row 0. */
static void
hc_known_from_row(HcCall *call, HcKnownKey *known)
{
	bool		isnull;
	Datum		stored;
	MemoryContext old;

	known->kind = hc_text(call, 0, "known_kind");
	if (known->kind == NULL)
		return;
	known->id = hc_text(call, 0, "known_id");
	known->scope_id = hc_text(call, 0, "known_scope_id");
	known->buyer_id = hc_text(call, 0, "known_buyer_id");
	stored = hc_datum(0, "known_fingerprint", &isnull);
	old = MemoryContextSwitchTo(call->outer);
	known->fingerprint = isnull ? NULL : DatumGetByteaPCopy(stored);
	MemoryContextSwitchTo(old);
	known->created_at = hc_timestamptz(0, "known_created_at");
}

/* The key's reservation on Citus, where keys are per routing id. */
static HcStatement known_key = {
	"WITH " HC_KNOWN_KEY " SELECT " HC_KNOWN_KEY_COLUMNS " FROM known k",
	{HC_KNOWN_KEY_PARAMS}
};
static HcStatement known_key_03 = {
	"WITH " HC_KNOWN_KEY_IN("hc_stock_reservations", "asset_id") " SELECT " HC_KNOWN_KEY_COLUMNS
	" FROM known k",
	{HC_KNOWN_KEY_PARAMS}
};

/* The same, looked up directly: one key space for holds and stock. */
static void
hc_known_fetch(HcCall *call, const char *key, HcKnownKey *known)
{
	Datum		values[5];
	bool		nulls[5];

	if (call->scope != NULL)
	{
		HcArgs		args;

		hc_args(&args, orders_table_03() ? &known_key_03 : &known_key);
		hc_bind_text(&args, "key", key);
		known->kind = NULL;
		if (hc_run(call, &args, SPI_OK_SELECT) > 0)
			hc_known_from_row(call, known);
		return;
	}
	if (hc_fetch(call, &hold_key, key, values, nulls))
		known->kind = "hold";
	else if (hc_fetch(call, orders_table_03() ? &stock_key_03 : &stock_key, key, values, nulls))
		known->kind = "stock";
	else
	{
		known->kind = NULL;
		return;
	}
	known->id = TextDatumGetCString(values[0]);
	known->scope_id = TextDatumGetCString(values[1]);
	known->buyer_id = TextDatumGetCString(values[2]);
	known->fingerprint = nulls[3] ? NULL : DatumGetByteaPP(values[3]);
	known->created_at = DatumGetTimestampTz(values[4]);
}

/*
 * How messages name a key: it is a per-request secret (whoever knows it can
 * replay the request and read its reservation), so never the key itself but
 * the first 8 hex digits of its SHA-256, which the client can compute too:
 * sha256:1a2b3c4d.
 */
static char *
idempotency_label(const char *key)
{
	uint8		hash[PG_SHA256_DIGEST_LENGTH];
	pg_cryptohash_ctx *ctx = pg_cryptohash_create(PG_SHA256);

	if (pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) key, strlen(key)) < 0 ||
		pg_cryptohash_final(ctx, hash, sizeof(hash)) < 0)
		elog(ERROR, "could not compute SHA-256: %s", pg_cryptohash_error(ctx));
	pg_cryptohash_free(ctx);
	return psprintf("sha256:%02x%02x%02x%02x", hash[0], hash[1], hash[2], hash[3]);
}

/*
 * Judge what was found for the key: nothing (new), the same request within
 * holdcommit.idempotency_retention (replay), another request (RS005), or a
 * key past retention, which is forgotten here so that the caller can run
 * again.
 */
static HcKeyVerdict
hc_idempotency_judge(HcCall *call, const char *key, HcFingerprint *fp, HcKnownKey *known)
{
	TimestampTz retention_start = call->now - (int64) hc_idempotency_retention * USECS_PER_SEC;
	bytea	   *digest;

	if (known->kind == NULL)
	{
		hc_refuse_new_key_read_only(call->function);
		return HC_KEY_NEW;
	}
	if (known->created_at <= retention_start)
	{
		HcArgs		args;

		/* Forgetting the key writes, and what follows is a new request. */
		hc_refuse_new_key_read_only(call->function);

		hc_args(&args, strcmp(known->kind, "hold") == 0 ? &forget_hold_key :
				orders_table_03() ? &forget_stock_key_03 : &forget_stock_key);
		hc_bind_text(&args, "scope_id", known->scope_id);
		hc_bind_text(&args, "reservation_id", known->id);
		if (hc_run(call, &args, SPI_OK_UPDATE) != 1)
			elog(ERROR, "could not forget idempotency key %s", idempotency_label(key));
		return HC_KEY_FORGOTTEN;
	}
	digest = hc_fingerprint_digest(fp);
	if (known->fingerprint == NULL ||
		VARSIZE_ANY_EXHDR(known->fingerprint) != PG_SHA256_DIGEST_LENGTH ||
		memcmp(VARDATA_ANY(known->fingerprint), VARDATA(digest), PG_SHA256_DIGEST_LENGTH) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_HC_IDEMPOTENCY_KEY_REUSED),
				 errmsg("idempotency key %s was already used for a different request",
						idempotency_label(key)),
				 errdetail("A %s was made with this key and other arguments.",
						   strcmp(known->kind, "hold") == 0 ? "hold" : "stock reservation"),
				 errhidestmt(true),
				 errhint("Send a new idempotency key for a new request; reuse a key only to retry the same request.")));
	return HC_KEY_REPLAY;
}

/*
 * The one skeleton of every call that takes a key: take the key's lock, run
 * the domain statement of args (which must return rows rows, reading what
 * the key already made with HC_KNOWN_KEY_COLUMNS), and judge.  Returns true
 * for a replay of the same request (*known filled), false for a new one;
 * RS005 for another request.  A key past retention is forgotten and the
 * statement run again.
 */
bool
hc_idempotency_run(HcCall *call, HcArgs *args, uint64 rows, const char *key,
				   HcFingerprint *fp, HcKnownKey *known)
{
	HcKeyVerdict verdict;

	hc_idempotency_lock(key);
	do
	{
		if (hc_run(call, args, SPI_OK_SELECT) != rows)
			elog(ERROR, "%s read " UINT64_FORMAT " rows, not " UINT64_FORMAT,
				 call->function, SPI_processed, rows);
		hc_known_from_row(call, known);
		verdict = hc_idempotency_judge(call, key, fp, known);
	} while (verdict == HC_KEY_FORGOTTEN);
	return verdict == HC_KEY_REPLAY;
}

/*
 * The same skeleton for a call whose own first look needs no statement of
 * its own (a hold): the key's lock, then the key looked up directly.
 */
bool
hc_idempotency_find(HcCall *call, const char *key, HcFingerprint *fp, HcKnownKey *known)
{
	HcKeyVerdict verdict;

	hc_idempotency_lock(key);
	do
	{
		hc_known_fetch(call, key, known);
		verdict = hc_idempotency_judge(call, key, fp, known);
	} while (verdict == HC_KEY_FORGOTTEN);
	return verdict == HC_KEY_REPLAY;
}

/*
 * The sweeper's part for keys (sweep.c): up to batch_size keys of each kind
 * past holdcommit.idempotency_retention are forgotten, each kind from where
 * the last batch of this sweep stopped.  Returns how many.
 */
int64
hc_idempotency_sweep(HcCall *call, int batch_size, HcSweepCounts *counts)
{
	HcArgs		args;
	int64		holds;
	int64		stock;

	hc_args(&args, orders_table_03() ? &forget_keys_03 : &forget_keys);
	hc_bind(&args, "retention_start",
			TimestampTzGetDatum(call->now - (int64) hc_idempotency_retention * USECS_PER_SEC));
	hc_bind(&args, "batch_size", Int32GetDatum(batch_size));
	hc_bind(&args, "holds_from", TimestampTzGetDatum(hc_sweep_from(&counts->hold_keys)));
	hc_bind(&args, "stock_from", TimestampTzGetDatum(hc_sweep_from(&counts->stock_keys)));
	hc_run(call, &args, SPI_OK_SELECT);
	holds = hc_int64(0, "holds");
	stock = hc_int64(0, "stock");
	/* The newest of each batch is at or after its start: the next starts there. */
	if (holds > 0)
		hc_sweep_reached(&counts->hold_keys, hc_timestamptz(0, "holds_last"));
	if (stock > 0)
		hc_sweep_reached(&counts->stock_keys, hc_timestamptz(0, "stock_last"));
	return holds + stock;
}
