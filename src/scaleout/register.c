/*
 * register.c
 *		What the scale-out layer (Citus) fills in for the core and the
 *		domains, at _PG_init: they reach it only through these tables
 *		(core/placement.h; README.md).
 */
#include "postgres.h"

#include "core/placement.h"
#include "scaleout/null_routing.h"
#include "scaleout/order_steps.h"
#include "scaleout/register.h"
#include "scaleout/route.h"
#include "scaleout/shard_plans.h"

static const HcPlacement citus_placement = {
	.distributed = hc_citus_distributed,
	.seats_together = hc_citus_seats_together,
	.route = hc_citus_route,
	.route_lookup = hc_citus_route_lookup,
	.route_prefixed = hc_citus_route_prefixed,
	.assets_scope = hc_citus_assets_scope,
	.send_prefixed = hc_citus_send_prefixed,
	.coordinator = hc_citus_coordinator,
	.local_scopes = hc_citus_local_scopes,
	.lock_scope = hc_citus_lock_scope,
	.scope_relation = hc_shard_relation,
	.scope_sql = hc_shard_sql,
	.scope_plan_slot = hc_shard_plan_slot,
	.scope_key = hc_shard_key_scope,
	.own_prepare = hc_citus_own_prepare,
};

void
hc_scaleout_register(void)
{
	hc_placement_register(&citus_placement);
	hc_order_steps_register();
	hc_null_routing_register();
}
