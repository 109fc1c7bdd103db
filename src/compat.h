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
 *   common/errors.c                 emit_log_hook
 *   core/fetch.c                    row reads and locks without the executor
 *   core/search_path.c              the search path of a call's statements
 *   core/version.c                  a catalog scan, a syscache callback
 *   lease/lease.c                   the lock manager, by hand
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

#endif							/* HOLDCOMMIT_COMPAT_H */
