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
 * databases without it; a sweep that finds every slot taken stops a look.
 * A run that starts after another's due time ends due after it, so a
 * database waits for at most the N - 1 others once: with N databases to
 * sweep and M sweepers, each is swept at least every interval + ceil(N / M)
 * x time slice (doc/sweeper.md).
 *
 * Invariants:
 *   1. Only the launcher starts runs, so at most holdcommit.max_sweepers run,
 *      counting those an earlier launcher left.
 *   2. A run that starts after another's due time ends due after it: a
 *      database waits for at most the N - 1 others once.
 *   3. A look never delays a sweep: a sweep that finds every slot taken
 *      stops a look, which is due again at once.
 *   4. pg_database is read, and the log written, without the table's lock.
 *
 * Review on a new major: the background worker API (registration, connection,
 * signals), the columns of pg_database read by a heap scan (datallowconn,
 * datistemplate, datname; database_is_invalid_form), and how a transaction
 * is run by hand.
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

#include "bgw/sweeper/register.h"
#include "bgw/sweeper/sweeper.h"
#include "common/settings.h"

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

/* A database to sweep, as pg_database says now. */
typedef struct ListedDb
{
	Oid			oid;
	NameData	name;
} ListedDb;

/* The run this launcher started in entry db, or -1. */
static int
launcher_run_of(int db)
{
	int			i;

	for (i = 0; i < nruns; i++)
		if (runs[i].db == db)
			return i;
	return -1;
}

/* Is nothing running (or starting) in entry i? */
static bool
launcher_idle(int i, TimestampTz now)
{
	return launcher_run_of(i) < 0 && !hc_sweeper_busy(&hc_sweeper_shared->dbs[i], now);
}

/*
 * The databases to sweep: those that accept connections, are not templates
 * nor left invalid by an interrupted DROP DATABASE, and that
 * holdcommit.databases names (all if it is empty).  Read without the lock.
 */
static List *
launcher_list_databases(void)
{
	List	   *listed = NIL;
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tup;
	MemoryContext tick = CurrentMemoryContext;

	StartTransactionCommand();
	(void) GetTransactionSnapshot();
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while (HeapTupleIsValid(tup = heap_getnext(scan, ForwardScanDirection)))
	{
		Form_pg_database pgdb = (Form_pg_database) GETSTRUCT(tup);
		MemoryContext old;
		ListedDb   *db;

		if (!pgdb->datallowconn || pgdb->datistemplate || database_is_invalid_form(pgdb) ||
			!hc_sweeper_database_wanted(NameStr(pgdb->datname)))
			continue;
		old = MemoryContextSwitchTo(tick);
		db = palloc(sizeof(ListedDb));
		db->oid = pgdb->oid;
		db->name = pgdb->datname;
		listed = lappend(listed, db);
		MemoryContextSwitchTo(old);
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	CommitTransactionCommand();
	MemoryContextSwitchTo(tick);
	return listed;
}

/* A free entry, or one of a database without holdcommit that is idle; -1 if none. */
static int
launcher_free_entry(TimestampTz now)
{
	int			i = hc_sweeper_find(InvalidOid);

	if (i >= 0)
		return i;
	for (i = 0; i < hc_sweeper_shared->ndbs; i++)
	{
		SweepDb    *db = &hc_sweeper_shared->dbs[i];

		if ((db->kind == KIND_NONE || db->kind == KIND_OLD) && launcher_idle(i, now))
			return i;
	}
	return -1;
}

/*
 * Make the table match pg_database: an entry for every database to sweep,
 * named as it is now; free the entries of the others unless a run is on.
 * When the table is full, databases without holdcommit give up theirs.
 * Returns a database that found no entry (for the log), or NULL.
 */
static char *
launcher_scan(TimestampTz now)
{
	List	   *listed = launcher_list_databases();
	bool	   *seen = palloc0(sizeof(bool) * hc_sweeper_shared->ndbs);
	char	   *untracked = NULL;
	ListCell   *lc;
	int			i;

	LWLockAcquire(hc_sweeper_shared->lock, LW_EXCLUSIVE);
	foreach(lc, listed)
	{
		ListedDb   *listed_db = (ListedDb *) lfirst(lc);

		i = hc_sweeper_find(listed_db->oid);
		if (i < 0 && (i = launcher_free_entry(now)) >= 0)
		{
			memset(&hc_sweeper_shared->dbs[i], 0, sizeof(SweepDb));
			hc_sweeper_shared->dbs[i].dboid = listed_db->oid;
			hc_sweeper_shared->dbs[i].due = now;
		}
		if (i < 0)
		{
			if (untracked == NULL)
				untracked = pstrdup(NameStr(listed_db->name));
			continue;
		}
		seen[i] = true;
		hc_sweeper_shared->dbs[i].datname = listed_db->name;
	}
	for (i = 0; i < hc_sweeper_shared->ndbs; i++)
		if (OidIsValid(hc_sweeper_shared->dbs[i].dboid) && !seen[i] && launcher_idle(i, now))
			memset(&hc_sweeper_shared->dbs[i], 0, sizeof(SweepDb));
	LWLockRelease(hc_sweeper_shared->lock);
	pfree(seen);
	return untracked;
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
		LWLockAcquire(hc_sweeper_shared->lock, LW_EXCLUSIVE);
		if (hc_sweeper_shared->dbs[runs[i].db].dboid == runs[i].dboid)
		{
			SweepDb    *db = &hc_sweeper_shared->dbs[runs[i].db];

			/* A run that never claimed the entry stepped aside: still due. */
			if (db->last_start >= runs[i].started)
				db->due = launcher_next_due(db, now);
			db->start_requested = 0;
			db->preempted = false;
		}
		LWLockRelease(hc_sweeper_shared->lock);
		pfree(runs[i].handle);
		runs[i] = runs[--nruns];
	}
}

/* Start a run in entry i; false if no background worker slot is free. */
static bool
launcher_start(int i, TimestampTz now)
{
	SweepDb    *db = &hc_sweeper_shared->dbs[i];
	BackgroundWorker worker = {0};
	BackgroundWorkerHandle *handle;
	MemoryContext old;
	bool		registered;

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
	/* The handle outlives the tick. */
	old = MemoryContextSwitchTo(TopMemoryContext);
	registered = RegisterDynamicBackgroundWorker(&worker, &handle);
	MemoryContextSwitchTo(old);
	if (!registered)
		return false;
	runs[nruns].handle = handle;
	runs[nruns].db = i;
	runs[nruns].dboid = db->dboid;
	runs[nruns].started = now;
	nruns++;
	db->start_requested = now;
	db->wait = WAIT_NONE;
	return true;
}

/*
 * Does entry i wait for (or run) a sweep (rank 0) rather than a look (rank
 * 1)?  A look that CREATE or ALTER EXTENSION asked for counts as a sweep,
 * also while it runs: stopping it would leave the database to its next
 * look, ten intervals away.
 */
static int
launcher_rank(const SweepDb *db)
{
	return (db->kind == KIND_INSTALLED || db->kind == KIND_UNKNOWN ||
			db->look_now || db->look_asked) ? 0 : 1;
}

/*
 * The entry to start next: due, not paused, idle; first those with
 * holdcommit (or not yet looked at, or just given it), oldest due first,
 * then the looks at the others.  -1 if none.
 */
static int
launcher_pick(TimestampTz now)
{
	int			best = -1;
	int			i;

	for (i = 0; i < hc_sweeper_shared->ndbs; i++)
	{
		SweepDb    *db = &hc_sweeper_shared->dbs[i];

		if (!OidIsValid(db->dboid) || db->dropped || !launcher_idle(i, now) ||
			(db->due > now && !db->look_now) || hc_sweeper_paused(db->dboid))
			continue;
		if (best < 0 || launcher_rank(db) < launcher_rank(&hc_sweeper_shared->dbs[best]) ||
			(launcher_rank(db) == launcher_rank(&hc_sweeper_shared->dbs[best]) &&
			 db->due < hc_sweeper_shared->dbs[best].due))
			best = i;
	}
	return best;
}

/* How many sweepers run or start: the launcher's, and any an earlier launcher left. */
static int
launcher_busy(TimestampTz now)
{
	int			busy = nruns;
	int			i;

	for (i = 0; i < hc_sweeper_shared->ndbs; i++)
		if (launcher_run_of(i) < 0 && hc_sweeper_busy(&hc_sweeper_shared->dbs[i], now))
			busy++;
	return busy;
}

/*
 * A sweep waits while every slot is taken: stop a look (it only reads the
 * catalog, and is due again at once) so that looks never delay a sweep.
 * True if one was stopped.
 */
static bool
launcher_preempt_look(void)
{
	int			r;

	for (r = 0; r < nruns; r++)
	{
		SweepDb    *db = &hc_sweeper_shared->dbs[runs[r].db];

		if (launcher_rank(db) == 1 && !db->preempted)
		{
			db->preempted = true;
			TerminateBackgroundWorker(runs[r].handle);
			return true;
		}
	}
	return false;
}

/* Start what is due, up to the cap; the rest waits, and says why. */
static void
launcher_start_due(TimestampTz now)
{
	int			cap = Min(hc_max_sweepers, max_worker_processes);
	SweepWait	wait = WAIT_BUSY;
	int			i;

	LWLockAcquire(hc_sweeper_shared->lock, LW_EXCLUSIVE);
	while ((i = launcher_pick(now)) >= 0)
	{
		if (launcher_busy(now) >= cap)
		{
			if (launcher_rank(&hc_sweeper_shared->dbs[i]) == 0)
				(void) launcher_preempt_look();
			break;
		}
		if (!launcher_start(i, now))
		{
			wait = WAIT_NO_SLOT;
			break;
		}
	}
	for (i = 0; i < hc_sweeper_shared->ndbs; i++)
	{
		SweepDb    *db = &hc_sweeper_shared->dbs[i];

		if (OidIsValid(db->dboid) && db->due <= now && launcher_idle(i, now))
			db->wait = hc_sweeper_paused(db->dboid) ? WAIT_PAUSED : wait;
	}
	LWLockRelease(hc_sweeper_shared->lock);
}

/* What the log is to say of one database. */
typedef struct LauncherNews
{
	NameData	datname;
	SweepHealth health;
	char		reason[SWEEP_ERROR_LEN];
} LauncherNews;

/*
 * Tell the log of every database with holdcommit whose health changed, by
 * name, once.  Collected under the lock, logged after it.
 */
static void
launcher_report(TimestampTz now)
{
	LauncherNews *news = palloc(sizeof(LauncherNews) * hc_sweeper_shared->ndbs);
	int64		allowance;
	int			n = 0;
	int			i;

	LWLockAcquire(hc_sweeper_shared->lock, LW_EXCLUSIVE);
	allowance = hc_sweeper_busy_allowance();
	for (i = 0; i < hc_sweeper_shared->ndbs; i++)
	{
		SweepDb    *db = &hc_sweeper_shared->dbs[i];
		const char *reason;
		SweepHealth health;

		if (!OidIsValid(db->dboid) || db->dropped || db->kind != KIND_INSTALLED)
			continue;
		health = hc_sweeper_health(db, now, allowance, &reason);
		/* A run in progress says nothing new until it ends. */
		if (health == db->reported || (health == HEALTH_OK && !launcher_idle(i, now)))
			continue;
		db->reported = health;
		news[n].datname = db->datname;
		news[n].health = health;
		strlcpy(news[n].reason, reason ? reason : "", SWEEP_ERROR_LEN);
		n++;
	}
	LWLockRelease(hc_sweeper_shared->lock);

	for (i = 0; i < n; i++)
	{
		if (news[i].health == HEALTH_FAILED)
			ereport(WARNING,
					(errmsg("holdcommit sweeper: database \"%s\" is not swept: its last run failed: %s",
							NameStr(news[i].datname), news[i].reason),
					 errhint("The next run is due in %d s; hc_sweeper_databases shows the state.",
							 hc_sweep_interval)));
		else if (news[i].health == HEALTH_BEHIND)
			ereport(WARNING,
					(errmsg("holdcommit sweeper: database \"%s\" is not swept: its run is late: %s",
							NameStr(news[i].datname), news[i].reason),
					 errhint("hc_sweeper_databases shows the state; doc/sweeper.md says what each reason needs.")));
		else
			ereport(LOG,
					(errmsg("holdcommit sweeper: database \"%s\" is swept again",
							NameStr(news[i].datname))));
	}
	pfree(news);
}

/* Say once that the table is full, naming a database left out. */
static void
launcher_report_full(const char *untracked)
{
	if (untracked != NULL && !warned_full)
		ereport(WARNING,
				(errmsg("holdcommit sweeper cannot sweep database \"%s\": holdcommit.max_databases (%d) databases are tracked already",
						untracked, hc_sweeper_shared->ndbs),
				 errhint("Raise holdcommit.max_databases (a restart), or name the databases to sweep in holdcommit.databases.")));
	warned_full = (untracked != NULL);
}

/*
 * How long to sleep: until the next run falls due, a tick at most.  Runs
 * already due wait for a run's end or a pause's end, which set the latch.
 * now is the tick's, the one launcher_pick compared with: a run that falls
 * due during the tick is slept for too, not left for the next tick (a
 * second late), and the sleep is rounded up so as not to end before it.
 */
static long
launcher_sleep_ms(TimestampTz now)
{
	TimestampTz next = now + (int64) TICK_MS * 1000;
	int			i;

	LWLockAcquire(hc_sweeper_shared->lock, LW_SHARED);
	for (i = 0; i < hc_sweeper_shared->ndbs; i++)
	{
		SweepDb    *db = &hc_sweeper_shared->dbs[i];

		if (OidIsValid(db->dboid) && launcher_idle(i, now) && db->due > now && db->due < next)
			next = db->due;
	}
	LWLockRelease(hc_sweeper_shared->lock);
	return Max(1, (long) ((next - GetCurrentTimestamp() + 999) / 1000));
}

/* The launcher's latch leaves shared memory with it. */
static void
launcher_exit(int code, Datum arg)
{
	LWLockReleaseAll();
	LWLockAcquire(hc_sweeper_shared->lock, LW_EXCLUSIVE);
	hc_sweeper_shared->launcher = NULL;
	LWLockRelease(hc_sweeper_shared->lock);
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
	LWLockAcquire(hc_sweeper_shared->lock, LW_EXCLUSIVE);
	hc_sweeper_shared->launcher = &MyProc->procLatch;
	LWLockRelease(hc_sweeper_shared->lock);
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
			launcher_report_full(launcher_scan(now));
			launcher_start_due(now);
			launcher_report(now);
			sleep_ms = launcher_sleep_ms(now);
		}
		MemoryContextSwitchTo(old);
		MemoryContextReset(tick_context);

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 sleep_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

/*
 * The launcher, restarted 5 s after it crashes: _PG_init (holdcommit.c)
 * registers it.
 */
void
hc_launcher_describe(BackgroundWorker *launcher)
{
	memset(launcher, 0, sizeof(BackgroundWorker));
	launcher->bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	launcher->bgw_start_time = BgWorkerStart_RecoveryFinished;
	launcher->bgw_restart_time = 5;
	snprintf(launcher->bgw_library_name, BGW_MAXLEN, "holdcommit");
	snprintf(launcher->bgw_function_name, BGW_MAXLEN, "hc_launcher_main");
	snprintf(launcher->bgw_name, BGW_MAXLEN, "holdcommit launcher");
	snprintf(launcher->bgw_type, BGW_MAXLEN, "holdcommit launcher");
}
