/*
 * sweeper.h
 *		What the three parts of the background sweeper share: the table of
 *		databases it looks after, in shared memory (sweeper_state.c), which the
 *		launcher that schedules runs (launcher.c) and a run in one database
 *		(sweeper.c) read and write.  Only bgw/sweeper/ includes it; _PG_init
 *		sets the sweeper up through register.h.  README.md: the design.
 */
#ifndef HOLDCOMMIT_SWEEPER_H
#define HOLDCOMMIT_SWEEPER_H

#include "datatype/timestamp.h"
#include "storage/latch.h"
#include "storage/lwlock.h"

/* What the last look found in a database. */
typedef enum SweepKind
{
	KIND_UNKNOWN,				/* not looked at yet */
	KIND_NONE,					/* no holdcommit */
	KIND_OLD,					/* holdcommit older than 0.2.0 */
	KIND_INSTALLED
} SweepKind;

/* How the last run there ended. */
typedef enum SweepOutcome
{
	OUTCOME_NONE,				/* no run yet, or it stepped aside before it began */
	OUTCOME_RUNNING,
	OUTCOME_SWEPT,				/* found nothing more to do */
	OUTCOME_UNFINISHED,			/* its time slice ran out with work left */
	OUTCOME_FAILED,				/* an error: sqlstate, error */
	OUTCOME_STOPPED,			/* the process ended before the run did */
	OUTCOME_LOOKED				/* no (current) extension: nothing to run */
} SweepOutcome;

/* Why a run that is due has not started. */
typedef enum SweepWait
{
	WAIT_NONE,
	WAIT_BUSY,					/* all holdcommit.max_sweepers run */
	WAIT_NO_SLOT,				/* no free slot of max_worker_processes */
	WAIT_PAUSED					/* a command needs the database to itself */
} SweepWait;

/* What operators are told, once per change (launcher.c) and in the view. */
typedef enum SweepHealth
{
	HEALTH_OK,
	HEALTH_FAILED,
	HEALTH_BEHIND
} SweepHealth;

#define SWEEP_ERROR_LEN 256

/* One database, a row of hc_sweeper_databases. */
typedef struct SweepDb
{
	Oid			dboid;			/* InvalidOid: the entry is free */
	NameData	datname;
	bool		dropped;		/* DROP DATABASE succeeded: start nothing */
	bool		look_now;		/* CREATE or ALTER EXTENSION ran there */
	bool		look_asked;		/* the run on now was started by look_now */
	SweepKind	kind;
	TimestampTz start_requested;	/* a run started that has not claimed the entry yet; 0: none */
	bool		preempted;		/* a look the launcher stopped to make room for a sweep */
	pid_t		pid;			/* its running sweeper; cleared (under the lock) before it exits */
	bool		connected;		/* that sweeper has connected: a pause cancels it */
	bool		stop_asked;		/* a pause stopped that run: not a failure, still due */
	TimestampTz due;			/* when its next run (or look) may start */
	SweepWait	wait;			/* why a due run has not started */
	SweepHealth reported;		/* what the log last said */
	SweepOutcome outcome;
	TimestampTz last_start;
	TimestampTz last_end;
	TimestampTz last_swept;		/* the end of the last run without an error */
	int64		runs;
	int64		failures;
	int64		holds;			/* what the last run committed */
	int64		reservations;
	int64		keys;
	int			sqlstate;		/* the last failure */
	char		error[SWEEP_ERROR_LEN];
	TimestampTz error_at;
} SweepDb;

typedef struct SweepShared
{
	LWLock	   *lock;			/* guards everything here */
	Latch	   *launcher;		/* the launcher's latch, NULL while none runs */
	int			ndbs;
	SweepDb		dbs[FLEXIBLE_ARRAY_MEMBER];
} SweepShared;

extern SweepShared *hc_sweeper_shared;

/* A run that has not claimed its entry this long after its start never will. */
#define SWEEP_START_TIMEOUT_US	(60 * USECS_PER_SEC)
/* How long a pause waits for a run to end before it terminates it. */
#define SWEEP_STOP_WAIT_US	(5 * USECS_PER_SEC)

/* sweeper_state.c; the lock held by the caller */
extern int	hc_sweeper_find(Oid dboid);
extern bool hc_sweeper_paused(Oid dboid);
extern bool hc_sweeper_busy(const SweepDb *db, TimestampTz now);
extern int64 hc_sweeper_busy_allowance(void);
extern SweepHealth hc_sweeper_health(const SweepDb *db, TimestampTz now, int64 busy_allowance,
									   const char **reason);
extern void hc_sweeper_wake_launcher(void);

/* The databases holdcommit.databases names (all if it is empty). */
extern bool hc_sweeper_database_wanted(const char *datname);

#endif							/* HOLDCOMMIT_SWEEPER_H */
