/*
 * errors.c
 *		The refusals that every kind of reservation shares, and why
 *		refusals stay out of the server log.
 *
 * RS001 (asset taken) and RS002 (sold out) are answers, not faults: a flash
 * sale produces them by the thousand per second, and logging each with its
 * detail, hint and statement would fill the log by gigabytes.  Unless
 * holdcommit.log_refusals is on, they go to the client only.
 *
 * Review on a new major: emit_log_hook and the ErrorData fields the filter
 * reads (sqlerrcode, output_to_server).
 */
#include "postgres.h"

#include "utils/elog.h"
#include "utils/timestamp.h"

#include "common/errors.h"
#include "common/settings.h"

/*
 * Keep a refusal out of the server log: the body of the emit_log_hook that
 * holdcommit.c installs in every backend that loads the library.
 */
void
hc_filter_log(ErrorData *edata)
{
	if (!hc_log_refusals &&
		(edata->sqlerrcode == ERRCODE_HC_ASSET_UNAVAILABLE ||
		 edata->sqlerrcode == ERRCODE_HC_INSUFFICIENT_STOCK))
		edata->output_to_server = false;
}

/* RS006: no reservation of this kind ("hold", "stock reservation") has the id. */
void
hc_reservation_not_found(const char *id, const char *kind, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_HC_NOT_FOUND),
			 errmsg("reservation \"%s\" does not exist", id),
			 errdetail("No %s has the id \"%s\".", kind, id),
			 errhint("%s", hint)));
}

/*
 * RS004: the reservation has ended as status.  scope says what it reserved
 * (' of asset "A"'), or is empty.
 */
void
hc_reservation_not_active(const char *id, const char *scope, const char *status,
						  const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_HC_RESERVATION_NOT_ACTIVE),
			 errmsg("reservation \"%s\" is not active", id),
			 errdetail("Reservation \"%s\"%s is %s.", id, scope, status),
			 errhint("%s", hint)));
}

/* RS003: the reservation expired at expires_at. */
void
hc_reservation_expired(const char *id, const char *scope, TimestampTz expires_at,
					   const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_HC_RESERVATION_EXPIRED),
			 errmsg("reservation \"%s\" has expired", id),
			 errdetail("Reservation \"%s\"%s expired at %s.", id, scope,
					   timestamptz_to_str(expires_at)),
			 errhint("%s", hint)));
}
