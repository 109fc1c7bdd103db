/*
 * route.c
 *		Where a routing id's rows live, on Citus: this node's shards, or
 *		another node, where the call is sent whole.
 *
 * On a single node nothing here runs past hc_distributed(), which is
 * cached.  Once hc_distribute() has distributed the extension's tables
 * (doc/scale-out.md), every row of one asset, product or resource is in one
 * shard of each table, and those shards are on one node.  A call that Citus
 * delegated to that node (a bare SELECT hc_hold(...), the function
 * distributed by its routing argument) finds them here; the call then runs
 * the same statements as on a single node against those shards, named in
 * the statement text (statement.c), so that each statement stays one plain
 * local statement that commits in one phase.  A call that runs elsewhere
 * (the coordinator, when Citus did not delegate it: PERFORM in PL code, a
 * call inside a larger query) sends itself whole to the node of its rows in
 * a single-shard query of Citus, within the caller's transaction.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "route.h"
#include "statement.h"

const char *const hc_distributed_tables[HC_DISTRIBUTED_TABLES] = {
	"hc_assets", "hc_reservations", "hc_ledger", "hc_stock_parts", "hc_stock_reservations",
	"hc_stock_reservation_lines", "hc_locks", "hc_attempts"
};

/* Is hc_assets of schema distributed?  Known until its relcache entry goes. */
static bool distributed_known = false;
static bool distributed_value = false;
static Oid	distributed_schema = InvalidOid;
static Oid	distributed_assets = InvalidOid;
static bool distributed_callback = false;

static void
route_invalidate(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == distributed_assets)
		distributed_known = false;
}

static HcStatement is_distributed = {
	"SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid" EQ ":assets",
	{{"assets", OIDOID}}
};

/*
 * The shard of each distributed table that holds :routing_id's rows, and
 * whether this node has it.
 */
static HcStatement routing_shards = {
	"SELECT c.relname::pg_catalog.text AS relname, s.shardid,"
	"       p.groupid" EQ "(SELECT groupid FROM pg_catalog.pg_dist_local_group) AS here"
	"  FROM pg_catalog.pg_dist_shard s"
	"  JOIN pg_catalog.pg_class c ON c.oid" EQ "s.logicalrelid"
	"  JOIN pg_catalog.pg_dist_placement p ON p.shardid" EQ "s.shardid"
	" WHERE c.relnamespace" EQ ":schema"
	"   AND s.shardminvalue::pg_catalog.int4" LE "pg_catalog.worker_hash(:routing_id)"
	"   AND s.shardmaxvalue::pg_catalog.int4" GE "pg_catalog.worker_hash(:routing_id)",
	{{"schema", OIDOID}, {"routing_id", TEXTOID}}
};

/*
 * Are the extension's tables distributed by Citus?  Citus invalidates a
 * table's relcache entry when it distributes it, so the answer is kept
 * until then.
 */
bool
hc_distributed(HcCall *call)
{
	HcArgs		args;

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
	distributed_known = true;
	if (OidIsValid(distributed_assets) && OidIsValid(get_extension_oid("citus", true)) &&
		OidIsValid(get_relname_relid("pg_dist_partition", PG_CATALOG_NAMESPACE)))
	{
		hc_args(&args, &is_distributed);
		hc_bind(&args, "assets", ObjectIdGetDatum(distributed_assets));
		distributed_value = hc_run(call, &args, SPI_OK_SELECT) > 0;
	}
	return distributed_value;
}

/*
 * Run one SELECT of a holdcommit function as the caller (so that the ledger
 * of the node that makes the change names the caller), with pg_catalog
 * alone on the search path: Citus writes a function's name without its
 * schema in the query it sends if the schema is on the path here.  Returns
 * the function's result, copied into the call's memory.
 */
Datum
hc_route_run(HcCall *call, const char *sql, int nargs, Oid *types, Datum *values,
			 const char *nulls, Oid rettype, bool *isnull)
{
	OverrideSearchPath path = {0};
	Oid			owner;
	int			owner_context;
	int16		typlen;
	bool		typbyval;
	Datum		result;
	MemoryContext old;
	int			rc;

	path.addCatalog = true;
	PushOverrideSearchPath(&path);
	GetUserIdAndSecContext(&owner, &owner_context);
	SetUserIdAndSecContext(call->save_userid, call->save_sec_context);
	rc = SPI_execute_with_args(sql, nargs, types, (Datum *) values, nulls, false, 2);
	SetUserIdAndSecContext(owner, owner_context);
	PopOverrideSearchPath();
	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "%s: \"%s\" answered %s with " UINT64_FORMAT " rows",
			 call->function, sql, SPI_result_code_string(rc), SPI_processed);
	result = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, isnull);
	get_typlenbyval(rettype, &typlen, &typbyval);
	old = MemoryContextSwitchTo(call->outer);
	if (!*isnull)
		result = datumCopy(result, typbyval, typlen);
	MemoryContextSwitchTo(old);
	return result;
}

/*
 * Send the call whole to the node of routing_id's rows: the same function
 * with the same arguments, in a query that Citus plans for that one shard
 * (HAVING true: one row, whether or not an asset of that id exists).
 */
static Datum
route_forward(HcCall *call, FunctionCallInfo fcinfo, const char *routing_id, bool *isnull)
{
	HeapTuple	proctup;
	Form_pg_proc proc;
	StringInfoData sql;
	Oid			types[FUNC_MAX_ARGS + 1];
	Datum		values[FUNC_MAX_ARGS + 1];
	char		nulls[FUNC_MAX_ARGS + 1];
	int			nargs = fcinfo->nargs;
	const char *schema = quote_identifier(get_namespace_name(call->schema));
	Oid			rettype;
	int			i;

	proctup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fcinfo->flinfo->fn_oid));
	if (!HeapTupleIsValid(proctup))
		elog(ERROR, "cache lookup failed for function %u", fcinfo->flinfo->fn_oid);
	proc = (Form_pg_proc) GETSTRUCT(proctup);
	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT %s.%s(", schema, quote_identifier(NameStr(proc->proname)));
	for (i = 0; i < nargs; i++)
	{
		types[i] = proc->proargtypes.values[i];
		values[i] = fcinfo->args[i].value;
		nulls[i] = fcinfo->args[i].isnull ? 'n' : ' ';
		appendStringInfo(&sql, "%s$%d", i > 0 ? ", " : "", i + 1);
	}
	rettype = proc->prorettype;
	ReleaseSysCache(proctup);
	types[nargs] = TEXTOID;
	values[nargs] = CStringGetTextDatum(routing_id);
	nulls[nargs] = ' ';
	appendStringInfo(&sql, ") FROM %s.hc_assets WHERE id" EQ "$%d HAVING true", schema, nargs + 1);
	return hc_route_run(call, sql.data, nargs + 1, types, values, nulls, rettype, isnull);
}

/*
 * Call the form of this function that takes the routing id as its first
 * argument (hc_commit(asset_id, reservation_id, late_ok) for
 * hc_commit(reservation_id, late_ok)), which Citus sends to the node of
 * routing_id's rows.  For a call by reservation id alone on Citus, once
 * the routing id is found.
 */
Datum
hc_route_prefixed(HcCall *call, FunctionCallInfo fcinfo, const char *routing_id, bool *isnull)
{
	HeapTuple	proctup;
	Form_pg_proc proc;
	StringInfoData sql;
	Oid			types[FUNC_MAX_ARGS + 1];
	Datum		values[FUNC_MAX_ARGS + 1];
	char		nulls[FUNC_MAX_ARGS + 1];
	int			nargs = fcinfo->nargs;
	Oid			rettype;
	int			i;

	proctup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fcinfo->flinfo->fn_oid));
	if (!HeapTupleIsValid(proctup))
		elog(ERROR, "cache lookup failed for function %u", fcinfo->flinfo->fn_oid);
	proc = (Form_pg_proc) GETSTRUCT(proctup);
	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT %s.%s($1", quote_identifier(get_namespace_name(call->schema)),
					 quote_identifier(NameStr(proc->proname)));
	types[0] = TEXTOID;
	values[0] = CStringGetTextDatum(routing_id);
	nulls[0] = ' ';
	for (i = 0; i < nargs; i++)
	{
		types[i + 1] = proc->proargtypes.values[i];
		values[i + 1] = fcinfo->args[i].value;
		nulls[i + 1] = fcinfo->args[i].isnull ? 'n' : ' ';
		appendStringInfo(&sql, ", $%d", i + 2);
	}
	appendStringInfoChar(&sql, ')');
	rettype = proc->prorettype;
	ReleaseSysCache(proctup);
	return hc_route_run(call, sql.data, nargs + 1, types, values, nulls, rettype, isnull);
}

/*
 * Route a call by its routing id (asset, product or resource).  On a single
 * node, false: run here.  On Citus, false with call->shards set if this
 * node has the id's shards; else true, with the result of the call sent to
 * the node that has them.
 */
bool
hc_route(HcCall *call, FunctionCallInfo fcinfo, const char *routing_id, Datum *result,
		 bool *isnull)
{
	HcArgs		args;
	HcShards   *shards;
	uint64		n;
	uint64		row;
	int			here = 0;
	int			i;

	if (!hc_distributed(call))
		return false;
	hc_args(&args, &routing_shards);
	hc_bind(&args, "schema", ObjectIdGetDatum(call->schema));
	hc_bind_text(&args, "routing_id", routing_id);
	n = hc_run(call, &args, SPI_OK_SELECT);
	shards = MemoryContextAllocZero(call->outer, sizeof(HcShards));
	shards->routing_id = MemoryContextStrdup(call->outer, routing_id);
	for (row = 0; row < n; row++)
	{
		char	   *table = hc_text(call, (int) row, "relname");
		bool		isnull;

		for (i = 0; i < HC_DISTRIBUTED_TABLES; i++)
			if (strcmp(table, hc_distributed_tables[i]) == 0)
				break;
		if (i == HC_DISTRIBUTED_TABLES)
			continue;
		if (DatumGetBool(hc_datum((int) row, "here", &isnull)))
		{
			shards->names[i] = MemoryContextStrdup(call->outer,
												   psprintf("%s_" INT64_FORMAT, table,
															hc_int64((int) row, "shardid")));
			here++;
		}
	}
	for (i = 0; i < HC_DISTRIBUTED_TABLES; i++)
		if (shards->names[i] == NULL && here > 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("the shards of \"%s\" are not all on this node", routing_id),
					 errdetail("%s has no shard here for it.", hc_distributed_tables[i]),
					 errhint("Distribute every table of holdcommit with hc_distribute(), colocated.")));
	if (here > 0)
	{
		call->shards = shards;
		return false;
	}
	*result = route_forward(call, fcinfo, routing_id, isnull);
	return true;
}

/*
 * This node's shards, grouped by the range of routing ids they hold (a
 * group has one shard of each distributed table), in range order: what a
 * sweep of this node goes through.
 */
static HcStatement local_shards = {
	"SELECT s.shardminvalue::pg_catalog.int4 AS range, c.relname::pg_catalog.text AS relname,"
	"       s.shardid"
	"  FROM pg_catalog.pg_dist_shard s"
	"  JOIN pg_catalog.pg_class c ON c.oid" EQ "s.logicalrelid"
	"  JOIN pg_catalog.pg_dist_placement p ON p.shardid" EQ "s.shardid"
	" WHERE c.relnamespace" EQ ":schema"
	"   AND p.groupid" EQ "(SELECT groupid FROM pg_catalog.pg_dist_local_group)"
	" ORDER BY 1, 2",
	{{"schema", OIDOID}}
};

/* The groups of this node's shards (none on a node without shards). */
int
hc_local_shard_groups(HcCall *call, HcShards **groups)
{
	HcArgs		args;
	uint64		n;
	uint64		row;
	int			ngroups = 0;
	int32		range = 0;

	hc_args(&args, &local_shards);
	hc_bind(&args, "schema", ObjectIdGetDatum(call->schema));
	n = hc_run(call, &args, SPI_OK_SELECT);
	*groups = MemoryContextAllocZero(call->outer, sizeof(HcShards) * Max(n, 1));
	for (row = 0; row < n; row++)
	{
		char	   *table = hc_text(call, (int) row, "relname");
		int			i;

		if (ngroups == 0 || hc_int32((int) row, "range") != range)
		{
			range = hc_int32((int) row, "range");
			ngroups++;
		}
		for (i = 0; i < HC_DISTRIBUTED_TABLES; i++)
			if (strcmp(table, hc_distributed_tables[i]) == 0)
				(*groups)[ngroups - 1].names[i] =
					MemoryContextStrdup(call->outer,
										psprintf("%s_" INT64_FORMAT, table,
												 hc_int64((int) row, "shardid")));
	}
	for (row = 0; row < (uint64) ngroups; row++)
		for (int i = 0; i < HC_DISTRIBUTED_TABLES; i++)
			if ((*groups)[row].names[i] == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("a range of routing ids on this node has no shard of %s",
								hc_distributed_tables[i]),
						 errhint("Distribute every table of holdcommit with hc_distribute(), colocated.")));
	return ngroups;
}

/* Refuse, on Citus, what needs every row on this node. */
void
hc_require_single_node(HcCall *call, const char *what)
{
	if (hc_distributed(call))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s is not available on Citus", what),
				 errhint("See doc/scale-out.md for the calls that take the routing id.")));
}
