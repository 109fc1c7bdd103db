/*
 * validate.c
 *		Argument checks, run before anything else so that bad input never
 *		changes state.  Each error names the argument.
 */
#include "postgres.h"

#include "common/int.h"
#include "datatype/timestamp.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "common/settings.h"
#include "common/validate.h"

void
hc_arg_not_null(FunctionCallInfo fcinfo, int argno, const char *name)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", name)));
}

/* A text of 1 to max_bytes bytes. */
static char *
hc_arg_bounded_text(FunctionCallInfo fcinfo, int argno, const char *name, int max_bytes)
{
	text	   *t;
	int			len;

	hc_arg_not_null(fcinfo, argno, name);
	t = PG_GETARG_TEXT_PP(argno);
	len = VARSIZE_ANY_EXHDR(t);
	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be empty", name)));
	if (len > max_bytes)
		ereport(ERROR,
				(errcode(ERRCODE_STRING_DATA_RIGHT_TRUNCATION),
				 errmsg("%s is too long", name),
				 errdetail("It is %d bytes long; the limit is %d bytes.", len, max_bytes)));
	return text_to_cstring(t);
}

/* An asset, product, buyer, reservation, resource or owner id. */
char *
hc_arg_id(FunctionCallInfo fcinfo, int argno, const char *name)
{
	return hc_arg_bounded_text(fcinfo, argno, name, HC_MAX_ID_BYTES);
}

/* An idempotency key. */
char *
hc_arg_key(FunctionCallInfo fcinfo, int argno, const char *name)
{
	return hc_arg_bounded_text(fcinfo, argno, name, HC_MAX_KEY_BYTES);
}

/* Free text (a reason, a note): any length, but not null. */
char *
hc_arg_text(FunctionCallInfo fcinfo, int argno, const char *name)
{
	hc_arg_not_null(fcinfo, argno, name);
	return text_to_cstring(PG_GETARG_TEXT_PP(argno));
}

/*
 * An operator's note (empty is the caller's to refuse): it travels to the
 * worker with the call, so it is bounded.
 */
char *
hc_arg_note(FunctionCallInfo fcinfo, int argno, const char *name)
{
	char	   *note = hc_arg_text(fcinfo, argno, name);

	if (strlen(note) > HC_MAX_NOTE_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_STRING_DATA_RIGHT_TRUNCATION),
				 errmsg("%s is too long", name),
				 errdetail("It is %d bytes long; the limit is %d bytes.", (int) strlen(note),
						   HC_MAX_NOTE_BYTES)));
	return note;
}

/*
 * An interval argument as microseconds, a month counting as 30 days, as
 * interval comparison does; past the int64 range, the largest value of its
 * sign (the days' sign, or with none the time's).
 */
static int64
arg_usecs(FunctionCallInfo fcinfo, int argno, const char *name)
{
	const Interval *span;
	int64		days;
	int64		usecs;

	hc_arg_not_null(fcinfo, argno, name);
	span = PG_GETARG_INTERVAL_P(argno);
	days = (int64) span->month * DAYS_PER_MONTH + span->day;
	if (pg_mul_s64_overflow(days, USECS_PER_DAY, &usecs) ||
		pg_add_s64_overflow(usecs, span->time, &usecs))
		usecs = (days != 0 ? days : span->time) < 0 ? PG_INT64_MIN : PG_INT64_MAX;
	return usecs;
}

/* A ttl: > 0 and <= holdcommit.max_ttl, as microseconds. */
int64
hc_arg_ttl(FunctionCallInfo fcinfo, int argno, const char *name)
{
	int64		usecs = arg_usecs(fcinfo, argno, name);

	if (usecs <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be positive", name)));
	if (usecs > (int64) hc_max_ttl * USECS_PER_SEC)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not exceed holdcommit.max_ttl", name),
				 errdetail("holdcommit.max_ttl is %d seconds.", hc_max_ttl),
				 errhint("Ask for a shorter %s, or extend the hold later.", name)));
	return usecs;
}

/* A cooldown: >= 0, as microseconds. */
int64
hc_arg_cooldown(FunctionCallInfo fcinfo, int argno, const char *name)
{
	int64		usecs = arg_usecs(fcinfo, argno, name);

	if (usecs < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be negative", name)));
	return usecs;
}

/* A fencing token: positive. */
int64
hc_arg_token(FunctionCallInfo fcinfo, int argno, const char *name)
{
	int64		token;

	hc_arg_not_null(fcinfo, argno, name);
	token = PG_GETARG_INT64(argno);
	if (token <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be positive", name),
				 errhint("Use the token that hc_lock_acquire() returned.")));
	return token;
}

/* A boolean or an integer, not null. */
bool
hc_arg_bool(FunctionCallInfo fcinfo, int argno, const char *name)
{
	hc_arg_not_null(fcinfo, argno, name);
	return PG_GETARG_BOOL(argno);
}

int32
hc_arg_int(FunctionCallInfo fcinfo, int argno, const char *name)
{
	hc_arg_not_null(fcinfo, argno, name);
	return PG_GETARG_INT32(argno);
}
