/*
 * route.h
 *		Where a routing id's rows live: this node, or a Citus node (route.c).
 */
#ifndef HOLDCOMMIT_ROUTE_H
#define HOLDCOMMIT_ROUTE_H

#include "fmgr.h"

#include "core/call.h"

/* The extension's tables that Citus distributes by their routing id. */
#define HC_DISTRIBUTED_TABLES 8
extern const char *const hc_distributed_tables[HC_DISTRIBUTED_TABLES];

/*
 * The shard of each distributed table that holds one routing id's rows, on
 * this node: names[i] is the shard of hc_distributed_tables[i].
 */
typedef struct HcShards
{
	const char *routing_id;
	int64		anchor;			/* the shard of hc_assets */
	char	   *names[HC_DISTRIBUTED_TABLES];
} HcShards;

/*
 * In a SQL function, after hc_call_begin: on Citus, when routing_id's rows
 * are on another node, send the call there and return its result.
 */
#define HC_ROUTE(call, fcinfo, routing_id) \
	do { \
		Datum		hc_routed_; \
		bool		hc_routed_null_; \
		\
		if (hc_route((call), (fcinfo), (routing_id), &hc_routed_, &hc_routed_null_)) \
		{ \
			hc_call_end(call); \
			if (hc_routed_null_) \
				PG_RETURN_NULL(); \
			PG_RETURN_DATUM(hc_routed_); \
		} \
	} while (0)

/*
 * The same for a call on a reservation (hc_commit, hc_finalize, ...), given
 * its routing id or not (NULL): on Citus a call by reservation id alone
 * finds the routing id across every shard, then calls the form that takes
 * it; not_found(NULL, reservation_id) raises the domain's RS006 if there is
 * no such reservation.
 */
typedef void (*HcNotFound) (const char *routing_id, const char *reservation_id);

#define HC_ROUTE_RESERVATION(call, fcinfo, routing_id, table, column, reservation_id, not_found) \
	do { \
		Datum		hc_routed_; \
		\
		if (hc_route_reservation((call), (fcinfo), (routing_id), (table), (column), \
								 (reservation_id), (not_found), &hc_routed_)) \
		{ \
			hc_call_end(call); \
			PG_RETURN_DATUM(hc_routed_); \
		} \
	} while (0)

extern bool hc_distributed(HcCall *call);
extern bool hc_route_reservation(HcCall *call, FunctionCallInfo fcinfo, const char *routing_id,
								 const char *table, const char *column,
								 const char *reservation_id, HcNotFound not_found,
								 Datum *result);

extern bool hc_route(HcCall *call, FunctionCallInfo fcinfo, const char *routing_id,
					 Datum *result, bool *isnull);
extern char *hc_route_lookup(HcCall *call, const char *table, const char *column,
							 const char *reservation_id);
extern Datum hc_route_prefixed(HcCall *call, FunctionCallInfo fcinfo, const char *routing_id);
extern HcShards *hc_route_local(HcCall *call, const char *routing_id);
extern Datum hc_route_send(HcCall *call, const char *routing_id, const char *function,
						   int nargs, const Oid *types, const Datum *values, Oid rettype,
						   bool *isnull);
extern bool hc_citus_coordinator(HcCall *call);
extern int	hc_local_shard_groups(HcCall *call, HcShards **groups);
extern bool hc_lock_shard_group(HcCall *call, HcShards *group);
extern void hc_require_single_node(HcCall *call, const char *what);

#endif							/* HOLDCOMMIT_ROUTE_H */
