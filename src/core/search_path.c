/*
 * search_path.c
 *		The search path of a call's statements: pg_catalog, then the
 *		extension's schema, found by OID.
 *
 * A call's statements name the extension's tables without a schema; they
 * must resolve in the schema the call's function lives in, found by OID, so
 * that renaming the schema and planting look-alikes under its old name
 * redirects nothing, even when a statement is re-planned in the middle of
 * a call; and never in pg_temp or the caller's search path.
 *
 * Where the server has an override search path (15, 16), it is one: a list
 * of schema OIDs that namespace.c searches instead of search_path.  From 17
 * on, search_path is set in a GUC nest level to "pg_catalog, <the schema's
 * name>, pg_temp" (pg_temp last: unnamed, it would come first), undone at
 * the pop, or by the (sub)transaction's abort on an error.  The quoted name
 * is kept per schema OID and forgotten when any schema changes (a syscache
 * callback), so that a call looks nothing up.  A name works by name, though:
 * between the push and a (re)analysis of a statement, the schema may be
 * renamed and a look-alike created under the old name.  So every statement
 * carries the OID of its schema in a mark at the start of its text
 * (hc_search_path_mark), and whenever PostgreSQL analyses a text so marked
 * (post_parse_analyze_hook, in holdcommit.c) every table it reaches must be
 * in that schema or pg_catalog, or the statement is refused (42501, as a
 * privilege would be: the name led to a table the extension does not own).
 * The mark costs nothing per call: it is read only when a statement is
 * analysed, which a kept plan is not, and only holdcommit's statements carry
 * it (a trigger or a function that a statement runs is not checked); a text
 * that forges it can only be refused.
 *
 * Invariants:
 *   1. The path holds pg_catalog first, then the schema; pg_temp, where it
 *      is named at all, is last, and no statement of a call reaches it.
 *   2. The same path for every call in a schema, whatever the caller's, so
 *      that a kept plan is not re-planned because the caller's path changed.
 *
 * Review on a new major: namespace.c (how an override search path or
 * search_path is set and searched, and what the plan cache compares to
 * decide that a kept statement must be analysed again), guc.c's nest
 * levels, and post_parse_analyze_hook's arguments (compat.h).
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "nodes/nodeFuncs.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "compat.h"
#include "core/search_path.h"

#define MARK "/* holdcommit schema "

#ifndef HC_OVERRIDE_SEARCH_PATH
/* search_path for the last schema pushed (cached_schema), until a schema changes. */
static Oid	cached_schema = InvalidOid;
static char *cached_path = NULL;
static bool callback_registered = false;

static void
forget_path(Datum arg, int cacheid, uint32 hashvalue)
{
	cached_schema = InvalidOid;
}

static const char *
schema_path(Oid schema)
{
	char	   *name;

	if (!OidIsValid(schema))
		return "pg_catalog, pg_temp";
	if (schema == cached_schema)
		return cached_path;
	if (!callback_registered)
	{
		CacheRegisterSyscacheCallback(NAMESPACEOID, forget_path, (Datum) 0);
		callback_registered = true;
	}
	name = get_namespace_name(schema);
	if (name == NULL)
		elog(ERROR, "cache lookup failed for schema %u", schema);
	if (cached_path != NULL)
		pfree(cached_path);
	cached_path = MemoryContextStrdup(TopMemoryContext,
									  psprintf("pg_catalog, %s, pg_temp", quote_identifier(name)));
	cached_schema = schema;
	return cached_path;
}
#endif

int
hc_search_path_push(Oid schema)
{
#ifdef HC_OVERRIDE_SEARCH_PATH
	OverrideSearchPath path = {0};

	path.schemas = OidIsValid(schema) ? list_make1_oid(schema) : NIL;
	path.addCatalog = true;
	path.addTemp = false;
	PushOverrideSearchPath(&path);
	return 0;
#else
	int			level = NewGUCNestLevel();

	(void) set_config_option("search_path", schema_path(schema), PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	return level;
#endif
}

void
hc_search_path_pop(int pushed)
{
#ifdef HC_OVERRIDE_SEARCH_PATH
	PopOverrideSearchPath();
#else
	AtEOXact_GUC(true, pushed);
#endif
}

void
hc_search_path_mark(StringInfo buf, Oid schema)
{
	appendStringInfo(buf, MARK "%u */ ", schema);
}

/* Every table the query reaches, in its subqueries, CTEs and sublinks too. */
static bool
check_tables(Node *node, Oid *schema)
{
	if (node == NULL)
		return false;
	if (IsA(node, RangeTblEntry))
	{
		RangeTblEntry *rte = (RangeTblEntry *) node;
		Oid			namespace;

		if (rte->rtekind != RTE_RELATION)
			return false;
		namespace = get_rel_namespace(rte->relid);
		if (namespace != *schema && namespace != PG_CATALOG_NAMESPACE)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("a holdcommit statement reached table \"%s.%s\", outside the extension's schema",
							get_namespace_name(namespace), get_rel_name(rte->relid)),
					 errdetail("Its tables resolve in the extension's schema (OID %u) and pg_catalog only: was the schema renamed during the call?",
							   *schema),
					 errhint("Call the function again.")));
		return false;
	}
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, check_tables, schema, QTW_EXAMINE_RTES_BEFORE);
	return expression_tree_walker(node, check_tables, schema);
}

void
hc_search_path_check(ParseState *pstate, Query *query)
{
	const char *text = pstate->p_sourcetext;
	Oid			schema;

	if (text == NULL || strncmp(text, MARK, sizeof(MARK) - 1) != 0)
		return;
	schema = (Oid) strtoul(text + sizeof(MARK) - 1, NULL, 10);
	(void) check_tables((Node *) query, &schema);
}
