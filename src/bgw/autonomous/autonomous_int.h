/*
 * autonomous_int.h
 *		What the parts of the autonomous calls share: the caller
 *		(autonomous.c), the pool of workers in shared memory (pool.c) and a
 *		worker of the pool (pool_worker.c), the call on the wire and in the
 *		worker (remote.c).  Only bgw/autonomous/ includes it.  README.md: the
 *		design, the shared state and its locking rules.
 */
#ifndef HOLDCOMMIT_AUTONOMOUS_INT_H
#define HOLDCOMMIT_AUTONOMOUS_INT_H

#include "datatype/timestamp.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "postmaster/bgworker.h"
#include "storage/condition_variable.h"
#include "storage/dsm.h"
#include "storage/proc.h"
#include "storage/shm_mq.h"
#include "storage/spin.h"

/* Each way of a call: a request or an answer is a few hundred bytes. */
#define QUEUE_SIZE				8192

/* The segment of a worker of one call: this header, then the two queues. */
typedef struct OnceHeader
{
	Oid			dboid;
	bool		caller_gone;	/* the caller stopped waiting */
} OnceHeader;

#define ONCE_HEADER				MAXALIGN(sizeof(OnceHeader))

/* The storage of a function's arguments and result. */
typedef struct CallShape
{
	int			nargs;
	int16		typlen[FUNC_MAX_ARGS];
	bool		typbyval[FUNC_MAX_ARGS];
	int16		rettyplen;
	bool		rettypbyval;
} CallShape;

/* A call in flight, as its caller sees it. */
typedef struct Flight
{
	const char *function;
	int			slot;			/* the pool slot, or -1 */
	uint64		id;				/* the call, in the pool */
	BackgroundWorkerHandle *handle; /* a worker of one call */
	shm_mq_handle *request;
	shm_mq_handle *answer;
	OnceHeader *once;			/* a worker of one call: its segment's header */
} Flight;

/* A slot of the pool (pool.c): its state, which moves under the spinlock. */
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
	pid_t		pid;			/* the worker's, once it runs; 0: gone (or not yet) */
	PGPROC	   *proc;
	uint32		generation;		/* of the worker started for it: a late one knows it is late */
	bool		leave;			/* its database is about to be dropped: leave once idle */
	PGPROC	   *caller;			/* CLAIMED, POSTED, ANSWERED: who waits */
	pid_t		caller_pid;
	Oid			caller_role;	/* its session user: its share of the pool */
	TimestampTz claimed_at;
	uint64		request;		/* the call it was last claimed for */
	bool		caller_gone;	/* the caller stopped waiting */
	TimestampTz idle_since;		/* IDLE: since when; STARTING: when it was started */
} PoolSlot;

/* The pool in shared memory: the slots, then two queues per slot. */
typedef struct Pool
{
	slock_t		mutex;			/* guards last_request and the slots, not their queues */
	ConditionVariable changed;	/* a slot became idle or free */
	uint64		last_request;
	int			nslots;
	PoolSlot	slots[FLEXIBLE_ARRAY_MEMBER];
} Pool;

/* A slot whose worker runs, or is about to run, a caller's call. */
#define SLOT_BUSY(s) \
	((s)->state == SLOT_CLAIMED || (s)->state == SLOT_POSTED || (s)->state == SLOT_ANSWERED)

/*
 * Each file calls only the files listed before it here, never one after it
 * (no import circle): remote.c, pool.c, pool_worker.c, autonomous.c.
 */

/* remote.c: the call on the wire, and its run in a worker */
extern bool hc_autonomous_serving;
extern CallShape *hc_remote_call_shape(FunctionCallInfo fcinfo);
extern void hc_remote_request_build(StringInfo req, FunctionCallInfo fcinfo,
									const CallShape *shape);
extern Datum hc_remote_answer_take(FunctionCallInfo fcinfo, const CallShape *shape, char *data,
								   Size len);
extern void hc_remote_worker_settings(void);
extern void hc_remote_worker_describe(BackgroundWorker *worker, const char *main_function);
extern void hc_remote_worker_serve(shm_mq *request, shm_mq *answer, dsm_segment *seg,
								   MemoryContext call_context, bool (*caller_gone) (void));

/* pool.c: the pool in shared memory, and a caller's side of it */
extern Pool *hc_pool;
extern shm_mq *hc_pool_queue(int slot, bool answer);
extern bool hc_autonomous_waits_for(pid_t worker, pid_t pid);
extern bool hc_pool_ready(void);
extern void hc_pool_call(Flight *f, StringInfo req);
extern pid_t hc_pool_flight_worker(Flight *f);
extern void hc_pool_end(Flight *f);
extern void hc_autonomous_no_worker(const char *function, const char *hint);
extern pid_t hc_pool_worker_of(pid_t caller);

#endif							/* HOLDCOMMIT_AUTONOMOUS_INT_H */
