/*
 * lease.h
 *		What the attempt guard (attempt.c) shares with the leases (lease.c).
 */
#ifndef HOLDCOMMIT_LEASE_H
#define HOLDCOMMIT_LEASE_H

#include "core/call.h"

extern bool hc_lease_begin(HcCall *call, FunctionCallInfo fcinfo, const char *function,
						   const char *resource, bool session, Datum *result);
extern void hc_lease_hold(HcCall *call, const char *resource, const char *owner, int64 token);
extern bool hc_lease_lock(HcCall *call, const char *resource);
extern bool hc_lease_next_seq(HcCall *call, const char *resource, int64 *seq);

#endif							/* HOLDCOMMIT_LEASE_H */
