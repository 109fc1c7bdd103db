/*
 * placement.h
 *		Where a call's rows live: the seam between the core and the domains,
 *		which ask, and the scale-out layer, which answers (placement.c).
 *
 * In the way of TimescaleDB's cross_module_fn.h, the core and the domains
 * reach deployment only through hc_placement, a table of functions that
 * scaleout/register.c fills in at _PG_init (src/scaleout/README.md).  Until
 * then, and on a build without scale-out, it is the single node's table,
 * whose every answer is "one node, here".  The domain-facing names below
 * call through it.
 *
 * Invariants:
 *   1. hc_placement is never NULL, and it is set in _PG_init only.
 *   2. call->scope is NULL unless the table set it (route, or a caller
 *      iterating over hc_placement_local_scopes): then the call's statements
 *      run against that scope's tables (statement.c asks scope_sql and
 *      scope_plan_slot), and :key_scope is bound to scope_key.  On a single
 *      node it stays NULL, and per call only distributed() and route() run,
 *      each an indirect call that answers false.
 *   3. A scope is opaque outside scaleout/, and lives in the call's memory.
 */
#ifndef HOLDCOMMIT_PLACEMENT_H
#define HOLDCOMMIT_PLACEMENT_H

#include "fmgr.h"

#include "core/call.h"
#include "core/statement.h"

/* The tables of one routing id on this node (on Citus: its shards). */
typedef struct HcPlacementScope HcPlacementScope;

/*
 * A domain's refusal of an unknown reservation: not_found(NULL,
 * reservation_id) raises the domain's RS006.
 */
typedef void (*HcNotFound) (const char *routing_id, const char *reservation_id);

typedef struct HcPlacement
{
	/* Are the extension's tables spread over several nodes? */
	bool		(*distributed) (HcCall *call);
	/*
	 * Is each pool's seats' every row on one node (a single node; on Citus,
	 * the tables distributed by scope_id, not by 0.3.0's asset id)?
	 */
	bool		(*seats_together) (HcCall *call);

	/*
	 * Route a call by its routing id: false to run it here (with
	 * call->scope set when the rows are in a scope); true with the result
	 * of the call sent to the node of its rows.
	 */
	bool		(*route) (HcCall *call, FunctionCallInfo fcinfo, const char *routing_id,
						  Datum *result, bool *isnull);
	/* The routing id of a reservation, looked up by its id alone; NULL if none. */
	char	   *(*route_lookup) (HcCall *call, const char *table, const char *column,
								 const char *reservation_id);
	/* The form of this call that takes routing_id first, run and sent on. */
	Datum		(*route_prefixed) (HcCall *call, FunctionCallInfo fcinfo, const char *routing_id);
	/*
	 * The one routing id of the assets ids[0..n-1] (an error if they have
	 * several); NULL with *unknown set to one that has none.
	 */
	char	   *(*assets_scope) (HcCall *call, char **ids, int n, const char **unknown);
	/* The same, sent whole to the node of routing_id's rows, as a write there. */
	Datum		(*send_prefixed) (HcCall *call, FunctionCallInfo fcinfo, const char *routing_id);

	/* The node that sends sweeps and checks to the others (Citus' coordinator). */
	bool		(*coordinator) (HcCall *call);
	/* This node's scopes, *scopes[0..n-1], in the call's memory. */
	int			(*local_scopes) (HcCall *call, HcPlacementScope ***scopes);
	/* Lock a scope for writes: false if it has left this node. */
	bool		(*lock_scope) (HcCall *call, HcPlacementScope *scope);

	/* The scope's shard of relation name: table, or an index of table. */
	char	   *(*scope_relation) (HcPlacementScope *scope, const char *table, const char *name);
	/* The text of a statement (SPI's, with $n) over the scope's tables. */
	char	   *(*scope_sql) (HcPlacementScope *scope, const char *sql);
	/* Where the plan of stmt over the scope's tables is kept. */
	SPIPlanPtr *(*scope_plan_slot) (HcPlacementScope *scope, HcStatement *stmt);
	/* The routing id whose keys the scope's statements see (:key_scope). */
	const char *(*scope_key) (HcPlacementScope *scope);

	/*
	 * Is PREPARE TRANSACTION gid the deployment's own two-phase commit,
	 * which it finishes itself (Citus' recovery)?
	 */
	bool		(*own_prepare) (const char *gid);
} HcPlacement;

extern const HcPlacement *hc_placement;

extern void hc_placement_register(const HcPlacement *placement);

/* The domain-facing questions. */
static inline bool
hc_distributed(HcCall *call)
{
	return hc_placement->distributed(call);
}

static inline bool
hc_seats_together(HcCall *call)
{
	return hc_placement->seats_together(call);
}

static inline bool
hc_route(HcCall *call, FunctionCallInfo fcinfo, const char *routing_id, Datum *result,
		 bool *isnull)
{
	return hc_placement->route(call, fcinfo, routing_id, result, isnull);
}

static inline char *
hc_route_lookup(HcCall *call, const char *table, const char *column, const char *reservation_id)
{
	return hc_placement->route_lookup(call, table, column, reservation_id);
}

static inline Datum
hc_route_prefixed(HcCall *call, FunctionCallInfo fcinfo, const char *routing_id)
{
	return hc_placement->route_prefixed(call, fcinfo, routing_id);
}

static inline char *
hc_assets_scope(HcCall *call, char **ids, int n, const char **unknown)
{
	return hc_placement->assets_scope(call, ids, n, unknown);
}

static inline Datum
hc_send_prefixed(HcCall *call, FunctionCallInfo fcinfo, const char *routing_id)
{
	return hc_placement->send_prefixed(call, fcinfo, routing_id);
}

static inline bool
hc_placement_coordinator(HcCall *call)
{
	return hc_placement->coordinator(call);
}

static inline int
hc_placement_local_scopes(HcCall *call, HcPlacementScope ***scopes)
{
	return hc_placement->local_scopes(call, scopes);
}

static inline bool
hc_placement_lock_scope(HcCall *call, HcPlacementScope *scope)
{
	return hc_placement->lock_scope(call, scope);
}

static inline bool
hc_placement_own_prepare(const char *gid)
{
	return hc_placement->own_prepare(gid);
}

/*
 * Route a call on a reservation (hc_commit, hc_finalize, ...), given its
 * routing id or not (NULL): true with the result of the call sent to the
 * node of its rows.  A call by reservation id alone on several nodes finds
 * the routing id (column of table, the reservation's), then calls the form
 * that takes it; not_found(NULL, reservation_id) if there is no such
 * reservation.
 */
extern bool hc_route_reservation(HcCall *call, FunctionCallInfo fcinfo, const char *routing_id,
								 const char *table, const char *column,
								 const char *reservation_id, HcNotFound not_found,
								 Datum *result);
extern void hc_require_single_node(HcCall *call, const char *what);

/*
 * In a SQL function, after hc_call_begin: when routing_id's rows are on
 * another node, send the call there and return its result.
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
 * The two SQL functions of a call on a reservation, both run by
 * body(fcinfo, first), first being the position of reservation_id:
 * name(reservation_id, ...), and prefixed_name(routing_id, reservation_id,
 * ...), the form hc_route_reservation sends a call by reservation id alone
 * on as.  Each must be declared with PG_FUNCTION_INFO_V1.
 */
#define HC_RESERVATION_FUNCTIONS(name, prefixed_name, body) \
	Datum \
	name(PG_FUNCTION_ARGS) \
	{ \
		PG_RETURN_DATUM(body(fcinfo, 0)); \
	} \
	\
	Datum \
	prefixed_name(PG_FUNCTION_ARGS) \
	{ \
		PG_RETURN_DATUM(body(fcinfo, 1)); \
	}

#endif							/* HOLDCOMMIT_PLACEMENT_H */
