/*
 * compat.h
 *		What differs between the PostgreSQL majors holdcommit supports (15 to
 *		19): the one file of src/ that tests PG_VERSION_NUM.
 *
 * Each change is one macro or inline function here, named after what it
 * does, with the major that changed it; the rest of src/ calls that and
 * never tests a version (test/project/source.sh checks).  Include it after
 * postgres.h.
 *
 * Review on a new major, besides compiling with -Werror: these files bypass
 * the executor or hook the server, and each says in its header what to look
 * at there.
 *   holdcommit.c                    the hooks, the module magic
 *   scaleout/null_routing.c         planner_hook
 *   common/errors.c                 emit_log_hook
 *   core/fetch.c                    row reads and locks without the executor
 *   core/scan.c                     an index's rows in order, without the executor
 *   core/write.c                    row inserts and updates without the executor
 *   core/search_path.c              the search path of a call's statements
 *   core/version.c                  a catalog scan, a syscache callback
 *   lease/session.c                 the lock manager, by hand
 *   admin/guard.c                   an event trigger
 *   bgw/sweeper/sweeper_state.c     ProcessUtility_hook, shared memory
 *   bgw/sweeper/launcher.c, sweeper.c        background workers
 *   bgw/autonomous/autonomous.c, pool.c, pool_worker.c, remote.c
 *                                   background workers, dsm, shm_mq
 * Then raise the bound of the #error below.
 */
#ifndef HOLDCOMMIT_COMPAT_H
#define HOLDCOMMIT_COMPAT_H

#include "access/genam.h"
#include "access/tableam.h"
#include "catalog/pg_database.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "parser/analyze.h"
#include "storage/lock.h"
#include "utils/acl.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#if PG_VERSION_NUM < 150000
#error "holdcommit needs PostgreSQL 15 or later (it supports 15 to 19)"
#elif PG_VERSION_NUM >= 200000
#error "holdcommit supports PostgreSQL 15 to 19: for a new major, review the files src/compat.h lists under \"Review on a new major\", then raise its bound"
#endif

/*
 * 19: the planner hook and standard_planner take the EXPLAIN state too:
 * HC_PLANNER_ARGS declares a hook's parameters, HC_PLANNER_PASS hands them on.
 */
#if PG_VERSION_NUM >= 190000
#define HC_PLANNER_ARGS \
	Query *parse, const char *query_string, int cursor_options, ParamListInfo params, \
	ExplainState *es
#define HC_PLANNER_PASS parse, query_string, cursor_options, params, es
#else
#define HC_PLANNER_ARGS \
	Query *parse, const char *query_string, int cursor_options, ParamListInfo params
#define HC_PLANNER_PASS parse, query_string, cursor_options, params
#endif

/* 16: the varlena macros (VARSIZE, VARDATA, ...) moved from postgres.h to varatt.h. */
#if PG_VERSION_NUM >= 160000
#include "varatt.h"
#endif

/*
 * 18: PG_MODULE_MAGIC_EXT names the library and its version (the
 * extension's default_version, HC_LIBRARY_VERSION from the Makefile).
 */
#if PG_VERSION_NUM >= 180000
#define HC_MODULE_MAGIC PG_MODULE_MAGIC_EXT(.name = "holdcommit", .version = HC_LIBRARY_VERSION)
#else
#define HC_MODULE_MAGIC PG_MODULE_MAGIC
#endif

/*
 * 17: OverrideSearchPath (PushOverrideSearchPath, PopOverrideSearchPath) is
 * gone; core/search_path.c sets search_path in a GUC nest level instead.
 */
#if PG_VERSION_NUM < 170000
#define HC_OVERRIDE_SEARCH_PATH 1
#endif

/* 17: LockHeldByMe gained orstronger (false: this very mode, as before). */
static inline bool
hc_lock_held_by_me(const LOCKTAG *tag, LOCKMODE mode)
{
#if PG_VERSION_NUM >= 170000
	return LockHeldByMe(tag, mode, false);
#else
	return LockHeldByMe(tag, mode);
#endif
}

/*
 * 17: MyBackendId (1 to MaxBackends) became MyProcNumber (from 0): this
 * backend's index in an array of MaxBackends entries.
 */
#if PG_VERSION_NUM >= 170000
#include "storage/procnumber.h"
#define HC_MY_BACKEND_INDEX MyProcNumber
#else
#include "storage/backendid.h"
#define HC_MY_BACKEND_INDEX (MyBackendId - 1)
#endif

/*
 * 18: errhint_internal, a hint that is not looked up in a message catalog
 * (before, errhint always looks).
 */
#if PG_VERSION_NUM >= 180000
#define hc_errhint_internal errhint_internal
#else
#define hc_errhint_internal errhint
#endif

/* 18: MAX_BACKENDS moved from postmaster/postmaster.h to storage/procnumber.h. */
#if PG_VERSION_NUM >= 180000
#include "storage/procnumber.h"
#else
#include "postmaster/postmaster.h"
#endif

/* 19: get_database_name moved from commands/dbcommands.h to utils/lsyscache.h. */
#if PG_VERSION_NUM >= 190000
#include "utils/lsyscache.h"
#else
#include "commands/dbcommands.h"
#endif

/* 19: post_parse_analyze_hook's JumbleState became const. */
#if PG_VERSION_NUM >= 190000
typedef const JumbleState HcJumbleState;
#else
typedef JumbleState HcJumbleState;
#endif

/* 16: pg_database_ownercheck became object_ownercheck(DatabaseRelationId, ...). */
#if PG_VERSION_NUM >= 160000
#define hc_database_ownercheck(dboid, roleid) \
	object_ownercheck(DatabaseRelationId, (dboid), (roleid))
#else
#define hc_database_ownercheck(dboid, roleid) pg_database_ownercheck((dboid), (roleid))
#endif

/*
 * An index scan without instrumentation: 18 added its argument (NULL), 19
 * the scan's flags (SO_NONE: a scan that may lock and change rows).
 */
#if PG_VERSION_NUM >= 190000
#define hc_index_beginscan(heap, index, snapshot, nkeys, norderbys) \
	index_beginscan((heap), (index), (snapshot), NULL, (nkeys), (norderbys), SO_NONE)
#elif PG_VERSION_NUM >= 180000
#define hc_index_beginscan(heap, index, snapshot, nkeys, norderbys) \
	index_beginscan((heap), (index), (snapshot), NULL, (nkeys), (norderbys))
#else
#define hc_index_beginscan(heap, index, snapshot, nkeys, norderbys) \
	index_beginscan((heap), (index), (snapshot), (nkeys), (norderbys))
#endif

/*
 * A jsonb value built with pushJsonbValue: 19 keeps the builder's state in
 * a JsonbInState and puts the value built in its result (pushJsonbValue
 * returns nothing).  Start with HcJsonbBuild b = {0}; the value is b.result
 * after the last push.
 */
#if PG_VERSION_NUM >= 190000
typedef JsonbInState HcJsonbBuild;

static inline void
hc_jsonb_push(HcJsonbBuild *b, JsonbIteratorToken token, JsonbValue *value)
{
	pushJsonbValue(b, token, value);
}
#else
typedef struct HcJsonbBuild
{
	JsonbParseState *state;
	JsonbValue *result;
} HcJsonbBuild;

static inline void
hc_jsonb_push(HcJsonbBuild *b, JsonbIteratorToken token, JsonbValue *value)
{
	b->result = pushJsonbValue(&b->state, token, value);
}
#endif

/*
 * A numeric as an int32, *overflow set if it does not fit: 19 replaced
 * numeric_int4_opt_error by numeric_int4_safe, which reports into a soft
 * error context.
 */
#if PG_VERSION_NUM >= 190000
#include "nodes/miscnodes.h"
#endif
static inline int32
hc_numeric_int4(Numeric num, bool *overflow)
{
#if PG_VERSION_NUM >= 190000
	ErrorSaveContext escontext = {T_ErrorSaveContext};
	int32		result = numeric_int4_safe(num, (Node *) &escontext);

	*overflow = escontext.error_occurred;
	return result;
#else
	*overflow = false;
	return numeric_int4_opt_error(num, overflow);
#endif
}

/*
 * The range table of an EState that core/write.c makes by hand, one entry
 * per table written (relation i is entry i + 1), with what the statement
 * would need of each: privileges (perms, checked here as the executor
 * checks a statement's, its hook too), the columns inserted and updated
 * (an update's decide the UPDATE OF triggers, the generated columns to
 * compute, the indexes' unchanged hint).  16 moved these from the
 * RangeTblEntry into an RTEPermissionInfo and renamed ExecCheckRTPerms
 * ExecCheckPermissions; 18 gave ExecInitRangeTable the entries left after
 * pruning (all of them).
 */
#if PG_VERSION_NUM >= 160000
#include "parser/parse_relation.h"
#endif
static inline void
hc_exec_range_table(EState *estate, int n, const Oid *relids, const char *relkinds,
					const AclMode *perms, Bitmapset *const *inserted, Bitmapset *const *updated)
{
	List	   *rtable = NIL;
	List	   *perminfos = NIL;
	int			i;

	for (i = 0; i < n; i++)
	{
		RangeTblEntry *rte = makeNode(RangeTblEntry);
#if PG_VERSION_NUM >= 160000
		RTEPermissionInfo *perm;
#endif

		rte->rtekind = RTE_RELATION;
		rte->relid = relids[i];
		rte->relkind = relkinds[i];
		rte->rellockmode = RowExclusiveLock;
#if PG_VERSION_NUM >= 160000
		perm = addRTEPermissionInfo(&perminfos, rte);
		perm->requiredPerms = perms[i];
		perm->insertedCols = inserted[i];
		perm->updatedCols = updated[i];
#else
		rte->requiredPerms = perms[i];
		rte->insertedCols = inserted[i];
		rte->updatedCols = updated[i];
#endif
		rtable = lappend(rtable, rte);
	}
#if PG_VERSION_NUM >= 180000
	(void) ExecCheckPermissions(rtable, perminfos, true);
	ExecInitRangeTable(estate, rtable, perminfos, bms_add_range(NULL, 1, n));
#elif PG_VERSION_NUM >= 160000
	(void) ExecCheckPermissions(rtable, perminfos, true);
	ExecInitRangeTable(estate, rtable, perminfos);
#else
	(void) perminfos;
	(void) ExecCheckRTPerms(rtable, true);
	ExecInitRangeTable(estate, rtable);
#endif
}

/*
 * The index entries of a row written (core/write.c), unique and exclusion
 * constraints checked: 16 added onlySummarizing (an update the heap made
 * HOT still owes the summarizing indexes, BRIN, an entry), 19 made the
 * booleans flags.
 */
static inline List *
hc_insert_index_tuples(ResultRelInfo *rri, TupleTableSlot *slot, EState *estate, bool update,
					   bool only_summarizing)
{
#if PG_VERSION_NUM >= 190000
	return ExecInsertIndexTuples(rri, estate,
								 (update ? EIIT_IS_UPDATE : 0) |
								 (only_summarizing ? EIIT_ONLY_SUMMARIZING : 0),
								 slot, NIL, NULL);
#elif PG_VERSION_NUM >= 160000
	return ExecInsertIndexTuples(rri, slot, estate, update, false, NULL, NIL, only_summarizing);
#else
	Assert(!only_summarizing);
	return ExecInsertIndexTuples(rri, slot, estate, update, false, NULL, NIL);
#endif
}

/*
 * The update of a row by its TID (core/write.c), and which indexes need an
 * entry for the new version: 16 made simple_table_tuple_update's answer
 * TU_UpdateIndexes (none, all, or the summarizing ones only) from a bool.
 */
typedef enum HcIndexUpdate
{
	HC_INDEXES_NONE,
	HC_INDEXES_ALL,
	HC_INDEXES_SUMMARIZING
} HcIndexUpdate;

static inline HcIndexUpdate
hc_simple_table_tuple_update(Relation rel, ItemPointer tid, TupleTableSlot *slot,
							 Snapshot snapshot)
{
#if PG_VERSION_NUM >= 160000
	TU_UpdateIndexes update;

	simple_table_tuple_update(rel, tid, slot, snapshot, &update);
	return update == TU_None ? HC_INDEXES_NONE :
		update == TU_Summarizing ? HC_INDEXES_SUMMARIZING : HC_INDEXES_ALL;
#else
	bool		update;

	simple_table_tuple_update(rel, tid, slot, snapshot, &update);
	return update ? HC_INDEXES_ALL : HC_INDEXES_NONE;
#endif
}

#endif							/* HOLDCOMMIT_COMPAT_H */
