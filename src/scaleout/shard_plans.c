/*
 * shard_plans.c
 *		The statements of a call whose rows are in this node's shards on
 *		Citus (call->scope, route.c): their text over the shards, their kept
 *		plans, their :key_scope.  statement.c reaches them through the
 *		placement table (register.c).
 *
 * Invariants:
 *   1. A statement over a scope names each distributed table by its shard
 *      in the scope (hc_shard_sql), so that it stays one plain local
 *      statement that commits in one phase.
 *   2. Its plan is kept by statement and range of shards (the shard of
 *      hc_assets names the range), never in stmt->plan, which is the
 *      extension's own tables'.  At most HC_MAX_SHARD_PLANS plans are kept
 *      (about 70 statements, 16 ranges a node for 32 shards on 2 nodes):
 *      all go when there would be more, and when Citus changes its shards
 *      (hc_forget_shard_plans, from route.c's invalidation), before the
 *      next statement.
 */
#include "postgres.h"

#include "utils/hsearch.h"

#include "scaleout/shard_plans.h"

const char *hc_distributed_tables[HC_DISTRIBUTED_TABLES] = {
	"hc_assets", "hc_reservations", "hc_ledger", "hc_stock_parts", "hc_stock_orders",
	"hc_stock_order_lines", "hc_locks", "hc_attempts", "hc_asset_routes"
};

/*
 * The orders' tables as the SQL installed names them (0.4.0 renamed them);
 * the asset ids' routing ids where the tables are distributed by scope_id.
 */
void
hc_distributed_tables_of(bool sql_0_4, bool seats)
{
	hc_distributed_tables[4] = sql_0_4 ? "hc_stock_orders" : "hc_stock_reservations";
	hc_distributed_tables[5] = sql_0_4 ? "hc_stock_order_lines" : "hc_stock_reservation_lines";
	hc_distributed_tables[8] = seats ? "hc_asset_routes" : NULL;
}

/*
 * The text SPI takes (parameters as $n), with every distributed table's name
 * outside quotes, unqualified, replaced by its shard's.
 */
char *
hc_shard_sql(HcShards *shards, const char *sql)
{
	StringInfoData buf;
	const char *p;
	char		quote = '\0';

	initStringInfo(&buf);
	for (p = sql; *p != '\0'; p++)
	{
		if (hc_sql_quoted(&quote, *p))
			appendStringInfoChar(&buf, *p);
		else if ((isalpha((unsigned char) *p) || *p == '_') &&
				 (p == sql || !(isalnum((unsigned char) p[-1]) || p[-1] == '_' ||
								p[-1] == '.' || p[-1] == '$')))
		{
			int			len = 0;
			int			i;

			while (isalnum((unsigned char) p[len]) || p[len] == '_')
				len++;
			for (i = 0; i < HC_DISTRIBUTED_TABLES; i++)
				if (hc_distributed_tables[i] != NULL &&
					strncmp(p, hc_distributed_tables[i], len) == 0 &&
					hc_distributed_tables[i][len] == '\0')
					break;
			if (i < HC_DISTRIBUTED_TABLES)
				appendStringInfoString(&buf, shards->names[i]);
			else
				appendBinaryStringInfo(&buf, p, len);
			p += len - 1;
		}
		else
			appendStringInfoChar(&buf, *p);
	}
	return buf.data;
}

/*
 * The shard's name of relation name, the table or one of its indexes: Citus
 * names each the relation's name with the shard's id (hc_assets_102008,
 * hc_assets_pool_rank_102008).
 */
char *
hc_shard_relation(HcShards *shards, const char *table, const char *name)
{
	int			i;

	for (i = 0; i < HC_DISTRIBUTED_TABLES; i++)
		if (hc_distributed_tables[i] != NULL && strcmp(hc_distributed_tables[i], table) == 0)
			return psprintf("%s%s", name, shards->names[i] + strlen(table));
	elog(ERROR, "%s is not a distributed table of holdcommit", table);
	return NULL;				/* keep the compiler quiet */
}

#define HC_MAX_SHARD_PLANS 1024

typedef struct ShardPlanKey
{
	HcStatement *stmt;
	char		shard[NAMEDATALEN];	/* the range's shard of hc_assets */
} ShardPlanKey;

typedef struct ShardPlan
{
	ShardPlanKey key;
	SPIPlanPtr	plan;
} ShardPlan;

static HTAB *shard_plans = NULL;
static bool shard_plans_stale = false;

/* Citus changed its shards: drop the plans before the next statement. */
void
hc_forget_shard_plans(void)
{
	shard_plans_stale = true;
}

/* Where the plan of stmt over shards is kept (*slot NULL: none yet). */
SPIPlanPtr *
hc_shard_plan_slot(HcShards *shards, HcStatement *stmt)
{
	ShardPlanKey key = {0};
	ShardPlan  *entry;
	bool		found;

	if (shard_plans != NULL &&
		(shard_plans_stale || hash_get_num_entries(shard_plans) >= HC_MAX_SHARD_PLANS))
	{
		HASH_SEQ_STATUS seq;

		hash_seq_init(&seq, shard_plans);
		while ((entry = hash_seq_search(&seq)) != NULL)
			if (entry->plan != NULL)
				SPI_freeplan(entry->plan);
		hash_destroy(shard_plans);
		shard_plans = NULL;
	}
	shard_plans_stale = false;
	if (shard_plans == NULL)
	{
		HASHCTL		ctl = {0};

		ctl.keysize = sizeof(ShardPlanKey);
		ctl.entrysize = sizeof(ShardPlan);
		shard_plans = hash_create("holdcommit shard plans", HC_MAX_SHARD_PLANS, &ctl,
								  HASH_ELEM | HASH_BLOBS);
	}
	key.stmt = stmt;
	strlcpy(key.shard, shards->names[0], NAMEDATALEN);
	entry = hash_search(shard_plans, &key, HASH_ENTER, &found);
	if (!found)
		entry->plan = NULL;
	return &entry->plan;
}

/* The routing id whose keys the statements see: NULL for a group, every key. */
const char *
hc_shard_key_scope(HcShards *shards)
{
	return shards->routing_id;
}
