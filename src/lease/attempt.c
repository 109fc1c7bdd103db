/*
 * attempt.c
 *		Layer 2 of dual-layer locking: the point-of-no-return guard.
 *		hc_attempt_begin, hc_attempt_complete, hc_attempt_reset.
 *
 * Before an external call whose outcome may stay unknown (a timeout after
 * the ERP may or may not have made the invoice), the lease holder asks
 * hc_attempt_begin.  PROCEED records a permanent marker
 * ATTEMPTED-{owner}-r{n}-t{unix_ms} in hc_attempts and the ledger; later
 * callers see it whatever happened to the lease: a cooldown after each
 * attempt, a cap that ends in MANUAL_REVIEW until an operator resets, and
 * COMPLETED with its external_ref once the outcome is known.
 *
 * Invariants:
 *   1. Locks: the lease row (so that no takeover slips in, and to order the
 *      resource's ledger rows), then the attempts row, always in that order.
 *   2. Each call runs in a worker's transaction of its own (autonomous.c),
 *      routed by its resource there (hc_lease_begin, lease.c).
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

#include "common/errors.h"
#include "common/ids.h"
#include "common/ledger.h"
#include "common/result.h"
#include "common/validate.h"
#include "core/version.h"
#include "lease/lease.h"

PG_FUNCTION_INFO_V1(hc_attempt_begin);
PG_FUNCTION_INFO_V1(hc_attempt_complete);
PG_FUNCTION_INFO_V1(hc_attempt_reset);

/* The guard of a resource, as locked, and the hc_attempt a function returns. */
typedef struct Attempt
{
	char	   *resource;
	char	   *status;			/* the stored one: OPEN, MANUAL_REVIEW, COMPLETED */
	int32		attempts;		/* since the last reset */
	char	   *marker;			/* the last marker */
	char	   *external_ref;
	TimestampTz last_attempt_at;
	bool		has_attempt;	/* last_attempt_at is set */
	char	   *last_owner;		/* who made the last attempt, with which token */
	int64		last_token;
} Attempt;

#define ATTEMPT_COLUMNS "status, attempts, last_marker, external_ref, last_attempt_at, last_owner, last_token"

/*
 * A resource's first attempt (or completion) starts from an empty row,
 * which is this call's until it commits: as good as locked.
 */
static HcStatement add_attempts = {
	"INSERT INTO hc_attempts (resource, updated_at) VALUES (:resource, :now)"
	" ON CONFLICT (resource) DO NOTHING RETURNING " ATTEMPT_COLUMNS,
	{{"resource", TEXTOID}, {"now", TIMESTAMPTZOID}}
};

static HcStatement lock_attempts = {
	"SELECT " ATTEMPT_COLUMNS " FROM hc_attempts WHERE resource" EQ ":resource" " FOR UPDATE",
	{{"resource", TEXTOID}}
};

static HcStatement peek_attempts = {
	"SELECT " ATTEMPT_COLUMNS " FROM hc_attempts WHERE resource" EQ ":resource",
	{{"resource", TEXTOID}}
};

/*
 * A request key is a caller's capability: hc_attempts, which applications
 * read, keeps only its SHA-256.
 */
#define REQUEST_DIGEST "pg_catalog.sha256(pg_catalog.convert_to(:request_key, 'UTF8'))"

/*
 * Record attempt n, its marker, and its ledger row in the resource's order
 * (the lease row, locked already, moves its version on): one statement on
 * the hot path of an ERP call.  SET_KEY: the request key too (0.3.0 SQL).
 */
#define RECORD_ATTEMPT(SET_KEY) \
	"WITH a AS (" \
	"  UPDATE hc_attempts" \
	"     SET attempts = attempts" PLUS "1, total_attempts = total_attempts" PLUS "1," \
	"         last_marker = :marker, last_attempt_at = :now, last_owner = :owner," \
	"         last_token = :token, cooldown = :cooldown, max_attempts = :max_attempts," \
	SET_KEY "         updated_at = :now" \
	"   WHERE resource" EQ ":resource" " AND status" EQ "'OPEN'" \
	"  RETURNING resource)," \
	" v AS (" \
	"  UPDATE hc_locks SET version = version" PLUS "1" \
	"   WHERE resource" EQ ":resource" " AND EXISTS (SELECT FROM a)" \
	"  RETURNING version)" \
	HC_LEDGER_ROWS("'resource'", ":resource", "v.version", "'attempt'", "'call'", "NULL", "NULL", \
				   "0", "0", ":detail") \
	" FROM v RETURNING seq"

static HcStatement record_attempt = {
	RECORD_ATTEMPT("         last_request_digest = " REQUEST_DIGEST ","),
	{{"resource", TEXTOID}, {"marker", TEXTOID}, {"owner", TEXTOID}, {"token", INT8OID},
	 {"cooldown", INTERVALOID}, {"max_attempts", INT4OID}, {"request_key", TEXTOID},
	 {"detail", TEXTOID}, HC_LEDGER_PARAMS}
};

/* A 0.2.0 database, served until it is updated, has no request keys. */
static HcStatement record_attempt_0_2 = {
	RECORD_ATTEMPT(""),
	{{"resource", TEXTOID}, {"marker", TEXTOID}, {"owner", TEXTOID}, {"token", INT8OID},
	 {"cooldown", INTERVALOID}, {"max_attempts", INT4OID}, {"detail", TEXTOID},
	 HC_LEDGER_PARAMS}
};

/* Was the last attempt made with this request key?  (Its row is locked already.) */
static HcStatement same_request_key = {
	"SELECT 1 FROM hc_attempts"
	" WHERE resource" EQ ":resource" " AND last_request_digest" EQ REQUEST_DIGEST,
	{{"resource", TEXTOID}, {"request_key", TEXTOID}}
};

static HcStatement await_review = {
	"UPDATE hc_attempts"
	"   SET status = 'MANUAL_REVIEW', cooldown = :cooldown, max_attempts = :max_attempts,"
	"       updated_at = :now"
	" WHERE resource" EQ ":resource" " AND status" EQ "'OPEN'",
	{{"resource", TEXTOID}, {"cooldown", INTERVALOID}, {"max_attempts", INT4OID},
	 {"now", TIMESTAMPTZOID}}
};

static HcStatement complete_attempts = {
	"UPDATE hc_attempts"
	"   SET status = 'COMPLETED', external_ref = :external_ref, completed_at = :now,"
	"       updated_at = :now"
	" WHERE resource" EQ ":resource" " AND status" NE "'COMPLETED'",
	{{"resource", TEXTOID}, {"external_ref", TEXTOID}, {"now", TIMESTAMPTZOID}}
};

static HcStatement reset_attempts = {
	"UPDATE hc_attempts"
	"   SET status = 'OPEN', attempts = 0, reset_at = :now, reset_note = :note, updated_at = :now"
	" WHERE resource" EQ ":resource" " AND status" NE "'COMPLETED'",
	{{"resource", TEXTOID}, {"note", TEXTOID}, {"now", TIMESTAMPTZOID}}
};

/* Run a statement of the resource's guard that changes its one row. */
static void
attempt_change(HcCall *call, HcArgs *args, const char *resource)
{
	if (hc_run(call, args, SPI_OK_UPDATE) != 1)
		elog(ERROR, "attempts of resource \"%s\" changed under their lock", resource);
}

/* Read the guard from the last statement's single row. */
static void
attempt_read(HcCall *call, const char *resource, Attempt *a)
{
	bool		isnull;
	Datum		d;

	a->resource = pstrdup(resource);
	a->status = hc_text(call, 0, "status");
	a->attempts = hc_int32(0, "attempts");
	a->marker = hc_text(call, 0, "last_marker");
	a->external_ref = hc_text(call, 0, "external_ref");
	d = hc_datum(0, "last_attempt_at", &isnull);
	a->has_attempt = !isnull;
	a->last_attempt_at = isnull ? 0 : DatumGetTimestampTz(d);
	a->last_owner = hc_text(call, 0, "last_owner");
	d = hc_datum(0, "last_token", &isnull);
	a->last_token = isnull ? 0 : DatumGetInt64(d);
}

/* Make sure the resource has its guard row, then lock it. */
static void
attempt_lock(HcCall *call, const char *resource, Attempt *a)
{
	HcArgs		args;

	hc_args(&args, &add_attempts);
	hc_bind_text(&args, "resource", resource);
	if (hc_run(call, &args, SPI_OK_INSERT_RETURNING) == 1)
	{
		attempt_read(call, resource, a);
		return;
	}
	hc_args(&args, &lock_attempts);
	hc_bind_text(&args, "resource", resource);
	if (hc_run(call, &args, SPI_OK_SELECT) != 1)
		elog(ERROR, "attempts of resource \"%s\" vanished", resource);
	attempt_read(call, resource, a);
}

/* The hc_attempt row a function returns, with the outcome as its status. */
static Datum
attempt_result(FunctionCallInfo fcinfo, const Attempt *a, const char *outcome)
{
	Datum		values[6];
	bool		nulls[6] = {false};

	values[0] = CStringGetTextDatum(a->resource);
	values[1] = CStringGetTextDatum(outcome);
	values[2] = Int32GetDatum(a->attempts);
	values[3] = hc_result_text(a->marker, &nulls[3]);
	values[4] = hc_result_text(a->external_ref, &nulls[4]);
	nulls[5] = !a->has_attempt;
	values[5] = TimestampTzGetDatum(a->last_attempt_at);
	return hc_result_tuple(fcinfo, values, nulls);
}

/*
 * A ledger row for the guard of a resource, in the resource's order (its
 * lease row, already locked, gives the seq).
 */
static void
attempt_ledger(HcCall *call, const char *resource, const char *event, const char *detail)
{
	HcLedgerEntry e = {0};

	if (!hc_lease_next_seq(call, resource, &e.seq))
		elog(ERROR, "resource \"%s\" has no lease row", resource);
	e.kind = "resource";
	e.entity_id = resource;
	e.event = event;
	e.source = "call";
	e.detail = detail;
	hc_ledger_append(call, &e);
}

/* The detail every guard row of a lease holder starts with. */
static void
attempt_detail_holder(StringInfo detail, const HcLeaseHolder *holder)
{
	hc_detail_init(detail);
	hc_detail_text(detail, "owner", holder->owner);
	hc_detail_int(detail, "token", holder->token);
}

/*
 * Is the begin the same request as the last attempt's: the same holder
 * (owner and token) presenting the request key that attempt was made with?
 * A name or a token alone proves nothing: two deliveries of one webhook
 * can share them, and a caller whose answer was lost never saw the marker.
 */
static bool
attempt_same_request(HcCall *call, const Attempt *a, const HcLeaseHolder *holder,
					 const char *request_key)
{
	HcArgs		args;

	if (request_key == NULL || a->last_owner == NULL ||
		strcmp(a->last_owner, holder->owner) != 0 || a->last_token != holder->token)
		return false;
	hc_args(&args, &same_request_key);
	hc_bind_text(&args, "resource", a->resource);
	hc_bind_text(&args, "request_key", request_key);
	return hc_run(call, &args, SPI_OK_SELECT) == 1;
}

/*
 * hc_attempt_begin(resource, owner, token, cooldown, max_attempts,
 * request_key): may the lease holder make the external call now?  COMPLETED
 * (never again), MANUAL_REVIEW (the cap was reached), COOLDOWN (the last
 * attempt is too recent), or PROCEED with a new permanent marker.  Within
 * the cooldown, the same holder presenting the request key of the last
 * attempt gets that attempt back unchanged (its answer was lost); nothing is
 * written.  A 0.2.0 database's function has no request_key: COOLDOWN.
 */
Datum
hc_attempt_begin(PG_FUNCTION_ARGS)
{
	HcLeaseHolder holder;
	int64		cooldown;
	int32		max_attempts;
	char	   *request_key = NULL;
	HcCall		call;
	Attempt		a;
	const char *outcome;
	StringInfoData detail;
	HcArgs		args;
	Datum		result;

	hc_lease_holder_args(fcinfo, &holder);
	cooldown = hc_arg_cooldown(fcinfo, 3, "cooldown");
	max_attempts = hc_arg_int(fcinfo, 4, "max_attempts");
	if (max_attempts < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_attempts must be at least 1")));
	if (PG_NARGS() > 5 && !PG_ARGISNULL(5))
		request_key = hc_arg_key(fcinfo, 5, "request_key");
	if (hc_lease_begin(&call, fcinfo, "hc_attempt_begin", holder.resource, false, &result))
		return result;
	hc_lease_hold(&call, &holder);
	attempt_lock(&call, holder.resource, &a);

	if (strcmp(a.status, "COMPLETED") == 0)
		outcome = "COMPLETED";
	else if (strcmp(a.status, "MANUAL_REVIEW") == 0)
		outcome = "MANUAL_REVIEW";
	else if (a.attempts > 0 && call.now - a.last_attempt_at < cooldown &&
			 attempt_same_request(&call, &a, &holder, request_key))
	{
		/*
		 * Within the cooldown, the request that made the last attempt asks
		 * again because its answer was lost (a cancel, a timeout, a
		 * connection dropped after the commit): the same attempt, marker and
		 * all, also when it was the last one the cap allows.
		 */
		outcome = "PROCEED";
	}
	else if (a.attempts >= max_attempts)
	{
		/* The cap is reached: nothing more to wait for, a human decides. */
		hc_args(&args, &await_review);
		hc_bind_text(&args, "resource", holder.resource);
		hc_bind(&args, "cooldown", PG_GETARG_DATUM(3));
		hc_bind(&args, "max_attempts", Int32GetDatum(max_attempts));
		attempt_change(&call, &args, holder.resource);
		attempt_detail_holder(&detail, &holder);
		hc_detail_int(&detail, "attempts", a.attempts);
		hc_detail_int(&detail, "max_attempts", max_attempts);
		attempt_ledger(&call, holder.resource, "review", hc_detail_done(&detail));
		outcome = "MANUAL_REVIEW";
	}
	else if (a.attempts > 0 && call.now - a.last_attempt_at < cooldown)
		outcome = "COOLDOWN";
	else
	{
		bool		keyed = hc_sql_at_least("0.3.0");

		a.attempts++;
		a.marker = psprintf("ATTEMPTED-%s-r%d-t" INT64_FORMAT, holder.owner, a.attempts,
							hc_unix_ms(call.now));
		a.last_attempt_at = call.now;
		a.has_attempt = true;
		hc_args(&args, keyed ? &record_attempt : &record_attempt_0_2);
		hc_bind_text(&args, "resource", holder.resource);
		hc_bind_text(&args, "marker", a.marker);
		hc_bind_text(&args, "owner", holder.owner);
		hc_bind(&args, "token", Int64GetDatum(holder.token));
		hc_bind(&args, "cooldown", PG_GETARG_DATUM(3));
		hc_bind(&args, "max_attempts", Int32GetDatum(max_attempts));
		if (keyed && request_key != NULL)
			hc_bind_text(&args, "request_key", request_key);
		else if (keyed)
			hc_bind_null(&args, "request_key");
		attempt_detail_holder(&detail, &holder);
		hc_detail_int(&detail, "attempt", a.attempts);
		hc_detail_text(&detail, "marker", a.marker);
		hc_bind_text(&args, "detail", hc_detail_done(&detail));
		if (hc_run(&call, &args, SPI_OK_INSERT_RETURNING) != 1)
			elog(ERROR, "attempts of resource \"%s\" changed under their lock",
				 holder.resource);
		outcome = "PROCEED";
	}
	hc_call_end(&call);
	PG_RETURN_DATUM(attempt_result(fcinfo, &a, outcome));
}

/* RS004: the resource completed with another external_ref. */
static void
attempt_completed_otherwise(const Attempt *a, const char *external_ref)
{
	ereport(ERROR,
			(errcode(ERRCODE_HC_RESERVATION_NOT_ACTIVE),
			 errmsg("resource \"%s\" is already completed", a->resource),
			 errdetail("It completed with external_ref \"%s\", not \"%s\".",
					   a->external_ref, external_ref),
			 errhint("Check the external system: one of the two references is a duplicate.")));
}

/*
 * hc_attempt_complete(resource, owner, token, external_ref): the external
 * call succeeded; the resource is COMPLETED for good.  Completing again with
 * the same external_ref returns the row (a replay needs no lease); another
 * external_ref is RS004.
 */
Datum
hc_attempt_complete(PG_FUNCTION_ARGS)
{
	HcLeaseHolder holder;
	char	   *external_ref;
	HcCall		call;
	Attempt		a;
	HcArgs		args;
	StringInfoData detail;
	Datum		result;

	hc_lease_holder_args(fcinfo, &holder);
	external_ref = hc_arg_key(fcinfo, 3, "external_ref");
	if (hc_lease_begin(&call, fcinfo, "hc_attempt_complete", holder.resource, false, &result))
		return result;

	/* A replay: the outcome is already recorded, exactly so. */
	hc_args(&args, &peek_attempts);
	hc_bind_text(&args, "resource", holder.resource);
	if (hc_run(&call, &args, SPI_OK_SELECT) == 1)
	{
		attempt_read(&call, holder.resource, &a);
		if (strcmp(a.status, "COMPLETED") == 0 && strcmp(a.external_ref, external_ref) == 0)
		{
			hc_call_end(&call);
			PG_RETURN_DATUM(attempt_result(fcinfo, &a, "COMPLETED"));
		}
	}

	hc_lease_hold(&call, &holder);
	attempt_lock(&call, holder.resource, &a);
	if (strcmp(a.status, "COMPLETED") == 0)
	{
		if (strcmp(a.external_ref, external_ref) != 0)
			attempt_completed_otherwise(&a, external_ref);
	}
	else
	{
		hc_args(&args, &complete_attempts);
		hc_bind_text(&args, "resource", holder.resource);
		hc_bind_text(&args, "external_ref", external_ref);
		attempt_change(&call, &args, holder.resource);
		a.external_ref = external_ref;
		attempt_detail_holder(&detail, &holder);
		hc_detail_text(&detail, "external_ref", external_ref);
		hc_detail_int(&detail, "attempts", a.attempts);
		attempt_ledger(&call, holder.resource, "complete", hc_detail_done(&detail));
	}
	hc_call_end(&call);
	PG_RETURN_DATUM(attempt_result(fcinfo, &a, "COMPLETED"));
}

/*
 * hc_attempt_reset(resource, note): an operator has checked the external
 * system; clear MANUAL_REVIEW and the cooldown and count attempts from zero
 * again.  The markers stay in the ledger.  A COMPLETED resource is RS004: a
 * reset would allow a second external call.
 */
Datum
hc_attempt_reset(PG_FUNCTION_ARGS)
{
	char	   *resource = hc_arg_id(fcinfo, 0, "resource");
	char	   *note = hc_arg_note(fcinfo, 1, "note");
	HcCall		call;
	Attempt		a;
	HcArgs		args;
	StringInfoData detail;
	Datum		result;

	if (note[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("note must not be empty"),
				 errhint("Say what the check of the external system found.")));
	if (hc_lease_begin(&call, fcinfo, "hc_attempt_reset", resource, false, &result))
		return result;

	hc_args(&args, &lock_attempts);
	hc_bind_text(&args, "resource", resource);
	if (!hc_lease_lock(&call, resource) || hc_run(&call, &args, SPI_OK_SELECT) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_HC_NOT_FOUND),
				 errmsg("resource \"%s\" has no attempts", resource),
				 errdetail("There is no row for resource \"%s\" in hc_attempts.", resource),
				 errhint("Only a resource that hc_attempt_begin() has guarded can be reset.")));
	attempt_read(&call, resource, &a);
	if (strcmp(a.status, "COMPLETED") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_HC_RESERVATION_NOT_ACTIVE),
				 errmsg("resource \"%s\" is already completed", resource),
				 errdetail("It completed with external_ref \"%s\"; a reset would allow a second external call.",
						   a.external_ref),
				 errhint("Nothing to reset: the outcome is recorded.")));

	hc_args(&args, &reset_attempts);
	hc_bind_text(&args, "resource", resource);
	hc_bind_text(&args, "note", note);
	attempt_change(&call, &args, resource);
	hc_detail_init(&detail);
	hc_detail_text(&detail, "note", note);
	hc_detail_text(&detail, "status", a.status);
	hc_detail_int(&detail, "attempts", a.attempts);
	attempt_ledger(&call, resource, "reset", hc_detail_done(&detail));
	a.attempts = 0;
	hc_call_end(&call);
	PG_RETURN_DATUM(attempt_result(fcinfo, &a, "PROCEED"));
}
