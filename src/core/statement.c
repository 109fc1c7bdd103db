/*
 * statement.c
 *		Prepared statements with named parameters, and their results.
 *
 * A statement is prepared the first time a call runs it and kept for the
 * backend; its ":name" parameters become $1, $2, ... in the order of its
 * params at that moment, so a reader finds a parameter's name, type and
 * value together and never counts positions.
 *
 * Invariants:
 *   1. A call's statements reach their rows through indexes, by parameters:
 *      they get one generic plan, made with sequential and bitmap scans off,
 *      so that a plan made while the tables are empty (right after CREATE
 *      EXTENSION) is not a scan kept for the life of the backend.  A later
 *      re-plan (after an ANALYZE) is the planner's, with real statistics.
 *      hc_check's statements, which read whole tables, are planned as usual
 *      (call->point_lookups).  Neither kind of plan may need good estimates
 *      to stay linear: the shapes of the statements see to that
 *      (doc/architecture.md, "Plan policy").
 *   2. stmt->plan is the plan over the extension's own tables of the schema
 *      stmt->schema, made again for a call in another schema.  A call with a
 *      scope (placement.h) runs the statement over the scope's tables, with
 *      the text and the kept plan the placement gives; a call without one on
 *      distributed tables, with a plan for that one run.
 *   3. On a single node a run asks the placement one question (distributed,
 *      an indirect call answering false) beyond what it did without it.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/plancache.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"

#include "core/placement.h"
#include "core/search_path.h"
#include "core/statement.h"

/*
 * The routing id of the rows the running statement writes (call->routing_id,
 * or its scope's), for hc_scope_id(); NULL between statements, whatever
 * they end in (a call that a statement's trigger makes gives the
 * statement's back).
 */
static const char *statement_routing_id = NULL;

PG_FUNCTION_INFO_V1(hc_scope_id);

/*
 * hc_scope_id(): the default of the scope_id columns on Citus
 * (hc_distribute()), where every write runs in a call on one routing id's
 * shards.  A row written any other way would have no routing id: refused.
 */
Datum
hc_scope_id(PG_FUNCTION_ARGS)
{
	if (statement_routing_id == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("scope_id is written by holdcommit's calls only"),
				 errdetail("A row of a distributed holdcommit table needs its routing id.")));
	PG_RETURN_TEXT_P(cstring_to_text(statement_routing_id));
}

/* The position of a parameter in the statement, or an error. */
static int
statement_param(HcStatement *stmt, const char *name, int len)
{
	int			i;

	for (i = 0; i < HC_MAX_PARAMS && stmt->params[i].name != NULL; i++)
		if ((len < 0 ? strcmp(stmt->params[i].name, name) == 0 :
			 (strncmp(stmt->params[i].name, name, len) == 0 &&
			  stmt->params[i].name[len] == '\0')))
			return i;
	elog(ERROR, "holdcommit statement has no parameter :%.*s: \"%s\"",
		 len < 0 ? (int) strlen(name) : len, name, stmt->sql);
	return -1;					/* keep the compiler quiet */
}

/*
 * Reading SQL text a character at a time: is c inside a quoted literal or
 * identifier, or its opening or closing quote?  *quote is the quote open
 * ('\0' outside one); a reader copies such characters as they are.
 */
bool
hc_sql_quoted(char *quote, char c)
{
	if (*quote == '\0' && c != '\'' && c != '"')
		return false;
	if (*quote == '\0')
		*quote = c;
	else if (c == *quote)
		*quote = '\0';
	return true;
}

/*
 * The text as SPI takes it: the mark of the call's schema
 * (core/search_path.h), then the statement with every :name outside quotes
 * made $n (a "::" cast stays as it is).
 */
static char *
statement_sql(HcCall *call, HcStatement *stmt)
{
	StringInfoData buf;
	const char *p;
	char		quote = '\0';

	initStringInfo(&buf);
	hc_search_path_mark(&buf, call->schema);
	for (p = stmt->sql; *p != '\0'; p++)
	{
		if (hc_sql_quoted(&quote, *p))
			appendStringInfoChar(&buf, *p);
		else if (p[0] == ':' && p[1] == ':')
			appendStringInfoString(&buf, "::"), p++;
		else if (p[0] == ':' && (isalpha((unsigned char) p[1]) || p[1] == '_'))
		{
			const char *name = p + 1;
			int			len = 0;

			while (isalnum((unsigned char) name[len]) || name[len] == '_')
				len++;
			appendStringInfo(&buf, "$%d", statement_param(stmt, name, len) + 1);
			p += len;
		}
		else
			appendStringInfoChar(&buf, *p);
	}
	return buf.data;
}

/*
 * The settings a call's point lookups are planned with, until
 * AtEOXact_GUC(true, level) for the level returned (0: none).
 */
static int
statement_plan_settings(HcCall *call)
{
	int			guc_level;

	if (!call->point_lookups)
		return 0;
	guc_level = NewGUCNestLevel();
	(void) set_config_option("enable_seqscan", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("enable_bitmapscan", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	/*
	 * No JIT in the plan kept: compiling takes hundreds of milliseconds,
	 * which statements of this size never repay, and estimates on tables
	 * without statistics would otherwise ask for it.
	 */
	(void) set_config_option("jit", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	return guc_level;
}

/*
 * Plans for one run only, made with the parameters' values: on several
 * nodes, for a statement over the distributed tables themselves, which
 * Citus' planner routes by the values of their routing ids (a generic plan
 * of a distributed table fails).
 */
static bool
statement_one_shot(HcCall *call)
{
	return call->scope == NULL && hc_distributed(call);
}

/*
 * The plan of the statement: kept for the call's schema (or by the
 * placement, for its scope) once made; or, one_shot, a plan for this run
 * only, which the caller frees.
 */
static SPIPlanPtr
statement_prepare(HcCall *call, HcStatement *stmt, bool one_shot)
{
	Oid			argtypes[HC_MAX_PARAMS];
	SPIPlanPtr *slot = NULL;
	SPIPlanPtr	plan;
	char	   *sql;
	int			guc_level = 0;

	if (call->scope != NULL)
		slot = hc_placement->scope_plan_slot(call->scope, stmt);
	else if (!one_shot)
	{
		slot = &stmt->plan;
		if (stmt->plan != NULL && stmt->schema != call->schema)
		{
			SPI_freeplan(stmt->plan);
			stmt->plan = NULL;
		}
	}
	if (slot != NULL && *slot != NULL)
		return *slot;

	for (stmt->nparams = 0; stmt->nparams < HC_MAX_PARAMS && stmt->params[stmt->nparams].name;
		 stmt->nparams++)
		argtypes[stmt->nparams] = stmt->params[stmt->nparams].type;
	sql = statement_sql(call, stmt);
	if (call->scope != NULL)
	{
		char	   *unscoped = sql;

		sql = hc_placement->scope_sql(call->scope, unscoped);
		pfree(unscoped);
	}
	if (!one_shot)
		guc_level = statement_plan_settings(call);
	plan = SPI_prepare_cursor(sql, stmt->nparams, argtypes,
							  one_shot ? CURSOR_OPT_CUSTOM_PLAN :
							  call->point_lookups ? CURSOR_OPT_GENERIC_PLAN : 0);
	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed for \"%s\": %s", sql,
			 SPI_result_code_string(SPI_result));
	pfree(sql);
	if (one_shot)
		return plan;
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "SPI_keepplan failed");
	if (guc_level > 0)
	{
		ReleaseCachedPlan(SPI_plan_get_cached_plan(plan), CurrentResourceOwner);
		AtEOXact_GUC(true, guc_level);
	}
	*slot = plan;
	if (call->scope == NULL)
		stmt->schema = call->schema;
	return plan;
}

/* Start the arguments of one run of stmt: nothing bound yet. */
void
hc_args(HcArgs *args, HcStatement *stmt)
{
	args->stmt = stmt;
	memset(args->nulls, ' ', sizeof(args->nulls));
	memset(args->bound, 0, sizeof(args->bound));
}

/* Bind a parameter by name. */
void
hc_bind(HcArgs *args, const char *name, Datum value)
{
	int			i = statement_param(args->stmt, name, -1);

	args->values[i] = value;
	args->nulls[i] = ' ';
	args->bound[i] = true;
}

void
hc_bind_null(HcArgs *args, const char *name)
{
	int			i = statement_param(args->stmt, name, -1);

	args->values[i] = (Datum) 0;
	args->nulls[i] = 'n';
	args->bound[i] = true;
}

/* A text parameter from a C string; NULL binds SQL's null. */
void
hc_bind_text(HcArgs *args, const char *name, const char *value)
{
	if (value == NULL)
		hc_bind_null(args, name);
	else
		hc_bind(args, name, HC_TEXT(value));
}

/* SPI's run of the plan, with the latest snapshot if the call asks for it. */
static int
statement_spi(HcCall *call, SPIPlanPtr plan, HcArgs *args)
{
	if (call->latest)
		return SPI_execute_snapshot(plan, args->values, args->nulls, GetLatestSnapshot(),
									InvalidSnapshot, true, false, 0);
	return SPI_execute_plan(plan, args->values, args->nulls, false, 0);
}

/*
 * The run, with the routing id of the rows it writes for hc_scope_id(), and
 * the one before given back however it ends.  A single node has none.
 */
static int
statement_execute(HcCall *call, SPIPlanPtr plan, HcArgs *args, const char *routing_id)
{
	const char *outer = statement_routing_id;
	volatile int rc = 0;

	if (routing_id == NULL && outer == NULL)
		return statement_spi(call, plan, args);
	statement_routing_id = routing_id;
	PG_TRY();
	{
		rc = statement_spi(call, plan, args);
	}
	PG_FINALLY();
	{
		statement_routing_id = outer;
	}
	PG_END_TRY();
	return rc;
}

/*
 * Run a statement with a fresh snapshot (read_only = false), as a statement
 * of a READ COMMITTED transaction does, check that SPI answered as expected,
 * return the number of rows.  The rows stay in SPI_tuptable until the next
 * statement, which frees them (a loop of statements stays in flat memory);
 * copy what must outlive it.
 */
uint64
hc_run(HcCall *call, HcArgs *args, int expected)
{
	HcStatement *stmt = args->stmt;
	MemoryContext mine = CurrentMemoryContext;
	bool		one_shot = statement_one_shot(call);
	SPIPlanPtr	plan;
	const char *routing_id;
	int			guc_level;
	int			rc;
	int			i;

	hc_call_search_path(call);
	plan = statement_prepare(call, stmt, one_shot);

	for (i = 0; i < stmt->nparams; i++)
	{
		const char *name = stmt->params[i].name;

		if (args->bound[i])
			continue;
		if (strcmp(name, "now") == 0)
			hc_bind(args, name, TimestampTzGetDatum(call->now));
		else if (strcmp(name, "function") == 0)
			hc_bind_text(args, name, call->function);
		else if (strcmp(name, "actor") == 0)
			hc_bind_text(args, name, hc_actor(call));
		else if (strcmp(name, "key_scope") == 0)
			hc_bind_text(args, name,
						 call->scope != NULL ? hc_placement->scope_key(call->scope) : NULL);
		else
			elog(ERROR, "parameter :%s is not bound: \"%s\"", name, stmt->sql);
	}
	SPI_freetuptable(SPI_tuptable);
	routing_id = call->routing_id;
	if (routing_id == NULL && call->scope != NULL)
		routing_id = hc_placement->scope_key(call->scope);
	/* A plan for one run is made now, for these values (statement_prepare). */
	guc_level = one_shot ? statement_plan_settings(call) : 0;
	rc = statement_execute(call, plan, args, routing_id);
	if (guc_level > 0)
		AtEOXact_GUC(true, guc_level);
	if (one_shot)
		SPI_freeplan(plan);
	/* SPI leaves us in its procedure context; stay where the caller was. */
	MemoryContextSwitchTo(mine);
	if (rc != expected)
		elog(ERROR, "unexpected SPI result %s for \"%s\"",
			 SPI_result_code_string(rc), stmt->sql);
	return SPI_processed;
}

/* A column of row row of the last statement's result, by name. */
Datum
hc_datum(int row, const char *column, bool *isnull)
{
	int			col = SPI_fnumber(SPI_tuptable->tupdesc, column);

	if (col <= 0)
		elog(ERROR, "holdcommit statement returned no column \"%s\"", column);
	return SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col, isnull);
}

/* A column that must not be null: the schema says NOT NULL. */
static Datum
statement_required(int row, const char *column)
{
	bool		isnull;
	Datum		d = hc_datum(row, column, &isnull);

	if (isnull)
		elog(ERROR, "column \"%s\" of a holdcommit row is unexpectedly null", column);
	return d;
}

/* A text column as a C string that outlives SPI_finish, or NULL. */
char *
hc_text(HcCall *call, int row, const char *column)
{
	bool		isnull;
	Datum		d = hc_datum(row, column, &isnull);
	MemoryContext old;
	char	   *s;

	if (isnull)
		return NULL;
	old = MemoryContextSwitchTo(call->outer);
	s = TextDatumGetCString(d);
	MemoryContextSwitchTo(old);
	return s;
}

/* NOT NULL columns of the last statement's result. */
TimestampTz
hc_timestamptz(int row, const char *column)
{
	return DatumGetTimestampTz(statement_required(row, column));
}

int32
hc_int32(int row, const char *column)
{
	return DatumGetInt32(statement_required(row, column));
}

int64
hc_int64(int row, const char *column)
{
	return DatumGetInt64(statement_required(row, column));
}

Datum
hc_text_datum(const char *s)
{
	if (s == NULL)
		elog(ERROR, "null string passed as a holdcommit statement argument");
	return PointerGetDatum(cstring_to_text(s));
}

/* A text[] of n strings, none null. */
Datum
hc_text_array(char *const *values, int n)
{
	Datum	   *elems = palloc(sizeof(Datum) * n);
	int			i;

	for (i = 0; i < n; i++)
		elems[i] = hc_text_datum(values[i]);
	return PointerGetDatum(construct_array(elems, n, TEXTOID, -1, false, TYPALIGN_INT));
}
