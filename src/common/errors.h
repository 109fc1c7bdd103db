/*
 * errors.h
 *		The SQLSTATEs holdcommit raises for machine-readable outcomes.
 *
 * Class RS lies in the range the SQL standard leaves to implementations.
 * Applications map these to HTTP statuses (see README.md).
 */
#ifndef HOLDCOMMIT_ERRORS_H
#define HOLDCOMMIT_ERRORS_H

#include "datatype/timestamp.h"
#include "utils/elog.h"

#define ERRCODE_HC_ASSET_UNAVAILABLE		MAKE_SQLSTATE('R','S','0','0','1')	/* 409 */
#define ERRCODE_HC_INSUFFICIENT_STOCK		MAKE_SQLSTATE('R','S','0','0','2')	/* 409 */
#define ERRCODE_HC_RESERVATION_EXPIRED		MAKE_SQLSTATE('R','S','0','0','3')	/* 410 */
#define ERRCODE_HC_RESERVATION_NOT_ACTIVE	MAKE_SQLSTATE('R','S','0','0','4')	/* 409 */
#define ERRCODE_HC_IDEMPOTENCY_KEY_REUSED	MAKE_SQLSTATE('R','S','0','0','5')	/* 422 */
#define ERRCODE_HC_NOT_FOUND				MAKE_SQLSTATE('R','S','0','0','6')	/* 404 */
#define ERRCODE_HC_LOCK_NOT_HELD			MAKE_SQLSTATE('R','S','0','0','7')	/* 409 */

/* Keep RS001 and RS002 out of the server log (the emit_log_hook's body). */
extern void hc_filter_log(ErrorData *edata);

/* The refusals every kind of reservation shares: RS006, RS004, RS003. */
extern void hc_reservation_not_found(const char *id, const char *kind, const char *hint);
extern void hc_reservation_not_active(const char *id, const char *scope, const char *status,
									  const char *hint);
extern void hc_reservation_expired(const char *id, const char *scope, TimestampTz expires_at,
								   const char *hint);

#endif							/* HOLDCOMMIT_ERRORS_H */
