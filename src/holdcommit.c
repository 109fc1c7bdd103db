/*
 * holdcommit.c
 *		Module entry point: _PG_init defines the settings (common/settings.c),
 *		installs every hook and registers every background worker.  The SQL
 *		functions live in their domain's folder (hold/, stock/, lease/, admin/).
 *
 * Each layer hands over what is installed here in its register.h, which no
 * other file includes outside the layer: the bodies of its hooks, the size
 * and set-up of its shared memory, the description of its static worker.
 * Here the hooks chain to those installed before, and one layer's hook is
 * handed what another's needs (a pause lets the autonomous workers go), so
 * that the layers never call each other.  What a process registers for
 * itself at run time stays with the code that needs it: a worker's or a
 * caller's before_shmem_exit, a pause's PG_ENSURE_ERROR_CLEANUP, a cache's
 * invalidation callback on first use.
 *
 * Review on a new major: each hook's signature and when the server calls
 * it (emit_log_hook, post_parse_analyze_hook, shmem_request_hook and
 * shmem_startup_hook, ProcessUtility_hook, the xact callback),
 * RegisterBackgroundWorker's fields, and the module magic (compat.h).
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "parser/analyze.h"
#include "tcop/utility.h"

#include "compat.h"
#include "bgw/autonomous/register.h"
#include "bgw/sweeper/register.h"
#include "common/errors.h"
#include "common/settings.h"
#include "core/search_path.h"
#include "lease/register.h"
#include "scaleout/register.h"
#include "stock/register.h"

HC_MODULE_MAGIC;

void		_PG_init(void);

static emit_log_hook_type prev_emit_log_hook = NULL;
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;
static ProcessUtility_hook_type prev_process_utility = NULL;
static post_parse_analyze_hook_type prev_post_parse_analyze_hook = NULL;

/* emit_log_hook: refusals stay out of the server log (common/errors.c). */
static void
hc_emit_log(ErrorData *edata)
{
	hc_filter_log(edata);
	if (prev_emit_log_hook)
		prev_emit_log_hook(edata);
}

/*
 * shmem_request_hook: the background sweeper's table and its lock, the pool,
 * the watch of the reserves of each product.
 */
static void
hc_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(hc_sweeper_shmem_size());
	RequestNamedLWLockTranche(HC_SWEEPER_LWLOCK_TRANCHE, 1);
	RequestAddinShmemSpace(hc_pool_shmem_size());
	RequestAddinShmemSpace(hc_stock_watch_shmem_size());
	RequestNamedLWLockTranche(HC_SPREADERS_LWLOCK_TRANCHE, 1);
}

/* shmem_startup_hook: create them, or find them. */
static void
hc_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	hc_sweeper_shmem_init(&(GetNamedLWLockTranche(HC_SWEEPER_LWLOCK_TRANCHE))->lock);
	hc_pool_shmem_init();
	hc_stock_watch_shmem_init(&(GetNamedLWLockTranche(HC_SPREADERS_LWLOCK_TRANCHE))->lock);
	LWLockRelease(AddinShmemInitLock);
}

/*
 * post_parse_analyze_hook: a holdcommit statement (re)analysed reaches the
 * tables of its call's schema only (core/search_path.c).
 */
static void
hc_post_parse_analyze(ParseState *pstate, Query *query, HcJumbleState *jstate)
{
	if (prev_post_parse_analyze_hook)
		prev_post_parse_analyze_hook(pstate, query, jstate);
	hc_search_path_check(pstate, query);
}

/* What holds a database that a command needs to itself lets it go. */
static void
hc_database_leave(Oid dboid)
{
	hc_autonomous_retire(dboid);
	hc_stock_spreaders_stop(dboid);
}

/*
 * ProcessUtility_hook: a command that needs a database to itself pauses its
 * sweeping (bgw/sweeper) and lets its autonomous workers (bgw/autonomous)
 * and its spreaders (bgw/spreader) go; a PREPARE TRANSACTION is named to
 * the fenced writes (lease/fence.c).
 */
static void
hc_process_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
				   ProcessUtilityContext context, ParamListInfo params,
				   QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *parsetree = pstmt->utilityStmt;

	if (IsA(parsetree, TransactionStmt) &&
		((TransactionStmt *) parsetree)->kind == TRANS_STMT_PREPARE)
		hc_fence_prepare_named(((TransactionStmt *) parsetree)->gid);
	hc_sweeper_process_utility(pstmt, queryString, readOnlyTree, context, params, queryEnv,
							   dest, qc, prev_process_utility, hc_database_leave);
}

/*
 * Keep refusals out of the server log (errors.c), check holdcommit's
 * statements when they are analysed (core/search_path.c).  Then, only while
 * shared_preload_libraries is processed, set up the background sweeper
 * (bgw/sweeper) and the pool of workers for autonomous calls (bgw/autonomous).
 */
void
_PG_init(void)
{
	BackgroundWorker launcher;

	hc_settings_define();
	prev_emit_log_hook = emit_log_hook;
	emit_log_hook = hc_emit_log;
	prev_post_parse_analyze_hook = post_parse_analyze_hook;
	post_parse_analyze_hook = hc_post_parse_analyze;
	hc_scaleout_register();

	if (!process_shared_preload_libraries_in_progress)
		return;
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = hc_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = hc_shmem_startup;
	prev_process_utility = ProcessUtility_hook ? ProcessUtility_hook : standard_ProcessUtility;
	ProcessUtility_hook = hc_process_utility;
	RegisterXactCallback(hc_sweeper_xact_callback, NULL);
	hc_launcher_describe(&launcher);
	RegisterBackgroundWorker(&launcher);
}
