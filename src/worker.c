/*
 * worker.c
 *		The background sweeper, when holdcommit is in
 *		shared_preload_libraries: a launcher and one worker per database.
 *
 * The launcher ("holdcommit launcher" in pg_stat_activity.backend_type)
 * connects to no database.  Every holdcommit.sweep_interval, on SIGHUP and
 * when one of its workers stops, it lists the databases that accept
 * connections (templates excepted), narrowed by holdcommit.databases, and
 * starts a worker ("holdcommit sweeper") in each that has none, at most one
 * start per database per interval, so a crashed or killed worker comes back
 * within an interval.  The launcher keeps the workers' handles; shared
 * memory holds one slot per database with the pid of its worker.
 *
 * A worker looks for the extension in its database.  Without it, it logs
 * one LOG line (not one per interval: its slot remembers) and exits; the
 * launcher tries again at its next scan, so a database that is given the
 * extension later is swept without a restart.  Otherwise it runs the sweep
 * every interval as the extension's owner (hc_call_begin_as: a
 * security-restricted operation with a pinned search path), one transaction
 * per batch, never holding a row lock across its sleep.  An error ends the
 * run, not the worker: it is logged and recorded in hc_sweeper_status.  On
 * a standby (the launcher starts when recovery ends) nothing runs.
 *
 * DROP DATABASE, ALTER DATABASE ... RENAME or SET TABLESPACE, and CREATE
 * DATABASE ... TEMPLATE need a database to themselves: a utility hook stops
 * that database's worker first and keeps it from being restarted meanwhile.
 */
#include "postgres.h"

#include <signal.h>

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/indexing.h"
#include "catalog/pg_database.h"
#include "catalog/pg_extension.h"
#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/varlena.h"

#include "autonomous.h"
#include "call.h"
#include "holdcommit.h"
#include "sweep.h"
#include "worker.h"

PGDLLEXPORT void hc_launcher_main(Datum main_arg);
PGDLLEXPORT void hc_sweeper_main(Datum main_arg);

/* One database the launcher looks after. */
typedef struct SweeperSlot
{
	Oid			dboid;			/* InvalidOid: the slot is free */
	pid_t		pid;			/* its worker, 0 when none runs */
	bool		no_extension;	/* its last worker found no extension, and said so */
	int			paused;			/* DDL commands that need the database to themselves */
	TimestampTz hold_until;		/* after DROP DATABASE: no start before this */
} SweeperSlot;

typedef struct SweeperShared
{
	slock_t		mutex;
	int			nslots;
	SweeperSlot slots[FLEXIBLE_ARRAY_MEMBER];
} SweeperShared;

static SweeperShared *sweeper_shared = NULL;
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;
static ProcessUtility_hook_type prev_process_utility = NULL;

/* One slot per possible background worker: no more sweepers can run. */
static Size
sweeper_shmem_size(void)
{
	return add_size(offsetof(SweeperShared, slots),
					mul_size(max_worker_processes, sizeof(SweeperSlot)));
}

/* Ask for the slots (shmem_request_hook, in the postmaster). */
static void
sweeper_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(sweeper_shmem_size());
}

/* Find or create the slots, all free (shmem_startup_hook). */
static void
sweeper_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	sweeper_shared = ShmemInitStruct("holdcommit sweeper", sweeper_shmem_size(), &found);
	if (!found)
	{
		memset(sweeper_shared, 0, sweeper_shmem_size());
		SpinLockInit(&sweeper_shared->mutex);
		sweeper_shared->nslots = max_worker_processes;
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * Is the database named in holdcommit.databases (or is the list empty)?
 * The list is parsed like search_path: comma-separated, an unquoted name
 * folded to lower case (its check hook has refused any other value).
 */
static bool
sweeper_database_wanted(const char *datname)
{
	char	   *raw;
	List	   *names;
	ListCell   *lc;
	bool		wanted = false;

	if (hc_sweep_databases == NULL || hc_sweep_databases[0] == '\0')
		return true;
	raw = pstrdup(hc_sweep_databases);
	if (!SplitIdentifierString(raw, ',', &names))
		elog(ERROR, "holdcommit.databases is not a list of names: \"%s\"", hc_sweep_databases);
	foreach(lc, names)
		if (strcmp((char *) lfirst(lc), datname) == 0)
			wanted = true;
	list_free(names);
	pfree(raw);
	return wanted;
}

/* ------------------------------------------------------------------------
 * DDL that needs a database to itself
 * ------------------------------------------------------------------------
 */

/*
 * Stop the worker of a database (if any) and keep it from being started
 * until sweeper_resume().
 */
static void
sweeper_pause(Oid dboid)
{
	pid_t		pid = 0;
	int			i;

	SpinLockAcquire(&sweeper_shared->mutex);
	for (i = 0; i < sweeper_shared->nslots; i++)
	{
		SweeperSlot *slot = &sweeper_shared->slots[i];

		if (slot->dboid != dboid)
			continue;
		slot->paused++;
		pid = slot->pid;
	}
	SpinLockRelease(&sweeper_shared->mutex);
	if (pid != 0)
		(void) kill(pid, SIGTERM);
	hc_autonomous_retire(dboid);
}

/*
 * The command is over.  After a DROP DATABASE that succeeded, no worker may
 * start there for a minute: the launcher stops seeing the database once the
 * drop commits, and frees its slot.
 */
static void
sweeper_resume(Oid dboid, bool dropped)
{
	TimestampTz now = GetCurrentTimestamp();
	int			i;

	SpinLockAcquire(&sweeper_shared->mutex);
	for (i = 0; i < sweeper_shared->nslots; i++)
	{
		SweeperSlot *slot = &sweeper_shared->slots[i];

		if (slot->dboid != dboid || slot->paused == 0)
			continue;
		slot->paused--;
		if (dropped)
			slot->hold_until = now + 60 * USECS_PER_SEC;
	}
	SpinLockRelease(&sweeper_shared->mutex);
}

/* The database a utility statement needs to itself, if any. */
static Oid
sweeper_ddl_database(Node *parsetree, bool *drop)
{
	ListCell   *lc;

	*drop = false;
	switch (nodeTag(parsetree))
	{
		case T_DropdbStmt:
			*drop = true;
			return get_database_oid(((DropdbStmt *) parsetree)->dbname, true);
		case T_RenameStmt:
			if (((RenameStmt *) parsetree)->renameType == OBJECT_DATABASE)
				return get_database_oid(((RenameStmt *) parsetree)->subname, true);
			break;
		case T_AlterDatabaseStmt:
			foreach(lc, ((AlterDatabaseStmt *) parsetree)->options)
				if (strcmp(((DefElem *) lfirst(lc))->defname, "tablespace") == 0)
					return get_database_oid(((AlterDatabaseStmt *) parsetree)->dbname, true);
			break;
		case T_CreatedbStmt:
			foreach(lc, ((CreatedbStmt *) parsetree)->options)
			{
				DefElem    *def = (DefElem *) lfirst(lc);

				if (strcmp(def->defname, "template") == 0 && def->arg != NULL)
					return get_database_oid(defGetString(def), true);
			}
			break;
		default:
			break;
	}
	return InvalidOid;
}

/*
 * ProcessUtility_hook: a command that needs a database to itself stops that
 * database's sweeper first, and keeps it stopped while it runs.
 */
static void
sweeper_process_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
						ProcessUtilityContext context, ParamListInfo params,
						QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	bool		is_drop = false;
	Oid			dboid = sweeper_shared ? sweeper_ddl_database(pstmt->utilityStmt, &is_drop) : InvalidOid;
	volatile bool drop = is_drop;

	if (OidIsValid(dboid))
		sweeper_pause(dboid);
	PG_TRY();
	{
		if (prev_process_utility)
			prev_process_utility(pstmt, queryString, readOnlyTree, context, params,
								 queryEnv, dest, qc);
		else
			standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
									queryEnv, dest, qc);
	}
	PG_CATCH();
	{
		if (OidIsValid(dboid))
			sweeper_resume(dboid, false);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (OidIsValid(dboid))
		sweeper_resume(dboid, drop);
}

/* ------------------------------------------------------------------------
 * The launcher
 * ------------------------------------------------------------------------
 */

/* What the launcher keeps of each slot's worker. */
typedef struct LauncherSlot
{
	BackgroundWorkerHandle *handle;
	TimestampTz last_start;
} LauncherSlot;

static LauncherSlot *launcher_slots;

/* The databases to sweep, as a list of OIDs (in the current memory context). */
static List *
launcher_databases(void)
{
	List	   *oids = NIL;
	MemoryContext keep = CurrentMemoryContext;
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tup;

	StartTransactionCommand();
	(void) GetTransactionSnapshot();
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while (HeapTupleIsValid(tup = heap_getnext(scan, ForwardScanDirection)))
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tup);
		MemoryContext old;

		if (!db->datallowconn || db->datistemplate)
			continue;
#ifdef DATCONNLIMIT_INVALID_DB
		if (db->datconnlimit == DATCONNLIMIT_INVALID_DB)
			continue;
#endif
		if (!sweeper_database_wanted(NameStr(db->datname)))
			continue;
		old = MemoryContextSwitchTo(keep);
		oids = lappend_oid(oids, db->oid);
		MemoryContextSwitchTo(old);
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	CommitTransactionCommand();
	MemoryContextSwitchTo(keep);
	return oids;
}

/* Is the slot's worker starting or running? */
static bool
launcher_worker_alive(int i)
{
	pid_t		pid;

	if (sweeper_shared->slots[i].pid != 0)
		return true;
	return launcher_slots[i].handle != NULL &&
		GetBackgroundWorkerPid(launcher_slots[i].handle, &pid) != BGWH_STOPPED;
}

/* Start the worker of slot i. */
static void
launcher_start(int i)
{
	BackgroundWorker worker = {0};
	static bool warned = false;
	MemoryContext old;
	bool		registered;

	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;	/* the launcher restarts it */
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "holdcommit");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "hc_sweeper_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "holdcommit sweeper for database %u",
			 sweeper_shared->slots[i].dboid);
	snprintf(worker.bgw_type, BGW_MAXLEN, "holdcommit sweeper");
	worker.bgw_main_arg = Int32GetDatum(i);
	worker.bgw_notify_pid = MyProcPid;

	if (launcher_slots[i].handle != NULL)
		pfree(launcher_slots[i].handle);
	launcher_slots[i].handle = NULL;
	launcher_slots[i].last_start = GetCurrentTimestamp();
	/* The handle outlives this scan: it is allocated in the current context. */
	old = MemoryContextSwitchTo(TopMemoryContext);
	registered = RegisterDynamicBackgroundWorker(&worker, &launcher_slots[i].handle);
	MemoryContextSwitchTo(old);
	if (!registered)
	{
		launcher_slots[i].handle = NULL;
		if (!warned)
			ereport(WARNING,
					(errmsg("holdcommit launcher could not start a sweeper for database %u",
							sweeper_shared->slots[i].dboid),
					 errhint("Raise max_worker_processes.")));
		warned = true;
	}
	else
		warned = false;
}

/*
 * Make the slots match the databases to sweep: free the slots of databases
 * gone (stopping their workers), take slots for new ones, and start a
 * worker where none runs and none was started within the last interval.
 */
static void
launcher_scan(void)
{
	List	   *wanted;
	TimestampTz now = GetCurrentTimestamp();
	ListCell   *lc;
	int			i;

	/* Turned off: the workers stop by themselves; the slots stay. */
	if (hc_sweep_interval <= 0)
		return;
	wanted = launcher_databases();

	for (i = 0; i < sweeper_shared->nslots; i++)
	{
		SweeperSlot *slot = &sweeper_shared->slots[i];

		if (!OidIsValid(slot->dboid) || list_member_oid(wanted, slot->dboid))
			continue;
		if (launcher_worker_alive(i))
		{
			if (launcher_slots[i].handle != NULL)
				TerminateBackgroundWorker(launcher_slots[i].handle);
			continue;
		}
		SpinLockAcquire(&sweeper_shared->mutex);
		memset(slot, 0, sizeof(SweeperSlot));
		SpinLockRelease(&sweeper_shared->mutex);
		if (launcher_slots[i].handle != NULL)
			pfree(launcher_slots[i].handle);
		launcher_slots[i].handle = NULL;
		launcher_slots[i].last_start = 0;
	}

	foreach(lc, wanted)
	{
		Oid			dboid = lfirst_oid(lc);
		int			free_slot = -1;
		bool		startable;

		for (i = 0; i < sweeper_shared->nslots; i++)
		{
			if (sweeper_shared->slots[i].dboid == dboid)
				break;
			if (free_slot < 0 && !OidIsValid(sweeper_shared->slots[i].dboid))
				free_slot = i;
		}
		if (i == sweeper_shared->nslots)
		{
			if (free_slot < 0)
				continue;
			i = free_slot;
			SpinLockAcquire(&sweeper_shared->mutex);
			memset(&sweeper_shared->slots[i], 0, sizeof(SweeperSlot));
			sweeper_shared->slots[i].dboid = dboid;
			SpinLockRelease(&sweeper_shared->mutex);
		}
		SpinLockAcquire(&sweeper_shared->mutex);
		startable = sweeper_shared->slots[i].paused == 0 &&
			sweeper_shared->slots[i].hold_until <= now;
		SpinLockRelease(&sweeper_shared->mutex);
		if (startable && !launcher_worker_alive(i) &&
			(launcher_slots[i].last_start == 0 ||
			 TimestampDifferenceExceeds(launcher_slots[i].last_start, now,
										hc_sweep_interval * 1000)))
			launcher_start(i);
	}
	list_free(wanted);
}

/*
 * The launcher's main loop: scan, then sleep for an interval or until a
 * SIGHUP or a worker's start or end wakes it.
 */
void
hc_launcher_main(Datum main_arg)
{
	MemoryContext scan_context;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("holdcommit launcher");

	launcher_slots = MemoryContextAllocZero(TopMemoryContext,
											sizeof(LauncherSlot) * sweeper_shared->nslots);
	scan_context = AllocSetContextCreate(TopMemoryContext, "holdcommit launcher scan",
										 ALLOCSET_DEFAULT_SIZES);
	for (;;)
	{
		MemoryContext old;
		int			events = WL_LATCH_SET | WL_EXIT_ON_PM_DEATH;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		old = MemoryContextSwitchTo(scan_context);
		launcher_scan();
		MemoryContextSwitchTo(old);
		MemoryContextReset(scan_context);

		if (hc_sweep_interval > 0)
			events |= WL_TIMEOUT;
		(void) WaitLatch(MyLatch, events, (long) hc_sweep_interval * 1000L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

/* ------------------------------------------------------------------------
 * A worker in one database
 * ------------------------------------------------------------------------
 */

static int	sweeper_slot = -1;

/* Leave the slot on exit, however the worker ends. */
static void
sweeper_detach(int code, Datum arg)
{
	SweeperSlot *slot = &sweeper_shared->slots[DatumGetInt32(arg)];

	SpinLockAcquire(&sweeper_shared->mutex);
	if (slot->pid == MyProcPid)
		slot->pid = 0;
	SpinLockRelease(&sweeper_shared->mutex);
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

/* Say once that this database has no (current) holdcommit, then stop. */
static void
sweeper_skip_database(const char *datname, const char *why)
{
	SweeperSlot *slot = &sweeper_shared->slots[sweeper_slot];
	bool		said;

	SpinLockAcquire(&sweeper_shared->mutex);
	said = slot->no_extension;
	slot->no_extension = true;
	SpinLockRelease(&sweeper_shared->mutex);
	if (!said)
		ereport(LOG,
				(errmsg("holdcommit sweeper skips database \"%s\": %s", datname, why),
				 errhint("Run CREATE EXTENSION holdcommit (or ALTER EXTENSION holdcommit UPDATE) there, "
						 "or leave the database out of holdcommit.databases.")));
	proc_exit(0);
}

/* Start one transaction of a run, for a batch or for the record of the run. */
static void
sweeper_begin(HcCall *call, Oid owner, Oid schema, const char *actor)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	hc_call_begin_as(call, owner, schema, "hc_sweep", actor);
}

/* Commit that transaction: nothing stays locked after it. */
static void
sweeper_commit(HcCall *call)
{
	hc_call_end(call);
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/*
 * The error just caught, copied into run_context, and its transaction
 * aborted: the run goes on (or ends) in run_context.  Not inside an
 * ereport's arguments: it clears the error state that errstart set up.
 */
static ErrorData *
sweeper_abort(MemoryContext run_context)
{
	ErrorData  *edata;

	MemoryContextSwitchTo(run_context);
	edata = CopyErrorData();
	FlushErrorState();
	AbortCurrentTransaction();
	MemoryContextSwitchTo(run_context);
	return edata;
}

/*
 * One run: batches until one finds nothing, each its own transaction, then
 * the record in hc_sweeper_status.  An error ends the run, is logged and
 * recorded.  Everything it allocates lives in run_context, reset after.
 */
static void
sweeper_run(const char *datname, MemoryContext run_context)
{
	TimestampTz started = GetCurrentTimestamp();
	HcSweepCounts counts = {0};
	char	   *error = NULL;
	Oid			owner = InvalidOid;
	Oid			schema = InvalidOid;
	bool		found;
	bool		current = false;
	char	   *actor = NULL;
	HcCall		call;

	pgstat_report_activity(STATE_RUNNING, "holdcommit sweep");
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	found = sweeper_find_extension(&owner, &schema);
	if (found)
	{
		current = OidIsValid(get_relname_relid("hc_sweeper_status", schema));
		actor = MemoryContextStrdup(run_context, GetUserNameFromId(owner, false));
	}
	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextSwitchTo(run_context);
	if (!found)
		sweeper_skip_database(datname, "extension \"holdcommit\" is not installed");
	if (!current)
		sweeper_skip_database(datname, "extension \"holdcommit\" is older than 0.2.0");
	SpinLockAcquire(&sweeper_shared->mutex);
	sweeper_shared->slots[sweeper_slot].no_extension = false;
	SpinLockRelease(&sweeper_shared->mutex);

	PG_TRY();
	{
		bool		more;

		do
		{
			CHECK_FOR_INTERRUPTS();
			sweeper_begin(&call, owner, schema, actor);
			more = hc_sweep_batch(&call, hc_sweep_batch_size, &counts);
			sweeper_commit(&call);
		} while (more);
	}
	PG_CATCH();
	{
		error = sweeper_abort(run_context)->message;
		ereport(LOG,
				(errmsg("holdcommit sweeper run in database \"%s\" failed: %s", datname, error),
				 errdetail("What earlier batches of the run swept is committed; the next run tries again.")));
	}
	PG_END_TRY();

	PG_TRY();
	{
		sweeper_begin(&call, owner, schema, actor);
		hc_sweeper_record(&call, started, &counts, error, hc_sweep_interval);
		sweeper_commit(&call);
	}
	PG_CATCH();
	{
		char	   *unrecorded = sweeper_abort(run_context)->message;

		ereport(LOG,
				(errmsg("holdcommit sweeper could not record its run in database \"%s\": %s",
						datname, unrecorded)));
	}
	PG_END_TRY();
	MemoryContextSwitchTo(run_context);
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);
}

/*
 * A worker's main loop: claim the slot, connect, then run every interval
 * (measured from the end of the last run, so a SIGHUP that changes the
 * interval takes effect at once) until the interval is 0, the database is
 * no longer wanted, or SIGTERM.
 */
void
hc_sweeper_main(Datum main_arg)
{
	SweeperSlot *slot;
	Oid			dboid;
	bool		taken;
	char	   *datname;
	MemoryContext run_context;
	TimestampTz last_end = 0;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	sweeper_slot = DatumGetInt32(main_arg);
	slot = &sweeper_shared->slots[sweeper_slot];
	SpinLockAcquire(&sweeper_shared->mutex);
	dboid = slot->dboid;
	taken = slot->pid != 0 || slot->paused > 0 || !OidIsValid(dboid) ||
		slot->hold_until > GetCurrentTimestamp();
	if (!taken)
		slot->pid = MyProcPid;
	SpinLockRelease(&sweeper_shared->mutex);
	if (taken)
		proc_exit(0);
	before_shmem_exit(sweeper_detach, Int32GetDatum(sweeper_slot));

	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
	SetConfigOption("application_name", "holdcommit sweeper", PGC_USERSET, PGC_S_SESSION);
	SetConfigOption("search_path", "pg_catalog", PGC_USERSET, PGC_S_SESSION);
	pgstat_report_appname("holdcommit sweeper");

	StartTransactionCommand();
	datname = MemoryContextStrdup(TopMemoryContext, get_database_name(dboid));
	CommitTransactionCommand();

	run_context = AllocSetContextCreate(TopMemoryContext, "holdcommit sweeper run",
										ALLOCSET_DEFAULT_SIZES);
	for (;;)
	{
		long		wait_ms;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		if (hc_sweep_interval <= 0 || !sweeper_database_wanted(datname))
			proc_exit(0);

		wait_ms = (long) hc_sweep_interval * 1000L;
		if (last_end != 0)
			wait_ms -= (long) ((GetCurrentTimestamp() - last_end) / 1000);
		if (wait_ms <= 0 || last_end == 0)
		{
			if (!RecoveryInProgress())
			{
				MemoryContext old = MemoryContextSwitchTo(run_context);

				sweeper_run(datname, run_context);
				MemoryContextSwitchTo(old);
				MemoryContextReset(run_context);
			}
			last_end = GetCurrentTimestamp();
			wait_ms = (long) hc_sweep_interval * 1000L;
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 wait_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

/* ------------------------------------------------------------------------
 * Set-up, from _PG_init while shared_preload_libraries is processed
 * ------------------------------------------------------------------------
 */

/*
 * Ask for the shared memory, hook DDL that needs a database to itself, and
 * register the launcher (restarted 5 s after a crash).
 */
void
hc_worker_init(void)
{
	BackgroundWorker launcher = {0};

	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = sweeper_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = sweeper_shmem_startup;
	prev_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = sweeper_process_utility;

	launcher.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	launcher.bgw_start_time = BgWorkerStart_RecoveryFinished;
	launcher.bgw_restart_time = 5;
	snprintf(launcher.bgw_library_name, BGW_MAXLEN, "holdcommit");
	snprintf(launcher.bgw_function_name, BGW_MAXLEN, "hc_launcher_main");
	snprintf(launcher.bgw_name, BGW_MAXLEN, "holdcommit launcher");
	snprintf(launcher.bgw_type, BGW_MAXLEN, "holdcommit launcher");
	RegisterBackgroundWorker(&launcher);
}
