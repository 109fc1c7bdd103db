/*
 * idempotency.c
 *		Idempotency keys: one key space for every function that takes one.
 *
 * A call claims its key before it does anything else, by inserting the key
 * with the fingerprint of the call (function and arguments) and the
 * response it is about to give.  The insert is the rendezvous: a second call
 * with the same key waits for the first transaction, then either replays
 * what it stored or, if the first rolled back, claims the key itself.  A call
 * that fails rolls its claim back with it, so a failure stores nothing.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "common/cryptohash.h"
#include "common/sha2.h"
#include "utils/builtins.h"

#include "errors.h"
#include "holdcommit.h"
#include "idempotency.h"

static HcStatement claim_key = {
	"INSERT INTO hc_idempotency_keys"
	" (scope_id, key, function, fingerprint, reservation_id, status, expires_at, created_at)"
	" VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
	" ON CONFLICT DO NOTHING",
	8, {TEXTOID, TEXTOID, TEXTOID, BYTEAOID, TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID}
};

static HcStatement read_key = {
	"SELECT function, fingerprint, reservation_id, status, expires_at, created_at"
	"  FROM hc_idempotency_keys"
	" WHERE key OPERATOR(pg_catalog.=) $1",
	1, {TEXTOID}
};

static HcStatement forget_key = {
	"DELETE FROM hc_idempotency_keys"
	" WHERE key OPERATOR(pg_catalog.=) $1 AND created_at OPERATOR(pg_catalog.<=) $2",
	2, {TEXTOID, TIMESTAMPTZOID}
};

/*
 * The fingerprint is the function name and the arguments that define the
 * request, each length-prefixed so that no two argument lists collide.
 */
void
hc_fingerprint_init(HcFingerprint *fp, const char *function)
{
	initStringInfo(&fp->buf);
	hc_fingerprint_add(fp, function);
}

void
hc_fingerprint_add(HcFingerprint *fp, const char *value)
{
	appendStringInfo(&fp->buf, "%zu:%s;", strlen(value), value);
}

static bytea *
hc_fingerprint_digest(HcFingerprint *fp)
{
	bytea	   *digest = palloc(VARHDRSZ + PG_SHA256_DIGEST_LENGTH);
	pg_cryptohash_ctx *ctx = pg_cryptohash_create(PG_SHA256);

	if (pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (uint8 *) fp->buf.data, fp->buf.len) < 0 ||
		pg_cryptohash_final(ctx, (uint8 *) VARDATA(digest), PG_SHA256_DIGEST_LENGTH) < 0)
		elog(ERROR, "could not compute SHA-256: %s", pg_cryptohash_error(ctx));
	pg_cryptohash_free(ctx);
	SET_VARSIZE(digest, VARHDRSZ + PG_SHA256_DIGEST_LENGTH);
	return digest;
}

/*
 * Claim the key for a new request (returns true), or find the response
 * stored by an earlier call with the same key and arguments (returns false
 * and fills *stored).  The same key with other arguments raises RS005.  A
 * key older than holdcommit.idempotency_retention is forgotten and reclaimed.
 */
bool
hc_idempotency_claim(HcCall *call, const char *key, const char *scope_id,
					 HcFingerprint *fp, const HcStoredResponse *fresh,
					 HcStoredResponse *stored)
{
	bytea	   *digest = hc_fingerprint_digest(fp);
	TimestampTz retention_start = call->now - (int64) hc_idempotency_retention * USECS_PER_SEC;
	int			tries;

	for (tries = 0; tries < 3; tries++)
	{
		Datum		values[8];
		Datum		lookup[2];
		bytea	   *stored_digest;
		bool		isnull;
		char	   *stored_function;

		values[0] = HC_TEXT(scope_id);
		values[1] = HC_TEXT(key);
		values[2] = HC_TEXT(call->function);
		values[3] = PointerGetDatum(digest);
		values[4] = HC_TEXT(fresh->reservation_id);
		values[5] = HC_TEXT(fresh->status);
		values[6] = TimestampTzGetDatum(fresh->expires_at);
		values[7] = TimestampTzGetDatum(fresh->created_at);
		if (hc_run(&claim_key, values, NULL, SPI_OK_INSERT) == 1)
			return true;

		/* Taken: by whom, and is it still within the retention window? */
		lookup[0] = HC_TEXT(key);
		if (hc_run(&read_key, lookup, NULL, SPI_OK_SELECT) == 0)
			continue;			/* purged in between: claim again */
		if (hc_timestamptz(0, 6) <= retention_start)
		{
			lookup[1] = TimestampTzGetDatum(retention_start);
			hc_run(&forget_key, lookup, NULL, SPI_OK_DELETE);
			continue;
		}

		stored_function = hc_text(call, 0, 1);
		stored_digest = DatumGetByteaPP(hc_datum(0, 2, &isnull));
		if (strcmp(stored_function, call->function) != 0 ||
			VARSIZE_ANY_EXHDR(stored_digest) != PG_SHA256_DIGEST_LENGTH ||
			memcmp(VARDATA_ANY(stored_digest), VARDATA(digest), PG_SHA256_DIGEST_LENGTH) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_HC_IDEMPOTENCY_KEY_REUSED),
					 errmsg("idempotency key \"%s\" was already used for a different request", key),
					 errdetail("The key was first used by %s with other arguments.", stored_function),
					 errhint("Send a new idempotency key for a new request; reuse a key only to retry the same request.")));

		stored->reservation_id = hc_text(call, 0, 3);
		stored->status = hc_text(call, 0, 4);
		stored->expires_at = hc_timestamptz(0, 5);
		stored->created_at = hc_timestamptz(0, 6);
		return false;
	}
	elog(ERROR, "could not claim idempotency key \"%s\"", key);
	return false;				/* keep compiler quiet */
}
