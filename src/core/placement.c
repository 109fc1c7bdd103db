/*
 * placement.c
 *		The placement table (placement.h) and the single node's answers:
 *		every call runs here, against the extension's own tables.
 *
 * The scale-out layer replaces the table at _PG_init (scaleout/register.c);
 * the entries a single node never reaches (every one but distributed and
 * route, which answer false) are internal errors here.  What the domains
 * ask that the table answers through its other entries is composed here.
 */
#include "postgres.h"

#include "core/placement.h"

static bool
single_node_distributed(HcCall *call)
{
	return false;
}

static bool
single_node_seats_together(HcCall *call)
{
	return true;
}

static bool
single_node_route(HcCall *call, FunctionCallInfo fcinfo, const char *routing_id, Datum *result,
				  bool *isnull)
{
	return false;
}

/* An entry that only a distributed deployment reaches. */
static void
single_node_never(const char *entry)
{
	elog(ERROR, "holdcommit placement: %s on a single node", entry);
}

static char *
single_node_route_lookup(HcCall *call, const char *table, const char *column,
						 const char *reservation_id)
{
	single_node_never("route_lookup");
	return NULL;
}

static Datum
single_node_route_prefixed(HcCall *call, FunctionCallInfo fcinfo, const char *routing_id)
{
	single_node_never("route_prefixed");
	return (Datum) 0;
}

static char *
single_node_assets_scope(HcCall *call, char **ids, int n, const char **unknown)
{
	single_node_never("assets_scope");
	return NULL;
}

static Datum
single_node_send_prefixed(HcCall *call, FunctionCallInfo fcinfo, const char *routing_id)
{
	single_node_never("send_prefixed");
	return (Datum) 0;
}

static bool
single_node_coordinator(HcCall *call)
{
	single_node_never("coordinator");
	return false;
}

static int
single_node_local_scopes(HcCall *call, HcPlacementScope ***scopes)
{
	single_node_never("local_scopes");
	return 0;
}

static bool
single_node_lock_scope(HcCall *call, HcPlacementScope *scope)
{
	single_node_never("lock_scope");
	return false;
}

static char *
single_node_scope_relation(HcPlacementScope *scope, const char *table, const char *name)
{
	single_node_never("scope_relation");
	return NULL;
}

static char *
single_node_scope_sql(HcPlacementScope *scope, const char *sql)
{
	single_node_never("scope_sql");
	return NULL;
}

static SPIPlanPtr *
single_node_scope_plan_slot(HcPlacementScope *scope, HcStatement *stmt)
{
	single_node_never("scope_plan_slot");
	return NULL;
}

static const char *
single_node_scope_key(HcPlacementScope *scope)
{
	single_node_never("scope_key");
	return NULL;
}

/* A single node prepares a transaction only when someone asks it to. */
static bool
single_node_own_prepare(const char *gid)
{
	return false;
}

static const HcPlacement single_node = {
	.distributed = single_node_distributed,
	.seats_together = single_node_seats_together,
	.route = single_node_route,
	.route_lookup = single_node_route_lookup,
	.route_prefixed = single_node_route_prefixed,
	.assets_scope = single_node_assets_scope,
	.send_prefixed = single_node_send_prefixed,
	.coordinator = single_node_coordinator,
	.local_scopes = single_node_local_scopes,
	.lock_scope = single_node_lock_scope,
	.scope_relation = single_node_scope_relation,
	.scope_sql = single_node_scope_sql,
	.scope_plan_slot = single_node_scope_plan_slot,
	.scope_key = single_node_scope_key,
	.own_prepare = single_node_own_prepare,
};

const HcPlacement *hc_placement = &single_node;

/* At _PG_init: the scale-out layer's table replaces the single node's. */
void
hc_placement_register(const HcPlacement *placement)
{
	hc_placement = placement;
}

/* Route a call on a reservation (placement.h). */
bool
hc_route_reservation(HcCall *call, FunctionCallInfo fcinfo, const char *routing_id,
					 const char *table, const char *column, const char *reservation_id,
					 HcNotFound not_found, Datum *result)
{
	char	   *found;
	bool		isnull;

	if (routing_id != NULL)
		return hc_route(call, fcinfo, routing_id, result, &isnull);
	if (!hc_distributed(call))
		return false;
	found = hc_route_lookup(call, table, column, reservation_id);
	if (found == NULL)
		not_found(NULL, reservation_id);
	*result = hc_route_prefixed(call, fcinfo, found);
	return true;
}

/* Refuse, on several nodes, what needs every row on this node. */
void
hc_require_single_node(HcCall *call, const char *what)
{
	if (hc_distributed(call))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s is not available on Citus", what),
				 errhint("See doc/scale-out.md for the calls that take the routing id.")));
}
