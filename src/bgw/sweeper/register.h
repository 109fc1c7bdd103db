/*
 * register.h
 *		What _PG_init (holdcommit.c) needs of the background sweeper to set it
 *		up while shared_preload_libraries is processed: its shared memory, the
 *		bodies of its hooks and its launcher's description.  Only holdcommit.c
 *		and the files that define these include it.
 */
#ifndef HOLDCOMMIT_SWEEPER_REGISTER_H
#define HOLDCOMMIT_SWEEPER_REGISTER_H

#include "access/xact.h"
#include "postmaster/bgworker.h"
#include "storage/lwlock.h"
#include "tcop/utility.h"

/* The named LWLock tranche of the table's one lock. */
#define HC_SWEEPER_LWLOCK_TRANCHE	"holdcommit sweeper"

/* sweeper_state.c: the table and the pauses, in shared memory. */
extern Size hc_sweeper_shmem_size(void);
extern void hc_sweeper_shmem_init(LWLock *lock);

/* sweeper_state.c: the ProcessUtility_hook's body, and the XactCallback. */
extern void hc_sweeper_process_utility(PlannedStmt *pstmt, const char *queryString,
									   bool readOnlyTree, ProcessUtilityContext context,
									   ParamListInfo params, QueryEnvironment *queryEnv,
									   DestReceiver *dest, QueryCompletion *qc,
									   ProcessUtility_hook_type next, void (*leave) (Oid dboid));
extern void hc_sweeper_xact_callback(XactEvent event, void *arg);

/* launcher.c: the launcher, a static background worker. */
extern void hc_launcher_describe(BackgroundWorker *launcher);

#endif							/* HOLDCOMMIT_SWEEPER_REGISTER_H */
