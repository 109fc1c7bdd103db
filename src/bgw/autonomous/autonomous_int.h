/*
 * autonomous_int.h
 *		What the three parts of the autonomous calls share: the caller
 *		(autonomous.c), the pool of workers (pool.c) and the call on the
 *		wire and in the worker (remote.c).
 */
#ifndef HOLDCOMMIT_AUTONOMOUS_INT_H
#define HOLDCOMMIT_AUTONOMOUS_INT_H

#include "fmgr.h"
#include "lib/stringinfo.h"
#include "postmaster/bgworker.h"
#include "storage/dsm.h"
#include "storage/shm_mq.h"

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

/* remote.c */
extern bool autonomous_serving;
extern volatile OnceHeader *autonomous_once;	/* in a worker of one call */
extern CallShape *call_shape(FunctionCallInfo fcinfo);
extern void request_build(StringInfo req, FunctionCallInfo fcinfo, const CallShape *shape);
extern Datum answer_take(FunctionCallInfo fcinfo, const CallShape *shape, char *data, Size len);
extern void worker_settings(void);
extern void worker_describe(BackgroundWorker *worker, const char *main_function);
extern void worker_serve(shm_mq *request, shm_mq *answer, dsm_segment *seg,
						 MemoryContext call_context);

/* pool.c */
extern bool pool_ready(void);
extern void pool_call(Flight *f, StringInfo req);
extern pid_t pool_flight_worker(Flight *f);
extern void pool_end(Flight *f);
extern void no_worker(const char *function, const char *hint);
extern pid_t pool_worker_of(pid_t caller);

/* autonomous.c */
extern bool worker_waits_for(pid_t worker, pid_t pid);

#endif							/* HOLDCOMMIT_AUTONOMOUS_INT_H */
