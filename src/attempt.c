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
 * Locks: the lease row (so that no takeover slips in, and to order the
 * resource's ledger rows), then the attempts row, always in that order.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "common/int.h"
#include "datatype/timestamp.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "call.h"
#include "errors.h"
#include "lease.h"
#include "ledger.h"
#include "validate.h"

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
} Attempt;

/* A resource's first attempt (or completion) starts from an empty row. */
static HcStatement add_attempts = {
	"INSERT INTO hc_attempts (resource, updated_at) VALUES ($1, $2)"
	" ON CONFLICT (resource) DO NOTHING",
	2, {TEXTOID, TIMESTAMPTZOID}
};

static HcStatement lock_attempts = {
	"SELECT status, attempts, last_marker, external_ref, last_attempt_at"
	"  FROM hc_attempts WHERE resource OPERATOR(pg_catalog.=) $1 FOR UPDATE",
	1, {TEXTOID}
};

static HcStatement peek_attempts = {
	"SELECT status, attempts, last_marker, external_ref, last_attempt_at"
	"  FROM hc_attempts WHERE resource OPERATOR(pg_catalog.=) $1",
	1, {TEXTOID}
};

static HcStatement record_attempt = {
	"UPDATE hc_attempts"
	"   SET attempts = attempts OPERATOR(pg_catalog.+) 1,"
	"       total_attempts = total_attempts OPERATOR(pg_catalog.+) 1,"
	"       last_marker = $2, last_attempt_at = $3, last_owner = $4, last_token = $5,"
	"       cooldown = $6, max_attempts = $7, updated_at = $3"
	" WHERE resource OPERATOR(pg_catalog.=) $1 AND status OPERATOR(pg_catalog.=) 'OPEN'",
	7, {TEXTOID, TEXTOID, TIMESTAMPTZOID, TEXTOID, INT8OID, INTERVALOID, INT4OID}
};

static HcStatement await_review = {
	"UPDATE hc_attempts"
	"   SET status = 'MANUAL_REVIEW', cooldown = $3, max_attempts = $4, updated_at = $2"
	" WHERE resource OPERATOR(pg_catalog.=) $1 AND status OPERATOR(pg_catalog.=) 'OPEN'",
	4, {TEXTOID, TIMESTAMPTZOID, INTERVALOID, INT4OID}
};

static HcStatement complete_attempts = {
	"UPDATE hc_attempts"
	"   SET status = 'COMPLETED', external_ref = $2, completed_at = $3, updated_at = $3"
	" WHERE resource OPERATOR(pg_catalog.=) $1 AND status OPERATOR(pg_catalog.<>) 'COMPLETED'",
	3, {TEXTOID, TEXTOID, TIMESTAMPTZOID}
};

static HcStatement reset_attempts = {
	"UPDATE hc_attempts"
	"   SET status = 'OPEN', attempts = 0, reset_at = $2, reset_note = $3, updated_at = $2"
	" WHERE resource OPERATOR(pg_catalog.=) $1 AND status OPERATOR(pg_catalog.<>) 'COMPLETED'",
	3, {TEXTOID, TIMESTAMPTZOID, TEXTOID}
};

/* A cooldown: not null, >= 0, as microseconds (a month counts as 30 days). */
static int64
attempt_arg_cooldown(FunctionCallInfo fcinfo, int argno, const char *name)
{
	Interval   *cooldown;
	int64		days;
	int64		usecs;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", name)));
	cooldown = PG_GETARG_INTERVAL_P(argno);
	days = (int64) cooldown->month * DAYS_PER_MONTH + cooldown->day;
	if (pg_mul_s64_overflow(days, USECS_PER_DAY, &usecs) ||
		pg_add_s64_overflow(usecs, cooldown->time, &usecs))
		usecs = days < 0 ? PG_INT64_MIN : PG_INT64_MAX;
	if (usecs < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be negative", name)));
	return usecs;
}

/* Read the guard from the last statement's single row. */
static void
attempt_read(HcCall *call, const char *resource, Attempt *a)
{
	bool		isnull;
	Datum		d;

	a->resource = pstrdup(resource);
	a->status = hc_text(call, 0, 1);
	a->attempts = hc_int32(0, 2);
	a->marker = hc_text(call, 0, 3);
	a->external_ref = hc_text(call, 0, 4);
	d = hc_datum(0, 5, &isnull);
	a->has_attempt = !isnull;
	a->last_attempt_at = isnull ? 0 : DatumGetTimestampTz(d);
}

/* Make sure the resource has its guard row, then lock it. */
static void
attempt_lock(HcCall *call, const char *resource, Attempt *a)
{
	Datum		values[2];

	values[0] = HC_TEXT(resource);
	values[1] = TimestampTzGetDatum(call->now);
	hc_run(&add_attempts, values, NULL, SPI_OK_INSERT);
	if (hc_run(&lock_attempts, values, NULL, SPI_OK_SELECT) != 1)
		elog(ERROR, "attempts of resource \"%s\" vanished", resource);
	attempt_read(call, resource, a);
}

/* The hc_attempt row a function returns, with the outcome as its status. */
static Datum
attempt_result(FunctionCallInfo fcinfo, const Attempt *a, const char *outcome)
{
	TupleDesc	tupdesc;
	Datum		values[6];
	bool		nulls[6] = {false};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);
	values[0] = CStringGetTextDatum(a->resource);
	values[1] = CStringGetTextDatum(outcome);
	values[2] = Int32GetDatum(a->attempts);
	nulls[3] = a->marker == NULL;
	values[3] = a->marker ? CStringGetTextDatum(a->marker) : (Datum) 0;
	nulls[4] = a->external_ref == NULL;
	values[4] = a->external_ref ? CStringGetTextDatum(a->external_ref) : (Datum) 0;
	nulls[5] = !a->has_attempt;
	values[5] = TimestampTzGetDatum(a->last_attempt_at);
	return HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls));
}

/*
 * A ledger row for the guard of a resource, in the resource's order (its
 * lease row, already locked, gives the seq).
 */
static void
attempt_ledger(HcCall *call, const char *resource, const char *event, const char *detail)
{
	HcLedgerEntry e = {0};

	if (!hc_lease_next_seq(resource, &e.seq))
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
attempt_detail_holder(StringInfo detail, const char *owner, int64 token)
{
	hc_detail_init(detail);
	hc_detail_text(detail, "owner", owner);
	hc_detail_int(detail, "token", token);
}

/*
 * hc_attempt_begin(resource, owner, token, cooldown, max_attempts): may the
 * lease holder make the external call now?  COMPLETED (never again),
 * MANUAL_REVIEW (the cap was reached), COOLDOWN (the last attempt is too
 * recent), or PROCEED with a new permanent marker.
 */
Datum
hc_attempt_begin(PG_FUNCTION_ARGS)
{
	char	   *resource = hc_arg_id(fcinfo, 0, "resource");
	char	   *owner = hc_arg_id(fcinfo, 1, "owner");
	int64		token = hc_arg_token(fcinfo, 2, "token");
	int64		cooldown = attempt_arg_cooldown(fcinfo, 3, "cooldown");
	int32		max_attempts = hc_arg_int(fcinfo, 4, "max_attempts");
	HcCall		call;
	Attempt		a;
	const char *outcome;
	StringInfoData detail;
	Datum		values[7];

	if (max_attempts < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_attempts must be at least 1")));
	hc_lease_refuse_in_transaction("hc_attempt_begin");

	hc_call_begin(&call, fcinfo, "hc_attempt_begin");
	hc_lease_hold(&call, resource, owner, token);
	attempt_lock(&call, resource, &a);

	values[0] = HC_TEXT(resource);
	if (strcmp(a.status, "COMPLETED") == 0)
		outcome = "COMPLETED";
	else if (strcmp(a.status, "MANUAL_REVIEW") == 0)
		outcome = "MANUAL_REVIEW";
	else if (a.attempts >= max_attempts)
	{
		/* The cap is reached: nothing more to wait for, a human decides. */
		values[1] = TimestampTzGetDatum(call.now);
		values[2] = PG_GETARG_DATUM(3);
		values[3] = Int32GetDatum(max_attempts);
		if (hc_run(&await_review, values, NULL, SPI_OK_UPDATE) != 1)
			elog(ERROR, "attempts of resource \"%s\" changed under their lock", resource);
		attempt_detail_holder(&detail, owner, token);
		hc_detail_int(&detail, "attempts", a.attempts);
		hc_detail_int(&detail, "max_attempts", max_attempts);
		attempt_ledger(&call, resource, "review", hc_detail_done(&detail));
		outcome = "MANUAL_REVIEW";
	}
	else if (a.attempts > 0 && call.now - a.last_attempt_at < cooldown)
		outcome = "COOLDOWN";
	else
	{
		/* unix milliseconds of this call's clock reading */
		int64		unix_ms = call.now / 1000 +
			(int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000;

		a.attempts++;
		a.marker = psprintf("ATTEMPTED-%s-r%d-t" INT64_FORMAT, owner, a.attempts, unix_ms);
		a.last_attempt_at = call.now;
		a.has_attempt = true;
		values[1] = HC_TEXT(a.marker);
		values[2] = TimestampTzGetDatum(call.now);
		values[3] = HC_TEXT(owner);
		values[4] = Int64GetDatum(token);
		values[5] = PG_GETARG_DATUM(3);
		values[6] = Int32GetDatum(max_attempts);
		if (hc_run(&record_attempt, values, NULL, SPI_OK_UPDATE) != 1)
			elog(ERROR, "attempts of resource \"%s\" changed under their lock", resource);
		attempt_detail_holder(&detail, owner, token);
		hc_detail_int(&detail, "attempt", a.attempts);
		hc_detail_text(&detail, "marker", a.marker);
		attempt_ledger(&call, resource, "attempt", hc_detail_done(&detail));
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
	char	   *resource = hc_arg_id(fcinfo, 0, "resource");
	char	   *owner = hc_arg_id(fcinfo, 1, "owner");
	int64		token = hc_arg_token(fcinfo, 2, "token");
	char	   *external_ref = hc_arg_key(fcinfo, 3, "external_ref");
	HcCall		call;
	Attempt		a;
	Datum		values[3];
	StringInfoData detail;

	hc_lease_refuse_in_transaction("hc_attempt_complete");
	hc_call_begin(&call, fcinfo, "hc_attempt_complete");

	/* A replay: the outcome is already recorded, exactly so. */
	values[0] = HC_TEXT(resource);
	if (hc_run(&peek_attempts, values, NULL, SPI_OK_SELECT) == 1)
	{
		attempt_read(&call, resource, &a);
		if (strcmp(a.status, "COMPLETED") == 0 && strcmp(a.external_ref, external_ref) == 0)
		{
			hc_call_end(&call);
			PG_RETURN_DATUM(attempt_result(fcinfo, &a, "COMPLETED"));
		}
	}

	hc_lease_hold(&call, resource, owner, token);
	attempt_lock(&call, resource, &a);
	if (strcmp(a.status, "COMPLETED") == 0)
	{
		if (strcmp(a.external_ref, external_ref) != 0)
			attempt_completed_otherwise(&a, external_ref);
	}
	else
	{
		values[1] = HC_TEXT(external_ref);
		values[2] = TimestampTzGetDatum(call.now);
		if (hc_run(&complete_attempts, values, NULL, SPI_OK_UPDATE) != 1)
			elog(ERROR, "attempts of resource \"%s\" changed under their lock", resource);
		a.external_ref = external_ref;
		attempt_detail_holder(&detail, owner, token);
		hc_detail_text(&detail, "external_ref", external_ref);
		hc_detail_int(&detail, "attempts", a.attempts);
		attempt_ledger(&call, resource, "complete", hc_detail_done(&detail));
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
	char	   *note = hc_arg_text(fcinfo, 1, "note");
	HcCall		call;
	Attempt		a;
	Datum		values[3];
	StringInfoData detail;

	if (note[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("note must not be empty"),
				 errhint("Say what the check of the external system found.")));
	hc_lease_refuse_in_transaction("hc_attempt_reset");
	hc_call_begin(&call, fcinfo, "hc_attempt_reset");

	values[0] = HC_TEXT(resource);
	if (!hc_lease_lock(resource) ||
		hc_run(&lock_attempts, values, NULL, SPI_OK_SELECT) == 0)
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

	values[1] = TimestampTzGetDatum(call.now);
	values[2] = HC_TEXT(note);
	if (hc_run(&reset_attempts, values, NULL, SPI_OK_UPDATE) != 1)
		elog(ERROR, "attempts of resource \"%s\" changed under their lock", resource);
	hc_detail_init(&detail);
	hc_detail_text(&detail, "note", note);
	hc_detail_text(&detail, "status", a.status);
	hc_detail_int(&detail, "attempts", a.attempts);
	attempt_ledger(&call, resource, "reset", hc_detail_done(&detail));
	a.attempts = 0;
	hc_call_end(&call);
	PG_RETURN_DATUM(attempt_result(fcinfo, &a, "PROCEED"));
}
