/*
 * pool.c
 *		The workers of the autonomous calls, pooled in shared memory when
 *		holdcommit is preloaded: a slot per worker with its database, its
 *		state and two queues.
 *
 * A caller claims an idle worker of its database, or starts one while fewer
 * than holdcommit.max_workers run over all databases (an idle worker of
 * another database is asked to leave to make room), or waits for one.  It
 * writes its request into the slot's queues and posts it; the worker runs
 * it, answers, and the caller, once it has taken the answer (or given up),
 * makes the slot idle again: a slot's queues are re-created only while it
 * is idle, never detached, so no caller touches the queues of another's
 * call.  A worker idle for holdcommit.worker_idle_timeout leaves.  However
 * a worker or a caller ends, and in whichever order, the slot comes back: a
 * worker's exit frees its slot, or leaves it to the caller that still holds
 * its queues, whom it wakes; a caller that lets go (an answer, an error, a
 * cancel, its exit) makes the slot idle, or free if its worker has gone.
 *
 * No role and no database can take the whole pool: each has at most
 * holdcommit.max_workers - 1 calls in flight (one when the pool has one
 * worker), so another always finds a worker once a call ends.  A call
 * that finds no worker for holdcommit.worker_wait_timeout fails with 53000.
 */
#include "postgres.h"

#include <signal.h>

#include "commands/dbcommands.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/condition_variable.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "bgw/autonomous/autonomous.h"
#include "bgw/autonomous/autonomous_int.h"
#include "common/settings.h"

PGDLLEXPORT void hc_worker_pool_main(Datum main_arg);

typedef enum SlotState
{
	SLOT_FREE = 0,				/* no worker */
	SLOT_STARTING,				/* a worker is being started for dboid */
	SLOT_IDLE,					/* its worker waits for a call */
	SLOT_CLAIMED,				/* a caller is writing its request */
	SLOT_POSTED,				/* the request is there: the worker runs it */
	SLOT_ANSWERED,				/* the answer is there for the caller to take */
	SLOT_LEAVING				/* its worker is asked to leave, or leaves */
} SlotState;

typedef struct PoolSlot
{
	SlotState	state;
	Oid			dboid;
	pid_t		pid;			/* the worker's, once it runs; 0: gone (or not yet) */
	PGPROC	   *proc;
	uint32		generation;		/* of the worker started for it: a late one knows it is late */
	bool		leave;			/* its database is about to be dropped: leave once idle */
	PGPROC	   *caller;			/* CLAIMED, POSTED, ANSWERED: who waits */
	pid_t		caller_pid;
	Oid			caller_role;	/* its session user: its share of the pool */
	TimestampTz claimed_at;
	uint64		request;		/* the call it was last claimed for */
	bool		caller_gone;	/* the caller stopped waiting */
	TimestampTz idle_since;		/* IDLE: since when; STARTING: when it was started */
} PoolSlot;

typedef struct Pool
{
	slock_t		mutex;
	ConditionVariable changed;	/* a slot became idle or free */
	uint64		last_request;
	int			nslots;
	PoolSlot	slots[FLEXIBLE_ARRAY_MEMBER];
} Pool;

/* A worker that has not connected this long after its start never will. */
#define START_TIMEOUT_MS		10000

/* A slot whose worker runs, or is about to run, a caller's call. */
#define SLOT_BUSY(s) \
	((s)->state == SLOT_CLAIMED || (s)->state == SLOT_POSTED || (s)->state == SLOT_ANSWERED)

static const char *const slot_state_names[] = {
	[SLOT_FREE] = "free", [SLOT_STARTING] = "starting", [SLOT_IDLE] = "idle",
	[SLOT_CLAIMED] = "claimed", [SLOT_POSTED] = "running", [SLOT_ANSWERED] = "answered",
	[SLOT_LEAVING] = "leaving"
};

static Pool *pool = NULL;
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* In a pool worker: its slot, its generation there, and the call it is running. */
static int	serving_slot = -1;
static uint32 serving_generation = 0;
static uint64 serving_request = 0;

/* Where the slots end and the queues (two per slot) begin. */
static Size
pool_queues_offset(int nslots)
{
	return MAXALIGN(add_size(offsetof(Pool, slots), mul_size(nslots, sizeof(PoolSlot))));
}

/* One slot per possible background worker: no more workers can run. */
static Size
pool_size(void)
{
	return add_size(pool_queues_offset(max_worker_processes),
					mul_size(max_worker_processes, 2 * QUEUE_SIZE));
}

static shm_mq *
pool_queue(int slot, bool answer)
{
	return (shm_mq *) ((char *) pool + pool_queues_offset(pool->nslots) +
					   (Size) slot * 2 * QUEUE_SIZE + (answer ? QUEUE_SIZE : 0));
}

static void
pool_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(pool_size());
}

static void
pool_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	pool = ShmemInitStruct("holdcommit workers", pool_size(), &found);
	if (!found)
	{
		memset(pool, 0, pool_queues_offset(max_worker_processes));
		SpinLockInit(&pool->mutex);
		ConditionVariableInit(&pool->changed);
		pool->nslots = max_worker_processes;
	}
	LWLockRelease(AddinShmemInitLock);
}

void
hc_autonomous_init(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = pool_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = pool_shmem_startup;
}

/* Is there a pool to use? */
bool
pool_ready(void)
{
	return pool != NULL && hc_max_workers > 0;
}

/* 53000: no background worker could be started. */
void
no_worker(const char *function, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
			 errmsg("%s could not start a holdcommit worker", function),
			 errdetail("All max_worker_processes (%d) background workers are in use.",
					   max_worker_processes),
			 errhint("%s", hint)));
}

/* Start a pool worker in the slot the caller took for it (generation gen). */
static bool
pool_start(int i, uint32 gen, bool *stopped)
{
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;
	pid_t		pid;

	worker_describe(&worker, "hc_worker_pool_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "holdcommit worker for database %u", MyDatabaseId);
	worker.bgw_main_arg = Int32GetDatum(i);
	memcpy(worker.bgw_extra, &gen, sizeof(gen));
	*stopped = false;
	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
		*stopped = true;
	else if (WaitForBackgroundWorkerStartup(handle, &pid) != BGWH_STARTED)
		*stopped = true;
	if (*stopped)
	{
		SpinLockAcquire(&pool->mutex);
		if (pool->slots[i].state == SLOT_STARTING && pool->slots[i].generation == gen)
			pool->slots[i].state = SLOT_FREE;
		SpinLockRelease(&pool->mutex);
		ConditionVariableBroadcast(&pool->changed);
	}
	return !*stopped;
}

/*
 * Waiting for a worker of this database while every one of them waits for
 * a lock this transaction holds would never end: 40P01 instead.
 */
static void
pool_check_stuck(const char *function)
{
	pid_t	   *workers = palloc(sizeof(pid_t) * pool->nslots);
	int			n = 0;
	int			i;
	bool		stuck;

	SpinLockAcquire(&pool->mutex);
	for (i = 0; i < pool->nslots; i++)
		if (pool->slots[i].dboid == MyDatabaseId && pool->slots[i].state == SLOT_POSTED &&
			pool->slots[i].pid != 0)
			workers[n++] = pool->slots[i].pid;
	SpinLockRelease(&pool->mutex);
	stuck = n > 0;
	for (i = 0; i < n && stuck; i++)
		stuck = worker_waits_for(workers[i], MyProcPid);
	pfree(workers);
	if (stuck)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_DEADLOCK_DETECTED),
				 errmsg("%s waits for a holdcommit worker, and every one waits for a lock that this transaction holds",
						function),
				 errhint("Commit this transaction's changes to hc_locks or hc_attempts before calling %s, or raise holdcommit.max_workers.",
						 function)));
}

/*
 * Does a call counted in this caller's share (its role's or its database's)
 * wait, directly or through others, for a lock this caller holds?  Then the
 * share must not keep the caller from a worker that is there: it would wait
 * for a call that waits for it.
 */
static bool
pool_share_waits_for_me(Oid role)
{
	pid_t	   *workers = palloc(sizeof(pid_t) * pool->nslots);
	int			n = 0;
	int			i;
	bool		waits = false;

	SpinLockAcquire(&pool->mutex);
	for (i = 0; i < pool->nslots; i++)
	{
		PoolSlot   *slot = &pool->slots[i];

		if (slot->state == SLOT_POSTED && slot->pid != 0 &&
			(slot->caller_role == role || slot->dboid == MyDatabaseId))
			workers[n++] = slot->pid;
	}
	SpinLockRelease(&pool->mutex);
	for (i = 0; i < n && !waits; i++)
		waits = worker_waits_for(workers[i], MyProcPid);
	pfree(workers);
	return waits;
}

/* 53000: every worker this caller may use stayed busy. */
static void
pool_wait_timed_out(const char *function, int share)
{
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
			 errmsg("%s found no free holdcommit worker in %d ms", function,
					hc_worker_wait_timeout),
			 errdetail("holdcommit.max_workers (%d) run the lease and attempt calls of every database; a role or a database has at most %d of them at once.",
					   hc_max_workers, share),
			 errhint("Try again. If it recurs, see which calls hold the workers in hc_workers, and raise holdcommit.max_workers.")));
}

/*
 * Claim an idle worker of this database.  None idle: start one while fewer
 * than holdcommit.max_workers run, asking an idle worker of another
 * database to leave if that makes room; otherwise wait for one.  A role or
 * a database that has its share of calls in flight waits for one of them.
 */
static int
pool_claim(const char *function)
{
	int			claimed = -1;
	Oid			role = GetSessionUserId();
	TimestampTz waiting_since = GetCurrentTimestamp();
	TimestampTz last_stuck_check = waiting_since;
	bool		beyond_share = false;

	for (;;)
	{
		int			running = 0;
		int			start = -1;
		int			leaver = -1;
		PGPROC	   *leaver_proc = NULL;
		bool		ours = false;
		bool		starting = false;
		bool		stopped;
		uint32		gen = 0;
		int			share = Max(hc_max_workers - 1, 1);
		int			role_busy = 0;
		int			db_busy = 0;
		bool		may_take;
		TimestampTz now;
		int			i;

		CHECK_FOR_INTERRUPTS();
		hc_autonomous_check_client();
		now = GetCurrentTimestamp();
		SpinLockAcquire(&pool->mutex);
		for (i = 0; i < pool->nslots; i++)
		{
			PoolSlot   *slot = &pool->slots[i];

			if (slot->state == SLOT_STARTING && slot->pid == 0 &&
				TimestampDifferenceExceeds(slot->idle_since, now, START_TIMEOUT_MS))
				slot->state = SLOT_FREE;	/* its start failed, and its starter is gone */
			if (SLOT_BUSY(slot))
			{
				role_busy += slot->caller_role == role;
				db_busy += slot->dboid == MyDatabaseId;
			}
		}
		may_take = beyond_share || (role_busy < share && db_busy < share);
		for (i = 0; i < pool->nslots && claimed < 0; i++)
		{
			PoolSlot   *slot = &pool->slots[i];

			if (slot->state == SLOT_FREE)
			{
				if (start < 0)
					start = i;
				continue;
			}
			running++;
			if (slot->dboid != MyDatabaseId)
			{
				if (slot->state == SLOT_IDLE && leaver < 0)
					leaver = i;
				continue;
			}
			ours = true;
			if (slot->state == SLOT_STARTING)
				starting = true;
			if (slot->state == SLOT_IDLE && !slot->leave && may_take)
			{
				slot->state = SLOT_CLAIMED;
				slot->caller = MyProc;
				slot->caller_pid = MyProcPid;
				slot->caller_role = role;
				slot->claimed_at = now;
				slot->request = ++pool->last_request;
				slot->caller_gone = false;
				claimed = i;
			}
		}
		/* One start at a time per database: it is idle once it has connected. */
		if (claimed < 0 && start >= 0 && !starting && running < hc_max_workers && may_take)
		{
			pool->slots[start].state = SLOT_STARTING;
			pool->slots[start].dboid = MyDatabaseId;
			pool->slots[start].pid = 0;
			pool->slots[start].proc = NULL;
			pool->slots[start].leave = false;
			pool->slots[start].idle_since = now;
			gen = ++pool->slots[start].generation;
		}
		else
			start = -1;
		if (claimed < 0 && start < 0 && !ours && leaver >= 0 && may_take)
		{
			pool->slots[leaver].state = SLOT_LEAVING;
			leaver_proc = pool->slots[leaver].proc;
		}
		SpinLockRelease(&pool->mutex);

		if (claimed >= 0)
			break;
		if (leaver_proc != NULL)
			SetLatch(&leaver_proc->procLatch);
		if (start >= 0)
		{
			bool		started = pool_start(start, gen, &stopped);

			/*
			 * Its wait reset the latch, which a broadcast meanwhile may have
			 * set: the next sleep must not sleep through that.
			 */
			SetLatch(MyLatch);
			if (started)
				continue;
			if (!ours)
				no_worker(function, "Raise max_worker_processes (doc/operations.md counts what holdcommit takes), then try again.");
			/* No room now: wait for a worker of ours, as when the pool is full. */
		}
		now = GetCurrentTimestamp();
		if (hc_worker_wait_timeout > 0 &&
			TimestampDifferenceExceeds(waiting_since, now, hc_worker_wait_timeout))
			pool_wait_timed_out(function, share);
		if (TimestampDifferenceExceeds(last_stuck_check, now, DeadlockTimeout))
		{
			if (!may_take && pool_share_waits_for_me(role))
				beyond_share = true;
			else
				pool_check_stuck(function);
			last_stuck_check = now;
		}
		(void) ConditionVariableTimedSleep(&pool->changed, Min(DeadlockTimeout, CLIENT_CHECK_MS),
										   PG_WAIT_EXTENSION);
	}
	ConditionVariableCancelSleep();
	return claimed;
}

/*
 * The caller is done with the call, with its answer or without (an error,
 * a cancel): the worker is free for the next call once it has answered.
 * The pool's queues are only ever re-created in a slot that is idle, never
 * detached, so no caller can touch the queues of another's call.
 */
void
pool_end(Flight *f)
{
	PoolSlot   *slot;
	PGPROC	   *leaver = NULL;

	if (f->slot < 0)
		return;
	slot = &pool->slots[f->slot];
	SpinLockAcquire(&pool->mutex);
	if (slot->request == f->id)
	{
		if (slot->leave)
			leaver = slot->proc;
		slot->caller_gone = true;
		if (slot->pid == 0 && slot->state != SLOT_STARTING)
			slot->state = SLOT_FREE;	/* its worker has gone: the slot is ours to free */
		else if (slot->state == SLOT_CLAIMED || slot->state == SLOT_ANSWERED)
		{
			slot->state = SLOT_IDLE;
			slot->caller = NULL;
			slot->idle_since = GetCurrentTimestamp();
		}
	}
	SpinLockRelease(&pool->mutex);
	if (leaver != NULL)
		SetLatch(&leaver->procLatch);
	ConditionVariableBroadcast(&pool->changed);
	f->slot = -1;
}

/* Send the request to a worker of the pool: its answer comes in f->answer. */
void
pool_call(Flight *f, StringInfo req)
{
	PoolSlot   *slot;
	shm_mq	   *request;
	shm_mq	   *answer;
	PGPROC	   *worker;

	f->slot = pool_claim(f->function);
	slot = &pool->slots[f->slot];
	SpinLockAcquire(&pool->mutex);
	f->id = slot->request;
	worker = slot->proc;
	SpinLockRelease(&pool->mutex);

	/*
	 * Our side of each queue first, so that setting the worker's side sets
	 * only our own latch: the worker is woken once, by the request.
	 */
	request = shm_mq_create(pool_queue(f->slot, false), QUEUE_SIZE);
	answer = shm_mq_create(pool_queue(f->slot, true), QUEUE_SIZE);
	shm_mq_set_sender(request, MyProc);
	shm_mq_set_receiver(request, worker);
	shm_mq_set_receiver(answer, MyProc);
	shm_mq_set_sender(answer, worker);
	f->request = shm_mq_attach(request, NULL, NULL);
	f->answer = shm_mq_attach(answer, NULL, NULL);

	SpinLockAcquire(&pool->mutex);
	if (slot->request == f->id && slot->state == SLOT_CLAIMED)
		slot->state = SLOT_POSTED;
	SpinLockRelease(&pool->mutex);
	/* It fits in the queue: this wakes the worker and does not wait for it. */
	if (shm_mq_send(f->request, req->len, req->data, false, true) != SHM_MQ_SUCCESS)
		elog(ERROR, "could not send the call to the holdcommit worker");
}

/* The pool worker running a call for caller, if any (0: none). */
pid_t
pool_worker_of(pid_t caller)
{
	pid_t		worker = 0;
	int			i;

	if (pool == NULL)
		return 0;
	SpinLockAcquire(&pool->mutex);
	for (i = 0; i < pool->nslots && worker == 0; i++)
		if (pool->slots[i].state == SLOT_POSTED && pool->slots[i].caller_pid == caller &&
			!pool->slots[i].caller_gone)
			worker = pool->slots[i].pid;
	SpinLockRelease(&pool->mutex);
	return worker;
}

/*
 * The pool's worker of the call: its pid while it runs it, 0 when it is
 * gone without an answer, -1 when it has answered.
 */
pid_t
pool_flight_worker(Flight *f)
{
	PoolSlot   *slot = &pool->slots[f->slot];
	pid_t		pid = 0;

	SpinLockAcquire(&pool->mutex);
	if (slot->request == f->id && slot->state == SLOT_POSTED)
		pid = slot->pid;
	else if (slot->request == f->id && slot->state == SLOT_ANSWERED)
		pid = -1;
	SpinLockRelease(&pool->mutex);
	return pid;
}

bool
hc_autonomous_caller_gone(void)
{
	bool		gone = false;

	if (autonomous_once != NULL)
		return autonomous_once->caller_gone;
	if (serving_slot >= 0)
	{
		SpinLockAcquire(&pool->mutex);
		gone = pool->slots[serving_slot].caller_gone ||
			pool->slots[serving_slot].request != serving_request;
		SpinLockRelease(&pool->mutex);
	}
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
	PoolSlot   *slot = &pool->slots[DatumGetInt32(arg)];
	PGPROC	   *caller = NULL;

	SpinLockAcquire(&pool->mutex);
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
	SpinLockRelease(&pool->mutex);
	if (caller != NULL)
		SetLatch(&caller->procLatch);
	ConditionVariableBroadcast(&pool->changed);
}

/* The slot's answer is for a caller that has gone: the slot is idle again. */
static void
flight_orphaned(PoolSlot *slot, pid_t caller_pid)
{
	SpinLockAcquire(&pool->mutex);
	if (slot->state == SLOT_ANSWERED && slot->caller_pid == caller_pid)
	{
		slot->state = SLOT_IDLE;
		slot->caller = NULL;
		slot->idle_since = GetCurrentTimestamp();
	}
	SpinLockRelease(&pool->mutex);
	ConditionVariableBroadcast(&pool->changed);
}

/*
 * A pool worker: take the slot's calls one by one until it has been idle
 * for holdcommit.worker_idle_timeout, is asked to leave, or SIGTERM.
 */
void
hc_worker_pool_main(Datum main_arg)
{
	int			i = DatumGetInt32(main_arg);
	PoolSlot   *slot = &pool->slots[i];
	MemoryContext call_context;
	Oid			dboid;

	bool		late;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	autonomous_serving = true;
	serving_slot = i;
	memcpy(&serving_generation, MyBgworkerEntry->bgw_extra, sizeof(serving_generation));
	SpinLockAcquire(&pool->mutex);
	dboid = slot->state == SLOT_STARTING && slot->generation == serving_generation ?
		slot->dboid : InvalidOid;
	SpinLockRelease(&pool->mutex);
	if (!OidIsValid(dboid))
		proc_exit(0);
	before_shmem_exit(pool_worker_exit, Int32GetDatum(i));
	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
	worker_settings();
	call_context = AllocSetContextCreate(TopMemoryContext, "holdcommit call",
										 ALLOCSET_DEFAULT_SIZES);

	/* Still the slot's worker after connecting (not given up on as too slow)? */
	SpinLockAcquire(&pool->mutex);
	late = slot->state != SLOT_STARTING || slot->generation != serving_generation;
	if (!late)
	{
		slot->pid = MyProcPid;
		slot->proc = MyProc;
		slot->state = SLOT_IDLE;
		slot->idle_since = GetCurrentTimestamp();
	}
	SpinLockRelease(&pool->mutex);
	if (late)
		proc_exit(0);
	ConditionVariableBroadcast(&pool->changed);

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
		SpinLockAcquire(&pool->mutex);
		state = slot->state;
		caller_pid = slot->caller_pid;
		SpinLockRelease(&pool->mutex);
		/* An answer nobody takes: its caller ended without letting go. */
		if (state == SLOT_ANSWERED && BackendPidGetProc(caller_pid) == NULL)
			flight_orphaned(slot, caller_pid);
		SpinLockAcquire(&pool->mutex);
		state = slot->state;
		if (state == SLOT_IDLE)
		{
			idle_ms = TimestampDifferenceMilliseconds(slot->idle_since, GetCurrentTimestamp());
			if (idle_ms >= (long) hc_worker_idle_timeout * 1000L || hc_max_workers == 0 ||
				slot->leave)
				state = slot->state = SLOT_LEAVING;
		}
		serving_request = slot->request;
		SpinLockRelease(&pool->mutex);

		if (state == SLOT_LEAVING)
			proc_exit(0);
		if (state == SLOT_POSTED)
		{
			worker_serve(pool_queue(i, false), pool_queue(i, true), NULL, call_context);
			SpinLockAcquire(&pool->mutex);
			if (slot->caller_gone)
			{
				slot->state = SLOT_IDLE;
				slot->caller = NULL;
				slot->idle_since = GetCurrentTimestamp();
			}
			else
				slot->state = SLOT_ANSWERED;
			SpinLockRelease(&pool->mutex);
			ConditionVariableBroadcast(&pool->changed);
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

/*
 * DDL needs the database to itself: its workers leave as soon as they are
 * idle, and no caller claims them meanwhile.
 */
void
hc_autonomous_retire(Oid dboid)
{
	PGPROC	  **leavers;
	int			n = 0;
	int			i;

	if (pool == NULL)
		return;
	leavers = palloc(sizeof(PGPROC *) * pool->nslots);
	SpinLockAcquire(&pool->mutex);
	for (i = 0; i < pool->nslots; i++)
		if (pool->slots[i].dboid == dboid && pool->slots[i].state != SLOT_FREE)
		{
			pool->slots[i].leave = true;
			if (pool->slots[i].proc != NULL)
				leavers[n++] = pool->slots[i].proc;
		}
	SpinLockRelease(&pool->mutex);
	for (i = 0; i < n; i++)
		SetLatch(&leavers[i]->procLatch);
	pfree(leavers);
}

/*
 * hc_worker_state(): the pool's slots that are not free, from shared memory:
 * what each worker does and for whom.  No row: no worker runs (or holdcommit
 * is not preloaded, and every call starts a worker of its own).
 */
PG_FUNCTION_INFO_V1(hc_worker_state);

Datum
hc_worker_state(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	PoolSlot   *copy;
	int			n;
	int			i;

	InitMaterializedSRF(fcinfo, 0);
	if (pool == NULL)
		return (Datum) 0;
	n = pool->nslots;
	copy = palloc(sizeof(PoolSlot) * n);
	SpinLockAcquire(&pool->mutex);
	memcpy(copy, pool->slots, sizeof(PoolSlot) * n);
	SpinLockRelease(&pool->mutex);
	for (i = 0; i < n; i++)
	{
		PoolSlot   *slot = &copy[i];
		Datum		values[7];
		bool		nulls[7] = {false};
		char	   *name;

		if (slot->state == SLOT_FREE)
			continue;
		values[0] = Int32GetDatum(i);
		values[1] = CStringGetTextDatum(slot->state == SLOT_POSTED && slot->caller_gone ?
										"abandoned" : slot_state_names[slot->state]);
		name = get_database_name(slot->dboid);
		nulls[2] = name == NULL;
		values[2] = nulls[2] ? (Datum) 0 : DirectFunctionCall1(namein, CStringGetDatum(name));
		nulls[3] = slot->pid == 0;
		values[3] = Int32GetDatum(slot->pid);
		nulls[4] = nulls[5] = !SLOT_BUSY(slot);
		values[4] = Int32GetDatum(slot->caller_pid);
		name = nulls[5] ? NULL : GetUserNameFromId(slot->caller_role, true);
		nulls[5] = name == NULL;
		values[5] = nulls[5] ? (Datum) 0 : DirectFunctionCall1(namein, CStringGetDatum(name));
		values[6] = TimestampTzGetDatum(SLOT_BUSY(slot) ? slot->claimed_at : slot->idle_since);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
