/*
 * launcher.c
 *		The background sweeper's launcher: one process per server, connected
 *		to no database, that schedules runs in every database.
 *
 * Borrowed from pg_cron's background-worker mode (one scheduler, a
 * short-lived worker per job) and TimescaleDB's launcher (it alone starts
 * workers, so it alone enforces their cap).  Every tick (at most a second
 * apart, and whenever a run ends or a command asks) it reads pg_database
 * into the table of sweeper_state.c, reaps the runs that ended, starts runs
 * that are due while fewer than holdcommit.max_sweepers run, and tells the
 * log, once per change, of a database that is not swept.
 *
 * A run (sweeper.c) sweeps one database for at most
 * holdcommit.sweep_time_slice, then exits.  A database is due again an
 * interval after its run ended (at once if its slice ran out with work
 * left); one without holdcommit is looked at again after ten intervals, or
 * at once after CREATE EXTENSION there.  The due runs start oldest first,
 * and databases with holdcommit (or not yet looked at) before the looks at
 * databases without it.  A run that starts after another's due time ends
 * due after it, so a database waits for at most the N - 1 others once:
 * with N databases to sweep and M sweepers, each is swept at least every
 * interval + ceil(N / M) x time slice (doc/sweeper.md).
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "holdcommit.h"
#include "sweeper.h"

PGDLLEXPORT void hc_launcher_main(Datum main_arg);

/* A look at a database without holdcommit, every this many intervals. */
#define LOOK_INTERVALS 10
/* The launcher's longest sleep: how soon it sees a new database. */
#define TICK_MS 1000

/* A run the launcher started. */
typedef struct LauncherRun
{
	BackgroundWorkerHandle *handle;
	int			db;				/* its entry */
	Oid			dboid;
	TimestampTz started;		/* when it was registered */
} LauncherRun;

static LauncherRun *runs;
static int	nruns;
static bool warned_full = false;

/* Is entry db one of the runs this launcher started? */
static bool
launcher_running(int db)
{
	int			i;

	for (i = 0; i < nruns; i++)
		if (runs[i].db == db)
			return true;
	return false;
}

/*
 * Make the table match pg_database: an entry for every database to sweep
 * (holdcommit.databases, accepting connections, not a template), named as
 * it is now; free the entries of the others unless a run is on.
 */
static void
launcher_scan(TimestampTz now)
{
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tup;
	bool	   *seen = palloc0(sizeof(bool) * sweep_shared->ndbs);
	int			i;

	StartTransactionCommand();
	(void) GetTransactionSnapshot();
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	LWLockAcquire(sweep_shared->lock, LW_EXCLUSIVE);
	while (HeapTupleIsValid(tup = heap_getnext(scan, ForwardScanDirection)))
	{
		Form_pg_database pgdb = (Form_pg_database) GETSTRUCT(tup);

		if (!pgdb->datallowconn || pgdb->datistemplate ||
			!sweep_database_wanted(NameStr(pgdb->datname)))
			continue;
		i = sweep_find(pgdb->oid);
		if (i < 0 && (i = sweep_find(InvalidOid)) >= 0)
		{
			memset(&sweep_shared->dbs[i], 0, sizeof(SweepDb));
			sweep_shared->dbs[i].dboid = pgdb->oid;
			sweep_shared->dbs[i].due = now;
		}
		if (i < 0)
		{
			if (!warned_full)
				ereport(WARNING,
						(errmsg("holdcommit sweeper cannot sweep database \"%s\": holdcommit.max_databases (%d) databases are tracked already",
								NameStr(pgdb->datname), sweep_shared->ndbs),
						 errhint("Raise holdcommit.max_databases (a restart), or name the databases to sweep in holdcommit.databases.")));
			warned_full = true;
			continue;
		}
		seen[i] = true;
		namestrcpy(&sweep_shared->dbs[i].datname, NameStr(pgdb->datname));
	}
	for (i = 0; i < sweep_shared->ndbs; i++)
	{
		SweepDb    *db = &sweep_shared->dbs[i];

		if (OidIsValid(db->dboid) && !seen[i] && db->pid == 0 && !launcher_running(i))
		{
			memset(db, 0, sizeof(SweepDb));
			warned_full = false;
		}
	}
	LWLockRelease(sweep_shared->lock);
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	CommitTransactionCommand();
	pfree(seen);
}

/* When a database whose run (or look) just ended is due again. */
static TimestampTz
launcher_next_due(const SweepDb *db, TimestampTz now)
{
	int64		interval = (int64) hc_sweep_interval * USECS_PER_SEC;

	switch (db->outcome)
	{
		case OUTCOME_UNFINISHED:
			return now;
		case OUTCOME_LOOKED:
			return now + LOOK_INTERVALS * interval;
		case OUTCOME_NONE:
			return db->due;		/* it stepped aside: still due */
		default:
			return now + interval;
	}
}

/* Forget the runs that ended, and schedule their databases' next. */
static void
launcher_reap(TimestampTz now)
{
	int			i = 0;

	while (i < nruns)
	{
		pid_t		pid;

		if (GetBackgroundWorkerPid(runs[i].handle, &pid) != BGWH_STOPPED)
		{
			i++;
			continue;
		}
		LWLockAcquire(sweep_shared->lock, LW_EXCLUSIVE);
		if (sweep_shared->dbs[runs[i].db].dboid == runs[i].dboid)
		{
			SweepDb    *db = &sweep_shared->dbs[runs[i].db];

			/* A run that never claimed the entry stepped aside: still due. */
			if (db->last_start >= runs[i].started)
				db->due = launcher_next_due(db, now);
			db->starting = false;
		}
		LWLockRelease(sweep_shared->lock);
		pfree(runs[i].handle);
		runs[i] = runs[--nruns];
	}
}

/* Start a run in entry i; false if no background worker slot is free. */
static bool
launcher_start(int i)
{
	SweepDb    *db = &sweep_shared->dbs[i];
	BackgroundWorker worker = {0};
	BackgroundWorkerHandle *handle;
	TimestampTz started = GetCurrentTimestamp();

	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "holdcommit");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "hc_sweeper_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "holdcommit sweeper for database \"%s\"",
			 NameStr(db->datname));
	snprintf(worker.bgw_type, BGW_MAXLEN, "holdcommit sweeper");
	worker.bgw_main_arg = Int32GetDatum(i);
	memcpy(worker.bgw_extra, &db->dboid, sizeof(Oid));
	worker.bgw_notify_pid = MyProcPid;
	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
		return false;
	runs[nruns].handle = handle;
	runs[nruns].db = i;
	runs[nruns].dboid = db->dboid;
	runs[nruns].started = started;
	nruns++;
	db->look_now = false;
	db->starting = true;
	db->wait = WAIT_NONE;
	return true;
}

/*
 * The entry to start next: due, not paused, not running; first those with
 * holdcommit (or not yet looked at, or just given it), oldest due first,
 * then the looks at the others.  -1 if none.
 */
static int
launcher_pick(TimestampTz now)
{
	int			best = -1;
	int			best_rank = 2;
	int			i;

	for (i = 0; i < sweep_shared->ndbs; i++)
	{
		SweepDb    *db = &sweep_shared->dbs[i];
		int			rank;

		if (!OidIsValid(db->dboid) || db->dropped || db->pid != 0 || launcher_running(i) ||
			(db->due > now && !db->look_now))
			continue;
		if (sweep_paused(db->dboid))
			continue;
		rank = (db->kind == KIND_INSTALLED || db->kind == KIND_UNKNOWN || db->look_now) ? 0 : 1;
		if (rank < best_rank || (rank == best_rank && db->due < sweep_shared->dbs[best].due))
		{
			best = i;
			best_rank = rank;
		}
	}
	return best;
}

/* How many sweepers run: the launcher's, and any an earlier launcher left. */
static int
launcher_busy(void)
{
	int			busy = nruns;
	int			i;

	for (i = 0; i < sweep_shared->ndbs; i++)
		if (sweep_shared->dbs[i].pid != 0 && !launcher_running(i))
			busy++;
	return busy;
}

/* Start what is due, up to the cap; the rest waits, and says why. */
static void
launcher_start_due(TimestampTz now)
{
	int			cap = Min(hc_max_sweepers, max_worker_processes);
	SweepWait	wait = WAIT_BUSY;
	int			i;

	LWLockAcquire(sweep_shared->lock, LW_EXCLUSIVE);
	while (launcher_busy() < cap && (i = launcher_pick(now)) >= 0)
	{
		if (!launcher_start(i))
		{
			wait = WAIT_NO_SLOT;
			break;
		}
	}
	for (i = 0; i < sweep_shared->ndbs; i++)
	{
		SweepDb    *db = &sweep_shared->dbs[i];

		if (OidIsValid(db->dboid) && db->due <= now && db->pid == 0 && !launcher_running(i))
			db->wait = sweep_paused(db->dboid) ? WAIT_PAUSED : wait;
	}
	LWLockRelease(sweep_shared->lock);
}

/*
 * How long to sleep: until the next run falls due, a tick at most.  Runs
 * already due wait for a run's end or a pause's end, which set the latch.
 */
static long
launcher_sleep_ms(TimestampTz now)
{
	TimestampTz next = now + (int64) TICK_MS * 1000;
	int			i;

	LWLockAcquire(sweep_shared->lock, LW_SHARED);
	for (i = 0; i < sweep_shared->ndbs; i++)
	{
		SweepDb    *db = &sweep_shared->dbs[i];

		if (OidIsValid(db->dboid) && db->pid == 0 && !launcher_running(i) &&
			db->due > now && db->due < next)
			next = db->due;
	}
	LWLockRelease(sweep_shared->lock);
	return Max(10, (long) ((next - now) / 1000));
}

/* Tell the log of every database whose health changed, by name, once. */
static void
launcher_report(TimestampTz now)
{
	int			i;

	LWLockAcquire(sweep_shared->lock, LW_EXCLUSIVE);
	for (i = 0; i < sweep_shared->ndbs; i++)
	{
		SweepDb    *db = &sweep_shared->dbs[i];
		const char *reason;
		SweepHealth health;

		if (!OidIsValid(db->dboid) || db->dropped)
			continue;
		health = sweep_health(db, now, &reason);
		if (health == db->reported || ((db->pid != 0 || db->starting) && health == HEALTH_OK))
			continue;
		if (health == HEALTH_FAILED)
			ereport(WARNING,
					(errmsg("holdcommit sweeper: database \"%s\" is not swept: its last run failed: %s",
							NameStr(db->datname), reason),
					 errhint("The next run is due in %d s; hc_sweeper_databases shows the state.",
							 hc_sweep_interval)));
		else if (health == HEALTH_BEHIND)
			ereport(WARNING,
					(errmsg("holdcommit sweeper: database \"%s\" is not swept: its run has been due for more than %d s: %s",
							NameStr(db->datname), hc_sweep_interval, reason),
					 errhint("hc_sweeper_databases shows the state; doc/sweeper.md says what each reason needs.")));
		else if (db->kind == KIND_INSTALLED)
			ereport(LOG,
					(errmsg("holdcommit sweeper: database \"%s\" is swept again",
							NameStr(db->datname))));
		db->reported = health;
	}
	LWLockRelease(sweep_shared->lock);
}

/* The launcher's latch leaves shared memory with it. */
static void
launcher_exit(int code, Datum arg)
{
	LWLockAcquire(sweep_shared->lock, LW_EXCLUSIVE);
	sweep_shared->launcher = NULL;
	LWLockRelease(sweep_shared->lock);
}

/*
 * The launcher's main loop: a tick, then sleep until the next due run, a
 * second at most, or until a run's end, a SIGHUP or a command wakes it.
 */
void
hc_launcher_main(Datum main_arg)
{
	MemoryContext tick_context;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("holdcommit launcher");

	runs = MemoryContextAllocZero(TopMemoryContext, sizeof(LauncherRun) * max_worker_processes);
	LWLockAcquire(sweep_shared->lock, LW_EXCLUSIVE);
	sweep_shared->launcher = &MyProc->procLatch;
	LWLockRelease(sweep_shared->lock);
	before_shmem_exit(launcher_exit, (Datum) 0);

	tick_context = AllocSetContextCreate(TopMemoryContext, "holdcommit launcher tick",
										 ALLOCSET_DEFAULT_SIZES);
	for (;;)
	{
		MemoryContext old;
		TimestampTz now;
		long		sleep_ms = TICK_MS;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		old = MemoryContextSwitchTo(tick_context);
		now = GetCurrentTimestamp();
		launcher_reap(now);
		if (hc_sweep_interval > 0)
		{
			launcher_scan(now);
			launcher_start_due(now);
			launcher_report(now);
			sleep_ms = launcher_sleep_ms(GetCurrentTimestamp());
		}
		MemoryContextSwitchTo(old);
		MemoryContextReset(tick_context);

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 sleep_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

/* Register the launcher (restarted 5 s after it crashes). */
void
hc_launcher_register(void)
{
	BackgroundWorker launcher = {0};

	launcher.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	launcher.bgw_start_time = BgWorkerStart_RecoveryFinished;
	launcher.bgw_restart_time = 5;
	snprintf(launcher.bgw_library_name, BGW_MAXLEN, "holdcommit");
	snprintf(launcher.bgw_function_name, BGW_MAXLEN, "hc_launcher_main");
	snprintf(launcher.bgw_name, BGW_MAXLEN, "holdcommit launcher");
	snprintf(launcher.bgw_type, BGW_MAXLEN, "holdcommit launcher");
	RegisterBackgroundWorker(&launcher);
}
