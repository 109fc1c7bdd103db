/*
 * search_path.c
 *		The search path of a call's statements: pg_catalog, then the
 *		extension's schema, found by OID.
 *
 * Where the server has an override search path (15, 16), it is one: a list
 * of schema OIDs that namespace.c searches instead of search_path, so
 * renaming the schema and planting look-alikes under its old name redirects
 * nothing, even when a statement is re-planned.  From 17 on, search_path is
 * set in a GUC nest level to "pg_catalog, <the schema's name>, pg_temp"
 * (pg_temp last: unnamed, it would come first), undone at the pop, or by
 * the (sub)transaction's abort on an error.
 *
 * Review on a new major: namespace.c's search path (how a path is set and
 * searched, what the plan cache compares to decide a re-plan) and guc.c's
 * nest levels.
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"

#include "compat.h"
#include "core/search_path.h"

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
	char	   *value = "pg_catalog, pg_temp";

	if (OidIsValid(schema))
	{
		char	   *name = get_namespace_name(schema);

		if (name == NULL)
			elog(ERROR, "cache lookup failed for schema %u", schema);
		value = psprintf("pg_catalog, %s, pg_temp", quote_identifier(name));
	}
	(void) set_config_option("search_path", value, PGC_USERSET, PGC_S_SESSION,
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
