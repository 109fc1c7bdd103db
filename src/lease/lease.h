/*
 * lease.h
 *		What the attempt guard (attempt.c) and the fenced writes (fence.c)
 *		share with the leases (lease.c, session.c).
 */
#ifndef HOLDCOMMIT_LEASE_H
#define HOLDCOMMIT_LEASE_H

#include "core/call.h"

/*
 * The holder of a lease as a call names it: arguments 0-2 of every call made
 * under a lease (heartbeat, release, the attempt guard).
 */
typedef struct HcLeaseHolder
{
	char	   *resource;
	char	   *owner;
	int64		token;
} HcLeaseHolder;

extern void hc_lease_holder_args(FunctionCallInfo fcinfo, HcLeaseHolder *holder);
extern bool hc_lease_begin(HcCall *call, FunctionCallInfo fcinfo, const char *function,
						   const char *resource, bool session, Datum *result);
extern void hc_lease_hold(HcCall *call, const HcLeaseHolder *holder);
extern void hc_lease_fence(HcCall *call, const HcLeaseHolder *holder);
extern bool hc_lease_lock(HcCall *call, const char *resource);
extern bool hc_lease_next_seq(HcCall *call, const char *resource, int64 *seq);

/* Leases bound to their session (session.c). */
extern bool hc_lease_bound_session(HcCall *call, const char *resource, int32 *pid,
								   TimestampTz *started);
extern bool hc_lease_session_alive(const char *resource, int32 pid, TimestampTz started);
extern bool hc_lease_session_take(FunctionCallInfo fcinfo, const char *function,
								  const char *resource);
extern void hc_lease_session_let_go(const char *resource);

#endif							/* HOLDCOMMIT_LEASE_H */
