/*
 * autonomous.c
 *		Lease and attempt calls committed before they return, whatever the
 *		caller's context.
 *
 * A fencing token or a PROCEED marker that a caller has seen must never be
 * taken back by the caller's rollback: not at the end of a transaction
 * block, not when a later statement of a pipeline fails, not when the
 * statement around a PL function or a trigger fails.  So the caller does
 * not make the change itself: it sends the call (the function's OID, its
 * arguments, who calls, a few settings) to a background worker connected
 * to the same database, which runs the very same function in a transaction
 * of its own, commits it (synchronously: at least synchronous_commit = on)
 * and only then answers over a shared-memory queue, as parallel query and
 * pg_background do.  The caller returns the answer, or raises the error the
 * worker raised, with its SQLSTATE, detail and hint.
 *
 * With holdcommit preloaded the workers are a pool in shared memory: a slot
 * per worker with the worker's database and two queues.  A caller claims an
 * idle worker of its database, or starts one while fewer than
 * holdcommit.max_workers run over all databases (an idle worker of another
 * database is asked to leave to make room); a worker idle for
 * holdcommit.worker_idle_timeout leaves.  Without the preload (or with
 * holdcommit.max_workers = 0) every call starts a worker of its own, with
 * its queues in a dynamic shared memory segment: the same function, slower.
 *
 * What the caller cannot see, it checks itself.  PostgreSQL's deadlock
 * detector does not know that the caller waits for its worker, so every
 * deadlock_timeout the caller asks whether the worker waits, directly or
 * through others, for a lock the caller holds (its transaction changed
 * hc_locks, took LOCK TABLE, ran ALTER EXTENSION); then it cancels the
 * worker, which cannot have committed, and raises 40P01.  A worker that
 * ends before it answers is an error; whether its transaction committed
 * the caller cannot know, and need not: calling again with the same
 * arguments gets the same token, or the same attempt, back.  A caller that
 * stops waiting (cancel, statement_timeout) leaves its request to be
 * committed whole or not at all; the worker stops an acquire's retries.
 */
#include "postgres.h"

#include <signal.h>

#include "access/htup_details.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "libpq/pqformat.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/condition_variable.h"
#include "storage/dsm.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "storage/shm_mq.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "tcop/tcopprot.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timeout.h"

#include "autonomous.h"
#include "holdcommit.h"

PGDLLEXPORT void hc_worker_pool_main(Datum main_arg);
PGDLLEXPORT void hc_worker_once_main(Datum main_arg);

/* Each way of a call: a request or an answer is a few hundred bytes. */
#define QUEUE_SIZE				8192

/* The settings of the caller that the worker runs the call with. */
static const char *const caller_settings[] = {
	"lock_timeout", "statement_timeout", "holdcommit.max_ttl"
};

/* ------------------------------------------------------------------------
 * The pool, in shared memory
 * ------------------------------------------------------------------------
 */

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
	pid_t		pid;			/* the worker's, once it runs */
	PGPROC	   *proc;
	PGPROC	   *caller;			/* CLAIMED, POSTED, ANSWERED: who waits */
	pid_t		caller_pid;
	uint64		request;		/* the call it was last claimed for */
	bool		caller_gone;	/* the caller stopped waiting */
	TimestampTz idle_since;		/* IDLE: since when; STARTING: when it was started */
} PoolSlot;

/* A worker that has not connected this long after its start never will. */
#define START_TIMEOUT_MS		10000

typedef struct Pool
{
	slock_t		mutex;
	ConditionVariable changed;	/* a slot became idle or free */
	uint64		last_request;
	int			nslots;
	PoolSlot	slots[FLEXIBLE_ARRAY_MEMBER];
} Pool;

static Pool *pool = NULL;
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

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

/* ------------------------------------------------------------------------
 * Requests and answers
 * ------------------------------------------------------------------------
 */

/* The storage of a function's arguments and result. */
typedef struct CallShape
{
	int			nargs;
	int16		typlen[FUNC_MAX_ARGS];
	bool		typbyval[FUNC_MAX_ARGS];
	int16		rettyplen;
	bool		rettypbyval;
} CallShape;

static void
shape_of(Oid fn_oid, CallShape *shape)
{
	Oid		   *argtypes;
	Oid			rettype = get_func_signature(fn_oid, &argtypes, &shape->nargs);
	int			i;

	for (i = 0; i < shape->nargs; i++)
		get_typlenbyval(argtypes[i], &shape->typlen[i], &shape->typbyval[i]);
	get_typlenbyval(rettype, &shape->rettyplen, &shape->rettypbyval);
}

/* The caller's: cached in fn_extra. */
static CallShape *
call_shape(FunctionCallInfo fcinfo)
{
	if (fcinfo->flinfo->fn_extra == NULL)
	{
		CallShape  *shape = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(CallShape));

		shape_of(fcinfo->flinfo->fn_oid, shape);
		fcinfo->flinfo->fn_extra = shape;
	}
	return fcinfo->flinfo->fn_extra;
}

/* Longer texts are cut, so that an answer always fits in its queue. */
#define ANSWER_TEXT_MAX		2000

static void
send_string(StringInfo buf, const char *s)
{
	if (s == NULL)
		pq_sendint32(buf, (uint32) -1);
	else
	{
		pq_sendint32(buf, strlen(s));
		pq_sendbytes(buf, s, strlen(s));
	}
}

static char *
get_string(StringInfo buf)
{
	int			len = (int) pq_getmsgint(buf, 4);

	if (len < 0)
		return NULL;
	return pnstrdup(pq_getmsgbytes(buf, len), len);
}

/* A value, detoasted: the worker cannot read the caller's toast. */
static void
send_datum(StringInfo buf, Datum value, bool isnull, int16 typlen, bool typbyval)
{
	const char *data;
	int			size;

	pq_sendbyte(buf, isnull);
	if (isnull)
		return;
	if (typbyval)
	{
		pq_sendint64(buf, (int64) value);
		return;
	}
	if (typlen == -1)
	{
		struct varlena *v = pg_detoast_datum_packed((struct varlena *) DatumGetPointer(value));

		data = (const char *) v;
		size = VARSIZE_ANY(v);
	}
	else
	{
		Assert(typlen > 0);
		data = DatumGetPointer(value);
		size = typlen;
	}
	pq_sendint32(buf, size);
	pq_sendbytes(buf, data, size);
}

static Datum
get_datum(StringInfo buf, bool typbyval, bool *isnull)
{
	int			size;
	char	   *copy;

	*isnull = pq_getmsgbyte(buf) != 0;
	if (*isnull)
		return (Datum) 0;
	if (typbyval)
		return (Datum) pq_getmsgint64(buf);
	size = (int) pq_getmsgint(buf, 4);
	copy = palloc(size);
	memcpy(copy, pq_getmsgbytes(buf, size), size);
	return PointerGetDatum(copy);
}

/*
 * The request: the function and its arguments, the caller's role and
 * session, and the settings to run it with.  The commit is synchronous
 * whatever the caller's synchronous_commit (remote_apply stays).
 */
static void
request_build(StringInfo req, FunctionCallInfo fcinfo, const CallShape *shape)
{
	int			i;

	initStringInfo(req);
	pq_sendint32(req, fcinfo->flinfo->fn_oid);
	pq_sendint32(req, GetUserId());
	pq_sendint32(req, MyProcPid);
	pq_sendint64(req, MyStartTimestamp);
	send_string(req, synchronous_commit == SYNCHRONOUS_COMMIT_REMOTE_APPLY ? "remote_apply" : "on");
	pq_sendint32(req, (uint32) lengthof(caller_settings));
	for (i = 0; i < (int) lengthof(caller_settings); i++)
	{
		send_string(req, caller_settings[i]);
		send_string(req, GetConfigOption(caller_settings[i], false, false));
	}
	pq_sendint32(req, shape->nargs);
	for (i = 0; i < shape->nargs; i++)
		send_datum(req, fcinfo->args[i].value, fcinfo->args[i].isnull,
				   shape->typlen[i], shape->typbyval[i]);
}

/* The caller: return the worker's result, or raise its error. */
static Datum
answer_take(FunctionCallInfo fcinfo, const CallShape *shape, char *data, Size len)
{
	StringInfoData buf;
	ErrorData	edata = {0};

	buf.data = data;
	buf.len = (int) len;
	buf.maxlen = (int) len;
	buf.cursor = 0;
	if (pq_getmsgbyte(&buf) == 'R')
		return get_datum(&buf, shape->rettypbyval, &fcinfo->isnull);

	edata.elevel = ERROR;
	edata.sqlerrcode = (int) pq_getmsgint(&buf, 4);
	edata.message = get_string(&buf);
	edata.detail = get_string(&buf);
	edata.hint = get_string(&buf);
	edata.context = get_string(&buf);
	ThrowErrorData(&edata);
	pg_unreachable();
}

/* ------------------------------------------------------------------------
 * The caller
 * ------------------------------------------------------------------------
 */

static bool serving = false;	/* this process is a worker */
static int	serving_slot = -1;	/* its pool slot; -1: a worker of one call */
static uint64 serving_request = 0;
static int32 caller_pid = 0;
static TimestampTz caller_started = 0;

bool
hc_autonomous_here(void)
{
	return serving;
}

int32
hc_session_pid(void)
{
	return serving ? caller_pid : MyProcPid;
}

TimestampTz
hc_session_started(void)
{
	return serving ? caller_started : MyStartTimestamp;
}

/* A call in flight, as its caller sees it. */
typedef struct Flight
{
	const char *function;
	int			slot;			/* the pool slot, or -1 */
	uint64		id;				/* the call, in the pool */
	BackgroundWorkerHandle *handle; /* a worker of one call */
	shm_mq_handle *request;
	shm_mq_handle *answer;
} Flight;

/* Is pid among the processes that the worker waits for, directly or not? */
static bool
worker_waits_for(pid_t worker, pid_t pid)
{
	List	   *todo = list_make1_int(worker);
	List	   *seen = NIL;
	bool		found = false;

	while (todo != NIL && !found && list_length(seen) < 64)
	{
		int			next = linitial_int(todo);
		ArrayType  *blockers;
		Datum	   *elems;
		int			n;
		int			i;

		todo = list_delete_first(todo);
		if (list_member_int(seen, next))
			continue;
		seen = lappend_int(seen, next);
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
 * The worker running the call: its pid while it runs it, 0 when it is gone
 * without an answer, -1 while that cannot be told yet (not started, or it
 * has answered).
 */
static pid_t
flight_worker(Flight *f)
{
	pid_t		pid = 0;

	if (f->slot >= 0)
	{
		PoolSlot   *slot = &pool->slots[f->slot];

		SpinLockAcquire(&pool->mutex);
		if (slot->request == f->id && slot->state == SLOT_POSTED)
			pid = slot->pid;
		else if (slot->request == f->id && slot->state == SLOT_ANSWERED)
			pid = -1;
		SpinLockRelease(&pool->mutex);
		return pid;
	}
	switch (GetBackgroundWorkerPid(f->handle, &pid))
	{
		case BGWH_STARTED:
			return pid;
		case BGWH_NOT_YET_STARTED:
			return -1;
		default:
			return 0;
	}
}

/* The worker ended, or will never start, without an answer. */
static void
flight_lost(Flight *f)
{
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("the holdcommit worker running %s ended before it answered", f->function),
			 errdetail("Its transaction may or may not have committed."),
			 errhint("Call %s again with the same arguments: the same owner gets the same token, or the same attempt, back.",
					 f->function)));
}

/*
 * Wait for the answer.  From deadlock_timeout on, look every
 * deadlock_timeout for what the deadlock detector cannot see: the worker
 * waiting, directly or through others, for a lock of ours.  The worker is
 * stuck behind our lock until our transaction ends, so it cannot have
 * committed: cancel it and fail.
 */
static char *
flight_await(Flight *f, Size *len)
{
	TimestampTz next_check = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), DeadlockTimeout);
	void	   *data;
	char	   *copy;

	for (;;)
	{
		shm_mq_result res = shm_mq_receive(f->answer, len, &data, true);
		pid_t		worker;
		long		wait_ms;

		if (res == SHM_MQ_SUCCESS)
			break;
		worker = res == SHM_MQ_DETACHED ? 0 : flight_worker(f);
		if (worker == 0)
		{
			/* It may have answered just before it went. */
			if (res != SHM_MQ_DETACHED &&
				shm_mq_receive(f->answer, len, &data, true) == SHM_MQ_SUCCESS)
				break;
			flight_lost(f);
		}
		wait_ms = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), next_check);
		if (wait_ms <= 0)
		{
			if (worker > 0 && worker_waits_for(worker, MyProcPid))
			{
				(void) kill(worker, SIGINT);
				ereport(ERROR,
						(errcode(ERRCODE_T_R_DEADLOCK_DETECTED),
						 errmsg("%s waits for a lock that this transaction holds", f->function),
						 errdetail("holdcommit makes the change in a transaction of its own, which needs a lock this transaction took: it changed a row of hc_locks or hc_attempts, locked one of holdcommit's tables, or altered the extension. Nothing was changed."),
						 errhint("Commit those changes before calling %s, or call it outside this transaction.",
								 f->function)));
			}
			next_check = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), DeadlockTimeout);
			wait_ms = DeadlockTimeout;
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 Max(wait_ms, 1), PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	/* It lies in the queue, which is the slot's (or the segment's). */
	copy = palloc(*len);
	memcpy(copy, data, *len);
	return copy;
}

/* 53000: no background worker could be started. */
static void
no_worker(const char *function, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
			 errmsg("%s could not start a holdcommit worker", function),
			 errdetail("All max_worker_processes (%d) background workers are in use.",
					   max_worker_processes),
			 errhint("%s", hint)));
}

/* Start a pool worker in the slot the caller took for it. */
static bool
pool_start(int i, bool *stopped)
{
	BackgroundWorker worker = {0};
	BackgroundWorkerHandle *handle;
	pid_t		pid;

	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "holdcommit");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "hc_worker_pool_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "holdcommit worker for database %u", MyDatabaseId);
	snprintf(worker.bgw_type, BGW_MAXLEN, "holdcommit worker");
	worker.bgw_main_arg = Int32GetDatum(i);
	worker.bgw_notify_pid = MyProcPid;
	*stopped = false;
	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
		*stopped = true;
	else if (WaitForBackgroundWorkerStartup(handle, &pid) != BGWH_STARTED)
		*stopped = true;
	if (*stopped)
	{
		SpinLockAcquire(&pool->mutex);
		if (pool->slots[i].state == SLOT_STARTING && pool->slots[i].pid == 0)
			pool->slots[i].state = SLOT_FREE;
		SpinLockRelease(&pool->mutex);
	}
	return !*stopped;
}

/*
 * Claim an idle worker of this database.  None idle: start one while fewer
 * than holdcommit.max_workers run, asking an idle worker of another
 * database to leave if that makes room; otherwise wait for one.
 */
static int
pool_claim(const char *function)
{
	int			claimed = -1;

	for (;;)
	{
		int			running = 0;
		int			start = -1;
		int			leaver = -1;
		PGPROC	   *leaver_proc = NULL;
		bool		ours = false;
		bool		starting = false;
		bool		stopped;
		int			i;

		SpinLockAcquire(&pool->mutex);
		for (i = 0; i < pool->nslots && claimed < 0; i++)
		{
			PoolSlot   *slot = &pool->slots[i];

			if (slot->state == SLOT_STARTING && slot->pid == 0 &&
				TimestampDifferenceExceeds(slot->idle_since, GetCurrentTimestamp(), START_TIMEOUT_MS))
				slot->state = SLOT_FREE;	/* its start failed, and its starter is gone */
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
			if (slot->state == SLOT_IDLE)
			{
				slot->state = SLOT_CLAIMED;
				slot->caller = MyProc;
				slot->caller_pid = MyProcPid;
				slot->request = ++pool->last_request;
				slot->caller_gone = false;
				claimed = i;
			}
		}
		/* One start at a time per database: it is idle once it has connected. */
		if (claimed < 0 && start >= 0 && !starting && running < hc_max_workers)
		{
			pool->slots[start].state = SLOT_STARTING;
			pool->slots[start].dboid = MyDatabaseId;
			pool->slots[start].pid = 0;
			pool->slots[start].idle_since = GetCurrentTimestamp();
		}
		else
			start = -1;
		if (claimed < 0 && start < 0 && !ours && leaver >= 0)
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
			if (!pool_start(start, &stopped) && !ours)
				no_worker(function, "Raise max_worker_processes (doc/operations.md counts what holdcommit takes), then try again.");
			continue;
		}
		(void) ConditionVariableTimedSleep(&pool->changed, 1000, PG_WAIT_EXTENSION);
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
static void
flight_end(Flight *f)
{
	PoolSlot   *slot;

	if (f->slot < 0)
		return;
	slot = &pool->slots[f->slot];
	SpinLockAcquire(&pool->mutex);
	if (slot->request == f->id)
	{
		slot->caller_gone = true;
		if (slot->state == SLOT_CLAIMED || slot->state == SLOT_ANSWERED)
		{
			slot->state = slot->pid != 0 ? SLOT_IDLE : SLOT_FREE;
			slot->caller = NULL;
			slot->idle_since = GetCurrentTimestamp();
		}
	}
	SpinLockRelease(&pool->mutex);
	ConditionVariableBroadcast(&pool->changed);
	f->slot = -1;
}

/* Send the request to a worker of the pool and take its answer. */
static char *
pool_call(Flight *f, StringInfo req, Size *len)
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
	return flight_await(f, len);
}

/* The segment of a worker of one call: its database, then the two queues. */
#define ONCE_HEADER		MAXALIGN(sizeof(Oid))

/*
 * Start a worker for this one call and take its answer.  The segment is
 * the call's own and goes with the caller's transaction, error or not.
 */
static char *
once_call(Flight *f, StringInfo req, Size *len)
{
	dsm_segment *seg = dsm_create(ONCE_HEADER + 2 * QUEUE_SIZE, 0);
	char	   *base = dsm_segment_address(seg);
	BackgroundWorker worker = {0};
	shm_mq	   *request;
	shm_mq	   *answer;
	char	   *reply;

	*(Oid *) base = MyDatabaseId;
	request = shm_mq_create(base + ONCE_HEADER, QUEUE_SIZE);
	answer = shm_mq_create(base + ONCE_HEADER + QUEUE_SIZE, QUEUE_SIZE);
	shm_mq_set_sender(request, MyProc);
	shm_mq_set_receiver(answer, MyProc);

	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "holdcommit");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "hc_worker_once_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "holdcommit worker for pid %d", MyProcPid);
	snprintf(worker.bgw_type, BGW_MAXLEN, "holdcommit worker");
	worker.bgw_main_arg = UInt32GetDatum(dsm_segment_handle(seg));
	worker.bgw_notify_pid = MyProcPid;
	if (!RegisterDynamicBackgroundWorker(&worker, &f->handle))
		no_worker(f->function, "Raise max_worker_processes, or preload holdcommit so that its workers are pooled (doc/operations.md).");

	f->request = shm_mq_attach(request, seg, f->handle);
	f->answer = shm_mq_attach(answer, seg, f->handle);
	if (shm_mq_send(f->request, req->len, req->data, false, true) != SHM_MQ_SUCCESS)
		flight_lost(f);
	reply = flight_await(f, len);
	dsm_detach(seg);
	return reply;
}

/* Was the function created or replaced by this transaction, not committed yet? */
static pg_noinline bool
defined_here(Oid fn_oid)
{
	HeapTuple	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fn_oid));
	bool		here;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for function %u", fn_oid);
	here = TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(tup->t_data));
	ReleaseSysCache(tup);
	return here;
}

/* The call in flight in this backend, for its exit. */
static Flight *in_flight = NULL;

/* A caller that exits while it waits (FATAL) lets its worker go. */
static void
caller_exit(int code, Datum arg)
{
	if (in_flight != NULL)
		flight_end(in_flight);
	in_flight = NULL;
}

Datum
hc_autonomous(FunctionCallInfo fcinfo, const char *function)
{
	static bool exit_registered = false;
	CallShape  *shape = call_shape(fcinfo);
	StringInfoData req;
	Flight		f = {0};
	Size		len;
	char	   *volatile answer = NULL;

	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("%s cannot run on a standby", function),
				 errhint("Leases and attempts are written on the primary.")));
	if (defined_here(fcinfo->flinfo->fn_oid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s cannot run in the transaction that created or updated extension \"holdcommit\"",
						function),
				 errdetail("The call runs in a transaction of its own, which cannot see the extension until this transaction commits."),
				 errhint("Commit CREATE EXTENSION or ALTER EXTENSION first.")));
	request_build(&req, fcinfo, shape);
	f.function = function;
	f.slot = -1;
	if (!exit_registered)
	{
		before_shmem_exit(caller_exit, (Datum) 0);
		exit_registered = true;
	}
	in_flight = &f;
	PG_TRY();
	{
		if (pool != NULL && hc_max_workers > 0)
			answer = pool_call(&f, &req, &len);
		else
			answer = once_call(&f, &req, &len);
	}
	PG_FINALLY();
	{
		in_flight = NULL;
		flight_end(&f);
	}
	PG_END_TRY();
	return answer_take(fcinfo, shape, answer, len);
}

/* ------------------------------------------------------------------------
 * The worker
 * ------------------------------------------------------------------------
 */

bool
hc_autonomous_caller_gone(void)
{
	bool		gone = false;

	if (serving && serving_slot >= 0)
	{
		SpinLockAcquire(&pool->mutex);
		gone = pool->slots[serving_slot].caller_gone ||
			pool->slots[serving_slot].request != serving_request;
		SpinLockRelease(&pool->mutex);
	}
	return gone;
}

/* Every call in a READ COMMITTED transaction of its own; nothing by name. */
static void
worker_settings(void)
{
	SetConfigOption("application_name", "holdcommit worker", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("search_path", "pg_catalog", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("default_transaction_isolation", "read committed", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("default_transaction_read_only", "off", PGC_SUSET, PGC_S_OVERRIDE);
	pgstat_report_appname("holdcommit worker");
}

static void
send_text(StringInfo buf, const char *s)
{
	if (s != NULL && strlen(s) > ANSWER_TEXT_MAX)
		s = pnstrdup(s, pg_mbcliplen(s, strlen(s), ANSWER_TEXT_MAX));
	send_string(buf, s);
}

/* The answer to an error: its SQLSTATE, message, detail, hint and context. */
static void
answer_error(StringInfo answer, ErrorData *edata)
{
	resetStringInfo(answer);
	pq_sendbyte(answer, 'E');
	pq_sendint32(answer, edata->sqlerrcode);
	send_text(answer, edata->message);
	send_text(answer, edata->detail);
	send_text(answer, edata->hint);
	send_text(answer, NULL);
}

/*
 * Run one call in a transaction of its own; the answer says what it
 * returned (after the commit) or the error it raised (after the rollback).
 */
static void
worker_run(char *data, Size len, StringInfo answer)
{
	MemoryContext cxt = CurrentMemoryContext;
	StringInfoData req;
	Oid			fn_oid;
	Oid			userid;
	char	   *sync;

	req.data = data;
	req.len = (int) len;
	req.maxlen = (int) len;
	req.cursor = 0;
	fn_oid = pq_getmsgint(&req, 4);
	userid = pq_getmsgint(&req, 4);
	caller_pid = (int32) pq_getmsgint(&req, 4);
	caller_started = pq_getmsgint64(&req);
	sync = get_string(&req);

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PG_TRY();
	{
		FmgrInfo	flinfo;
		LOCAL_FCINFO(fcinfo, FUNC_MAX_ARGS);
		CallShape	shape;
		Datum		result;
		Oid			save_userid;
		int			save_sec_context;
		int			n;
		int			i;

		if (strcmp(sync, GetConfigOption("synchronous_commit", false, false)) != 0)
			(void) set_config_option("synchronous_commit", sync, PGC_SUSET, PGC_S_SESSION,
									 GUC_ACTION_LOCAL, true, 0, false);
		n = (int) pq_getmsgint(&req, 4);
		for (i = 0; i < n; i++)
		{
			char	   *name = get_string(&req);
			char	   *value = get_string(&req);

			if (value != NULL && strcmp(value, GetConfigOption(name, false, false)) != 0)
				(void) set_config_option(name, value, PGC_SUSET, PGC_S_SESSION,
										 GUC_ACTION_LOCAL, true, 0, false);
		}
		if (StatementTimeout > 0)
			enable_timeout_after(STATEMENT_TIMEOUT, StatementTimeout);

		fmgr_info(fn_oid, &flinfo);
		shape_of(fn_oid, &shape);
		InitFunctionCallInfoData(*fcinfo, &flinfo, shape.nargs, InvalidOid, NULL, NULL);
		if ((int) pq_getmsgint(&req, 4) != shape.nargs)
			elog(ERROR, "holdcommit worker: the call has the wrong number of arguments");
		for (i = 0; i < shape.nargs; i++)
			fcinfo->args[i].value = get_datum(&req, shape.typbyval[i], &fcinfo->args[i].isnull);

		pgstat_report_activity(STATE_RUNNING, get_func_name(fn_oid));
		GetUserIdAndSecContext(&save_userid, &save_sec_context);
		SetUserIdAndSecContext(userid, save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
		PushActiveSnapshot(GetTransactionSnapshot());
		result = FunctionCallInvoke(fcinfo);
		PopActiveSnapshot();
		SetUserIdAndSecContext(save_userid, save_sec_context);

		MemoryContextSwitchTo(cxt);
		resetStringInfo(answer);
		pq_sendbyte(answer, 'R');
		send_datum(answer, result, fcinfo->isnull, shape.rettyplen, shape.rettypbyval);
		disable_timeout(STATEMENT_TIMEOUT, false);
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		disable_timeout(STATEMENT_TIMEOUT, false);
		AbortCurrentTransaction();
		MemoryContextSwitchTo(cxt);
		answer_error(answer, edata);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	pgstat_report_activity(STATE_IDLE, NULL);
}

/* Take the request from the queue, run it, answer. */
static void
worker_serve(shm_mq *request, shm_mq *answer, dsm_segment *seg, MemoryContext call_context)
{
	MemoryContext old = MemoryContextSwitchTo(call_context);
	shm_mq_handle *in = shm_mq_attach(request, seg, NULL);
	shm_mq_handle *out = shm_mq_attach(answer, seg, NULL);
	StringInfoData reply;
	Size		len;
	void	   *data;

	if (shm_mq_receive(in, &len, &data, false) == SHM_MQ_SUCCESS &&
		!hc_autonomous_caller_gone())
	{
		initStringInfo(&reply);
		worker_run(data, len, &reply);
		(void) shm_mq_send(out, reply.len, reply.data, false, true);
	}
	MemoryContextSwitchTo(old);
	MemoryContextReset(call_context);
}

/*
 * However a pool worker ends: its slot is free, unless an answer waits in
 * it for its caller, who frees it then; a caller waiting for it learns it.
 */
static void
pool_worker_exit(int code, Datum arg)
{
	PoolSlot   *slot = &pool->slots[DatumGetInt32(arg)];
	PGPROC	   *caller = NULL;

	SpinLockAcquire(&pool->mutex);
	if (slot->pid == MyProcPid || slot->pid == 0)
	{
		if (slot->state == SLOT_CLAIMED || slot->state == SLOT_POSTED ||
			slot->state == SLOT_ANSWERED)
			caller = slot->caller;
		if (slot->state != SLOT_ANSWERED)
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

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	serving = true;
	serving_slot = i;
	SpinLockAcquire(&pool->mutex);
	dboid = slot->state == SLOT_STARTING ? slot->dboid : InvalidOid;
	SpinLockRelease(&pool->mutex);
	if (!OidIsValid(dboid))
		proc_exit(0);
	before_shmem_exit(pool_worker_exit, Int32GetDatum(i));
	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
	worker_settings();
	call_context = AllocSetContextCreate(TopMemoryContext, "holdcommit call",
										 ALLOCSET_DEFAULT_SIZES);

	SpinLockAcquire(&pool->mutex);
	slot->pid = MyProcPid;
	slot->proc = MyProc;
	slot->state = SLOT_IDLE;
	slot->idle_since = GetCurrentTimestamp();
	SpinLockRelease(&pool->mutex);
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
			if (idle_ms >= (long) hc_worker_idle_timeout * 1000L || hc_max_workers == 0)
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

/* A worker of one call, without the pool: its queues are in a segment. */
void
hc_worker_once_main(Datum main_arg)
{
	dsm_segment *seg;
	char	   *base;
	shm_mq	   *request;
	shm_mq	   *answer;

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	serving = true;
	seg = dsm_attach(DatumGetUInt32(main_arg));
	if (seg == NULL)
		proc_exit(0);			/* the caller has gone: nothing to do */
	base = dsm_segment_address(seg);
	request = (shm_mq *) (base + ONCE_HEADER);
	answer = (shm_mq *) (base + ONCE_HEADER + QUEUE_SIZE);
	shm_mq_set_receiver(request, MyProc);
	shm_mq_set_sender(answer, MyProc);
	BackgroundWorkerInitializeConnectionByOid(*(Oid *) base, InvalidOid, 0);
	worker_settings();
	worker_serve(request, answer, seg,
				 AllocSetContextCreate(TopMemoryContext, "holdcommit call",
									   ALLOCSET_DEFAULT_SIZES));
	pgstat_report_stat(true);
	proc_exit(0);
}

/* DDL needs the database to itself: its idle workers leave. */
void
hc_autonomous_retire(Oid dboid)
{
	PGPROC	   *leavers[64];
	int			n = 0;
	int			i;

	if (pool == NULL)
		return;
	SpinLockAcquire(&pool->mutex);
	for (i = 0; i < pool->nslots && n < (int) lengthof(leavers); i++)
		if (pool->slots[i].dboid == dboid && pool->slots[i].state == SLOT_IDLE)
		{
			pool->slots[i].state = SLOT_LEAVING;
			leavers[n++] = pool->slots[i].proc;
		}
	SpinLockRelease(&pool->mutex);
	for (i = 0; i < n; i++)
		SetLatch(&leavers[i]->procLatch);
}
