/*
 * shard_plans.h
 *		A call's scope on Citus, this node's shards of its routing id, and
 *		the statements that run against them (shard_plans.c).
 */
#ifndef HOLDCOMMIT_SHARD_PLANS_H
#define HOLDCOMMIT_SHARD_PLANS_H

#include "core/placement.h"

/*
 * The extension's tables that Citus distributes by their routing id, by the
 * names of the SQL installed (hc_distributed_tables_of: the orders' tables
 * had other names before 0.4.0, whose holds this library still serves), and
 * NULL for hc_asset_routes where the tables are distributed by 0.3.0's
 * columns (seats: by scope_id).
 */
#define HC_DISTRIBUTED_TABLES 9
extern const char *hc_distributed_tables[HC_DISTRIBUTED_TABLES];
extern void hc_distributed_tables_of(bool sql_0_4, bool seats);

/*
 * The scope of a call on Citus: the shard of each distributed table that
 * holds one routing id's rows, on this node (names[i] is the shard of
 * hc_distributed_tables[i]), or a group of colocated shards that the sweep
 * and the check go through (routing_id NULL: every key of the group).
 */
struct HcPlacementScope
{
	const char *routing_id;
	int64		anchor;			/* the shard of hc_assets */
	char	   *names[HC_DISTRIBUTED_TABLES];
};

typedef struct HcPlacementScope HcShards;

extern char *hc_shard_sql(HcShards *shards, const char *sql);
extern char *hc_shard_relation(HcShards *shards, const char *table, const char *name);
extern SPIPlanPtr *hc_shard_plan_slot(HcShards *shards, HcStatement *stmt);
extern const char *hc_shard_key_scope(HcShards *shards);
extern void hc_forget_shard_plans(void);

#endif							/* HOLDCOMMIT_SHARD_PLANS_H */
