/*
 * sweeper_state.c
 *		The background sweeper's table of databases in shared memory, the
 *		commands that pause it, and hc_sweeper_databases(), which shows it.
 *
 * The launcher (launcher.c) fills the table from pg_database and schedules
 * the runs; each run (sweeper.c) writes its outcome into its database's
 * entry.  Because the table lives in shared memory, the view answers for
 * every database from any database, whether or not a sweeper could reach
 * it.  One LWLock guards it all.
 *
 * DROP DATABASE, ALTER DATABASE ... RENAME or SET TABLESPACE and CREATE
 * DATABASE ... TEMPLATE need a database to themselves.  The backend running
 * one marks the database paused in its own cell of an array (one per
 * backend), stops the database's run (a query cancel: the run steps aside
 * without a FATAL, still due) and unmarks it when the command's transaction
 * ends (an XactCallback: a RENAME commits after the command), on its error,
 * and on FATAL too (PG_ENSURE_ERROR_CLEANUP, a before_shmem_exit callback;
 * an exit aborts the transaction), so no exit path leaves a pause behind.
 * The sweeper's pid is read and signalled under the lock, and a sweeper
 * clears it under the lock before it exits, so the pid signalled is never
 * stale.
 *
 * Invariants:
 *   1. One LWLock guards the table and the pauses; a pid is signalled only
 *      under it, and a sweeper clears its own under it before it exits.
 *   2. Only a user who may run the command pauses the database: a refused
 *      DROP DATABASE must not stop the owner's sweeping.
 *   3. A pause ends with the command's transaction, not before (a run
 *      started meanwhile would connect to the old name), and on every exit
 *      path: the xact callback, the error cleanup, the exit callback.
 *   4. A database that DROP DATABASE removed is marked dropped: no run
 *      starts there again.
 *
 * Review on a new major: the ProcessUtility_hook's signature and the parse
 * nodes of the commands that need a database to themselves (CreatedbStmt,
 * DropdbStmt, RenameStmt, AlterDatabaseStmt), the per-backend index
 * (compat.h), the database owner check, the xact callback's events.
 */
#include "postgres.h"

#include <signal.h>

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_database.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
#include "utils/varlena.h"

#include "compat.h"
#include "bgw/sweeper/register.h"
#include "bgw/sweeper/sweeper.h"
#include "common/settings.h"

PG_FUNCTION_INFO_V1(hc_sweeper_databases);

SweepShared *hc_sweeper_shared = NULL;

/* The database each backend's command has paused (InvalidOid: none). */
static Oid *sweep_pauses = NULL;

/* This transaction ran CREATE or ALTER EXTENSION holdcommit. */
static bool look_at_commit = false;

/* A command of this transaction paused a database: resume when it ends. */
static bool resume_at_end = false;

static Size
sweep_table_size(void)
{
	return add_size(offsetof(SweepShared, dbs), mul_size(hc_max_databases, sizeof(SweepDb)));
}

static Size
sweep_pauses_size(void)
{
	return mul_size(MaxBackends, sizeof(Oid));
}

/* The table and the pauses (shmem_request_hook, in holdcommit.c). */
Size
hc_sweeper_shmem_size(void)
{
	return add_size(sweep_table_size(), sweep_pauses_size());
}

/*
 * Create them, or find them (shmem_startup_hook, in holdcommit.c, which
 * holds AddinShmemInitLock).  lock is the LWLock that guards them.
 */
void
hc_sweeper_shmem_init(LWLock *lock)
{
	bool		found;

	hc_sweeper_shared = ShmemInitStruct("holdcommit sweeper", sweep_table_size(), &found);
	if (!found)
	{
		memset(hc_sweeper_shared, 0, sweep_table_size());
		hc_sweeper_shared->lock = lock;
		hc_sweeper_shared->ndbs = hc_max_databases;
	}
	sweep_pauses = ShmemInitStruct("holdcommit sweeper pauses", sweep_pauses_size(), &found);
	if (!found)
		memset(sweep_pauses, 0, sweep_pauses_size());
}

/* The entry of a database, or -1. */
int
hc_sweeper_find(Oid dboid)
{
	int			i;

	for (i = 0; i < hc_sweeper_shared->ndbs; i++)
		if (hc_sweeper_shared->dbs[i].dboid == dboid)
			return i;
	return -1;
}

/* Does a command running now need the database to itself? */
bool
hc_sweeper_paused(Oid dboid)
{
	int			i;

	for (i = 0; i < MaxBackends; i++)
		if (sweep_pauses[i] == dboid)
			return true;
	return false;
}

/* Wake the launcher, if it runs: something changed that it should act on. */
void
hc_sweeper_wake_launcher(void)
{
	if (hc_sweeper_shared->launcher != NULL)
		SetLatch(hc_sweeper_shared->launcher);
}

/* Does a run hold the entry, or is one starting (not for ever)? */
bool
hc_sweeper_busy(const SweepDb *db, TimestampTz now)
{
	return db->pid != 0 ||
		(db->start_requested != 0 && now - db->start_requested < SWEEP_START_TIMEOUT_US);
}

/*
 * How long a database may wait for a busy sweeper and still be on time:
 * ceil(N / max_sweepers) time slices, N the databases with holdcommit (the
 * bound of launcher.c).
 */
int64
hc_sweeper_busy_allowance(void)
{
	int			cap = Max(1, Min(hc_max_sweepers, max_worker_processes));
	int			n = 0;
	int			i;

	for (i = 0; i < hc_sweeper_shared->ndbs; i++)
		if (hc_sweeper_shared->dbs[i].kind == KIND_INSTALLED)
			n++;
	return (int64) ((n + cap - 1) / cap) * hc_sweep_time_slice * 1000;
}

static const char paused_reason[] =
	"a CREATE, ALTER or DROP DATABASE command needs the database to itself";

/*
 * Is a database with holdcommit swept as it should be?  Behind: its run
 * has been due for longer than an interval (no worker slot, a pause), or
 * than the bound allows when only busy sweepers hold it up; failed: the
 * last run ended in an error.  *reason says why, for the view and the log.
 */
SweepHealth
hc_sweeper_health(const SweepDb *db, TimestampTz now, int64 busy_allowance, const char **reason)
{
	/* A run that has just ended is not late, whatever the launcher knows yet. */
	TimestampTz due = Max(db->due, db->last_end);
	int64		late = (int64) hc_sweep_interval * USECS_PER_SEC;

	*reason = NULL;
	if (db->kind != KIND_INSTALLED)
		return HEALTH_OK;
	if (db->wait == WAIT_BUSY)
		late = Max(late, busy_allowance);
	else if (db->wait == WAIT_NONE)
		late += 2 * USECS_PER_SEC;	/* the launcher's next two ticks */
	if (!hc_sweeper_busy(db, now) && hc_sweep_interval > 0 && due != 0 && now - due > late)
	{
		switch (db->wait)
		{
			case WAIT_PAUSED:
				*reason = paused_reason;
				break;
			case WAIT_NO_SLOT:
				*reason = "no background worker slot is free (max_worker_processes)";
				break;
			case WAIT_BUSY:
				*reason = "every sweeper is busy (holdcommit.max_sweepers)";
				break;
			default:
				*reason = "the launcher has not started its run";
				break;
		}
		return HEALTH_BEHIND;
	}
	if (db->outcome == OUTCOME_FAILED || db->outcome == OUTCOME_STOPPED)
	{
		*reason = db->error;
		return HEALTH_FAILED;
	}
	return HEALTH_OK;
}

/* ------------------------------------------------------------------------
 * Commands that need a database to themselves, and CREATE EXTENSION
 * ------------------------------------------------------------------------
 */

/*
 * Mark the database paused by this backend, stop its run and wait until it
 * has ended.  A run that has connected is cancelled (SIGINT) and ends
 * quietly (sweeper.c), not terminated with a FATAL; one still connecting
 * sees the pause once it has connected.  Waiting for it keeps it from
 * waiting for the command's lock on the database (it would fail with a
 * FATAL once the database is gone or renamed), and from the SIGTERM of
 * DROP DATABASE ... WITH (FORCE).  A run not gone in time is terminated.
 */
static void
sweep_pause(Oid dboid)
{
	TimestampTz give_up = GetCurrentTimestamp() + SWEEP_STOP_WAIT_US;
	bool		cancelled = false;

	LWLockAcquire(hc_sweeper_shared->lock, LW_EXCLUSIVE);
	sweep_pauses[HC_MY_BACKEND_INDEX] = dboid;
	LWLockRelease(hc_sweeper_shared->lock);
	for (;;)
	{
		bool		running = false;
		int			i;

		LWLockAcquire(hc_sweeper_shared->lock, LW_EXCLUSIVE);
		i = hc_sweeper_find(dboid);
		if (i >= 0 && hc_sweeper_shared->dbs[i].pid != 0)
		{
			SweepDb    *db = &hc_sweeper_shared->dbs[i];

			db->stop_asked = true;
			if (GetCurrentTimestamp() >= give_up)
				(void) kill(db->pid, SIGTERM);
			else
			{
				if (db->connected && !cancelled)
					cancelled = (kill(db->pid, SIGINT) == 0);
				running = true;
			}
		}
		LWLockRelease(hc_sweeper_shared->lock);
		if (!running)
			return;
		CHECK_FOR_INTERRUPTS();
		pg_usleep(10 * 1000L);
	}
}

/* The command is over, however it ended (also a before_shmem_exit callback). */
static void
sweep_resume(int code, Datum arg)
{
	LWLockAcquire(hc_sweeper_shared->lock, LW_EXCLUSIVE);
	sweep_pauses[HC_MY_BACKEND_INDEX] = InvalidOid;
	hc_sweeper_wake_launcher();
	LWLockRelease(hc_sweeper_shared->lock);
}

/* After a DROP DATABASE that succeeded: no run may start there any more. */
static void
sweep_forget(Oid dboid)
{
	int			i;

	LWLockAcquire(hc_sweeper_shared->lock, LW_EXCLUSIVE);
	i = hc_sweeper_find(dboid);
	if (i >= 0)
		hc_sweeper_shared->dbs[i].dropped = true;
	LWLockRelease(hc_sweeper_shared->lock);
}

/* The database a utility statement needs to itself, if any. */
static Oid
sweep_ddl_database(Node *parsetree, bool *drop)
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
 * May the current user run the command at all?  Only then does it pause
 * the database: a refused DROP DATABASE must not stop the owner's sweeping.
 * (The command checks again; this only keeps strangers out.)
 */
static bool
sweep_may_pause(Node *parsetree, Oid dboid)
{
	bool		owner = hc_database_ownercheck(dboid, GetUserId());

	if (IsA(parsetree, CreatedbStmt))
	{
		HeapTuple	tup = SearchSysCache1(DATABASEOID, ObjectIdGetDatum(dboid));
		bool		is_template = false;

		if (HeapTupleIsValid(tup))
		{
			is_template = ((Form_pg_database) GETSTRUCT(tup))->datistemplate;
			ReleaseSysCache(tup);
		}
		return have_createdb_privilege() && (owner || is_template);
	}
	if (IsA(parsetree, RenameStmt))
		return owner && have_createdb_privilege();
	return owner;
}

/* CREATE EXTENSION holdcommit or ALTER EXTENSION holdcommit ...? */
static bool
sweep_extension_command(Node *parsetree)
{
	if (IsA(parsetree, CreateExtensionStmt))
		return strcmp(((CreateExtensionStmt *) parsetree)->extname, "holdcommit") == 0;
	if (IsA(parsetree, AlterExtensionStmt))
		return strcmp(((AlterExtensionStmt *) parsetree)->extname, "holdcommit") == 0;
	return false;
}

/*
 * This database has (a new) holdcommit: look at it now, not at the next
 * look.  Called once the command has committed, so that the look sees it.
 */
static void
sweep_look_now(void)
{
	int			i;

	LWLockAcquire(hc_sweeper_shared->lock, LW_EXCLUSIVE);
	i = hc_sweeper_find(MyDatabaseId);
	if (i >= 0)
		hc_sweeper_shared->dbs[i].look_now = true;
	hc_sweeper_wake_launcher();
	LWLockRelease(hc_sweeper_shared->lock);
}

/*
 * XactCallback (holdcommit.c registers it): once the extension's command
 * has committed, have it looked at; once a pausing command's transaction
 * has ended, resume.
 */
void
hc_sweeper_xact_callback(XactEvent event, void *arg)
{
	bool		end = (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
					   event == XACT_EVENT_PREPARE);

	if (resume_at_end && end)
	{
		resume_at_end = false;
		sweep_resume(0, (Datum) 0);
	}
	if (!look_at_commit)
		return;
	if (event == XACT_EVENT_COMMIT)
		sweep_look_now();
	if (end)
		look_at_commit = false;
}

/*
 * The body of the ProcessUtility_hook (holdcommit.c installs it): a command
 * that needs a database to itself pauses that database's sweeping while it
 * runs, and has leave(dboid) let go of whatever else holds the database (the
 * autonomous workers); CREATE or ALTER EXTENSION holdcommit has the
 * database looked at again.  next runs the command: the hook installed
 * before, or standard_ProcessUtility.
 */
void
hc_sweeper_process_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
						   ProcessUtilityContext context, ParamListInfo params,
						   QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc,
						   ProcessUtility_hook_type next, void (*leave) (Oid dboid))
{
	Node	   *parsetree = pstmt->utilityStmt;
	bool		is_drop = false;
	Oid			dboid = hc_sweeper_shared ? sweep_ddl_database(parsetree, &is_drop) : InvalidOid;
	volatile bool drop = is_drop;

	if (!OidIsValid(dboid) || !sweep_may_pause(parsetree, dboid))
	{
		next(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
		if (hc_sweeper_shared && sweep_extension_command(parsetree))
			look_at_commit = true;
		return;
	}
	PG_ENSURE_ERROR_CLEANUP(sweep_resume, ObjectIdGetDatum(dboid));
	{
		sweep_pause(dboid);
		leave(dboid);
		next(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
		if (drop)
			sweep_forget(dboid);
	}
	PG_END_ENSURE_ERROR_CLEANUP(sweep_resume, ObjectIdGetDatum(dboid));
	/* Not before: a run started meanwhile would connect to the old name. */
	resume_at_end = true;
}

/* ------------------------------------------------------------------------
 * hc_sweeper_databases(): one row per database of the server
 * ------------------------------------------------------------------------
 */

#define STATE_COLUMNS 17

static const char *const kind_names[] = {
	[KIND_UNKNOWN] = "not looked at yet",
	[KIND_NONE] = "no holdcommit",
	[KIND_OLD] = "holdcommit older than 0.2.0",
	[KIND_INSTALLED] = "installed"
};

/* What the view reads of the table, copied under the lock. */
typedef struct SweepView
{
	SweepDb    *dbs;
	bool	   *paused;
	int			ndbs;
	bool		full;
	int64		busy_allowance;
} SweepView;

static void
sweep_view_copy(SweepView *view)
{
	int			i;

	view->ndbs = hc_sweeper_shared->ndbs;
	view->dbs = palloc(sizeof(SweepDb) * view->ndbs);
	view->paused = palloc(sizeof(bool) * view->ndbs);
	LWLockAcquire(hc_sweeper_shared->lock, LW_SHARED);
	memcpy(view->dbs, hc_sweeper_shared->dbs, sizeof(SweepDb) * view->ndbs);
	for (i = 0; i < view->ndbs; i++)
		view->paused[i] = OidIsValid(view->dbs[i].dboid) && hc_sweeper_paused(view->dbs[i].dboid);
	view->full = hc_sweeper_find(InvalidOid) < 0;
	view->busy_allowance = hc_sweeper_busy_allowance();
	LWLockRelease(hc_sweeper_shared->lock);
}

/* The state and reason of a database the table has, at now. */
static const char *
sweep_state_of(const SweepView *view, int i, TimestampTz now, const char **reason)
{
	const SweepDb *db = &view->dbs[i];

	*reason = NULL;
	if (db->dropped)
		return "dropped";
	if (view->paused[i])
	{
		*reason = paused_reason;
		return "paused";
	}
	if (hc_sweeper_busy(db, now))
		return "running";
	switch (hc_sweeper_health(db, now, view->busy_allowance, reason))
	{
		case HEALTH_BEHIND:
			return "behind";
		case HEALTH_FAILED:
			return "failed";
		case HEALTH_OK:
			break;
	}
	if (db->kind == KIND_NONE || db->kind == KIND_OLD)
	{
		*reason = kind_names[db->kind];
		return "skipped";
	}
	if (db->kind == KIND_UNKNOWN)
		return "new";
	return "ok";
}

static Datum
timestamp_or_null(TimestampTz t, bool *isnull)
{
	*isnull = (t == 0);
	return TimestampTzGetDatum(t);
}

/* One row from entry i of the copy. */
static void
sweep_row(const SweepView *view, int i, TimestampTz now, Datum *values, bool *nulls)
{
	const SweepDb *db = &view->dbs[i];
	const char *reason;
	const char *state = sweep_state_of(view, i, now, &reason);

	values[1] = CStringGetTextDatum(state);
	nulls[2] = (reason == NULL || reason[0] == '\0');
	if (!nulls[2])
		values[2] = CStringGetTextDatum(reason);
	nulls[3] = (db->kind == KIND_UNKNOWN);
	values[3] = BoolGetDatum(db->kind == KIND_INSTALLED);
	nulls[4] = (db->pid == 0);
	values[4] = Int32GetDatum(db->pid);
	values[5] = timestamp_or_null(db->last_start, &nulls[5]);
	values[6] = timestamp_or_null(db->last_end, &nulls[6]);
	values[7] = timestamp_or_null(db->last_swept, &nulls[7]);
	values[8] = timestamp_or_null(db->due, &nulls[8]);
	values[9] = Int64GetDatum(db->runs);
	values[10] = Int64GetDatum(db->failures);
	values[11] = Int64GetDatum(db->holds);
	values[12] = Int64GetDatum(db->reservations);
	values[13] = Int64GetDatum(db->keys);
	nulls[14] = (db->sqlstate == 0);
	if (!nulls[14])
		values[14] = CStringGetTextDatum(unpack_sql_state(db->sqlstate));
	values[15] = timestamp_or_null(db->error_at, &nulls[15]);
	nulls[16] = (db->error_at == 0);
	if (!nulls[16])
		values[16] = CStringGetTextDatum(db->error);
}

/* A database the table does not have: why not. */
static void
sweep_row_untracked(Form_pg_database pgdb, const SweepView *view, Datum *values, bool *nulls)
{
	const char *state;
	const char *reason;

	if (hc_sweeper_shared == NULL)
	{
		state = "off";
		reason = "holdcommit is not in shared_preload_libraries: only hc_sweep() or pg_cron sweep";
	}
	else if (hc_sweep_interval <= 0)
	{
		state = "off";
		reason = "holdcommit.sweep_interval is 0";
	}
	else if (RecoveryInProgress())
	{
		state = "standby";
		reason = "a standby is read-only: its primary sweeps";
	}
	else if (!pgdb->datallowconn || pgdb->datistemplate || database_is_invalid_form(pgdb))
	{
		state = "excluded";
		reason = "the database does not accept connections, is a template or is invalid";
	}
	else if (!hc_sweeper_database_wanted(NameStr(pgdb->datname)))
	{
		state = "excluded";
		reason = "not named in holdcommit.databases";
	}
	else if (view->full)
	{
		state = "behind";
		reason = "holdcommit.max_databases is too small: no entry is free for it";
	}
	else
	{
		state = "new";
		reason = "the launcher has not seen it yet";
	}
	values[1] = CStringGetTextDatum(state);
	values[2] = CStringGetTextDatum(reason);
}

/*
 * hc_sweeper_databases(): every database of the server, what the background
 * sweeper does there and why not, from a copy of the table in shared memory.
 */
Datum
hc_sweeper_databases(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TimestampTz now = GetCurrentTimestamp();
	SweepView	view = {0};
	bool		cluster_wide;
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tup;

	InitMaterializedSRF(fcinfo, 0);
	cluster_wide = hc_sweeper_shared == NULL || hc_sweep_interval <= 0 || RecoveryInProgress();
	if (!cluster_wide)
		sweep_view_copy(&view);
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_database pgdb = (Form_pg_database) GETSTRUCT(tup);
		Datum		values[STATE_COLUMNS];
		bool		nulls[STATE_COLUMNS];
		int			i = -1;

		memset(nulls, true, sizeof(nulls));
		values[0] = NameGetDatum(&pgdb->datname);
		nulls[0] = false;
		nulls[1] = false;
		nulls[2] = false;
		for (int j = 0; !cluster_wide && j < view.ndbs; j++)
			if (view.dbs[j].dboid == pgdb->oid)
				i = j;
		if (i >= 0 && hc_sweeper_database_wanted(NameStr(pgdb->datname)))
		{
			memset(nulls, false, sizeof(nulls));
			sweep_row(&view, i, now, values, nulls);
		}
		else
			sweep_row_untracked(pgdb, &view, values, nulls);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return (Datum) 0;
}

/* ------------------------------------------------------------------------
 * Set-up, from _PG_init while shared_preload_libraries is processed
 * ------------------------------------------------------------------------
 */

/*
 * Is the database named in holdcommit.databases (or is the list empty)?
 * The list is parsed like search_path: comma-separated, an unquoted name
 * folded to lower case (its check hook has refused any other value).
 */
bool
hc_sweeper_database_wanted(const char *datname)
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
