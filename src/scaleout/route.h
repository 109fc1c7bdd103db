/*
 * route.h
 *		Where a routing id's rows live on Citus: this node's shards, or
 *		another node (route.c).  The placement table's routing entries
 *		(register.c) and what the other files of scaleout/ use.
 */
#ifndef HOLDCOMMIT_ROUTE_H
#define HOLDCOMMIT_ROUTE_H

#include "fmgr.h"

#include "core/call.h"
#include "core/placement.h"
#include "scaleout/shard_plans.h"

/* The placement table's entries (placement.h says what each answers). */
extern bool hc_citus_distributed(HcCall *call);
extern bool hc_citus_seats_together(HcCall *call);
extern bool hc_citus_route(HcCall *call, FunctionCallInfo fcinfo, const char *routing_id,
						   Datum *result, bool *isnull);
extern char *hc_citus_route_lookup(HcCall *call, const char *table, const char *column,
								   const char *reservation_id);
extern bool hc_citus_own_prepare(const char *gid);
extern Datum hc_citus_route_prefixed(HcCall *call, FunctionCallInfo fcinfo,
									 const char *routing_id);
extern Datum hc_citus_send_prefixed(HcCall *call, FunctionCallInfo fcinfo,
									const char *routing_id);
extern char *hc_citus_assets_scope(HcCall *call, char **ids, int n, const char **unknown);
extern bool hc_citus_coordinator(HcCall *call);
extern int	hc_citus_local_scopes(HcCall *call, HcShards ***groups);
extern bool hc_citus_lock_scope(HcCall *call, HcShards *group);

/* A look across the shards that opens no transaction block; AtEOXact_GUC(true, level) ends it. */
extern int	hc_route_read_begin(void);

/* This node's shards of routing_id, locked, as the call's scope; NULL: elsewhere. */
extern HcShards *hc_route_local(HcCall *call, const char *routing_id);
extern Datum hc_route_send(HcCall *call, const char *routing_id, const char *function,
						   int nargs, const Oid *types, const Datum *values, Oid rettype,
						   bool *isnull);

#endif							/* HOLDCOMMIT_ROUTE_H */
