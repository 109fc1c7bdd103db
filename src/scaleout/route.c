/*
 * route.c
 *		Where a routing id's rows live, on Citus: this node's shards, or
 *		another node, where the call is sent whole.  The routing entries of
 *		the placement table (register.c, core/placement.h; README.md).
 *
 * Once hc_distribute() has distributed the extension's tables
 * (doc/scale-out.md), every row of one asset, product or resource is in one
 * shard of each table, and those shards are on one node.  A call that Citus
 * delegated to that node (a bare SELECT hc_hold(...), the function
 * distributed by its routing argument) finds them here; the call then runs
 * the same statements as on a single node against those shards, named in
 * the statement text (shard_plans.c).  A call that runs elsewhere (the
 * coordinator, when Citus did not delegate it: PERFORM in PL code, a call
 * inside a larger query) sends itself whole to the node of its rows in a
 * single-shard query of Citus, within the caller's transaction.
 *
 * Invariants:
 *   1. On a single node nothing here runs past hc_citus_distributed(), whose
 *      answer is kept until the relcache entry of hc_assets goes.
 *   2. Each statement of a call on this node's shards stays one plain local
 *      statement that commits in one phase.
 *   3. A call runs on this node's shards only under Citus' lock on their
 *      placement metadata (route_lock), taken as Citus' executor takes it
 *      for a write, and held until the transaction ends; the ranges are
 *      read again once it is held.
 *   4. The ranges are one chunk in CacheMemoryContext, dropped (with the
 *      plans over shards) by Citus' relcache invalidation of any of the
 *      tables; a load that saw an invalidation loads again.
 *   5. A call sent to another node goes as the caller, counted by Citus as
 *      a write (two-phase commit with the transaction's other writes), and
 *      never from a read-only transaction.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/tuplestore.h"

#include "core/search_path.h"
#include "core/statement.h"
#include "core/version.h"
#include "scaleout/route.h"
#include "scaleout/shard_plans.h"

/* Is hc_assets of schema distributed?  Known until its relcache entry goes. */
static bool distributed_known = false;
static bool distributed_value = false;
static bool distributed_by_scope = false;	/* by scope_id, not by 0.3.0's asset id */
static Oid	distributed_schema = InvalidOid;
static Oid	distributed_assets = InvalidOid;
static bool distributed_callback = false;

/*
 * The shards of the distributed tables, by range of the routing ids' hash,
 * in range order; each range has one shard of every table.  Kept until
 * Citus changes the metadata of one of the tables (it invalidates the
 * table's relcache entry when a shard is made, moved or dropped).
 */
typedef struct RouteRange
{
	int32		min;			/* the hashes of the range: min..max */
	int32		max;
	bool		here;			/* on this node */
	int64		anchor;			/* the range's shard of hc_assets */
	char	   *names[HC_DISTRIBUTED_TABLES];
} RouteRange;

static RouteRange *ranges = NULL;
static int	nranges = 0;
static Oid	range_tables[HC_DISTRIBUTED_TABLES];
static uint64 range_invalidations = 0;	/* a load that saw one loads again */
static uint32 range_colocation = 0;		/* the tables' colocation id */

static void
route_invalidate(Datum arg, Oid relid)
{
	int			i;

	if (relid == InvalidOid || relid == distributed_assets)
		distributed_known = false;
	for (i = 0; i < HC_DISTRIBUTED_TABLES; i++)
		if (relid == InvalidOid || relid == range_tables[i])
		{
			if (ranges != NULL)
				pfree(ranges);	/* one chunk: the names live in it too */
			ranges = NULL;
			nranges = 0;
			range_invalidations++;
			hc_forget_shard_plans();
			break;
		}
}

static HcStatement is_distributed = {
	"SELECT pg_catalog.column_to_column_name(logicalrelid, partkey) AS routing"
	"  FROM pg_catalog.pg_dist_partition WHERE logicalrelid" EQ ":assets",
	{{"assets", OIDOID}}
};

/* Every shard of the tables :tables, and whether this node has it. */
static HcStatement all_shards = {
	"SELECT s.logicalrelid, s.shardid, s.shardminvalue::pg_catalog.int4 AS min,"
	"       s.shardmaxvalue::pg_catalog.int4 AS max,"
	"       EXISTS (SELECT 1 FROM pg_catalog.pg_dist_placement p"
	"                WHERE p.shardid" EQ "s.shardid"
	"                  AND p.groupid" EQ "(SELECT groupid FROM pg_catalog.pg_dist_local_group)) AS here"
	"  FROM pg_catalog.pg_dist_shard s"
	" WHERE s.logicalrelid" EQ "ANY (:tables)"
	" ORDER BY 3, 1",
	{{"tables", OIDARRAYOID}}
};

static HcStatement colocation = {
	"SELECT colocationid FROM pg_catalog.pg_dist_partition WHERE logicalrelid" EQ ":assets",
	{{"assets", OIDOID}}
};

static bool route_is_distributed(HcCall *call);

/*
 * Are the extension's tables distributed by Citus?  Citus invalidates a
 * table's relcache entry when it distributes it, so the answer is kept
 * until then.
 */
bool
hc_citus_distributed(HcCall *call)
{
	if (distributed_known && distributed_schema == call->schema)
		return distributed_value;
	if (!distributed_callback)
	{
		CacheRegisterRelcacheCallback(route_invalidate, (Datum) 0);
		distributed_callback = true;
	}
	distributed_schema = call->schema;
	distributed_assets = get_relname_relid("hc_assets", call->schema);
	distributed_value = false;
	distributed_by_scope = false;
	/* Known while it is looked up: the look runs statements, which ask again. */
	distributed_known = true;
	PG_TRY();
	{
		distributed_value = route_is_distributed(call);
	}
	PG_CATCH();
	{
		distributed_known = false;
		PG_RE_THROW();
	}
	PG_END_TRY();
	return distributed_value;
}

/*
 * Is hc_assets in Citus' catalog of distributed tables?  And by scope_id
 * (distributed_by_scope)?
 */
static bool
route_is_distributed(HcCall *call)
{
	HcArgs		args;
	char	   *routing;

	if (OidIsValid(distributed_assets) && OidIsValid(get_extension_oid("citus", true)) &&
		OidIsValid(get_relname_relid("pg_dist_partition", PG_CATALOG_NAMESPACE)))
	{
		hc_args(&args, &is_distributed);
		hc_bind(&args, "assets", ObjectIdGetDatum(distributed_assets));
		if (hc_run(call, &args, SPI_OK_SELECT) == 0)
			return false;
		routing = hc_text(call, 0, "routing");	/* NULL: not by a column */
		distributed_by_scope = routing != NULL && strcmp(routing, "scope_id") == 0;
		return true;
	}
	return false;
}

/* A pool's seats on one node: not where 0.3.0 distributed them by asset id. */
bool
hc_citus_seats_together(HcCall *call)
{
	return !hc_citus_distributed(call) || distributed_by_scope;
}

/*
 * Load the ranges of the distributed tables' shards if they are not known:
 * one range per group of colocated shards, each with a shard of every
 * table, on one node.
 */
static void
route_load(HcCall *call)
{
	Datum		tables[HC_DISTRIBUTED_TABLES];
	HcArgs		args;
	uint64		n;
	uint64		row;
	int			count = 0;
	RouteRange *loaded;
	char	   *names;
	Size		names_size = 0;
	int			i;

	uint64		invalidations;

again:
	if (ranges != NULL)
		return;
	invalidations = range_invalidations;
	hc_distributed_tables_of(hc_sql_at_least("0.4.0"), distributed_by_scope);
	for (i = 0; i < HC_DISTRIBUTED_TABLES; i++)
	{
		range_tables[i] = hc_distributed_tables[i] == NULL ? InvalidOid :
			get_relname_relid(hc_distributed_tables[i], call->schema);
		tables[i] = ObjectIdGetDatum(range_tables[i]);
	}
	hc_args(&args, &colocation);
	hc_bind(&args, "assets", ObjectIdGetDatum(range_tables[0]));
	if (hc_run(call, &args, SPI_OK_SELECT) != 1)
		elog(ERROR, "hc_assets is not distributed");
	range_colocation = (uint32) hc_int32(0, "colocationid");
	hc_args(&args, &all_shards);
	hc_bind(&args, "tables", PointerGetDatum(construct_array(tables, HC_DISTRIBUTED_TABLES,
															 OIDOID, sizeof(Oid), true,
															 TYPALIGN_INT)));
	n = hc_run(call, &args, SPI_OK_SELECT);
	for (row = 0; row < n; row++)
		if (row == 0 || hc_int32((int) row, "min") != hc_int32((int) row - 1, "min"))
			count++;
	for (row = 0; row < n; row++)
		names_size += NAMEDATALEN;
	/* One chunk, so that an invalidation frees it at once. */
	loaded = MemoryContextAllocZero(CacheMemoryContext,
									sizeof(RouteRange) * Max(count, 1) + names_size);
	names = (char *) (loaded + Max(count, 1));
	count = 0;
	for (row = 0; row < n; row++)
	{
		bool		isnull;
		Oid			relid = DatumGetObjectId(hc_datum((int) row, "logicalrelid", &isnull));
		RouteRange *range;

		if (row == 0 || hc_int32((int) row, "min") != hc_int32((int) row - 1, "min"))
		{
			range = &loaded[count++];
			range->min = hc_int32((int) row, "min");
			range->max = hc_int32((int) row, "max");
			range->here = true;
		}
		range = &loaded[count - 1];
		range->here = range->here && DatumGetBool(hc_datum((int) row, "here", &isnull));
		for (i = 0; i < HC_DISTRIBUTED_TABLES; i++)
			if (range_tables[i] == relid)
			{
				snprintf(names, NAMEDATALEN, "%s_" INT64_FORMAT, hc_distributed_tables[i],
						 hc_int64((int) row, "shardid"));
				if (i == 0)
					range->anchor = hc_int64((int) row, "shardid");
				range->names[i] = names;
				names += NAMEDATALEN;
			}
	}
	for (row = 0; row < (uint64) count; row++)
		for (i = 0; i < HC_DISTRIBUTED_TABLES; i++)
			if (loaded[row].names[i] == NULL && hc_distributed_tables[i] != NULL)
			{
				pfree(loaded);
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("a range of routing ids has no shard of %s",
								hc_distributed_tables[i]),
						 errhint("Distribute every table of holdcommit with hc_distribute(), colocated.")));
			}
	if (invalidations != range_invalidations)
	{
		pfree(loaded);
		goto again;
	}
	ranges = loaded;
	nranges = count;
}

/*
 * Run one SELECT of a holdcommit function as the caller (so that the ledger
 * of the node that makes the change names the caller), with pg_catalog
 * alone on the search path: Citus writes a function's name without its
 * schema in the query it sends if the schema is on the path here.  Returns
 * the function's result, copied into the call's memory; or with rows, of a
 * function that returns a set, each row of the set into rows.
 */
static Datum
route_run(HcCall *call, const char *sql, int nargs, Oid *types, Datum *values,
		  const char *nulls, Oid rettype, ReturnSetInfo *rows, bool *isnull)
{
	int			path;
	Oid			owner;
	int			owner_context;
	int16		typlen;
	bool		typbyval;
	Datum		result;
	MemoryContext mine = CurrentMemoryContext;	/* SPI leaves its own current */
	int			rc;

	path = hc_search_path_push(InvalidOid);
	GetUserIdAndSecContext(&owner, &owner_context);
	SetUserIdAndSecContext(call->save_userid, call->save_sec_context);
	rc = SPI_execute_with_args(sql, nargs, types, (Datum *) values, nulls, false,
							   rows != NULL ? 0 : 2);
	SetUserIdAndSecContext(owner, owner_context);
	hc_search_path_pop(path);
	if (rc != SPI_OK_SELECT || (rows == NULL && SPI_processed > 1))
		elog(ERROR, "%s: \"%s\" answered %s with " UINT64_FORMAT " rows",
			 call->function, sql, SPI_result_code_string(rc), SPI_processed);
	MemoryContextSwitchTo(mine);
	if (rows != NULL)
	{
		Datum	   *row_values = palloc(sizeof(Datum) * rows->setDesc->natts);
		bool	   *row_nulls = palloc(sizeof(bool) * rows->setDesc->natts);
		uint64		i;

		for (i = 0; i < SPI_processed; i++)
		{
			Datum		row = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, isnull);
			HeapTupleData tuple;

			if (*isnull)
				elog(ERROR, "%s: a row of the set is null", call->function);
			tuple.t_data = DatumGetHeapTupleHeader(row);
			tuple.t_len = HeapTupleHeaderGetDatumLength(tuple.t_data);
			ItemPointerSetInvalid(&tuple.t_self);
			tuple.t_tableOid = InvalidOid;
			heap_deform_tuple(&tuple, rows->setDesc, row_values, row_nulls);
			tuplestore_putvalues(rows->setResult, rows->setDesc, row_values, row_nulls);
		}
		*isnull = false;
		return (Datum) 0;
	}
	if (SPI_processed == 0)
	{
		*isnull = true;
		return (Datum) 0;
	}
	result = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, isnull);
	get_typlenbyval(rettype, &typlen, &typbyval);
	MemoryContextSwitchTo(call->outer);
	if (!*isnull)
		result = datumCopy(result, typbyval, typlen);
	MemoryContextSwitchTo(mine);
	return result;
}

/*
 * Before a call is sent to the node of routing_id's rows as a write: a read
 * of its shard of hc_routes, as the caller.  Citus makes a transaction
 * two-phase when its write reaches a node it has not written to, checked
 * when the write is given a connection; a write to shards this transaction
 * has not touched yet may be given a connection that a read of other shards
 * there opened, where Citus 13.2 and 14.0 do not check, and commit each
 * node in one phase (BEGIN; UPDATE on node A; SELECT of one shard on node B;
 * UPDATE of another shard on B; COMMIT).  Once read, the shard's group is
 * this transaction's on that connection, and the write sent to it is
 * checked.
 */
static void
route_touch(HcCall *call, const char *schema, const char *routing_id)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(routing_id)};
	bool		isnull;

	(void) route_run(call, psprintf("SELECT 1 FROM %s.hc_routes WHERE routing_id" EQ "$1", schema),
					 1, types, values, NULL, INT4OID, NULL, &isnull);
}

/*
 * Run this call's function again with its arguments, on the node of
 * routing_id's rows, and return its result.  Not prefixed: the same
 * function, in a query that Citus plans for that one shard (HAVING true: one
 * row, whether or not an asset of that id exists).  Prefixed: the form of
 * the function that takes the routing id as its first argument
 * (hc_commit(asset_id, reservation_id, late_ok) for hc_commit(reservation_id,
 * late_ok)), called here, which sends itself on: a call by reservation id
 * alone, once the routing id is found.
 */
static Datum
route_call(HcCall *call, FunctionCallInfo fcinfo, const char *routing_id, bool prefixed,
		   bool sent, bool *isnull)
{
	HeapTuple	proctup;
	Form_pg_proc proc;
	StringInfoData sql;
	Oid			types[FUNC_MAX_ARGS + 1];
	Datum		values[FUNC_MAX_ARGS + 1];
	char		nulls[FUNC_MAX_ARGS + 1];
	const char *schema = quote_identifier(get_namespace_name(call->schema));
	int			routing = prefixed ? 0 : fcinfo->nargs;	/* where routing_id goes */
	int			shift = prefixed ? 1 : 0;
	Oid			rettype;
	bool		retset;
	int			i;

	proctup = hc_call_proc(fcinfo);
	proc = (Form_pg_proc) GETSTRUCT(proctup);
	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT %s.%s(%s", schema, quote_identifier(NameStr(proc->proname)),
					 prefixed ? "$1" : "");
	for (i = 0; i < fcinfo->nargs; i++)
	{
		types[i + shift] = proc->proargtypes.values[i];
		values[i + shift] = fcinfo->args[i].value;
		nulls[i + shift] = fcinfo->args[i].isnull ? 'n' : ' ';
		appendStringInfo(&sql, "%s$%d", i + shift > 0 ? ", " : "", i + shift + 1);
	}
	rettype = proc->prorettype;
	retset = proc->proretset;
	ReleaseSysCache(proctup);
	types[routing] = TEXTOID;
	values[routing] = CStringGetTextDatum(routing_id);
	nulls[routing] = ' ';
	appendStringInfoChar(&sql, ')');
	if (sent)
	{
		/*
		 * Citus counts a SELECT as a read, whatever its function writes: a
		 * transaction whose writes went that way to two nodes would commit
		 * on each in one phase, not all or nothing.  The update of no row
		 * of hc_routes (empty, colocated; the caller may update it) on the
		 * same shard makes it a write, so that Citus commits it in two
		 * phases with the transaction's other writes.  (No "AND false":
		 * Citus would prune the update to no shard, and send the query to
		 * any node.)
		 */
		char	   *counted = psprintf("WITH counted_as_a_write AS (UPDATE %s.hc_routes"
									   " SET routing_id = routing_id WHERE routing_id" EQ "$%d"
									   " RETURNING 1) ", schema, routing + 1);

		appendStringInfo(&sql, " FROM %s.hc_routes WHERE routing_id" EQ "$%d HAVING true", schema,
						 routing + 1);
		sql.data = psprintf("%s%s", counted, sql.data);
		route_touch(call, schema, routing_id);
	}
	return route_run(call, sql.data, fcinfo->nargs + 1, types, values, nulls, rettype,
					 retset ? (ReturnSetInfo *) fcinfo->resultinfo : NULL, isnull);
}

/*
 * A look across the shards before a call is sent on: on a node whose
 * connection this transaction has not used yet, outside a transaction block
 * there (citus.select_opens_transaction_block), until AtEOXact_GUC(true,
 * level).  A block that a read opened is where Citus would not check a
 * later write of another shard of that node for two-phase commit
 * (route_touch); the transaction's own rows are read in the blocks that
 * wrote them.
 */
int
hc_route_read_begin(void)
{
	int			level = NewGUCNestLevel();

	(void) set_config_option("citus.select_opens_transaction_block", "off", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	return level;
}

/*
 * The routing id of a reservation, looked up by its id alone across every
 * shard (column of table, the reservation's table), as the caller: Citus
 * uses one connection per node and user within a transaction, and the
 * caller's forwarded and delegated calls of the same transaction went as
 * the caller.  NULL if there is no such reservation.
 */
char *
hc_citus_route_lookup(HcCall *call, const char *table, const char *column,
					  const char *reservation_id)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1];
	bool		isnull;
	Datum		found;
	int			level;

	values[0] = CStringGetTextDatum(reservation_id);
	level = hc_route_read_begin();
	found = route_run(call, psprintf("SELECT %s FROM %s.%s WHERE id" EQ "$1 LIMIT 1", column,
									 quote_identifier(get_namespace_name(call->schema)), table),
					  1, types, values, NULL, TEXTOID, NULL, &isnull);
	AtEOXact_GUC(true, level);
	return isnull ? NULL : TextDatumGetCString(found);
}

/*
 * The form of this call that takes the routing id first, run here with
 * routing_id, which sends itself on (route_call): a call by reservation id
 * alone once its routing id is known.
 */
Datum
hc_citus_route_prefixed(HcCall *call, FunctionCallInfo fcinfo, const char *routing_id)
{
	bool		isnull;

	return route_call(call, fcinfo, routing_id, true, false, &isnull);
}

/*
 * The form of this call that takes the routing id first, sent whole to the
 * node of routing_id's rows as a write (never to Citus' delegation, which
 * runs a call from within another as a read there: a group hold in one
 * transaction with writes on other nodes would not be in their two-phase
 * commit).
 */
Datum
hc_citus_send_prefixed(HcCall *call, FunctionCallInfo fcinfo, const char *routing_id)
{
	bool		isnull;

	return route_call(call, fcinfo, routing_id, true, true, &isnull);
}

/*
 * Citus' lock on the placement metadata of a group of colocated shards
 * (resource_lock.h: ADV_LOCKTAG_CLASS_CITUS_COLOCATED_SHARDS_METADATA, keyed
 * by the colocation id and the group's index among the shards): its
 * executor takes it in ShareLock for each write to a shard, and a shard
 * move or split takes it in ExclusiveLock on every node to block writes to
 * the shards it is moving while it switches them over.
 */
#define HC_CITUS_COLOCATED_SHARDS_METADATA_LOCK 8

/*
 * Lock a range of this node's shards for the writes of a call, as Citus'
 * executor does, so that no move of them can lose a write; then whether
 * they are still here, with the metadata as it is once locked.  The lock
 * is held until the transaction ends.
 */
static bool
route_lock(HcCall *call, int range)
{
	LOCKTAG		tag;
	int64		anchor = ranges[range].anchor;
	int32		min = ranges[range].min;

	/* The ranges are in the order of the shards' index. */
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) range, (uint32) range_colocation,
						 HC_CITUS_COLOCATED_SHARDS_METADATA_LOCK);
	(void) LockAcquire(&tag, ShareLock, false, false);
	AcceptInvalidationMessages();
	route_load(call);
	return range < nranges && ranges[range].anchor == anchor && ranges[range].min == min &&
		ranges[range].here;
}

/*
 * This node's shards of routing_id, locked for the call's writes (and the
 * call's scope from then on); NULL if another node has them.
 */
HcShards *
hc_route_local(HcCall *call, const char *routing_id)
{
	int32		hash;
	int			lo;
	int			hi;
	int			i;

	route_load(call);
	/* Citus hashes a text routing id with text's hash function, as hashtext. */
	hash = DatumGetInt32(DirectFunctionCall1Coll(hashtext, DEFAULT_COLLATION_OID,
												 CStringGetTextDatum(routing_id)));
	lo = 0;
	hi = nranges - 1;
	while (lo <= hi)
	{
		int			mid = (lo + hi) / 2;

		if (hash < ranges[mid].min)
			hi = mid - 1;
		else if (hash > ranges[mid].max)
			lo = mid + 1;
		else
		{
			HcShards   *shards;

			if (!ranges[mid].here)
				break;
			if (!route_lock(call, mid))
				ereport(ERROR,
						(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
						 errmsg("the shards of \"%s\" moved to another node while %s waited for them",
								routing_id, call->function),
						 errhint("Call again: Citus sends the call to their new node.")));
			shards = MemoryContextAllocZero(call->outer, sizeof(HcShards));
			shards->routing_id = MemoryContextStrdup(call->outer, routing_id);
			shards->anchor = ranges[mid].anchor;
			for (i = 0; i < HC_DISTRIBUTED_TABLES; i++)
				if (ranges[mid].names[i] != NULL)
					shards->names[i] = MemoryContextStrdup(call->outer, ranges[mid].names[i]);
			call->scope = shards;
			return shards;
		}
	}
	/*
	 * Citus opens the other node's transaction read-only only for BEGIN READ
	 * ONLY: sent there, the call could write.
	 */
	if (XactReadOnly)
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("%s cannot be sent to the node of \"%s\" in a read-only transaction",
						call->function, routing_id),
				 errhint("Call it in a read-write transaction.")));
	return NULL;
}

/*
 * Route a call by its routing id (asset, product or resource): false to run
 * here, on a single node, or on Citus with call->scope set to this node's
 * shards of the id; else true, with the result of the call sent to the
 * node that has them.
 */
bool
hc_citus_route(HcCall *call, FunctionCallInfo fcinfo, const char *routing_id, Datum *result,
			   bool *isnull)
{
	if (!hc_citus_distributed(call) || hc_route_local(call, routing_id) != NULL)
		return false;
	*result = route_call(call, fcinfo, routing_id, false, true, isnull);
	return true;
}

/*
 * schema.function(routing_id, args...) run on the node of routing_id's rows,
 * as the caller, in a query Citus plans for that one shard and counts as a
 * write (route_call): a step of a call whose rows are on several nodes.
 */
Datum
hc_route_send(HcCall *call, const char *routing_id, const char *function, int nargs,
			  const Oid *types, const Datum *values, Oid rettype, bool *isnull)
{
	const char *schema = quote_identifier(get_namespace_name(call->schema));
	StringInfoData sql;
	Oid			all_types[FUNC_MAX_ARGS];
	Datum		all_values[FUNC_MAX_ARGS];
	int			i;

	Assert(nargs < FUNC_MAX_ARGS);
	initStringInfo(&sql);
	appendStringInfo(&sql, "WITH counted_as_a_write AS (UPDATE %s.hc_routes"
					 " SET routing_id = routing_id WHERE routing_id" EQ "$1 RETURNING 1)"
					 " SELECT %s.%s($1", schema, schema, quote_identifier(function));
	all_types[0] = TEXTOID;
	all_values[0] = CStringGetTextDatum(routing_id);
	for (i = 0; i < nargs; i++)
	{
		all_types[i + 1] = types[i];
		all_values[i + 1] = values[i];
		appendStringInfo(&sql, ", $%d", i + 2);
	}
	appendStringInfo(&sql, ") FROM %s.hc_routes WHERE routing_id" EQ "$1 HAVING true", schema);
	route_touch(call, schema, routing_id);
	return route_run(call, sql.data, nargs + 1, all_types, all_values, NULL, rettype, NULL, isnull);
}

/*
 * The groups of this node's shards, (*groups)[0..n-1], one per range, in
 * range order, each with every key of its range (routing_id NULL).
 */
int
hc_citus_local_scopes(HcCall *call, HcShards ***groups)
{
	HcShards   *all;
	int			n = 0;
	int			r;
	int			i;

	route_load(call);
	all = MemoryContextAllocZero(call->outer, sizeof(HcShards) * Max(nranges, 1));
	*groups = MemoryContextAllocZero(call->outer, sizeof(HcShards *) * Max(nranges, 1));
	for (r = 0; r < nranges; r++)
	{
		if (!ranges[r].here)
			continue;
		all[n].anchor = ranges[r].anchor;
		for (i = 0; i < HC_DISTRIBUTED_TABLES; i++)
			if (ranges[r].names[i] != NULL)
				all[n].names[i] = MemoryContextStrdup(call->outer, ranges[r].names[i]);
		(*groups)[n] = &all[n];
		n++;
	}
	return n;
}

/*
 * Lock a group of this node's shards for writes (route_lock), as the sweep
 * does before it sweeps it: false if the group has left this node.
 */
bool
hc_citus_lock_scope(HcCall *call, HcShards *group)
{
	int			r;

	route_load(call);
	for (r = 0; r < nranges; r++)
		if (ranges[r].anchor == group->anchor)
			return ranges[r].here && route_lock(call, r);
	return false;
}

static HcStatement local_group = {
	"SELECT groupid FROM pg_catalog.pg_dist_local_group", {{NULL}}
};

/*
 * Is this node Citus' coordinator (group 0)?  hc_sweep and hc_check there
 * run on every worker; on a worker, whether or not it has shards yet, they
 * go through its own.
 */
bool
hc_citus_coordinator(HcCall *call)
{
	HcArgs		args;

	hc_args(&args, &local_group);
	return hc_run(call, &args, SPI_OK_SELECT) == 1 && hc_int32(0, "groupid") == 0;
}

/*
 * Is PREPARE TRANSACTION gid Citus' own, the first phase of a commit over
 * several nodes, which its recovery finishes if the coordinator cannot
 * (citus.recover_2pc_interval)?  Citus names it citus_GROUP_PID_TXN_CONN
 * (remote_transaction.c); a role that names its own so is taken at its word.
 */
bool
hc_citus_own_prepare(const char *gid)
{
	return strncmp(gid, "citus_", 6) == 0 && OidIsValid(get_extension_oid("citus", true));
}
