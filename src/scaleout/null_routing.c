/*
 * null_routing.c
 *		A bare call of a distributed holdcommit function whose routing
 *		argument is null, refused before Citus plans it.
 *
 * Citus delegates SELECT hc_hold($1, ...), and SELECT ... FROM hc_hold($1,
 * ...), to the node of $1's shard: its
 * planner hashes the argument to find the shard, and with a null constant
 * (or a parameter bound to null) it hashes a null pointer, and the backend
 * crashes, every session of the coordinator with it (Citus 13.2 and 14.0,
 * function_call_delegation.c).  This planner hook runs before Citus' (Citus
 * is preloaded first, doc/scale-out.md) and raises what the call itself
 * would raise on a single node: 22004 "ARG must not be null".
 *
 * Invariants:
 *   1. Only the shapes Citus delegates are looked at: a SELECT of one
 *      function call, or from one.  Catalogs are read only when its first
 *      argument is null: every other query costs a few pointer tests.
 *   2. Only a function of holdcommit's schema, in a database with Citus, is
 *      refused; anything else goes on to the next planner as it came.
 */
#include "postgres.h"

#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/planner.h"
#include "parser/parsetree.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "compat.h"
#include "core/version.h"
#include "scaleout/null_routing.h"

static planner_hook_type prev_planner = NULL;

/* Is arg a null constant, or a parameter bound to null? */
static bool
arg_is_null(Node *arg, ParamListInfo params)
{
	arg = strip_implicit_coercions(arg);
	if (IsA(arg, Const))
		return ((Const *) arg)->constisnull;
	if (IsA(arg, Param) && ((Param *) arg)->paramkind == PARAM_EXTERN && params != NULL)
	{
		int			id = ((Param *) arg)->paramid;

		if (id > 0 && id <= params->numParams)
		{
			ParamExternData prm_data;
			ParamExternData *prm = params->paramFetch != NULL ?
				params->paramFetch(params, id, false, &prm_data) : &params->params[id - 1];

			return prm != NULL && OidIsValid(prm->ptype) && prm->isnull;
		}
	}
	return false;
}

/* Refuse fn's call as the function itself would, if it is holdcommit's, under Citus. */
static void
refuse_if_holdcommit(Oid fn)
{
	Oid			schema;
	HeapTuple	proctup;
	Datum		names;
	bool		isnull;
	char	   *first = NULL;

	if (!OidIsValid(get_extension_oid("citus", true)) ||
		!hc_extension_row(NULL, &schema, NULL) || get_func_namespace(fn) != schema)
		return;
	proctup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fn));
	if (!HeapTupleIsValid(proctup))
		return;
	names = SysCacheGetAttr(PROCOID, proctup, Anum_pg_proc_proargnames, &isnull);
	if (!isnull)
	{
		Datum	   *elems;
		int			n;

		deconstruct_array(DatumGetArrayTypeP(names), TEXTOID, -1, false, TYPALIGN_INT,
						  &elems, NULL, &n);
		if (n > 0)
			first = TextDatumGetCString(elems[0]);
	}
	ReleaseSysCache(proctup);
	ereport(ERROR,
			(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
			 errmsg("%s must not be null", first != NULL ? first : "the first argument")));
}

/* If expr is a call whose first argument is null, refuse it if it is holdcommit's. */
static void
check_call(Node *expr, ParamListInfo params)
{
	if (expr != NULL && IsA(expr, FuncExpr))
	{
		FuncExpr   *call = (FuncExpr *) expr;

		if (call->args != NIL && arg_is_null(linitial(call->args), params))
			refuse_if_holdcommit(call->funcid);
	}
}

static PlannedStmt *
null_routing_planner(HC_PLANNER_ARGS)
{
	if (parse->commandType == CMD_SELECT && parse->jointree != NULL)
	{
		List	   *from = parse->jointree->fromlist;

		if (from == NIL && list_length(parse->targetList) == 1)
			check_call((Node *) linitial_node(TargetEntry, parse->targetList)->expr, params);
		else if (list_length(from) == 1 && IsA(linitial(from), RangeTblRef))
		{
			RangeTblEntry *rte = rt_fetch(linitial_node(RangeTblRef, from)->rtindex,
										  parse->rtable);

			if (rte->rtekind == RTE_FUNCTION && list_length(rte->functions) == 1)
				check_call(linitial_node(RangeTblFunction, rte->functions)->funcexpr, params);
		}
	}
	return prev_planner != NULL ? prev_planner(HC_PLANNER_PASS) : standard_planner(HC_PLANNER_PASS);
}

/* At _PG_init, after Citus': this hook first, then Citus'. */
void
hc_null_routing_register(void)
{
	prev_planner = planner_hook;
	planner_hook = null_routing_planner;
}
