/*
 * spreader.c
 *		The spreader: a short-lived background worker that spreads one hot
 *		product (started by a reserve that saw its callers wait,
 *		stock/spread_watch.c) or gathers every product of its database
 *		that is due (started at the end of a sweep), each in a transaction
 *		of its own, committed at once.
 *
 * A spread or a gather never runs in a caller's transaction: every reserve
 * of the product waits for its part 0 until that transaction ends.  Here it
 * takes part 0 waiting at most HC_SPREAD_WAIT_MS, a gather step
 * HC_GATHER_WAIT_MS (the statement timeout: it waits in the queue of the
 * reserves, stalling nobody), and from the moment it
 * has it, it must commit within the stall bound of whoever started it
 * (holdcommit.stock_spread_stall): the statement timeout is armed anew
 * then, and past it the run rolls back (auto_spread.c takes the other
 * parts without waiting).  So no reserve waits for part 0 longer than the
 * bound plus the commit.  What each run did, how long it held part 0 and
 * why it failed are recorded in hc_stock_spreads, in a second transaction,
 * after the commit whose time they include.
 *
 * Invariants:
 *   1. Every change commits in a transaction of its own, as the
 *      extension's owner (hc_call_begin_as), in READ COMMITTED.
 *   2. Part 0 is held at most the stall bound before the commit starts;
 *      the commit itself is the only other time it is held.
 *   3. At most one gatherer per database at a time (a session lock of its
 *      own); at most one spreader per product (the watch's spreading flag,
 *      cleared at exit however the worker ends).
 *   4. An error ends a run, never the worker's other runs: it is caught,
 *      rolled back, logged at DEBUG1 (55P03 and the stall bound are
 *      routine) or LOG, and recorded.
 *
 * Review on a new major: the background worker API (connecting by OID),
 * the transactions it runs by hand, the statement timeout it arms, the
 * session lock's tag.
 */
#include "postgres.h"

#include <math.h>

#include "access/xact.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lock.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "core/call.h"
#include "core/version.h"
#include "stock/auto_spread.h"

PGDLLEXPORT void hc_spreader_main(Datum main_arg);

/* The session lock of a database's gatherer: an advisory tag no SQL function makes. */
#define GATHERER_LOCK_KIND	0x6863
/*
 * A gatherer starts no step after this long (the next sweep goes on), so
 * that even without the preload (which ends it at once: spread_watch.c's
 * hc_stock_spreaders_stop) it never keeps DROP DATABASE, which waits 5 s
 * for the sessions of the database, from its work.
 */
#define GATHERER_BUDGET_US	(2 * USECS_PER_SEC)

static HcSpreadOrder order;
static Oid	owner;
static Oid	schema;
static char *actor;

/* However the worker ends, its seat is free and another spread of its product may start. */
static void
spreader_exit(int code, Datum arg)
{
	hc_stock_spreader_seat_leave(&order);
	if (order.kind == HC_SPREAD_PRODUCT)
		hc_stock_watch_spread_done(order.dboid, order.product_id, 0);
}

static void
spreader_set(const char *name, const char *value)
{
	SetConfigOption(name, value, PGC_SUSET, PGC_S_OVERRIDE);
}

/* Part 0 is held: from now on the run has the stall bound to commit in. */
static void
spreader_locked(void)
{
	disable_timeout(STATEMENT_TIMEOUT, false);
	enable_timeout_after(STATEMENT_TIMEOUT, order.stall_ms);
}

/* Start a transaction of the worker, its statements bounded by timeout_ms. */
static void
spreader_begin(HcCall *call, int timeout_ms)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	enable_timeout_after(STATEMENT_TIMEOUT, timeout_ms);
	PushActiveSnapshot(GetTransactionSnapshot());
	hc_call_begin_as(call, owner, schema, "hc_stock_auto_spread", actor);
}

static void
spreader_commit(HcCall *call)
{
	hc_call_end(call);
	PopActiveSnapshot();
	disable_timeout(STATEMENT_TIMEOUT, false);
	CommitTransactionCommand();
}

/* Record what a run did after its transaction ended: its stall, or its failure. */
static void
spreader_record(const char *product_id, const char *why, double stall_ms)
{
	MemoryContext mine = CurrentMemoryContext;
	HcCall		call;

	PG_TRY();
	{
		spreader_begin(&call, HC_GATHER_WAIT_MS);
		if (why != NULL)
			hc_stock_spread_record_failure(&call, product_id, why, stall_ms);
		else
			hc_stock_spread_record_stall(&call, product_id, stall_ms);
		spreader_commit(&call);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(mine);
		FlushErrorState();
		disable_timeout(STATEMENT_TIMEOUT, false);
		AbortCurrentTransaction();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(mine);
}

/* What the run of the moment has done; read after a longjmp. */
static HcSpreadDone done;

/*
 * One transaction of a run, committed at once, then its record: a spread,
 * or a step of a gather (one part merged into part 0).  False if it
 * failed.
 */
static bool
spreader_step(const char *product_id, int32 target, int32 waiters)
{
	MemoryContext mine = CurrentMemoryContext;
	HcCall		call;
	ErrorData  *volatile edata = NULL;
	int32		before = done.parts_to;
	TimestampTz end;

	PG_TRY();
	{
		spreader_begin(&call, order.stall_ms + (order.kind == HC_SPREAD_PRODUCT ?
												HC_SPREAD_WAIT_MS : HC_GATHER_WAIT_MS));
		(void) hc_stock_auto_spread_run(&call, product_id, target, waiters, true,
										order.kind == HC_SPREAD_PRODUCT, spreader_locked, &done);
		spreader_commit(&call);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(mine);
		edata = CopyErrorData();
		FlushErrorState();
		disable_timeout(STATEMENT_TIMEOUT, false);
		AbortCurrentTransaction();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(mine);
	end = GetCurrentTimestamp();

	if (edata != NULL)
	{
		bool		routine = edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE ||
			edata->sqlerrcode == ERRCODE_QUERY_CANCELED;

		ereport(routine ? DEBUG1 : LOG,
				(errmsg("holdcommit spreader: the %s of product \"%s\" failed with SQLSTATE %s: %s",
						order.kind == HC_SPREAD_PRODUCT ? "spread" : "gather", product_id,
						unpack_sql_state(edata->sqlerrcode), edata->message)));
		spreader_record(product_id, edata->message,
						done.locked_at != 0 ? (double) (end - done.locked_at) / 1000.0 : NAN);
		return false;
	}
	/* The reserves that wait for the spread go on at once, not after its record. */
	if (order.kind == HC_SPREAD_PRODUCT)
		hc_stock_watch_spread_done(order.dboid, product_id, done.parts_to);
	if (done.parts_to != before || done.parts_to != done.parts_from)
		spreader_record(product_id, NULL, (double) (end - done.locked_at) / 1000.0);
	return true;
}

/*
 * A run: spread product_id into target parts, or gather it (target 1: its
 * floor) part by part, no step starting after until.  Returns the parts it
 * has, 0 if unknown (it failed or ran out of time).
 */
static int32
spreader_run(const char *product_id, int32 target, int32 waiters, TimestampTz until)
{
	memset(&done, 0, sizeof(done));
	do
	{
		CHECK_FOR_INTERRUPTS();
		if (GetCurrentTimestamp() > until || !spreader_step(product_id, target, waiters))
			return 0;
	} while (done.more);
	return done.parts_to;
}

/* Is this worker the only gatherer of its database?  Held until it exits. */
static bool
spreader_gatherer_alone(void)
{
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, 0, 0, GATHERER_LOCK_KIND);
	return LockAcquire(&tag, ExclusiveLock, true, true) != LOCKACQUIRE_NOT_AVAIL;
}

/* Gather every product that is due, one transaction each. */
static void
spreader_gather(void)
{
	MemoryContext mine = CurrentMemoryContext;
	List	   *volatile due = NIL;
	ListCell   *lc;
	HcCall		call;

	PG_TRY();
	{
		List	   *found;
		MemoryContext old;

		spreader_begin(&call, HC_GATHER_WAIT_MS);
		found = hc_stock_gather_due(&call, order.gather_after_s);
		/* The list outlives the transaction. */
		old = MemoryContextSwitchTo(mine);
		foreach(lc, found)
			due = lappend(due, pstrdup((const char *) lfirst(lc)));
		MemoryContextSwitchTo(old);
		spreader_commit(&call);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(mine);
		EmitErrorReport();
		FlushErrorState();
		disable_timeout(STATEMENT_TIMEOUT, false);
		AbortCurrentTransaction();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(mine);
	ereport(DEBUG1, (errmsg("holdcommit spreader: %d products to gather", list_length(due))));
	/* The watch's parts tell the next rush of the product whether to spread it again. */
	foreach(lc, due)
	{
		int32		parts = spreader_run((const char *) lfirst(lc), 1, 0,
										 MyStartTimestamp + GATHERER_BUDGET_US);

		if (parts > 0)
			hc_stock_watch_parts((const char *) lfirst(lc), parts);
	}
}

/*
 * The worker's main: connect to the database of its order, find
 * holdcommit 0.4.0 or later there, run, exit.
 */
void
hc_spreader_main(Datum main_arg)
{
	MemoryContext run_context;
	char	   *version = NULL;
	bool		found;

	memcpy(&order, MyBgworkerEntry->bgw_extra, sizeof(HcSpreadOrder));
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	before_shmem_exit(spreader_exit, (Datum) 0);
	if (!hc_stock_spreader_seat_take(&order))
		proc_exit(0);
	BackgroundWorkerInitializeConnectionByOid(order.dboid, InvalidOid, 0);
	if (RecoveryInProgress())
		proc_exit(0);
	spreader_set("application_name", "holdcommit spreader");
	spreader_set("search_path", "pg_catalog");
	spreader_set("default_transaction_isolation", "read committed");
	spreader_set("default_transaction_read_only", "off");
	spreader_set("default_transaction_deferrable", "off");
	spreader_set("idle_in_transaction_session_timeout", "0");
	spreader_set("session_replication_role", "origin");
	spreader_set("lock_timeout", "0");
	pgstat_report_appname("holdcommit spreader");

	run_context = AllocSetContextCreate(TopMemoryContext, "holdcommit spreader",
										ALLOCSET_DEFAULT_SIZES);
	StartTransactionCommand();
	found = hc_extension_row(&owner, &schema, &version);
	if (found)
		actor = MemoryContextStrdup(run_context, GetUserNameFromId(owner, false));
	found = found && version != NULL && hc_sql_at_least("0.4.0");
	CommitTransactionCommand();
	MemoryContextSwitchTo(run_context);
	if (!found)
		proc_exit(0);

	pgstat_report_activity(STATE_RUNNING, order.kind == HC_SPREAD_PRODUCT ?
						   "holdcommit spread" : "holdcommit gather");
	if (order.kind == HC_SPREAD_PRODUCT)
	{
		/* Sized once the rush's callers have come: the most at once by then. */
		long		early_ms = (long) ((order.sized_at - GetCurrentTimestamp()) / 1000);
		int32		waiters = order.waiters;
		int32		target;

		if (early_ms > 0)
			(void) WaitLatch(MyLatch, WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, early_ms, PG_WAIT_EXTENSION);
		target = hc_stock_watch_size(order.product_id, &waiters, order.max_parts);
		hc_stock_watch_spread_done(order.dboid, order.product_id,
								   spreader_run(order.product_id, Max(order.target, target), waiters,
												DT_NOEND));
	}
	else if (spreader_gatherer_alone())
		spreader_gather();
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);
	proc_exit(0);
}
