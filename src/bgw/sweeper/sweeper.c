/*
 * sweeper.c
 *		One run of the background sweeper in one database: a short-lived
 *		worker the launcher (launcher.c) starts, which sweeps for at most
 *		holdcommit.sweep_time_slice and exits.
 *
 * It claims its database's entry (sweeper_state.c) before it connects, so
 * a command that needs the database to itself can stop it, and steps aside
 * if one runs.  Such a command cancels the run (SIGINT), held off but where
 * the run catches errors: there the run rolls back and ends with a LOG
 * line, not a FATAL, and is still due.  It looks for the extension; without
 * it (or with one older than 0.2.0) it says so once and ends.  Otherwise it
 * sweeps as the extension's owner (hc_call_begin_as: a security-restricted
 * operation with a pinned search path), one transaction per batch, in READ
 * COMMITTED and read-write whatever the database's or role's defaults, with
 * statement_timeout and lock_timeout set to what is left of its slice.
 * Only committed batches count.  An error ends the run: it is logged with
 * its SQLSTATE, detail and context, recorded in hc_sweeper_status and in
 * the entry.
 *
 * Invariants:
 *   1. A run claims its entry before it connects, and steps aside if its
 *      database is paused, dropped or already taken.
 *   2. A cancel is held off except where the run catches errors: a pause's
 *      cancel ends the run with a LOG line, never a FATAL, and still due.
 *   3. Every statement is bounded by what is left of the slice
 *      (statement_timeout and lock_timeout); only committed batches count.
 *   4. However the run ends, its exit callback gives its entry back, under
 *      the lock.
 *
 * Review on a new major: the background worker API (connecting by OID, the
 * signals), the transactions it runs by hand (StartTransactionCommand and
 * its snapshot), and the catalog scan of pg_extension.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/indexing.h"
#include "catalog/pg_extension.h"
#include "commands/dbcommands.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "admin/sweep.h"
#include "bgw/sweeper/sweeper.h"
#include "common/settings.h"
#include "core/call.h"

PGDLLEXPORT void hc_sweeper_main(Datum main_arg);

static int	sweeper_db = -1;

/* Under the lock, however the process ends: the entry is no longer ours. */
static void
sweeper_leave(int code, Datum arg)
{
	SweepDb    *db = &hc_sweeper_shared->dbs[sweeper_db];

	/* Nothing of ours is held at exit; never wait here for a lock we hold. */
	LWLockReleaseAll();
	LWLockAcquire(hc_sweeper_shared->lock, LW_EXCLUSIVE);
	if (db->pid == MyProcPid)
	{
		db->pid = 0;
		if (db->outcome == OUTCOME_RUNNING)
		{
			/*
			 * A pause or the launcher stopped it: not a failure, still due,
			 * and late from now on, not from when it fell due.
			 */
			if (hc_sweeper_paused(db->dboid) || db->stop_asked || db->preempted)
			{
				db->outcome = OUTCOME_NONE;
				db->last_end = GetCurrentTimestamp();
				/* Stopped before its look: the extension's command still asks. */
				db->look_now |= db->look_asked;
			}
			else
			{
				db->outcome = OUTCOME_STOPPED;
				db->failures++;
				db->error_at = GetCurrentTimestamp();
				db->sqlstate = ERRCODE_ADMIN_SHUTDOWN;
				strlcpy(db->error, "the sweeper ended before its run did (terminated?)",
						SWEEP_ERROR_LEN);
			}
		}
		db->look_asked = false;
		hc_sweeper_wake_launcher();
	}
	LWLockRelease(hc_sweeper_shared->lock);
}

/* Take the entry for this run, unless it is paused or taken; true if taken. */
static bool
sweeper_claim(Oid dboid)
{
	SweepDb    *db = &hc_sweeper_shared->dbs[sweeper_db];
	bool		mine;

	LWLockAcquire(hc_sweeper_shared->lock, LW_EXCLUSIVE);
	mine = db->dboid == dboid && !db->dropped && db->pid == 0 && !hc_sweeper_paused(dboid);
	if (db->dboid == dboid)
		db->start_requested = 0;	/* this run has come, whether it stays or not */
	if (mine)
	{
		db->pid = MyProcPid;
		db->connected = false;
		db->stop_asked = false;
		db->look_asked = db->look_now;
		db->look_now = false;
		db->outcome = OUTCOME_RUNNING;
		db->last_start = GetCurrentTimestamp();
	}
	LWLockRelease(hc_sweeper_shared->lock);
	return mine;
}

/*
 * Connected: from now on a command that needs the database to itself
 * cancels the run rather than wait for it.  Has one come meanwhile?
 */
static bool
sweeper_connected(Oid dboid)
{
	SweepDb    *db = &hc_sweeper_shared->dbs[sweeper_db];
	bool		paused;

	LWLockAcquire(hc_sweeper_shared->lock, LW_EXCLUSIVE);
	db->connected = true;
	paused = hc_sweeper_paused(dboid) || db->stop_asked;
	LWLockRelease(hc_sweeper_shared->lock);
	return paused;
}

/* Did a command that needs the database to itself stop this run? */
static bool
sweeper_stop_asked(void)
{
	bool		asked;

	LWLockAcquire(hc_sweeper_shared->lock, LW_SHARED);
	asked = hc_sweeper_shared->dbs[sweeper_db].stop_asked;
	LWLockRelease(hc_sweeper_shared->lock);
	return asked;
}

/* Set a setting for this session, whatever the database or role says. */
static void
sweeper_set(const char *name, const char *value)
{
	SetConfigOption(name, value, PGC_SUSET, PGC_S_OVERRIDE);
}

/*
 * The timeouts of the next transaction: what is left of the slice.  A
 * background worker's statements are not timed by postgres.c, so the
 * statement timeout is armed here (sweeper_begin), as remote.c does.
 */
static long sweeper_timeout_ms;

static void
sweeper_set_timeouts(long left_ms)
{
	char		ms[32];

	sweeper_timeout_ms = Max(left_ms, 1);
	snprintf(ms, sizeof(ms), "%ld", sweeper_timeout_ms);
	sweeper_set("statement_timeout", ms);
	sweeper_set("lock_timeout", ms);
}

/* The extension in this database: its owner and schema, if it is there. */
static bool
sweeper_find_extension(Oid *owner, Oid *schema)
{
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	bool		found = false;

	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ,
				CStringGetDatum("holdcommit"));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
	{
		Form_pg_extension ext = (Form_pg_extension) GETSTRUCT(tup);

		*owner = ext->extowner;
		*schema = ext->extnamespace;
		found = true;
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return found;
}

/* Record what the look found; say it once, when it changes. */
static void
sweeper_looked(const char *datname, SweepKind kind, const char *why)
{
	SweepDb    *db = &hc_sweeper_shared->dbs[sweeper_db];
	bool		changed;

	LWLockAcquire(hc_sweeper_shared->lock, LW_EXCLUSIVE);
	changed = db->kind != kind;
	db->kind = kind;
	if (kind != KIND_INSTALLED)
	{
		db->outcome = OUTCOME_LOOKED;
		db->last_end = GetCurrentTimestamp();
	}
	LWLockRelease(hc_sweeper_shared->lock);
	if (changed && kind != KIND_INSTALLED)
		ereport(LOG,
				(errmsg("holdcommit sweeper skips database \"%s\": %s", datname, why),
				 errhint("Run CREATE EXTENSION holdcommit (or ALTER EXTENSION holdcommit UPDATE) there, "
						 "or leave the database out of holdcommit.databases.")));
}

/* Start one transaction of a run, for a batch or for the record of the run. */
static void
sweeper_begin(HcCall *call, Oid owner, Oid schema, const char *actor)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	enable_timeout_after(STATEMENT_TIMEOUT, (int) Min(sweeper_timeout_ms, INT_MAX));
	PushActiveSnapshot(GetTransactionSnapshot());
	hc_call_begin_as(call, owner, schema, "hc_sweep", actor);
}

/* Commit that transaction: nothing stays locked after it. */
static void
sweeper_commit(HcCall *call)
{
	hc_call_end(call);
	PopActiveSnapshot();
	disable_timeout(STATEMENT_TIMEOUT, false);
	CommitTransactionCommand();
}

/*
 * The error just caught, copied into run_context, logged with its SQLSTATE,
 * detail, hint and context, and its transaction aborted.  The cancel of a
 * command that needs the database to itself ends the run instead: not a
 * failure, one LOG line, and sweeper_leave says still due.
 */
static ErrorData *
sweeper_abort(MemoryContext run_context, const char *datname, const char *what)
{
	ErrorData  *edata;

	HOLD_CANCEL_INTERRUPTS();	/* the error zeroed the count */
	MemoryContextSwitchTo(run_context);
	edata = CopyErrorData();
	FlushErrorState();
	disable_timeout(STATEMENT_TIMEOUT, false);
	AbortCurrentTransaction();
	MemoryContextSwitchTo(run_context);
	if (sweeper_stop_asked())
	{
		ereport(LOG,
				(errmsg("holdcommit sweeper stopped its run in database \"%s\": a command needs the database to itself",
						datname),
				 errdetail("The run is due again once the command ends.")));
		proc_exit(0);
	}
	ereport(LOG,
			(errcode(edata->sqlerrcode),
			 errmsg("holdcommit sweeper %s in database \"%s\" failed with SQLSTATE %s: %s",
					what, datname, unpack_sql_state(edata->sqlerrcode), edata->message),
			 edata->detail ? errdetail("%s", edata->detail) : 0,
			 edata->hint ? errhint("%s", edata->hint) : 0,
			 edata->context ? errcontext("%s", edata->context) : 0));
	return edata;
}

/* Write the run's outcome into the entry. */
static void
sweeper_record_entry(const HcSweepCounts *counts, SweepOutcome outcome, ErrorData *edata)
{
	SweepDb    *db = &hc_sweeper_shared->dbs[sweeper_db];
	TimestampTz now = GetCurrentTimestamp();

	LWLockAcquire(hc_sweeper_shared->lock, LW_EXCLUSIVE);
	db->outcome = outcome;
	db->last_end = now;
	db->runs++;
	db->holds = counts->expired_holds;
	db->reservations = counts->expired_reservations;
	db->keys = counts->purged_keys;
	if (edata != NULL)
	{
		db->failures++;
		db->sqlstate = edata->sqlerrcode;
		db->error_at = now;
		memcpy(db->error, edata->message,
			   pg_mbcliplen(edata->message, strlen(edata->message), SWEEP_ERROR_LEN - 1));
		db->error[pg_mbcliplen(edata->message, strlen(edata->message), SWEEP_ERROR_LEN - 1)] = '\0';
	}
	else
		db->last_swept = now;
	LWLockRelease(hc_sweeper_shared->lock);
}

/*
 * The run: batches until one finds nothing or the slice runs out, each its
 * own transaction; *committed gets what the committed batches did.
 */
static SweepOutcome
sweeper_batches(HcSweepCounts *committed, Oid owner, Oid schema, const char *actor,
				TimestampTz deadline)
{
	for (;;)
	{
		HcSweepCounts batch = *committed;
		HcCall		call;
		long		left_ms = (long) ((deadline - GetCurrentTimestamp()) / 1000);
		bool		more;

		CHECK_FOR_INTERRUPTS();
		if (left_ms <= 0)
			return OUTCOME_UNFINISHED;
		sweeper_set_timeouts(left_ms);
		sweeper_begin(&call, owner, schema, actor);
		more = hc_sweep_batch(&call, hc_sweep_batch_size, &batch);
		sweeper_commit(&call);
		*committed = batch;
		if (!more)
			return OUTCOME_SWEPT;
	}
}

/*
 * One run in this database.  Everything it allocates lives in run_context.
 */
static void
sweeper_run(const char *datname, MemoryContext run_context, TimestampTz deadline)
{
	TimestampTz started = GetCurrentTimestamp();
	HcSweepCounts *counts = palloc0(sizeof(HcSweepCounts));
	volatile SweepOutcome outcome = OUTCOME_FAILED;
	ErrorData  *volatile edata = NULL;
	Oid			owner = InvalidOid;
	Oid			schema = InvalidOid;
	bool		found;
	bool		current = false;
	bool		has_sqlstate = false;
	char	   *actor = NULL;
	HcCall		call;

	pgstat_report_activity(STATE_RUNNING, "holdcommit sweep");
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	found = sweeper_find_extension(&owner, &schema);
	if (found)
	{
		Oid			status = get_relname_relid("hc_sweeper_status", schema);

		current = OidIsValid(status);
		/* 0.2.0, which this library serves too, has no SQLSTATE column. */
		has_sqlstate = current && get_attnum(status, "last_error_sqlstate") != InvalidAttrNumber;
		actor = MemoryContextStrdup(run_context, GetUserNameFromId(owner, false));
	}
	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextSwitchTo(run_context);
	if (!found || !current)
	{
		sweeper_looked(datname, found ? KIND_OLD : KIND_NONE,
					   found ? "extension \"holdcommit\" is older than 0.2.0"
					   : "extension \"holdcommit\" is not installed");
		return;
	}
	sweeper_looked(datname, KIND_INSTALLED, NULL);

	PG_TRY();
	{
		RESUME_CANCEL_INTERRUPTS();
		outcome = sweeper_batches(counts, owner, schema, actor, deadline);
		HOLD_CANCEL_INTERRUPTS();
	}
	PG_CATCH();
	{
		edata = sweeper_abort(run_context, datname, "run");
	}
	PG_END_TRY();

	/* The record gets a second of its own, should the slice be over. */
	sweeper_set_timeouts(Max(1000, (long) ((deadline - GetCurrentTimestamp()) / 1000)));
	PG_TRY();
	{
		RESUME_CANCEL_INTERRUPTS();
		sweeper_begin(&call, owner, schema, actor);
		hc_sweeper_record(&call, started, counts, edata, hc_sweep_interval, has_sqlstate);
		sweeper_commit(&call);
		HOLD_CANCEL_INTERRUPTS();
	}
	PG_CATCH();
	{
		(void) sweeper_abort(run_context, datname, "record of its run");
	}
	PG_END_TRY();
	MemoryContextSwitchTo(run_context);
	sweeper_record_entry(counts, outcome, edata);
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);
}

/*
 * A run's main: claim the entry, connect, set this session's own
 * transaction characteristics, run, exit.
 */
void
hc_sweeper_main(Datum main_arg)
{
	Oid			dboid;
	char	   *datname;
	MemoryContext run_context;
	TimestampTz deadline = MyStartTimestamp + (int64) hc_sweep_time_slice * 1000;

	pqsignal(SIGTERM, die);
	/* A cancel only where an error is caught (sweeper_run): elsewhere it is FATAL. */
	HOLD_CANCEL_INTERRUPTS();
	BackgroundWorkerUnblockSignals();

	sweeper_db = DatumGetInt32(main_arg);
	memcpy(&dboid, MyBgworkerEntry->bgw_extra, sizeof(Oid));
	if (!sweeper_claim(dboid))
		proc_exit(0);
	before_shmem_exit(sweeper_leave, (Datum) 0);

	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
	if (sweeper_connected(dboid) || RecoveryInProgress())
	{
		LWLockAcquire(hc_sweeper_shared->lock, LW_EXCLUSIVE);
		hc_sweeper_shared->dbs[sweeper_db].outcome = OUTCOME_NONE;
		LWLockRelease(hc_sweeper_shared->lock);
		proc_exit(0);
	}
	sweeper_set("application_name", "holdcommit sweeper");
	sweeper_set("search_path", "pg_catalog");
	sweeper_set("default_transaction_isolation", "read committed");
	sweeper_set("default_transaction_read_only", "off");
	sweeper_set("default_transaction_deferrable", "off");
	sweeper_set("idle_in_transaction_session_timeout", "0");
	sweeper_set("session_replication_role", "origin");
	pgstat_report_appname("holdcommit sweeper");

	StartTransactionCommand();
	datname = MemoryContextStrdup(TopMemoryContext, get_database_name(dboid));
	CommitTransactionCommand();

	run_context = AllocSetContextCreate(TopMemoryContext, "holdcommit sweeper run",
										ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(run_context);
	sweeper_run(datname, run_context, deadline);
	proc_exit(0);
}
