/*
 * pool.c
 *		The workers of the autonomous calls, pooled in shared memory when
 *		holdcommit is preloaded: a slot per worker with its database, its
 *		state and two queues; a caller's side of it (claim a worker, post the
 *		request, let the worker go), what a waiting caller looks at, and
 *		hc_worker_state().  The worker's side: pool_worker.c.
 *
 * A caller claims an idle worker of its database, or starts one while fewer
 * than holdcommit.max_workers run over all databases (an idle worker of
 * another database is asked to leave to make room), or waits for one.  It
 * writes its request into the slot's queues and posts it; the worker runs
 * it, answers, and the caller, once it has taken the answer (or given up),
 * makes the slot idle again.  A worker idle for
 * holdcommit.worker_idle_timeout leaves.
 *
 * Invariants:
 *   1. Every field of every slot, and last_request, is read and written
 *      under the pool's spinlock, never held across anything that can fail
 *      or wait; what a check needs is copied out under it (hc_worker_state,
 *      the deadlock looks).
 *   2. A slot's queues are re-created only by the caller that has just
 *      claimed it idle, never detached, so no caller touches the queues of
 *      another's call.
 *   3. However a worker or a caller ends, and in whichever order, the slot
 *      comes back: a worker's exit frees its slot, or leaves it to the
 *      caller that still holds its queues, whom it wakes; a caller that
 *      lets go (an answer, an error, a cancel, its exit) makes the slot
 *      idle, or free if its worker has gone.
 *   4. A slot's generation changes with each worker started for it: a
 *      worker that comes too late (its starter gave up on it) sees another
 *      generation and leaves the slot alone.
 *   5. No role and no database can take the whole pool: each has at most
 *      holdcommit.max_workers - 1 calls in flight (one when the pool has one
 *      worker), so another always finds a worker once a call ends.  A call
 *      that finds no worker for holdcommit.worker_wait_timeout fails with
 *      53000.
 *
 * Review on a new major: the shared memory hooks' order, dynamic background
 * workers, condition variables, latches and shm_mq.
 */
#include "postgres.h"

#include <signal.h>

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/condition_variable.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "tcop/tcopprot.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "compat.h"
#include "bgw/autonomous/autonomous.h"
#include "bgw/autonomous/autonomous_int.h"
#include "bgw/autonomous/register.h"
#include "common/settings.h"

/* A worker that has not connected this long after its start never will. */
#define START_TIMEOUT_MS		10000

static const char *const slot_state_names[] = {
	[SLOT_FREE] = "free", [SLOT_STARTING] = "starting", [SLOT_IDLE] = "idle",
	[SLOT_CLAIMED] = "claimed", [SLOT_POSTED] = "running", [SLOT_ANSWERED] = "answered",
	[SLOT_LEAVING] = "leaving"
};

Pool	   *hc_pool = NULL;

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

/* The request (answer false) or the answer queue of a slot. */
shm_mq *
hc_pool_queue(int slot, bool answer)
{
	return (shm_mq *) ((char *) hc_pool + pool_queues_offset(hc_pool->nslots) +
					   (Size) slot * 2 * QUEUE_SIZE + (answer ? QUEUE_SIZE : 0));
}

/* The pool (shmem_request_hook, in holdcommit.c). */
Size
hc_pool_shmem_size(void)
{
	return pool_size();
}

/*
 * Create it, or find it (shmem_startup_hook, in holdcommit.c, which holds
 * AddinShmemInitLock).
 */
void
hc_pool_shmem_init(void)
{
	bool		found;

	hc_pool = ShmemInitStruct("holdcommit workers", pool_size(), &found);
	if (!found)
	{
		memset(hc_pool, 0, pool_queues_offset(max_worker_processes));
		SpinLockInit(&hc_pool->mutex);
		ConditionVariableInit(&hc_pool->changed);
		hc_pool->nslots = max_worker_processes;
	}
}

/* Is there a pool to use? */
bool
hc_pool_ready(void)
{
	return hc_pool != NULL && hc_max_workers > 0;
}

/* 53000: no background worker could be started. */
void
hc_autonomous_no_worker(const char *function, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
			 errmsg("%s could not start a holdcommit worker", function),
			 errdetail("All max_worker_processes (%d) background workers are in use.",
					   max_worker_processes),
			 errhint("%s", hint)));
}

/* ------------------------------------------------------------------------
 * What a caller looks at while it waits (for a worker, for its answer)
 * ------------------------------------------------------------------------
 */

/*
 * Is pid among the processes that the worker waits for, directly or not?
 * A lock wait is an edge (pg_blocking_pids), and so is a caller waiting for
 * its pool worker: the deadlock detector sees the first, only we the second.
 */
bool
hc_autonomous_waits_for(pid_t worker, pid_t pid)
{
	List	   *todo = list_make1_int(worker);
	List	   *seen = NIL;
	bool		found = false;

	while (todo != NIL && !found && list_length(seen) < 64)
	{
		int			next = linitial_int(todo);
		pid_t		worker_of_next;
		ArrayType  *blockers;
		Datum	   *elems;
		int			n;
		int			i;

		todo = list_delete_first(todo);
		if (list_member_int(seen, next))
			continue;
		seen = lappend_int(seen, next);
		worker_of_next = hc_pool_worker_of(next);
		if (worker_of_next != 0)
			todo = lappend_int(todo, worker_of_next);
		blockers = DatumGetArrayTypeP(DirectFunctionCall1(pg_blocking_pids, Int32GetDatum(next)));
		deconstruct_array(blockers, INT4OID, 4, true, TYPALIGN_INT, &elems, NULL, &n);
		for (i = 0; i < n; i++)
		{
			if (DatumGetInt32(elems[i]) == pid)
				found = true;
			todo = lappend_int(todo, DatumGetInt32(elems[i]));
		}
	}
	list_free(todo);
	list_free(seen);
	return found;
}

/*
 * Has the client of this backend gone?  Then end the session, as
 * PostgreSQL does when client_connection_check_interval finds it gone: the
 * call it waited for goes on (or not) without it.  Looked at once every
 * CLIENT_CHECK_MS at most.  pq_check_connection() resets the latch, which
 * may have been set by the wake-up this caller waits for (its condition
 * variable's broadcast, its worker's answer): it is set again, so that the
 * caller's next wait looks once more instead of sleeping through it.
 */
extern bool pq_check_connection(void);	/* libpq/libpq.h, which needs GSSAPI's headers */

void
hc_autonomous_check_client(void)
{
	static TimestampTz last_check = 0;
	TimestampTz now;

	if (whereToSendOutput != DestRemote || MyProcPort == NULL)
		return;
	now = GetCurrentTimestamp();
	if (!TimestampDifferenceExceeds(last_check, now, CLIENT_CHECK_MS))
		return;
	last_check = now;
	if (pq_check_connection())
	{
		SetLatch(MyLatch);
		return;
	}
	ClientConnectionLost = 1;
	InterruptPending = 1;
	CHECK_FOR_INTERRUPTS();
}

/* Start a pool worker in the slot the caller took for it (generation gen). */
static bool
pool_start(int i, uint32 gen, bool *stopped)
{
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;
	pid_t		pid;

	hc_remote_worker_describe(&worker, "hc_worker_pool_main");
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
		SpinLockAcquire(&hc_pool->mutex);
		if (hc_pool->slots[i].state == SLOT_STARTING && hc_pool->slots[i].generation == gen)
			hc_pool->slots[i].state = SLOT_FREE;
		SpinLockRelease(&hc_pool->mutex);
		ConditionVariableBroadcast(&hc_pool->changed);
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
	pid_t	   *workers = palloc(sizeof(pid_t) * hc_pool->nslots);
	int			n = 0;
	int			i;
	bool		stuck;

	SpinLockAcquire(&hc_pool->mutex);
	for (i = 0; i < hc_pool->nslots; i++)
		if (hc_pool->slots[i].dboid == MyDatabaseId && hc_pool->slots[i].state == SLOT_POSTED &&
			hc_pool->slots[i].pid != 0)
			workers[n++] = hc_pool->slots[i].pid;
	SpinLockRelease(&hc_pool->mutex);
	stuck = n > 0;
	for (i = 0; i < n && stuck; i++)
		stuck = hc_autonomous_waits_for(workers[i], MyProcPid);
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
	pid_t	   *workers = palloc(sizeof(pid_t) * hc_pool->nslots);
	int			n = 0;
	int			i;
	bool		waits = false;

	SpinLockAcquire(&hc_pool->mutex);
	for (i = 0; i < hc_pool->nslots; i++)
	{
		PoolSlot   *slot = &hc_pool->slots[i];

		if (slot->state == SLOT_POSTED && slot->pid != 0 &&
			(slot->caller_role == role || slot->dboid == MyDatabaseId))
			workers[n++] = slot->pid;
	}
	SpinLockRelease(&hc_pool->mutex);
	for (i = 0; i < n && !waits; i++)
		waits = hc_autonomous_waits_for(workers[i], MyProcPid);
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
		SpinLockAcquire(&hc_pool->mutex);
		for (i = 0; i < hc_pool->nslots; i++)
		{
			PoolSlot   *slot = &hc_pool->slots[i];

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
		for (i = 0; i < hc_pool->nslots && claimed < 0; i++)
		{
			PoolSlot   *slot = &hc_pool->slots[i];

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
				slot->request = ++hc_pool->last_request;
				slot->caller_gone = false;
				claimed = i;
			}
		}
		/* One start at a time per database: it is idle once it has connected. */
		if (claimed < 0 && start >= 0 && !starting && running < hc_max_workers && may_take)
		{
			hc_pool->slots[start].state = SLOT_STARTING;
			hc_pool->slots[start].dboid = MyDatabaseId;
			hc_pool->slots[start].pid = 0;
			hc_pool->slots[start].proc = NULL;
			hc_pool->slots[start].leave = false;
			hc_pool->slots[start].idle_since = now;
			gen = ++hc_pool->slots[start].generation;
		}
		else
			start = -1;
		if (claimed < 0 && start < 0 && !ours && leaver >= 0 && may_take)
		{
			hc_pool->slots[leaver].state = SLOT_LEAVING;
			leaver_proc = hc_pool->slots[leaver].proc;
		}
		SpinLockRelease(&hc_pool->mutex);

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
				hc_autonomous_no_worker(function, "Raise max_worker_processes (doc/operations.md counts what holdcommit takes), then try again.");
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
		(void) ConditionVariableTimedSleep(&hc_pool->changed, Min(DeadlockTimeout, CLIENT_CHECK_MS),
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
hc_pool_end(Flight *f)
{
	PoolSlot   *slot;
	PGPROC	   *leaver = NULL;

	if (f->slot < 0)
		return;
	slot = &hc_pool->slots[f->slot];
	SpinLockAcquire(&hc_pool->mutex);
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
	SpinLockRelease(&hc_pool->mutex);
	if (leaver != NULL)
		SetLatch(&leaver->procLatch);
	ConditionVariableBroadcast(&hc_pool->changed);
	f->slot = -1;
}

/* Send the request to a worker of the pool: its answer comes in f->answer. */
void
hc_pool_call(Flight *f, StringInfo req)
{
	PoolSlot   *slot;
	shm_mq	   *request;
	shm_mq	   *answer;
	PGPROC	   *worker;

	f->slot = pool_claim(f->function);
	slot = &hc_pool->slots[f->slot];
	SpinLockAcquire(&hc_pool->mutex);
	f->id = slot->request;
	worker = slot->proc;
	SpinLockRelease(&hc_pool->mutex);

	/*
	 * Our side of each queue first, so that setting the worker's side sets
	 * only our own latch: the worker is woken once, by the request.
	 */
	request = shm_mq_create(hc_pool_queue(f->slot, false), QUEUE_SIZE);
	answer = shm_mq_create(hc_pool_queue(f->slot, true), QUEUE_SIZE);
	shm_mq_set_sender(request, MyProc);
	shm_mq_set_receiver(request, worker);
	shm_mq_set_receiver(answer, MyProc);
	shm_mq_set_sender(answer, worker);
	f->request = shm_mq_attach(request, NULL, NULL);
	f->answer = shm_mq_attach(answer, NULL, NULL);

	SpinLockAcquire(&hc_pool->mutex);
	if (slot->request == f->id && slot->state == SLOT_CLAIMED)
		slot->state = SLOT_POSTED;
	SpinLockRelease(&hc_pool->mutex);
	/* It fits in the queue: this wakes the worker and does not wait for it. */
	if (shm_mq_send(f->request, req->len, req->data, false, true) != SHM_MQ_SUCCESS)
		elog(ERROR, "could not send the call to the holdcommit worker");
}

/* The pool worker running a call for caller, if any (0: none). */
pid_t
hc_pool_worker_of(pid_t caller)
{
	pid_t		worker = 0;
	int			i;

	if (hc_pool == NULL)
		return 0;
	SpinLockAcquire(&hc_pool->mutex);
	for (i = 0; i < hc_pool->nslots && worker == 0; i++)
		if (hc_pool->slots[i].state == SLOT_POSTED && hc_pool->slots[i].caller_pid == caller &&
			!hc_pool->slots[i].caller_gone)
			worker = hc_pool->slots[i].pid;
	SpinLockRelease(&hc_pool->mutex);
	return worker;
}

/*
 * The pool's worker of the call: its pid while it runs it, 0 when it is
 * gone without an answer, -1 when it has answered.
 */
pid_t
hc_pool_flight_worker(Flight *f)
{
	PoolSlot   *slot = &hc_pool->slots[f->slot];
	pid_t		pid = 0;

	SpinLockAcquire(&hc_pool->mutex);
	if (slot->request == f->id && slot->state == SLOT_POSTED)
		pid = slot->pid;
	else if (slot->request == f->id && slot->state == SLOT_ANSWERED)
		pid = -1;
	SpinLockRelease(&hc_pool->mutex);
	return pid;
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

	if (hc_pool == NULL)
		return;
	leavers = palloc(sizeof(PGPROC *) * hc_pool->nslots);
	SpinLockAcquire(&hc_pool->mutex);
	for (i = 0; i < hc_pool->nslots; i++)
		if (hc_pool->slots[i].dboid == dboid && hc_pool->slots[i].state != SLOT_FREE)
		{
			hc_pool->slots[i].leave = true;
			if (hc_pool->slots[i].proc != NULL)
				leavers[n++] = hc_pool->slots[i].proc;
		}
	SpinLockRelease(&hc_pool->mutex);
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
	if (hc_pool == NULL)
		return (Datum) 0;
	n = hc_pool->nslots;
	copy = palloc(sizeof(PoolSlot) * n);
	SpinLockAcquire(&hc_pool->mutex);
	memcpy(copy, hc_pool->slots, sizeof(PoolSlot) * n);
	SpinLockRelease(&hc_pool->mutex);
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
