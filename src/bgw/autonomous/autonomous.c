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
 * With holdcommit preloaded the workers are a pool in shared memory
 * (pool.c).  Without the preload (or with holdcommit.max_workers = 0) every
 * call starts a worker of its own, with its queues in a dynamic shared
 * memory segment: the same function, slower.  The call on the wire and its
 * run in the worker: remote.c.
 *
 * What the caller cannot see, it checks itself.  PostgreSQL's deadlock
 * detector does not know that the caller waits for its worker, so every
 * deadlock_timeout the caller asks whether the worker waits, directly or
 * through others, for a lock the caller holds (its transaction changed
 * hc_locks, took LOCK TABLE, ran ALTER EXTENSION); then it cancels the
 * worker, which cannot have committed, and raises 40P01.  A worker that
 * ends before it answers is an error; whether its transaction committed
 * the caller cannot know, and need not: calling again with the same
 * arguments gets the same token back (the same owner), or the same attempt
 * (the same request_key).  A caller that stops waiting (cancel,
 * statement_timeout, its client gone) leaves its request to be committed
 * whole or not at all; an acquire's retries are the caller's own calls, and
 * stop with it.
 *
 * Invariants:
 *   1. The caller changes nothing itself: the call runs in the worker's
 *      transaction, committed (synchronously) before the worker answers.
 *   2. However the caller stops waiting (an answer, an error, a cancel, its
 *      exit), it lets its worker go: flight_end, in PG_FINALLY and in its
 *      exit callback.
 *   3. It never waits for ever on a worker that waits for it: every
 *      deadlock_timeout it looks, and cancels a worker stuck behind its
 *      locks, which cannot have committed (40P01).
 *   4. A request always fits in its queue: the arguments are bounded, and
 *      checked against half the queue.
 *
 * Review on a new major: dynamic background workers, dsm and shm_mq (their
 * calls and their error paths), the lock manager's view of who waits for
 * whom, and the catalog scan that finds the extension.
 */
#include "postgres.h"

#include <signal.h>

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/indexing.h"
#include "catalog/pg_extension.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/dsm.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "bgw/autonomous/autonomous.h"
#include "bgw/autonomous/autonomous_int.h"
#include "core/standby.h"

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
		return hc_pool_flight_worker(f);
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
			 errhint("Call %s again with the same arguments: the same owner gets the same token back, the same request_key the same attempt.",
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
			if (worker > 0 && hc_autonomous_waits_for(worker, MyProcPid))
			{
				(void) kill(worker, SIGINT);
				ereport(ERROR,
						(errcode(ERRCODE_T_R_DEADLOCK_DETECTED),
						 errmsg("%s waits for a lock that this transaction holds", f->function),
						 errdetail("holdcommit makes the change in a transaction of its own, which waits for a lock this transaction took: it changed a row of hc_locks or hc_attempts, locked one of holdcommit's tables, or altered the extension. The call is cancelled."),
						 errhint("Commit those changes before calling %s, or call it outside this transaction.",
								 f->function)));
			}
			next_check = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), DeadlockTimeout);
			wait_ms = DeadlockTimeout;
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 Max(Min(wait_ms, CLIENT_CHECK_MS), 1), PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		hc_autonomous_check_client();
	}
	/* It lies in the queue, which is the slot's (or the segment's). */
	copy = palloc(*len);
	memcpy(copy, data, *len);
	return copy;
}

/*
 * Start a worker for this one call and take its answer.  The segment is
 * the call's own and goes with the caller's transaction, error or not.
 */
static char *
once_call(Flight *f, StringInfo req, Size *len)
{
	dsm_segment *seg = dsm_create(ONCE_HEADER + 2 * QUEUE_SIZE, 0);
	char	   *base = dsm_segment_address(seg);
	BackgroundWorker worker;
	shm_mq	   *request;
	shm_mq	   *answer;
	char	   *reply;

	f->once = (OnceHeader *) base;
	f->once->dboid = MyDatabaseId;
	f->once->caller_gone = false;
	request = shm_mq_create(base + ONCE_HEADER, QUEUE_SIZE);
	answer = shm_mq_create(base + ONCE_HEADER + QUEUE_SIZE, QUEUE_SIZE);
	shm_mq_set_sender(request, MyProc);
	shm_mq_set_receiver(answer, MyProc);

	hc_remote_worker_describe(&worker, "hc_worker_once_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "holdcommit worker for pid %d", MyProcPid);
	worker.bgw_main_arg = UInt32GetDatum(dsm_segment_handle(seg));
	if (!RegisterDynamicBackgroundWorker(&worker, &f->handle))
		hc_autonomous_no_worker(f->function, "Raise max_worker_processes, or preload holdcommit so that its workers are pooled (doc/operations.md).");

	f->request = shm_mq_attach(request, seg, f->handle);
	f->answer = shm_mq_attach(answer, seg, f->handle);
	if (shm_mq_send(f->request, req->len, req->data, false, true) != SHM_MQ_SUCCESS)
		flight_lost(f);
	reply = flight_await(f, len);
	f->once = NULL;
	dsm_detach(seg);
	return reply;
}

/* Was this catalog row written by this transaction, not committed yet? */
static bool
written_here(HeapTuple tup)
{
	return TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(tup->t_data));
}

/*
 * Was the function created or replaced by this transaction, not committed
 * yet, so that a worker cannot see it?  Its pg_proc row is written here, and
 * so is holdcommit's pg_extension row (CREATE or ALTER EXTENSION): a GRANT
 * or ALTER FUNCTION rewrites the pg_proc row too, but leaves a committed
 * version that the worker sees.
 */
static pg_noinline bool
defined_here(Oid fn_oid)
{
	HeapTuple	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fn_oid));
	bool		here;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for function %u", fn_oid);
	here = written_here(tup);
	ReleaseSysCache(tup);
	if (here)
	{
		Relation	rel = table_open(ExtensionRelationId, AccessShareLock);
		ScanKeyData key;
		SysScanDesc scan;

		ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ,
					CStringGetDatum("holdcommit"));
		scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
		tup = systable_getnext(scan);
		here = HeapTupleIsValid(tup) && written_here(tup);
		systable_endscan(scan);
		table_close(rel, AccessShareLock);
	}
	return here;
}

/* The call in flight in this backend, for its exit. */
static Flight *in_flight = NULL;

/*
 * The caller is done with the call, with its answer or without (an error, a
 * cancel, its exit): the worker is let go.
 */
static void
flight_end(Flight *f)
{
	if (f->once != NULL)
		f->once->caller_gone = true;	/* the segment goes with the transaction */
	hc_pool_end(f);
}

/* A caller that exits while it waits (FATAL) lets its worker go. */
static void
caller_exit(int code, Datum arg)
{
	if (in_flight != NULL)
		flight_end(in_flight);
	in_flight = NULL;
}

/*
 * A call that would write is refused in the caller, before it asks for a
 * worker: on a standby no worker runs (they start once recovery has ended)
 * and none could write, and a read-only transaction asked for no write.
 */
void
hc_autonomous_require_writable(const char *function)
{
	hc_refuse_read_only(function);
}

Datum
hc_autonomous(FunctionCallInfo fcinfo, const char *function)
{
	static bool exit_registered = false;
	CallShape  *shape = hc_remote_call_shape(fcinfo);
	StringInfoData req;
	Flight		f = {0};
	Size		len;
	char	   *volatile answer = NULL;

	hc_autonomous_require_writable(function);
	if (defined_here(fcinfo->flinfo->fn_oid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s cannot run in the transaction that created or updated extension \"holdcommit\"",
						function),
				 errdetail("The call runs in a transaction of its own, which cannot see the extension until this transaction commits."),
				 errhint("Commit CREATE EXTENSION or ALTER EXTENSION first.")));
	hc_remote_request_build(&req, fcinfo, shape);
	/* Every argument is bounded: a request always fits in its queue. */
	if (req.len > QUEUE_SIZE / 2)
		elog(ERROR, "the arguments of %s take %d bytes, more than a holdcommit worker takes",
			 function, req.len);
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
		if (hc_pool_ready())
		{
			hc_pool_call(&f, &req);
			answer = flight_await(&f, &len);
		}
		else
			answer = once_call(&f, &req, &len);
	}
	PG_FINALLY();
	{
		in_flight = NULL;
		flight_end(&f);
	}
	PG_END_TRY();
	return hc_remote_answer_take(fcinfo, shape, answer, len);
}
