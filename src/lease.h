/*
 * lease.h
 *		What the attempt guard (attempt.c) shares with the leases (lease.c).
 */
#ifndef HOLDCOMMIT_LEASE_H
#define HOLDCOMMIT_LEASE_H

#include "fmgr.h"
#include "lib/stringinfo.h"

#include "call.h"

extern void hc_lease_refuse_in_transaction(const char *function);
extern int64 hc_arg_token(FunctionCallInfo fcinfo, int argno, const char *name);
extern void hc_lease_hold(HcCall *call, const char *resource, const char *owner, int64 token);
extern bool hc_lease_lock(const char *resource);
extern bool hc_lease_next_seq(const char *resource, int64 *seq);

/* The ledger detail of a lease or attempt row: a small JSON object. */
extern void hc_detail_init(StringInfo buf);
extern void hc_detail_text(StringInfo buf, const char *key, const char *value);
extern void hc_detail_int(StringInfo buf, const char *key, int64 value);
extern char *hc_detail_done(StringInfo buf);

#endif							/* HOLDCOMMIT_LEASE_H */
