/*
 * grant.c
 *		hc_grant_app(role), hc_grant_operator(role), hc_grant_monitor(role):
 *		exactly the rights an application, an operator's tooling or a
 *		monitoring role needs, and nothing for PUBLIC.
 *
 * Invariants:
 *   1. Only members of the extension are granted (found through pg_depend
 *      by OID, never by a name someone could have put beside them), and
 *      every name listed here must be a member, so the lists cannot drift
 *      from what exists.
 *   2. The GRANTs run with the caller's rights: granting is the caller's act.
 *   3. On Citus the grants of the functions Citus did not distribute run on
 *      every worker too, or the call fails (08006) and grants nothing.
 */
#include "postgres.h"

#include "catalog/pg_class.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"

#include "common/validate.h"
#include "core/standby.h"
#include "core/statement.h"
#include "core/version.h"

PG_FUNCTION_INFO_V1(hc_grant_app);
PG_FUNCTION_INFO_V1(hc_grant_operator);
PG_FUNCTION_INFO_V1(hc_grant_monitor);

/* What an application calls, and the state it may read in full. */
static const char *const app_functions[] = {
	"hc_hold", "hc_commit", "hc_release", "hc_extend",
	"hc_reserve", "hc_reserve_items", "hc_finalize", "hc_unreserve",
	"hc_lock_acquire", "hc_lock_acquire_session", "hc_lock_heartbeat", "hc_lock_release",
	"hc_attempt_begin", "hc_attempt_complete",
	"hc_check", NULL
};
/*
 * What 0.3.0 added for applications: on Citus the steps of a call on an
 * order of several products, which reach the other nodes as the caller.
 */
static const char *const app_functions_0_3[] = {"hc_order_step", NULL};
/* The parts that hc_inventory sums: on Citus a view's shards are read as the caller. */
static const char *const app_tables_0_3[] = {"hc_stock_parts", NULL};
static const char *const app_tables[] = {
	"hc_assets", "hc_inventory", "hc_stock_reservation_lines",
	"hc_locks", "hc_attempts", "hc_lease_status", "hc_attempt_status",
	"hc_sweeper_status", NULL
};

/*
 * Tables an application reads without their idempotency_key and the
 * request's fingerprint: a key is a per-request secret, and reading another
 * buyer's key would let one replay (and so read) their reservation.
 */
static const char *const app_keyless_tables[] = {
	"hc_reservations", "hc_stock_reservations", NULL
};
/*
 * The tables of the orders, which 0.4.0's views hc_stock_reservations and
 * hc_stock_reservation_lines read: on Citus a view's shards are read as the
 * caller.
 */
static const char *const app_keyless_tables_0_4[] = {"hc_stock_orders", NULL};
/* The group holds and the check of a lease in the caller's transaction, of 0.4.0. */
static const char *const app_functions_0_4[] = {"hc_hold_many", "hc_hold_best", "hc_lock_check", NULL};
static const char *const app_tables_0_4[] = {"hc_stock_order_lines", NULL};

/* What an operator's tooling adds: stock, assets, resets, and everything to read. */
static const char *const operator_functions[] = {
	"hc_asset_add", "hc_stock_set", "hc_stock_adjust", "hc_attempt_reset", "hc_sweep", NULL
};
static const char *const operator_tables[] = {
	"hc_reservations", "hc_stock_reservations", "hc_idempotency_keys", "hc_ledger",
	"hc_overview", NULL
};

/*
 * What 0.3.0 added for operators: a 0.2.0 database, which this library
 * serves until it is updated, has none of it.
 */
static const char *const operator_functions_0_3[] = {
	"hc_sweeper_state", "hc_stock_spread", "hc_worker_state", NULL
};
static const char *const operator_tables_0_3[] = {
	"hc_sweeper_databases", "hc_stock_parts", "hc_workers", NULL
};
/* What 0.4.0 added for operators: the orders' table, the automatic spreads of hot products. */
static const char *const operator_functions_0_4[] = {
	"hc_stock_auto_spread", "hc_stock_waits", NULL
};
static const char *const operator_tables_0_4[] = {"hc_stock_orders", "hc_stock_spreads", NULL};

/* What a monitoring role reads: figures only, no keys, no buyers. */
static const char *const monitor_tables[] = {"hc_metrics", "hc_overview", NULL};
/*
 * What 0.4.0 added for it: the views of the operators' page, and the
 * function hc_ops_sweeper reads (a view's functions are called as its reader).
 */
static const char *const monitor_tables_0_4[] = {"hc_ops_products", "hc_ops_sales", "hc_ops_sweeper", NULL};
static const char *const monitor_functions_0_4[] = {"hc_sweeper_state", NULL};

/* Are the grants of this call run on Citus' workers too (grant_execute)? */
static bool grant_on_workers = false;

typedef struct GrantTarget
{
	Oid			role;
	const char *role_name;		/* quoted */
	Oid			extension;
	Oid		   *functions;		/* the extension's member functions */
	int			nfunctions;
	Oid		   *relations;		/* its member tables, views, sequences */
	int			nrelations;
} GrantTarget;

static void
grant_execute(const char *sql)
{
	if (SPI_execute(sql, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not run \"%s\"", sql);
}

/*
 * EXECUTE on a function.  On Citus also on every worker, for a function
 * Citus did not distribute: Citus passes on the grants of the tables, the
 * schema and the functions it distributed (in this transaction), not those
 * of the functions that a query it sends to a worker may call there
 * (hc_commit(reservation_id) in a query on one shard).  Run apart, on each
 * worker, in a transaction of its own.
 */
static void
grant_execute_function(Oid function, const char *sql)
{
	Oid			types[2] = {TEXTOID, OIDOID};
	Datum		values[1];

	grant_execute(sql);
	if (!grant_on_workers)
		return;
	values[0] = ObjectIdGetDatum(function);
	if (SPI_execute_with_args("SELECT 1 FROM pg_catalog.pg_dist_object"
							  " WHERE classid" EQ "'pg_catalog.pg_proc'::pg_catalog.regclass"
							  "   AND objid" EQ "$1", 1, types + 1, values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read Citus' catalog");
	if (SPI_processed > 0)
		return;
	/* Citus refuses a GRANT on a worker unless it does not look at it. */
	values[0] = CStringGetTextDatum(psprintf("SET citus.enable_ddl_propagation TO off; %s", sql));
	if (SPI_execute_with_args("SELECT w.result FROM pg_catalog.run_command_on_workers($1) w"
							  " WHERE NOT w.success", 1, types, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not run \"%s\" on the workers", sql);
	if (SPI_processed > 0)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("could not run \"%s\" on every worker", sql),
				 errdetail("%s", SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1)),
				 errhint("Check that every worker is up, then grant again.")));
}

/* Find the extension's member functions and relations. */
static void
grant_find_members(GrantTarget *t)
{
	Datum		values[1];
	Oid			argtypes[1] = {OIDOID};
	uint64		n;
	uint64		i;

	t->extension = get_extension_oid("holdcommit", false);
	values[0] = ObjectIdGetDatum(t->extension);
	if (SPI_execute_with_args("SELECT classid, objid FROM pg_catalog.pg_depend"
							  " WHERE refclassid" EQ "'pg_catalog.pg_extension'::pg_catalog.regclass"
							  "   AND refobjid" EQ "$1"
							  "   AND deptype" EQ "'e'",
							  1, argtypes, values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not list the members of extension holdcommit");
	n = SPI_processed;
	t->functions = palloc(sizeof(Oid) * (n + 1));
	t->relations = palloc(sizeof(Oid) * (n + 1));
	t->nfunctions = t->nrelations = 0;
	for (i = 0; i < n; i++)
	{
		bool		isnull;
		Oid			classid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
		Oid			objid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));

		if (classid == ProcedureRelationId)
			t->functions[t->nfunctions++] = objid;
		else if (classid == RelationRelationId)
			t->relations[t->nrelations++] = objid;
	}
}

/* EXECUTE on every member function with one of the names. */
static void
grant_functions(GrantTarget *t, const char *const *names)
{
	for (; *names != NULL; names++)
	{
		bool		found = false;
		int			i;

		for (i = 0; i < t->nfunctions; i++)
		{
			char	   *name = get_func_name(t->functions[i]);

			if (name == NULL || strcmp(name, *names) != 0)
				continue;
			grant_execute_function(t->functions[i],
								   psprintf("GRANT EXECUTE ON FUNCTION %s TO %s",
											format_procedure_qualified(t->functions[i]),
											t->role_name));
			found = true;
		}
		if (!found)
			elog(ERROR, "extension holdcommit has no function %s to grant", *names);
	}
}

/* The member relation with this name. */
static Oid
grant_relation(GrantTarget *t, const char *name)
{
	int			i;

	for (i = 0; i < t->nrelations; i++)
	{
		char	   *relname = get_rel_name(t->relations[i]);

		if (relname != NULL && strcmp(relname, name) == 0)
			return t->relations[i];
	}
	elog(ERROR, "extension holdcommit has no relation %s to grant", name);
	return InvalidOid;			/* keep compiler quiet */
}

static char *
grant_relation_name(Oid relid)
{
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
									  get_rel_name(relid));
}

/* SELECT on the relations; with keyless, on every column but the key's. */
static void
grant_select(GrantTarget *t, const char *const *names, bool keyless)
{
	for (; *names != NULL; names++)
	{
		Oid			relid = grant_relation(t, *names);
		StringInfoData columns;

		initStringInfo(&columns);
		if (keyless)
		{
			Datum		values[1];
			Oid			argtypes[1] = {OIDOID};
			uint64		i;

			values[0] = ObjectIdGetDatum(relid);
			if (SPI_execute_with_args("SELECT attname FROM pg_catalog.pg_attribute"
									  " WHERE attrelid" EQ "$1"
									  "   AND attnum" GT "0 AND NOT attisdropped"
									  "   AND attname" NE "ALL ('{idempotency_key,fingerprint}'::pg_catalog.name[])"
									  " ORDER BY attnum",
									  1, argtypes, values, NULL, true, 0) != SPI_OK_SELECT)
				elog(ERROR, "could not list the columns of %s", *names);
			for (i = 0; i < SPI_processed; i++)
				appendStringInfo(&columns, "%s%s", i == 0 ? "(" : ", ",
								 quote_identifier(SPI_getvalue(SPI_tuptable->vals[i],
															   SPI_tuptable->tupdesc, 1)));
			appendStringInfoString(&columns, ")");
		}
		grant_execute(psprintf("GRANT SELECT %s ON TABLE %s TO %s", columns.data,
							   grant_relation_name(relid), t->role_name));
	}
}

/* Is this the coordinator of a Citus cluster that the extension is distributed on? */
static bool
grant_citus_coordinator(Oid schema)
{
	Oid			types[1] = {OIDOID};
	Datum		values[1];

	values[0] = ObjectIdGetDatum(get_relname_relid("hc_assets", schema));
	if (!OidIsValid(get_extension_oid("citus", true)) ||
		!OidIsValid(get_relname_relid("pg_dist_partition", PG_CATALOG_NAMESPACE)) ||
		!OidIsValid(DatumGetObjectId(values[0])))
		return false;
	if (SPI_execute_with_args("SELECT 1 FROM pg_catalog.pg_dist_partition p, pg_catalog.pg_dist_local_group g"
							  " WHERE p.logicalrelid" EQ "$1 AND g.groupid" EQ "0",
							  1, types, values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read Citus' catalog");
	return SPI_processed > 0;
}

/* Connect, find the members, grant USAGE on the schema of the function called. */
static void
grant_begin(GrantTarget *t, FunctionCallInfo fcinfo, const char *function)
{
	hc_arg_not_null(fcinfo, 0, "role");
	hc_refuse_read_only(function);
	hc_require_served_sql();
	t->role = PG_GETARG_OID(0);
	t->role_name = quote_identifier(GetUserNameFromId(t->role, false));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	grant_find_members(t);
	grant_on_workers = grant_citus_coordinator(get_func_namespace(fcinfo->flinfo->fn_oid));
	grant_execute(psprintf("GRANT USAGE ON SCHEMA %s TO %s",
						   quote_identifier(get_namespace_name(get_func_namespace(fcinfo->flinfo->fn_oid))),
						   t->role_name));
}

static void
grant_app(GrantTarget *t)
{
	grant_functions(t, app_functions);
	grant_select(t, app_tables, false);
	grant_select(t, app_keyless_tables, true);
	/*
	 * On Citus a call sent to another node updates no row of the empty
	 * hc_routes, so that Citus counts it as a write (route.c).
	 */
	if (hc_sql_at_least("0.3.0"))
	{
		grant_functions(t, app_functions_0_3);
		grant_select(t, app_tables_0_3, false);
		grant_execute(psprintf("GRANT SELECT, UPDATE ON TABLE %s TO %s",
							   grant_relation_name(grant_relation(t, "hc_routes")),
							   t->role_name));
	}
	if (hc_sql_at_least("0.4.0"))
	{
		grant_functions(t, app_functions_0_4);
		grant_select(t, app_tables_0_4, false);
		grant_select(t, app_keyless_tables_0_4, true);
	}
}

/*
 * hc_grant_app(role): the calls an application makes, and read access to
 * the state tables except idempotency keys.
 */
Datum
hc_grant_app(PG_FUNCTION_ARGS)
{
	GrantTarget t;

	grant_begin(&t, fcinfo, "hc_grant_app");
	grant_app(&t);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * hc_grant_operator(role): what hc_grant_app gives, plus the operator calls
 * and read access to everything, the ledger and the keys included.
 */
Datum
hc_grant_operator(PG_FUNCTION_ARGS)
{
	GrantTarget t;

	grant_begin(&t, fcinfo, "hc_grant_operator");
	grant_app(&t);
	grant_functions(&t, operator_functions);
	grant_select(&t, operator_tables, false);
	if (hc_sql_at_least("0.3.0"))
	{
		grant_functions(&t, operator_functions_0_3);
		grant_select(&t, operator_tables_0_3, false);
	}
	if (hc_sql_at_least("0.4.0"))
	{
		grant_functions(&t, operator_functions_0_4);
		grant_select(&t, operator_tables_0_4, false);
	}
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * hc_grant_monitor(role): read access to hc_metrics, hc_overview and (0.4.0)
 * the views of the operators' page only, for a monitoring role such as
 * postgres_exporter's.
 */
Datum
hc_grant_monitor(PG_FUNCTION_ARGS)
{
	GrantTarget t;

	grant_begin(&t, fcinfo, "hc_grant_monitor");
	grant_select(&t, monitor_tables, false);
	if (hc_sql_at_least("0.4.0"))
	{
		grant_select(&t, monitor_tables_0_4, false);
		grant_functions(&t, monitor_functions_0_4);
	}
	SPI_finish();
	PG_RETURN_VOID();
}
