/*
 * autonomous.h
 *		Lease and attempt calls made in a transaction of their own, in a
 *		background worker, committed before they return (autonomous.c).
 */
#ifndef HOLDCOMMIT_AUTONOMOUS_H
#define HOLDCOMMIT_AUTONOMOUS_H

#include "datatype/timestamp.h"
#include "fmgr.h"

/* Is this process a worker running a call for a caller (not the caller)? */
extern bool hc_autonomous_here(void);

/* Refuse a call on a standby or in a read-only transaction (25006). */
extern void hc_autonomous_require_writable(const char *function);

/*
 * Run the function being called in a worker and return what it returned
 * there (fcinfo->isnull too), or raise the error it raised.
 */
extern Datum hc_autonomous(FunctionCallInfo fcinfo, const char *function);

/*
 * A caller that waits (for a worker, an answer, a backoff) looks this often
 * whether its client is still there, so that a client gone does not leave
 * it waiting: FATAL "connection to client lost", as
 * client_connection_check_interval would.
 */
#define CLIENT_CHECK_MS			500
extern void hc_autonomous_check_client(void);

/* The session a call is made for: the caller's pid and start time. */
extern int32 hc_session_pid(void);
extern TimestampTz hc_session_started(void);

#endif							/* HOLDCOMMIT_AUTONOMOUS_H */
