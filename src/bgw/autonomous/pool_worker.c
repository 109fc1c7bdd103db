/*
 * pool_worker.c
 *		A worker of the pool (pool.c): started by a caller for one slot and
 *		one database, it takes the slot's calls one by one (remote.c runs
 *		each), until it has been idle for holdcommit.worker_idle_timeout, is
 *		asked to leave, or SIGTERM.
 *
 * Invariants:
 *   1. The worker takes its slot only if the slot is still STARTING with the
 *      generation it was started for, once before it connects and once
 *      after: a worker its starter gave up on leaves without touching it.
 *   2. It runs a call only while the slot is POSTED, and leaves only from
 *      IDLE (then LEAVING, under the spinlock): never with a call that a
 *      caller waits for, unless it is terminated.
 *   3. However it exits (before_shmem_exit), its slot is free, unless a
 *      caller still holds the slot's queues: that caller, woken, frees it.
 *   4. An answer no caller takes (the caller ended without letting go) is
 *      dropped once the caller's process is gone: the slot is idle again.
 *
 * Review on a new major: the background worker's connection by OID and its
 * signals, latches and condition variables, how a process is found by pid.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/condition_variable.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "storage/spin.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "bgw/autonomous/autonomous_int.h"
#include "common/settings.h"

PGDLLEXPORT void hc_worker_pool_main(Datum main_arg);

/* In a pool worker: its slot, its generation there, and the call it is running. */
static int	serving_slot = -1;
static uint32 serving_generation = 0;
static uint64 serving_request = 0;

/* In a pool worker: has the caller of the call being run stopped waiting? */
static bool
pool_caller_gone(void)
{
	bool		gone;

	SpinLockAcquire(&hc_pool->mutex);
	gone = hc_pool->slots[serving_slot].caller_gone ||
		hc_pool->slots[serving_slot].request != serving_request;
	SpinLockRelease(&hc_pool->mutex);
	return gone;
}

/*
 * However a pool worker ends: its slot is free, unless a caller still holds
 * its queues, who frees it once it has seen the worker gone (and learns it
 * now).  A caller that has let go already (a cancel, a timeout, its exit,
 * while the worker ran its call) never will: the slot is free at once.  A
 * worker that came too late for its slot (another generation holds it)
 * leaves it alone.
 */
static void
pool_worker_exit(int code, Datum arg)
{
	PoolSlot   *slot = &hc_pool->slots[DatumGetInt32(arg)];
	PGPROC	   *caller = NULL;

	SpinLockAcquire(&hc_pool->mutex);
	if (slot->generation == serving_generation && (slot->pid == MyProcPid || slot->pid == 0))
	{
		/*
		 * A caller that holds the slot's queues frees the slot itself, once
		 * it has seen the worker gone: nobody may re-create them before.
		 */
		if (SLOT_BUSY(slot) && !slot->caller_gone)
			caller = slot->caller;
		else
			slot->state = SLOT_FREE;
		slot->pid = 0;
		slot->proc = NULL;
	}
	SpinLockRelease(&hc_pool->mutex);
	if (caller != NULL)
		SetLatch(&caller->procLatch);
	ConditionVariableBroadcast(&hc_pool->changed);
}

/* The slot's answer is for a caller that has gone: the slot is idle again. */
static void
flight_orphaned(PoolSlot *slot, pid_t caller_pid)
{
	SpinLockAcquire(&hc_pool->mutex);
	if (slot->state == SLOT_ANSWERED && slot->caller_pid == caller_pid)
	{
		slot->state = SLOT_IDLE;
		slot->caller = NULL;
		slot->idle_since = GetCurrentTimestamp();
	}
	SpinLockRelease(&hc_pool->mutex);
	ConditionVariableBroadcast(&hc_pool->changed);
}

/*
 * A pool worker: take the slot's calls one by one until it has been idle
 * for holdcommit.worker_idle_timeout, is asked to leave, or SIGTERM.
 */
void
hc_worker_pool_main(Datum main_arg)
{
	int			i = DatumGetInt32(main_arg);
	PoolSlot   *slot = &hc_pool->slots[i];
	MemoryContext call_context;
	Oid			dboid;

	bool		late;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	hc_autonomous_serving = true;
	serving_slot = i;
	memcpy(&serving_generation, MyBgworkerEntry->bgw_extra, sizeof(serving_generation));
	SpinLockAcquire(&hc_pool->mutex);
	dboid = slot->state == SLOT_STARTING && slot->generation == serving_generation ?
		slot->dboid : InvalidOid;
	SpinLockRelease(&hc_pool->mutex);
	if (!OidIsValid(dboid))
		proc_exit(0);
	before_shmem_exit(pool_worker_exit, Int32GetDatum(i));
	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
	hc_remote_worker_settings();
	call_context = AllocSetContextCreate(TopMemoryContext, "holdcommit call",
										 ALLOCSET_DEFAULT_SIZES);

	/* Still the slot's worker after connecting (not given up on as too slow)? */
	SpinLockAcquire(&hc_pool->mutex);
	late = slot->state != SLOT_STARTING || slot->generation != serving_generation;
	if (!late)
	{
		slot->pid = MyProcPid;
		slot->proc = MyProc;
		slot->state = SLOT_IDLE;
		slot->idle_since = GetCurrentTimestamp();
	}
	SpinLockRelease(&hc_pool->mutex);
	if (late)
		proc_exit(0);
	ConditionVariableBroadcast(&hc_pool->changed);

	for (;;)
	{
		SlotState	state;
		long		idle_ms = 0;
		pid_t		caller_pid;

		/* A cancel that came after its call was answered is for nobody. */
		QueryCancelPending = false;
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		SpinLockAcquire(&hc_pool->mutex);
		state = slot->state;
		caller_pid = slot->caller_pid;
		SpinLockRelease(&hc_pool->mutex);
		/* An answer nobody takes: its caller ended without letting go. */
		if (state == SLOT_ANSWERED && BackendPidGetProc(caller_pid) == NULL)
			flight_orphaned(slot, caller_pid);
		SpinLockAcquire(&hc_pool->mutex);
		state = slot->state;
		if (state == SLOT_IDLE)
		{
			idle_ms = TimestampDifferenceMilliseconds(slot->idle_since, GetCurrentTimestamp());
			if (idle_ms >= (long) hc_worker_idle_timeout * 1000L || hc_max_workers == 0 ||
				slot->leave)
				state = slot->state = SLOT_LEAVING;
		}
		serving_request = slot->request;
		SpinLockRelease(&hc_pool->mutex);

		if (state == SLOT_LEAVING)
			proc_exit(0);
		if (state == SLOT_POSTED)
		{
			hc_remote_worker_serve(hc_pool_queue(i, false), hc_pool_queue(i, true), NULL,
								   call_context, pool_caller_gone);
			SpinLockAcquire(&hc_pool->mutex);
			if (slot->caller_gone)
			{
				slot->state = SLOT_IDLE;
				slot->caller = NULL;
				slot->idle_since = GetCurrentTimestamp();
			}
			else
				slot->state = SLOT_ANSWERED;
			SpinLockRelease(&hc_pool->mutex);
			ConditionVariableBroadcast(&hc_pool->changed);
			pgstat_report_stat(false);
			continue;
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 state == SLOT_ANSWERED ? 1000L :
						 Max((long) hc_worker_idle_timeout * 1000L - idle_ms, 1),
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

