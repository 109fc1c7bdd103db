/*
 * call.h
 *		The life of one SQL call (call.c).
 */
#ifndef HOLDCOMMIT_CALL_H
#define HOLDCOMMIT_CALL_H

#include "access/htup.h"
#include "fmgr.h"
#include "utils/timestamp.h"

/*
 * One SQL call of an hc_* function.  It reads the clock once, runs SPI as
 * the extension's owner in a security-restricted operation, resolves table
 * names in the extension's schema by OID, and remembers who called for the
 * ledger.  Everything a nested call could change lives here, not in file
 * statics.
 */
typedef struct HcCall
{
	const char *function;		/* SQL name, for the ledger */
	TimestampTz now;			/* the one clock reading of this call */
	const char *actor;			/* who the ledger names: see hc_actor() */
	MemoryContext outer;		/* where results outlive SPI_finish */
	Oid			schema;			/* the extension's schema */
	bool		point_lookups;	/* plan for point lookups (all but hc_check) */
	bool		latest;			/* read the latest committed state, whatever the isolation */
	/* where the call's rows are, if not in the extension's tables (placement.h) */
	struct HcPlacementScope *scope;
	/*
	 * The routing id of the rows the next statements write, where the scope
	 * is a group of shards (the sweep's product); hc_scope_id() on Citus.
	 */
	const char *routing_id;
	Oid			save_userid;
	int			save_sec_context;
	/* the search path, pushed before the first statement through SPI */
	bool		search_path_pushed;
	int			search_path;	/* what hc_search_path_push returned */
	int			xact_level;		/* the transaction nest level of the call */
} HcCall;

extern void hc_call_begin(HcCall *call, FunctionCallInfo fcinfo, const char *function);
extern void hc_call_begin_keyed(HcCall *call, FunctionCallInfo fcinfo, const char *function);
extern void hc_call_begin_read(HcCall *call, FunctionCallInfo fcinfo, const char *function);
extern void hc_call_begin_as(HcCall *call, Oid owner, Oid schema, const char *function,
							 const char *actor);
extern void hc_call_end(HcCall *call);
extern void hc_call_push_search_path(HcCall *call);

/*
 * Before a statement through SPI: the call's search path (core/search_path.h),
 * pushed by its first one.  A call that ends with point reads (fetch.c)
 * never pushes it.
 */
static inline void
hc_call_search_path(HcCall *call)
{
	if (!call->search_path_pushed)
		hc_call_push_search_path(call);
}

/* The pg_proc row of the function being called; ReleaseSysCache() it. */
extern HeapTuple hc_call_proc(FunctionCallInfo fcinfo);
extern const char *hc_actor(HcCall *call);

#endif							/* HOLDCOMMIT_CALL_H */
