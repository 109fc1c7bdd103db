/*
 * remote.c
 *		A lease or attempt call on the wire and in its worker: the request
 *		(the function's OID, its arguments, who calls, the caller's settings),
 *		the answer (the result, or the error with its SQLSTATE, detail and
 *		hint), and the worker's run of the call in a transaction of its own,
 *		committed before it answers.  Also the worker of one call, for a
 *		server without the pool.
 *
 * Invariants:
 *   1. A value crosses detoasted (the worker cannot read the caller's
 *      toast); an answer's texts are cut so that it fits in its queue.
 *   2. The worker runs the call as the caller's user, with the caller's
 *      lock_timeout, statement_timeout, holdcommit.max_ttl and lc_messages,
 *      in READ COMMITTED, read-write, with search_path pg_catalog and a
 *      commit at least as synchronous as on.
 *   3. The answer is sent after the commit, or after the rollback of an
 *      error: an answer seen is a change committed, or none.
 *   4. A call whose caller stopped waiting before it began is not run.
 *
 * Review on a new major: the transaction run by hand in the worker
 * (StartTransactionCommand, its isolation, snapshot and GUCs), the
 * pq_send/pq_getmsg format of the message on shm_mq, how ErrorData is copied.
 */
#include "postgres.h"

#include <signal.h>

#include "access/xact.h"
#include "libpq/pqformat.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timeout.h"

#include "compat.h"
#include "bgw/autonomous/autonomous.h"
#include "bgw/autonomous/autonomous_int.h"

PGDLLEXPORT void hc_worker_once_main(Datum main_arg);

/* The settings of the caller that the worker runs the call with. */
static const char *const caller_settings[] = {
	"lock_timeout", "statement_timeout", "holdcommit.max_ttl", "lc_messages"
};

/* A holdcommit worker that runs calls, started by main_function, for this backend. */
void
hc_remote_worker_describe(BackgroundWorker *worker, const char *main_function)
{
	memset(worker, 0, sizeof(BackgroundWorker));
	worker->bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker->bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker->bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(worker->bgw_library_name, BGW_MAXLEN, "holdcommit");
	snprintf(worker->bgw_function_name, BGW_MAXLEN, "%s", main_function);
	snprintf(worker->bgw_type, BGW_MAXLEN, "holdcommit worker");
	worker->bgw_notify_pid = MyProcPid;
}

/* Longer texts are cut, so that an answer always fits in its queue. */
#define ANSWER_TEXT_MAX		2000

bool		hc_autonomous_serving = false;	/* this process is a worker */
static volatile OnceHeader *autonomous_once = NULL;	/* a worker of one call */
static int32 caller_pid = 0;	/* the session of the call being run */
static TimestampTz caller_started = 0;

bool
hc_autonomous_here(void)
{
	return hc_autonomous_serving;
}

int32
hc_session_pid(void)
{
	return hc_autonomous_serving ? caller_pid : MyProcPid;
}

TimestampTz
hc_session_started(void)
{
	return hc_autonomous_serving ? caller_started : MyStartTimestamp;
}

static void
shape_of(Oid fn_oid, CallShape *shape)
{
	Oid		   *argtypes;
	Oid			rettype = get_func_signature(fn_oid, &argtypes, &shape->nargs);
	int			i;

	for (i = 0; i < shape->nargs; i++)
		get_typlenbyval(argtypes[i], &shape->typlen[i], &shape->typbyval[i]);
	get_typlenbyval(rettype, &shape->rettyplen, &shape->rettypbyval);
}

/* The caller's: cached in fn_extra. */
CallShape *
hc_remote_call_shape(FunctionCallInfo fcinfo)
{
	if (fcinfo->flinfo->fn_extra == NULL)
	{
		CallShape  *shape = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(CallShape));

		shape_of(fcinfo->flinfo->fn_oid, shape);
		fcinfo->flinfo->fn_extra = shape;
	}
	return fcinfo->flinfo->fn_extra;
}

static void
send_string(StringInfo buf, const char *s)
{
	if (s == NULL)
		pq_sendint32(buf, (uint32) -1);
	else
	{
		pq_sendint32(buf, strlen(s));
		pq_sendbytes(buf, s, strlen(s));
	}
}

static char *
get_string(StringInfo buf)
{
	int			len = (int) pq_getmsgint(buf, 4);

	if (len < 0)
		return NULL;
	return pnstrdup(pq_getmsgbytes(buf, len), len);
}

/* A value, detoasted: the worker cannot read the caller's toast. */
static void
send_datum(StringInfo buf, Datum value, bool isnull, int16 typlen, bool typbyval)
{
	const char *data;
	int			size;

	pq_sendbyte(buf, isnull);
	if (isnull)
		return;
	if (typbyval)
	{
		pq_sendint64(buf, (int64) value);
		return;
	}
	if (typlen == -1)
	{
		struct varlena *v = pg_detoast_datum_packed((struct varlena *) DatumGetPointer(value));

		data = (const char *) v;
		size = VARSIZE_ANY(v);
	}
	else
	{
		Assert(typlen > 0);
		data = DatumGetPointer(value);
		size = typlen;
	}
	pq_sendint32(buf, size);
	pq_sendbytes(buf, data, size);
}

static Datum
get_datum(StringInfo buf, bool typbyval, bool *isnull)
{
	int			size;
	char	   *copy;

	*isnull = pq_getmsgbyte(buf) != 0;
	if (*isnull)
		return (Datum) 0;
	if (typbyval)
		return (Datum) pq_getmsgint64(buf);
	size = (int) pq_getmsgint(buf, 4);
	copy = palloc(size);
	memcpy(copy, pq_getmsgbytes(buf, size), size);
	return PointerGetDatum(copy);
}

/*
 * The request: the function and its arguments, the caller's role and
 * session, and the settings to run it with.  The commit is synchronous
 * whatever the caller's synchronous_commit (remote_apply stays).
 */
void
hc_remote_request_build(StringInfo req, FunctionCallInfo fcinfo, const CallShape *shape)
{
	int			i;

	initStringInfo(req);
	pq_sendint32(req, fcinfo->flinfo->fn_oid);
	pq_sendint32(req, GetUserId());
	pq_sendint32(req, MyProcPid);
	pq_sendint64(req, MyStartTimestamp);
	send_string(req, synchronous_commit == SYNCHRONOUS_COMMIT_REMOTE_APPLY ? "remote_apply" : "on");
	pq_sendint32(req, (uint32) lengthof(caller_settings));
	for (i = 0; i < (int) lengthof(caller_settings); i++)
	{
		send_string(req, caller_settings[i]);
		send_string(req, GetConfigOption(caller_settings[i], false, false));
	}
	pq_sendint32(req, shape->nargs);
	for (i = 0; i < shape->nargs; i++)
		send_datum(req, fcinfo->args[i].value, fcinfo->args[i].isnull,
				   shape->typlen[i], shape->typbyval[i]);
}

/* The caller: return the worker's result, or raise its error. */
Datum
hc_remote_answer_take(FunctionCallInfo fcinfo, const CallShape *shape, char *data, Size len)
{
	StringInfoData buf;
	ErrorData	edata = {0};

	buf.data = data;
	buf.len = (int) len;
	buf.maxlen = (int) len;
	buf.cursor = 0;
	if (pq_getmsgbyte(&buf) == 'R')
		return get_datum(&buf, shape->rettypbyval, &fcinfo->isnull);

	edata.elevel = ERROR;
	edata.sqlerrcode = (int) pq_getmsgint(&buf, 4);
	edata.message = get_string(&buf);
	edata.detail = get_string(&buf);
	edata.hint = get_string(&buf);
	edata.context = get_string(&buf);
	ThrowErrorData(&edata);
	pg_unreachable();
}

/* Every call in a READ COMMITTED transaction of its own; nothing by name. */
void
hc_remote_worker_settings(void)
{
	SetConfigOption("application_name", "holdcommit worker", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("search_path", "pg_catalog", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("default_transaction_isolation", "read committed", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("default_transaction_read_only", "off", PGC_SUSET, PGC_S_OVERRIDE);
	pgstat_report_appname("holdcommit worker");
}

static void
send_text(StringInfo buf, const char *s)
{
	if (s != NULL && strlen(s) > ANSWER_TEXT_MAX)
		s = pnstrdup(s, pg_mbcliplen(s, strlen(s), ANSWER_TEXT_MAX));
	send_string(buf, s);
}

/* The answer to an error: its SQLSTATE, message, detail, hint and context. */
static void
answer_error(StringInfo answer, ErrorData *edata)
{
	resetStringInfo(answer);
	pq_sendbyte(answer, 'E');
	pq_sendint32(answer, edata->sqlerrcode);
	send_text(answer, edata->message);
	send_text(answer, edata->detail);
	send_text(answer, edata->hint);
	send_text(answer, NULL);
}

/*
 * Run one call in a transaction of its own; the answer says what it
 * returned (after the commit) or the error it raised (after the rollback).
 */
static void
worker_run(char *data, Size len, StringInfo answer)
{
	MemoryContext cxt = CurrentMemoryContext;
	StringInfoData req;
	Oid			fn_oid;
	Oid			userid;
	char	   *sync;

	req.data = data;
	req.len = (int) len;
	req.maxlen = (int) len;
	req.cursor = 0;
	fn_oid = pq_getmsgint(&req, 4);
	userid = pq_getmsgint(&req, 4);
	caller_pid = (int32) pq_getmsgint(&req, 4);
	caller_started = pq_getmsgint64(&req);
	sync = get_string(&req);

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PG_TRY();
	{
		FmgrInfo	flinfo;
		LOCAL_FCINFO(fcinfo, FUNC_MAX_ARGS);
		CallShape	shape;
		Datum		result;
		Oid			save_userid;
		int			save_sec_context;
		int			n;
		int			i;

		if (strcmp(sync, GetConfigOption("synchronous_commit", false, false)) != 0)
			(void) set_config_option("synchronous_commit", sync, PGC_SUSET, PGC_S_SESSION,
									 GUC_ACTION_LOCAL, true, 0, false);
		n = (int) pq_getmsgint(&req, 4);
		for (i = 0; i < n; i++)
		{
			char	   *name = get_string(&req);
			char	   *value = get_string(&req);

			if (value != NULL && strcmp(value, GetConfigOption(name, false, false)) != 0)
				(void) set_config_option(name, value, PGC_SUSET, PGC_S_SESSION,
										 GUC_ACTION_LOCAL, true, 0, false);
		}
		if (StatementTimeout > 0)
			enable_timeout_after(STATEMENT_TIMEOUT, StatementTimeout);

		fmgr_info(fn_oid, &flinfo);
		shape_of(fn_oid, &shape);
		InitFunctionCallInfoData(*fcinfo, &flinfo, shape.nargs, InvalidOid, NULL, NULL);
		if ((int) pq_getmsgint(&req, 4) != shape.nargs)
			elog(ERROR, "holdcommit worker: the call has the wrong number of arguments");
		for (i = 0; i < shape.nargs; i++)
			fcinfo->args[i].value = get_datum(&req, shape.typbyval[i], &fcinfo->args[i].isnull);

		pgstat_report_activity(STATE_RUNNING, get_func_name(fn_oid));
		GetUserIdAndSecContext(&save_userid, &save_sec_context);
		SetUserIdAndSecContext(userid, save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
		PushActiveSnapshot(GetTransactionSnapshot());
		result = FunctionCallInvoke(fcinfo);
		PopActiveSnapshot();
		SetUserIdAndSecContext(save_userid, save_sec_context);

		MemoryContextSwitchTo(cxt);
		resetStringInfo(answer);
		pq_sendbyte(answer, 'R');
		send_datum(answer, result, fcinfo->isnull, shape.rettyplen, shape.rettypbyval);
		disable_timeout(STATEMENT_TIMEOUT, false);
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		disable_timeout(STATEMENT_TIMEOUT, false);
		AbortCurrentTransaction();
		MemoryContextSwitchTo(cxt);
		answer_error(answer, edata);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	pgstat_report_activity(STATE_IDLE, NULL);
}

/*
 * Take the request from the queue, run it, answer; unless caller_gone() says
 * that the caller has stopped waiting.
 */
void
hc_remote_worker_serve(shm_mq *request, shm_mq *answer, dsm_segment *seg,
					   MemoryContext call_context, bool (*caller_gone) (void))
{
	MemoryContext old = MemoryContextSwitchTo(call_context);
	shm_mq_handle *in = shm_mq_attach(request, seg, NULL);
	shm_mq_handle *out = shm_mq_attach(answer, seg, NULL);
	StringInfoData reply;
	Size		len;
	void	   *data;

	if (shm_mq_receive(in, &len, &data, false) == SHM_MQ_SUCCESS &&
		!caller_gone())
	{
		initStringInfo(&reply);
		worker_run(data, len, &reply);
		(void) shm_mq_send(out, reply.len, reply.data, false, true);
	}
	MemoryContextSwitchTo(old);
	MemoryContextReset(call_context);
}

/* In a worker of one call: has its caller stopped waiting? */
static bool
once_caller_gone(void)
{
	return autonomous_once->caller_gone;
}

/* A worker of one call, without the pool: its queues are in a segment. */
void
hc_worker_once_main(Datum main_arg)
{
	dsm_segment *seg;
	char	   *base;
	shm_mq	   *request;
	shm_mq	   *answer;

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	hc_autonomous_serving = true;
	seg = dsm_attach(DatumGetUInt32(main_arg));
	if (seg == NULL)
		proc_exit(0);			/* the caller has gone: nothing to do */
	base = dsm_segment_address(seg);
	autonomous_once = (OnceHeader *) base;
	request = (shm_mq *) (base + ONCE_HEADER);
	answer = (shm_mq *) (base + ONCE_HEADER + QUEUE_SIZE);
	shm_mq_set_receiver(request, MyProc);
	shm_mq_set_sender(answer, MyProc);
	BackgroundWorkerInitializeConnectionByOid(autonomous_once->dboid, InvalidOid, 0);
	hc_remote_worker_settings();
	hc_remote_worker_serve(request, answer, seg,
						   AllocSetContextCreate(TopMemoryContext, "holdcommit call",
												 ALLOCSET_DEFAULT_SIZES),
						   once_caller_gone);
	pgstat_report_stat(true);
	proc_exit(0);
}
