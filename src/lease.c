/*
 * lease.c
 *		Layer 1 of dual-layer locking: leases with fencing tokens.
 *		hc_lock_acquire, hc_lock_heartbeat, hc_lock_release.
 *
 * A resource has one row in hc_locks, kept forever.  Acquiring takes it if it
 * is free, already ours, or stale (its last heartbeat is older than the
 * stale_after its holder acquired with); every new holder gets token + 1, so
 * tokens per resource only ever grow, and a downstream system can fence off
 * a former holder by its lower token.  Heartbeat and release act only while
 * owner and token both match.
 *
 * A lease must be committed before its holder acts on it, so these functions
 * refuse to run inside a transaction block (hc_lease_refuse_in_transaction):
 * each call is its own transaction, and a lease or marker never depends on a
 * later commit of the caller.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/pg_prng.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/backend_status.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "call.h"
#include "errors.h"
#include "lease.h"
#include "ledger.h"
#include "validate.h"

PG_FUNCTION_INFO_V1(hc_lock_acquire);
PG_FUNCTION_INFO_V1(hc_lock_acquire_session);
PG_FUNCTION_INFO_V1(hc_lock_heartbeat);
PG_FUNCTION_INFO_V1(hc_lock_release);

/* Backoff before retry n: min(200 ms * 2^(n-1) + random(0..200 ms), 2 s). */
#define LEASE_BACKOFF_BASE_MS	200
#define LEASE_BACKOFF_JITTER_MS 200
#define LEASE_BACKOFF_MAX_MS	2000

/* What one successful acquire attempt found and made. */
typedef struct LeaseTaken
{
	int64		token;			/* the token now held */
	char	   *previous_owner; /* NULL: the lease was free (or new) */
	int64		previous_token; /* 0: the resource is new */
	int64		version;		/* the resource's version: its ledger seq */
	bool		logged;			/* its ledger row is written (a new resource) */
} LeaseTaken;

/*
 * One acquire attempt, an atomic conditional step: take the row if it is
 * free, ours, or stale.  The same owner with a live lease keeps its token;
 * anyone else (or the same owner after its lease went stale) gets token + 1.
 *   $1 resource  $2 owner  $3 now  $4 stale_after  $5, $6 the pid and start
 *   of an ended session bound to the lease  $7, $8 ours, for a session-bound
 *   acquire (new_lease takes the same arguments, and three more)
 */
static HcStatement take_lease = {
	"WITH target AS ("
	"  SELECT resource, owner, token, heartbeat_at, stale_after,"
	"         COALESCE(session_pid OPERATOR(pg_catalog.=) $5"
	"                  AND session_started OPERATOR(pg_catalog.=) $6, false) AS session_ended"
	"    FROM hc_locks"
	"   WHERE resource OPERATOR(pg_catalog.=) $1"
	"     AND (owner IS NULL OR owner OPERATOR(pg_catalog.=) $2"
	"          OR heartbeat_at OPERATOR(pg_catalog.+) stale_after OPERATOR(pg_catalog.<=) $3"
	"          OR (session_pid OPERATOR(pg_catalog.=) $5"
	"              AND session_started OPERATOR(pg_catalog.=) $6))"
	"     FOR NO KEY UPDATE),"
	" judged AS ("
	"  SELECT t.*, t.owner OPERATOR(pg_catalog.=) $2"
	"              AND t.heartbeat_at OPERATOR(pg_catalog.+) t.stale_after OPERATOR(pg_catalog.>) $3"
	"              AND NOT t.session_ended AS same_live"
	"    FROM target t)"
	" UPDATE hc_locks l"
	"    SET owner = $2,"
	"        token = CASE WHEN j.same_live THEN j.token ELSE j.token OPERATOR(pg_catalog.+) 1 END,"
	"        acquired_at = CASE WHEN j.same_live THEN l.acquired_at ELSE $3 END,"
	"        version = CASE WHEN j.same_live THEN l.version"
	"                       ELSE l.version OPERATOR(pg_catalog.+) 1 END,"
	"        heartbeat_at = $3, stale_after = $4, session_pid = $7, session_started = $8,"
	"        updated_at = $3"
	"   FROM judged j"
	"  WHERE l.resource OPERATOR(pg_catalog.=) $1 AND l.resource OPERATOR(pg_catalog.=) j.resource"
	" RETURNING l.token, j.owner, j.token, l.version",
	8, {TEXTOID, TEXTOID, TIMESTAMPTZOID, INTERVALOID, INT4OID, TIMESTAMPTZOID, INT4OID,
	TIMESTAMPTZOID}
};

/*
 * A resource never leased before: token 1, and its ledger row.  On a conflict
 * (the row exists, or another acquire is inserting it) nothing happens and no
 * row lock is left behind, so this first try needs no subtransaction.
 * take_lease's arguments ($5, $6 unused), then $9 function, $10 actor,
 * $11 detail.
 */
static HcStatement new_lease = {
	"WITH l AS ("
	"  INSERT INTO hc_locks"
	"   (resource, owner, token, acquired_at, heartbeat_at, stale_after,"
	"    session_pid, session_started, updated_at)"
	"  VALUES ($1, $2, 1, $3, $3, $4, $7, $8, $3)"
	"  ON CONFLICT (resource) DO NOTHING RETURNING version)"
	HC_LEDGER_INSERT
	" SELECT 'resource', $1, l.version, $3, 'acquire', 'call', $9, NULL, NULL, 0, 0, $10, $11"
	"   FROM l RETURNING seq",
	11, {TEXTOID, TEXTOID, TIMESTAMPTZOID, INTERVALOID, INT4OID, TIMESTAMPTZOID, INT4OID,
	TIMESTAMPTZOID, TEXTOID, TEXTOID, TEXTOID}
};

static HcStatement beat_lease = {
	"UPDATE hc_locks SET heartbeat_at = $4, updated_at = $4"
	" WHERE resource OPERATOR(pg_catalog.=) $1 AND owner OPERATOR(pg_catalog.=) $2"
	"   AND token OPERATOR(pg_catalog.=) $3"
	" RETURNING heartbeat_at",
	4, {TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID}
};

/* Free the lease that owner $2 holds with token $3, and write the ledger row. */
static HcStatement free_lease = {
	"WITH l AS ("
	"  UPDATE hc_locks"
	"     SET owner = NULL, acquired_at = NULL, heartbeat_at = NULL, stale_after = NULL,"
	"         session_pid = NULL, session_started = NULL,"
	"         released_at = $4, updated_at = $4, version = version OPERATOR(pg_catalog.+) 1"
	"   WHERE resource OPERATOR(pg_catalog.=) $1 AND owner OPERATOR(pg_catalog.=) $2"
	"     AND token OPERATOR(pg_catalog.=) $3"
	"  RETURNING version)"
	HC_LEDGER_INSERT
	" SELECT 'resource', $1, l.version, $4, 'release', 'call', $5, NULL, NULL, 0, 0, $6, $7"
	"   FROM l RETURNING seq",
	7, {TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID, TEXTOID, TEXTOID, TEXTOID}
};

/* The session a lease is bound to, if any, without locking it. */
static HcStatement peek_session = {
	"SELECT session_pid, session_started FROM hc_locks"
	" WHERE resource OPERATOR(pg_catalog.=) $1 AND session_pid IS NOT NULL",
	1, {TEXTOID}
};

/* The lease as it is, without locking it: for error details. */
static HcStatement peek_lease = {
	"SELECT owner, token FROM hc_locks WHERE resource OPERATOR(pg_catalog.=) $1",
	1, {TEXTOID}
};

/*
 * Is the lease held by this owner and token?  The row lock keeps a takeover
 * (or a release) out until the caller's statement has committed what it
 * does under the lease, and orders the resource's ledger rows.
 */
static HcStatement hold_lease = {
	"SELECT 1 FROM hc_locks"
	" WHERE resource OPERATOR(pg_catalog.=) $1 AND owner OPERATOR(pg_catalog.=) $2"
	"   AND token OPERATOR(pg_catalog.=) $3"
	" FOR NO KEY UPDATE",
	3, {TEXTOID, TEXTOID, INT8OID}
};

/* The lease row, whoever holds it: for an operator's change (a reset). */
static HcStatement lock_lease = {
	"SELECT 1 FROM hc_locks WHERE resource OPERATOR(pg_catalog.=) $1 FOR NO KEY UPDATE",
	1, {TEXTOID}
};

/* The resource's next version, the seq of its next ledger row. */
static HcStatement next_version = {
	"UPDATE hc_locks SET version = version OPERATOR(pg_catalog.+) 1"
	" WHERE resource OPERATOR(pg_catalog.=) $1 RETURNING version",
	1, {TEXTOID}
};

/*
 * Refuse to run where the write could still be rolled back after the caller
 * has seen its result: inside a transaction block (explicit, or implicit in
 * a multi-statement query) or a subtransaction.
 */
void
hc_lease_refuse_in_transaction(const char *function)
{
	if (IsTransactionBlock() || IsSubTransaction())
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("%s cannot run inside a transaction block", function),
				 errdetail("A lease or attempt marker must be committed before the caller acts on it; inside a transaction block or subtransaction it could still be rolled back."),
				 errhint("Call it in autocommit mode.")));
}

/* A fencing token argument: not null, positive. */
int64
hc_arg_token(FunctionCallInfo fcinfo, int argno, const char *name)
{
	int64		token;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", name)));
	token = PG_GETARG_INT64(argno);
	if (token <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be positive", name),
				 errhint("Use the token that hc_lock_acquire() returned.")));
	return token;
}

/*
 * Raise RS007: this owner and token do not hold the lease.  The detail says
 * what the lease is now.
 */
static void
lease_not_held(HcCall *call, const char *resource, const char *owner, int64 token)
{
	Datum		values[1];
	char	   *detail;

	values[0] = HC_TEXT(resource);
	if (hc_run(&peek_lease, values, NULL, SPI_OK_SELECT) == 0)
		detail = psprintf("Resource \"%s\" has never been leased.", resource);
	else
	{
		char	   *holder = hc_text(call, 0, 1);
		bool		isnull;
		int64		current = DatumGetInt64(hc_datum(0, 2, &isnull));

		if (holder == NULL)
			detail = psprintf("The lease of resource \"%s\" is free; its last token is " INT64_FORMAT ".",
							  resource, current);
		else
			detail = psprintf("Resource \"%s\" is leased to \"%s\" with token " INT64_FORMAT ".",
							  resource, holder, current);
	}
	ereport(ERROR,
			(errcode(ERRCODE_HC_LOCK_NOT_HELD),
			 errmsg("lease of resource \"%s\" is not held by \"%s\" with token " INT64_FORMAT,
					resource, owner, token),
			 errdetail_internal("%s", detail),
			 errhint("Stop working on the resource: another worker may have taken it over. Acquire the lease again with hc_lock_acquire().")));
}

/*
 * Require the lease for the rest of the caller's statement (RS007 if this
 * owner and token do not hold it); a takeover waits until that commits.
 */
void
hc_lease_hold(HcCall *call, const char *resource, const char *owner, int64 token)
{
	Datum		values[3];

	values[0] = HC_TEXT(resource);
	values[1] = HC_TEXT(owner);
	values[2] = Int64GetDatum(token);
	if (hc_run(&hold_lease, values, NULL, SPI_OK_SELECT) == 0)
		lease_not_held(call, resource, owner, token);
}

/*
 * Lock the resource's lease row whoever holds it (lease rows are locked
 * before attempt rows); false if the resource was never leased.
 */
bool
hc_lease_lock(const char *resource)
{
	Datum		values[1];

	values[0] = HC_TEXT(resource);
	return hc_run(&lock_lease, values, NULL, SPI_OK_SELECT) == 1;
}

/*
 * Lock the resource's lease row and move its version on: the seq of the
 * ledger row about to be written.  false if the resource was never leased.
 */
bool
hc_lease_next_seq(const char *resource, int64 *seq)
{
	Datum		values[1];
	bool		isnull;

	values[0] = HC_TEXT(resource);
	if (hc_run(&next_version, values, NULL, SPI_OK_UPDATE_RETURNING) == 0)
		return false;
	*seq = DatumGetInt64(hc_datum(0, 1, &isnull));
	return true;
}

/*
 * The ledger detail of a lease or attempt row, a small JSON object built key
 * by key: hc_detail_init, then hc_detail_text / hc_detail_int, then
 * hc_detail_done for the string.  hc_check() reads owner, token and marker
 * back from it.
 */
void
hc_detail_init(StringInfo buf)
{
	initStringInfo(buf);
	appendStringInfoChar(buf, '{');
}

/* A text member ("key": "value", or null). */
void
hc_detail_text(StringInfo buf, const char *key, const char *value)
{
	if (buf->len > 1)
		appendStringInfoString(buf, ", ");
	escape_json(buf, key);
	appendStringInfoString(buf, ": ");
	if (value == NULL)
		appendStringInfoString(buf, "null");
	else
		escape_json(buf, value);
}

/* An integer member. */
void
hc_detail_int(StringInfo buf, const char *key, int64 value)
{
	if (buf->len > 1)
		appendStringInfoString(buf, ", ");
	escape_json(buf, key);
	appendStringInfo(buf, ": " INT64_FORMAT, value);
}

/* The finished object. */
char *
hc_detail_done(StringInfo buf)
{
	appendStringInfoChar(buf, '}');
	return buf->data;
}

/*
 * Is the backend with this pid, started at this time, still there?  The
 * start time tells a new backend that reuses the pid from the old one.
 */
static bool
lease_session_alive(int32 pid, TimestampTz started)
{
	int			n;
	int			i;

	pgstat_clear_snapshot();	/* the backends as they are now */
	n = pgstat_fetch_stat_numbackends();
	for (i = 1; i <= n; i++)
	{
		LocalPgBackendStatus *local = pgstat_fetch_stat_local_beentry(i);

		if (local != NULL && local->backendStatus.st_procpid == pid &&
			local->backendStatus.st_proc_start_timestamp == started)
			return true;
	}
	return false;
}

/* The ledger detail of a lease change: its owner and token, and whom it took over from. */
static char *
lease_detail(const char *owner, int64 token, const LeaseTaken *taken)
{
	StringInfoData detail;

	hc_detail_init(&detail);
	hc_detail_text(&detail, "owner", owner);
	hc_detail_int(&detail, "token", token);
	if (taken != NULL && taken->previous_owner != NULL)
	{
		hc_detail_text(&detail, "previous_owner", taken->previous_owner);
		hc_detail_int(&detail, "previous_token", taken->previous_token);
	}
	return hc_detail_done(&detail);
}

/*
 * One acquire attempt at its own instant (the clock is read again).  A new
 * resource is inserted with token 1 and its ledger row in one statement.
 * An existing one is taken in a subtransaction: if that fails, rolling it
 * back drops any row lock its statement took (a row that changed under us
 * is locked before it is re-checked), so nobody waits on an acquirer that
 * is sleeping in backoff.  A lease bound to a session that has ended counts
 * as stale; a session-bound acquire binds the lease to this backend.
 * taken->logged says whether the ledger row is written already.
 */
static bool
lease_try(HcCall *call, const char *resource, const char *owner, Datum stale_after,
		  bool session, LeaseTaken *taken)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner resowner = CurrentResourceOwner;
	Datum		values[11];
	char		nulls[11];
	bool		got = false;
	bool		isnull;

	memset(nulls, ' ', sizeof(nulls));
	call->now = GetCurrentTimestamp();
	values[0] = HC_TEXT(resource);
	values[1] = HC_TEXT(owner);
	values[2] = TimestampTzGetDatum(call->now);
	values[3] = stale_after;
	values[4] = values[5] = (Datum) 0;
	nulls[4] = nulls[5] = 'n';
	values[6] = Int32GetDatum(MyProcPid);
	values[7] = TimestampTzGetDatum(MyStartTimestamp);
	if (!session)
		nulls[6] = nulls[7] = 'n';
	values[8] = HC_TEXT(call->function);
	values[9] = HC_TEXT(hc_actor(call));
	values[10] = HC_TEXT(lease_detail(owner, 1, NULL));
	if (hc_run(&new_lease, values, nulls, SPI_OK_INSERT_RETURNING) == 1)
	{
		taken->token = 1;
		taken->previous_owner = NULL;
		taken->previous_token = 0;
		taken->version = DatumGetInt64(hc_datum(0, 1, &isnull));
		taken->logged = true;
		return true;
	}

	/* An existing resource: is it bound to a session that has ended? */
	if (hc_run(&peek_session, values, NULL, SPI_OK_SELECT) == 1)
	{
		int32		pid = DatumGetInt32(hc_datum(0, 1, &isnull));
		TimestampTz started = DatumGetTimestampTz(hc_datum(0, 2, &isnull));

		if (!lease_session_alive(pid, started))
		{
			values[4] = Int32GetDatum(pid);
			values[5] = TimestampTzGetDatum(started);
			nulls[4] = nulls[5] = ' ';
		}
	}

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	if (hc_run(&take_lease, values, nulls, SPI_OK_UPDATE_RETURNING) == 1)
	{
		taken->token = DatumGetInt64(hc_datum(0, 1, &isnull));
		taken->previous_owner = hc_text(call, 0, 2);
		taken->previous_token = DatumGetInt64(hc_datum(0, 3, &isnull));
		taken->version = DatumGetInt64(hc_datum(0, 4, &isnull));
		taken->logged = false;
		got = true;
		ReleaseCurrentSubTransaction();
	}
	else
		RollbackAndReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = resowner;
	return got;
}

/*
 * Sleep before retry n, interruptibly: cancel and statement_timeout end the
 * sleep at once, postmaster death ends the backend.
 */
static void
lease_backoff(int retry)
{
	int64		ms = LEASE_BACKOFF_MAX_MS;
	TimestampTz until;
	long		left;

	if (retry <= 4)
		ms = (int64) LEASE_BACKOFF_BASE_MS << (retry - 1);
	ms += (int64) pg_prng_uint64_range(&pg_global_prng_state, 0, LEASE_BACKOFF_JITTER_MS);
	ms = Min(ms, LEASE_BACKOFF_MAX_MS);

	until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), ms);
	while ((left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), until)) > 0)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 left, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/* The ledger row of an existing resource's lease taken: acquire or takeover. */
static void
lease_ledger(HcCall *call, const char *resource, const char *event, const char *owner,
			 const LeaseTaken *taken)
{
	HcLedgerEntry e = {0};

	e.kind = "resource";
	e.entity_id = resource;
	e.seq = taken->version;
	e.event = event;
	e.source = "call";
	e.detail = lease_detail(owner, taken->token, taken);
	hc_ledger_append(call, &e);
}

/*
 * The acquire of hc_lock_acquire and hc_lock_acquire_session: the fencing
 * token, or NULL if the lease is still busy after max_retries retries.
 */
static Datum
lease_acquire(FunctionCallInfo fcinfo, const char *function, bool session)
{
	char	   *resource = hc_arg_id(fcinfo, 0, "resource");
	char	   *owner = hc_arg_id(fcinfo, 1, "owner");
	Datum		stale_after;
	int32		max_retries;
	HcCall		call;
	LeaseTaken	taken = {0};
	int			retry;

	(void) hc_arg_ttl(fcinfo, 2, "stale_after");
	stale_after = PG_GETARG_DATUM(2);
	max_retries = hc_arg_int(fcinfo, 3, "max_retries");
	if (max_retries < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_retries must not be negative"),
				 errhint("Use 0 to try once.")));
	hc_lease_refuse_in_transaction(function);

	hc_call_begin(&call, fcinfo, function);
	for (retry = 0; !lease_try(&call, resource, owner, stale_after, session, &taken); retry++)
	{
		if (retry >= max_retries)
		{
			hc_call_end(&call);
			PG_RETURN_NULL();
		}
		lease_backoff(retry + 1);
	}

	/*
	 * A new resource's ledger row went in with it; an owner acquiring its own
	 * live lease again (the same token) only beat it.
	 */
	if (!taken.logged && taken.token != taken.previous_token)
		lease_ledger(&call, resource, taken.previous_owner == NULL ? "acquire" : "takeover",
					 owner, &taken);
	hc_call_end(&call);
	PG_RETURN_INT64(taken.token);
}

/*
 * hc_lock_acquire(resource, owner, stale_after, max_retries): the fencing
 * token of the lease, or NULL if it is still busy after max_retries retries.
 */
Datum
hc_lock_acquire(PG_FUNCTION_ARGS)
{
	return lease_acquire(fcinfo, "hc_lock_acquire", false);
}

/*
 * hc_lock_acquire_session(resource, owner, stale_after, max_retries): the
 * same, with the lease bound to this session: as soon as the session ends
 * (disconnect or crash), the next acquirer takes the lease over without
 * waiting for stale_after.  Heartbeats still keep it; stale_after still
 * frees it from a session that hangs.
 */
Datum
hc_lock_acquire_session(PG_FUNCTION_ARGS)
{
	return lease_acquire(fcinfo, "hc_lock_acquire_session", true);
}

/*
 * hc_lock_heartbeat(resource, owner, token): keep the lease fresh; the new
 * heartbeat time, or RS007 if owner and token no longer hold it.  No ledger
 * row: heartbeats are too frequent, and hc_locks shows the last one.
 */
Datum
hc_lock_heartbeat(PG_FUNCTION_ARGS)
{
	char	   *resource = hc_arg_id(fcinfo, 0, "resource");
	char	   *owner = hc_arg_id(fcinfo, 1, "owner");
	int64		token = hc_arg_token(fcinfo, 2, "token");
	HcCall		call;
	Datum		values[4];

	hc_lease_refuse_in_transaction("hc_lock_heartbeat");
	hc_call_begin(&call, fcinfo, "hc_lock_heartbeat");
	values[0] = HC_TEXT(resource);
	values[1] = HC_TEXT(owner);
	values[2] = Int64GetDatum(token);
	values[3] = TimestampTzGetDatum(call.now);
	if (hc_run(&beat_lease, values, NULL, SPI_OK_UPDATE_RETURNING) == 0)
		lease_not_held(&call, resource, owner, token);
	hc_call_end(&call);
	PG_RETURN_TIMESTAMPTZ(call.now);
}

/*
 * hc_lock_release(resource, owner, token): free the lease if owner and token
 * still hold it (true); otherwise change nothing (false).  The row and its
 * token stay, so the next holder gets a higher token.
 */
Datum
hc_lock_release(PG_FUNCTION_ARGS)
{
	char	   *resource = hc_arg_id(fcinfo, 0, "resource");
	char	   *owner = hc_arg_id(fcinfo, 1, "owner");
	int64		token = hc_arg_token(fcinfo, 2, "token");
	HcCall		call;
	Datum		values[7];
	bool		released;

	hc_lease_refuse_in_transaction("hc_lock_release");
	hc_call_begin(&call, fcinfo, "hc_lock_release");
	values[0] = HC_TEXT(resource);
	values[1] = HC_TEXT(owner);
	values[2] = Int64GetDatum(token);
	values[3] = TimestampTzGetDatum(call.now);
	values[4] = HC_TEXT(call.function);
	values[5] = HC_TEXT(hc_actor(&call));
	values[6] = HC_TEXT(lease_detail(owner, token, NULL));
	released = hc_run(&free_lease, values, NULL, SPI_OK_INSERT_RETURNING) == 1;
	hc_call_end(&call);
	PG_RETURN_BOOL(released);
}
