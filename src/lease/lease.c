/*
 * lease.c
 *		Layer 1 of dual-layer locking: leases with fencing tokens.
 *		hc_lock_acquire, hc_lock_heartbeat, hc_lock_release.
 *
 * A resource has one row in hc_locks, kept forever.  Acquiring takes it if
 * it is free, already ours, or stale (its last heartbeat is older than the
 * stale_after its holder acquired with).
 *
 * Invariants:
 *   1. Every new holder gets token + 1, so tokens per resource only ever
 *      grow, and a downstream system can fence off a former holder by its
 *      lower token.
 *   2. Heartbeat and release act only while owner and token both match.
 *   3. A lease is committed before its holder acts on it, whatever the
 *      caller does next: each call runs in a worker's transaction of its
 *      own (autonomous.c), which has committed when the call returns, on
 *      the node of the resource's rows (hc_lease_begin: core/placement.h).
 *   4. What belongs to the caller's session, the lock of a session-bound
 *      lease (session.c), the caller takes itself; so such a lease needs
 *      every row on one node (hc_require_single_node).
 *   5. A new token waits for no application's transaction: while an
 *      hc_lock_check (fence.c) keeps the current one, the try is busy.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/pg_prng.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "bgw/autonomous/autonomous.h"
#include "common/errors.h"
#include "common/ledger.h"
#include "common/validate.h"
#include "core/placement.h"
#include "core/subxact.h"
#include "core/version.h"
#include "lease/lease.h"

PG_FUNCTION_INFO_V1(hc_lock_acquire);
PG_FUNCTION_INFO_V1(hc_lock_acquire_session);
PG_FUNCTION_INFO_V1(hc_lock_heartbeat);
PG_FUNCTION_INFO_V1(hc_lock_release);

/* Backoff before retry n: min(200 ms * 2^(n-1) + random(0..200 ms), 2 s). */
#define LEASE_BACKOFF_BASE_MS	200
#define LEASE_BACKOFF_JITTER_MS 200
#define LEASE_BACKOFF_MAX_MS	2000

/* The most retries of one acquire: about 3 minutes of backoff. */
#define LEASE_MAX_RETRIES		100

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
 * The row an acquire may take, locked: free, ours, stale, or bound to a
 * session that has ended (:ended_pid and :ended_started name it; null: none).
 * A row held live by another owner is not locked at all: the try is busy and
 * writes nothing.  same_live: this owner holds it live, and keeps its token.
 */
static HcStatement judge_lease = {
	"SELECT owner, token,"
	"       COALESCE(owner" EQ ":owner" " AND heartbeat_at" PLUS "stale_after" GT ":now"
	"                AND NOT COALESCE(session_pid" EQ ":ended_pid"
	"                                 AND session_started" EQ ":ended_started, false), false) AS same_live"
	"  FROM hc_locks"
	" WHERE resource" EQ ":resource"
	"   AND (owner IS NULL OR owner" EQ ":owner"
	"        OR heartbeat_at" PLUS "stale_after" LE ":now"
	"        OR (session_pid" EQ ":ended_pid" " AND session_started" EQ ":ended_started))"
	" FOR NO KEY UPDATE",
	{{"resource", TEXTOID}, {"owner", TEXTOID}, {"ended_pid", INT4OID},
	 {"ended_started", TIMESTAMPTZOID}, {"now", TIMESTAMPTZOID}}
};

/*
 * Take the row judge_lease locked: the same token when :same_live, else
 * token + 1 (tokens per resource only grow).  :session_pid and
 * :session_started are ours, for a session-bound acquire.  This UPDATE
 * changes no key, so by itself it would not wait for an hc_lock_check's FOR
 * KEY SHARE: a new token is fenced only because unfenced_lease locked the
 * row FOR UPDATE before it, in the same subtransaction (lease_take).
 */
static HcStatement take_lease = {
	"UPDATE hc_locks"
	"   SET owner = :owner,"
	"       token = CASE WHEN :same_live THEN token ELSE token" PLUS "1 END,"
	"       acquired_at = CASE WHEN :same_live THEN acquired_at ELSE :now END,"
	"       version = CASE WHEN :same_live THEN version ELSE version" PLUS "1 END,"
	"       heartbeat_at = :now, stale_after = :stale_after, session_pid = :session_pid,"
	"       session_started = :session_started, updated_at = :now"
	" WHERE resource" EQ ":resource"
	" RETURNING token, version",
	{{"resource", TEXTOID}, {"owner", TEXTOID}, {"stale_after", INTERVALOID},
	 {"session_pid", INT4OID}, {"session_started", TIMESTAMPTZOID}, {"now", TIMESTAMPTZOID},
	 {"same_live", BOOLOID}}
};

/*
 * A resource never leased before: token 1, and its ledger row.  On a conflict
 * (the row exists, or another acquire is inserting it) nothing happens and no
 * row lock is left behind, so this first try needs no subtransaction.
 */
static HcStatement new_lease = {
	"WITH l AS ("
	"  INSERT INTO hc_locks"
	"   (resource, owner, token, acquired_at, heartbeat_at, stale_after,"
	"    session_pid, session_started, updated_at)"
	"  VALUES (:resource, :owner, 1, :now, :now, :stale_after, :session_pid, :session_started,"
	"          :now)"
	"  ON CONFLICT (resource) DO NOTHING RETURNING version)"
	HC_LEDGER_ROWS("'resource'", ":resource", "l.version", "'acquire'", "'call'", "NULL", "NULL",
				   "0", "0", ":detail")
	" FROM l RETURNING seq",
	{{"resource", TEXTOID}, {"owner", TEXTOID}, {"stale_after", INTERVALOID},
	 {"session_pid", INT4OID}, {"session_started", TIMESTAMPTZOID}, {"detail", TEXTOID},
	 HC_LEDGER_PARAMS}
};

static HcStatement beat_lease = {
	"UPDATE hc_locks SET heartbeat_at = :now, updated_at = :now"
	" WHERE resource" EQ ":resource" " AND owner" EQ ":owner" " AND token" EQ ":token"
	" RETURNING heartbeat_at",
	{{"resource", TEXTOID}, {"owner", TEXTOID}, {"token", INT8OID}, {"now", TIMESTAMPTZOID}}
};

/* Free the lease that :owner holds with :token, and write the ledger row. */
static HcStatement free_lease = {
	"WITH l AS ("
	"  UPDATE hc_locks"
	"     SET owner = NULL, acquired_at = NULL, heartbeat_at = NULL, stale_after = NULL,"
	"         session_pid = NULL, session_started = NULL,"
	"         released_at = :now, updated_at = :now, version = version" PLUS "1"
	"   WHERE resource" EQ ":resource" " AND owner" EQ ":owner" " AND token" EQ ":token"
	"  RETURNING version)"
	HC_LEDGER_ROWS("'resource'", ":resource", "l.version", "'release'", "'call'", "NULL", "NULL",
				   "0", "0", ":detail")
	" FROM l RETURNING seq",
	{{"resource", TEXTOID}, {"owner", TEXTOID}, {"token", INT8OID}, {"detail", TEXTOID},
	 HC_LEDGER_PARAMS}
};

/* The lease as it is, without locking it: for error details. */
static HcStatement peek_lease = {
	"SELECT owner, token FROM hc_locks WHERE resource" EQ ":resource",
	{{"resource", TEXTOID}}
};

/*
 * Is the lease held by this owner and token?  The row lock keeps a takeover
 * (or a release) out until the caller's statement has committed what it
 * does under the lease, and orders the resource's ledger rows.
 */
static HcStatement hold_lease = {
	"SELECT 1 FROM hc_locks"
	" WHERE resource" EQ ":resource" " AND owner" EQ ":owner" " AND token" EQ ":token"
	" FOR NO KEY UPDATE",
	{{"resource", TEXTOID}, {"owner", TEXTOID}, {"token", INT8OID}}
};

/*
 * The lease as its holder holds it, for a write of the caller's under its
 * token (fence.c): locked FOR KEY SHARE, which a heartbeat, a release or an
 * attempt call (no-key updates) does not wait for, and unfenced_lease does.
 */
static HcStatement fence_lease = {
	"SELECT heartbeat_at" PLUS "stale_after" GT ":now" " AS fresh, session_pid, session_started"
	"  FROM hc_locks"
	" WHERE resource" EQ ":resource" " AND owner" EQ ":owner" " AND token" EQ ":token"
	" FOR KEY SHARE",
	{{"resource", TEXTOID}, {"owner", TEXTOID}, {"token", INT8OID}, {"now", TIMESTAMPTZOID}}
};

/*
 * Before a take that hands out a new token: the row locked FOR UPDATE, the
 * one lock that waits for fence_lease.  SKIP LOCKED: while an hc_lock_check's
 * transaction is open the try is busy, and the caller backs off in its own
 * backend, never waiting in a worker.
 */
static HcStatement unfenced_lease = {
	"SELECT 1 FROM hc_locks WHERE resource" EQ ":resource" " FOR UPDATE SKIP LOCKED",
	{{"resource", TEXTOID}}
};

/* The lease row, whoever holds it: for an operator's change (a reset). */
static HcStatement lock_lease = {
	"SELECT 1 FROM hc_locks WHERE resource" EQ ":resource" " FOR NO KEY UPDATE",
	{{"resource", TEXTOID}}
};

/* The resource's next version, the seq of its next ledger row. */
static HcStatement next_version = {
	"UPDATE hc_locks SET version = version" PLUS "1"
	" WHERE resource" EQ ":resource" " RETURNING version",
	{{"resource", TEXTOID}}
};

/* Run a statement on the resource's lease row alone: how many rows. */
static uint64
lease_run(HcCall *call, HcStatement *stmt, int expected, const char *resource)
{
	HcArgs		args;

	hc_args(&args, stmt);
	hc_bind_text(&args, "resource", resource);
	return hc_run(call, &args, expected);
}

/* The holder that arguments 0-2 name: resource, owner, token, checked in that order. */
void
hc_lease_holder_args(FunctionCallInfo fcinfo, HcLeaseHolder *holder)
{
	holder->resource = hc_arg_id(fcinfo, 0, "resource");
	holder->owner = hc_arg_id(fcinfo, 1, "owner");
	holder->token = hc_arg_token(fcinfo, 2, "token");
}

/* A statement on the lease as its holder holds it. */
static void
lease_args(HcArgs *args, HcStatement *stmt, const HcLeaseHolder *holder)
{
	hc_args(args, stmt);
	hc_bind_text(args, "resource", holder->resource);
	hc_bind_text(args, "owner", holder->owner);
	hc_bind(args, "token", Int64GetDatum(holder->token));
}

/*
 * RS007: the holder does not hold the lease.  The detail says why when given,
 * else what the lease is now.
 */
static void
lease_refuse(HcCall *call, const HcLeaseHolder *holder, const char *why)
{
	const char *resource = holder->resource;
	char	   *detail;

	if (why != NULL)
		detail = pstrdup(why);
	else if (lease_run(call, &peek_lease, SPI_OK_SELECT, resource) == 0)
		detail = psprintf("Resource \"%s\" has never been leased.", resource);
	else
	{
		char	   *owner = hc_text(call, 0, "owner");
		int64		current = hc_int64(0, "token");

		if (owner == NULL)
			detail = psprintf("The lease of resource \"%s\" is free; its last token is " INT64_FORMAT ".",
							  resource, current);
		else
			detail = psprintf("Resource \"%s\" is leased to \"%s\" with token " INT64_FORMAT ".",
							  resource, owner, current);
	}
	ereport(ERROR,
			(errcode(ERRCODE_HC_LOCK_NOT_HELD),
			 errmsg("lease of resource \"%s\" is not held by \"%s\" with token " INT64_FORMAT,
					resource, holder->owner, holder->token),
			 errdetail_internal("%s", detail),
			 errhint("Stop working on the resource: another worker may have taken it over. Acquire the lease again with hc_lock_acquire().")));
}

/*
 * Run a statement on the lease as its holder holds it; RS007 if the holder
 * does not hold it, with a detail that says what the lease is now.
 */
static void
lease_as_holder(HcCall *call, HcStatement *stmt, int expected, const HcLeaseHolder *holder)
{
	HcArgs		args;

	lease_args(&args, stmt, holder);
	if (hc_run(call, &args, expected) == 0)
		lease_refuse(call, holder, NULL);
}

/*
 * Require the lease for the rest of the caller's statement (RS007 if the
 * holder does not hold it); a takeover waits until that commits.
 */
void
hc_lease_hold(HcCall *call, const HcLeaseHolder *holder)
{
	lease_as_holder(call, &hold_lease, SPI_OK_SELECT, holder);
}

/*
 * Keep the lease from a new token until the caller's transaction ends:
 * hc_lock_check.  RS007 if the holder does not hold it, or holds it stale or
 * bound to a session that has ended (anyone may take it over).
 */
void
hc_lease_fence(HcCall *call, const HcLeaseHolder *holder)
{
	HcArgs		args;
	bool		isnull;
	Datum		pid;

	lease_args(&args, &fence_lease, holder);
	hc_bind(&args, "now", TimestampTzGetDatum(GetCurrentTimestamp()));
	if (hc_run(call, &args, SPI_OK_SELECT) == 0)
		lease_refuse(call, holder, NULL);
	/* Past stale_after anyone may take it over: a check may not begin to keep them out. */
	if (!DatumGetBool(hc_datum(0, "fresh", &isnull)))
		lease_refuse(call, holder,
					 psprintf("The lease of resource \"%s\" is stale (no heartbeat within its stale_after): any worker may take it over. Beat it (hc_lock_heartbeat) before writing under it.",
							  holder->resource));
	pid = hc_datum(0, "session_pid", &isnull);
	if (!isnull && !hc_lease_session_alive(holder->resource, DatumGetInt32(pid),
										 hc_timestamptz(0, "session_started")))
		lease_refuse(call, holder,
					 psprintf("The lease of resource \"%s\" was bound to a session that has ended: any worker may take it over.",
							  holder->resource));
}

/*
 * Lock the resource's lease row whoever holds it (lease rows are locked
 * before attempt rows); false if the resource was never leased.
 */
bool
hc_lease_lock(HcCall *call, const char *resource)
{
	return lease_run(call, &lock_lease, SPI_OK_SELECT, resource) == 1;
}

/*
 * Lock the resource's lease row and move its version on: the seq of the
 * ledger row about to be written.  false if the resource was never leased.
 */
bool
hc_lease_next_seq(HcCall *call, const char *resource, int64 *seq)
{
	if (lease_run(call, &next_version, SPI_OK_UPDATE_RETURNING, resource) == 0)
		return false;
	*seq = hc_int64(0, "version");
	return true;
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
 * A statement of an acquire on the resource for owner, stale_after, bound
 * to this backend if session-bound (null: not).
 */
static void
lease_acquire_args(HcArgs *args, HcStatement *stmt, const char *resource, const char *owner,
				   Datum stale_after, bool session)
{
	hc_args(args, stmt);
	hc_bind_text(args, "resource", resource);
	hc_bind_text(args, "owner", owner);
	hc_bind(args, "stale_after", stale_after);
	if (session)
	{
		hc_bind(args, "session_pid", Int32GetDatum(hc_session_pid()));
		hc_bind(args, "session_started", TimestampTzGetDatum(hc_session_started()));
	}
	else
	{
		hc_bind_null(args, "session_pid");
		hc_bind_null(args, "session_started");
	}
}

/*
 * An existing resource: is it bound to a session that has ended?  Then name
 * that session in :ended_pid and :ended_started, so that judge_lease counts
 * the lease as stale.
 */
static void
lease_bind_ended_session(HcCall *call, HcArgs *judge, const char *resource)
{
	int32		pid;
	TimestampTz started;

	if (hc_lease_bound_session(call, resource, &pid, &started) &&
		!hc_lease_session_alive(resource, pid, started))
	{
		hc_bind(judge, "ended_pid", Int32GetDatum(pid));
		hc_bind(judge, "ended_started", TimestampTzGetDatum(started));
	}
}

/* The arguments of the take of an existing lease (lease_take). */
typedef struct LeaseTake
{
	HcCall	   *call;
	const char *resource;
	HcArgs	   *judge;			/* judge_lease's */
	HcArgs	   *take;			/* take_lease's */
	LeaseTaken *taken;
} LeaseTake;

static bool
lease_take(void *arg)
{
	LeaseTake  *t = (LeaseTake *) arg;
	bool		same_live;
	bool		isnull;

	if (hc_run(t->call, t->judge, SPI_OK_SELECT) != 1)
		return false;
	same_live = DatumGetBool(hc_datum(0, "same_live", &isnull));
	t->taken->previous_owner = hc_text(t->call, 0, "owner");
	t->taken->previous_token = hc_int64(0, "token");
	/* A new token, while an hc_lock_check keeps the current one: busy. */
	if (!same_live && lease_run(t->call, &unfenced_lease, SPI_OK_SELECT, t->resource) != 1)
		return false;
	hc_bind(t->take, "same_live", BoolGetDatum(same_live));
	if (hc_run(t->call, t->take, SPI_OK_UPDATE_RETURNING) != 1)
		elog(ERROR, "lease row of resource \"%s\" vanished under its lock", t->resource);
	t->taken->token = hc_int64(0, "token");
	t->taken->version = hc_int64(0, "version");
	t->taken->logged = false;
	return true;
}

/*
 * One acquire attempt at its own instant (the clock is read again).  A new
 * resource is inserted with token 1 and its ledger row in one statement.
 * An existing one is judged and locked (judge_lease: nothing is locked if it
 * is busy), fenced if it would get a new token (unfenced_lease: busy while
 * an hc_lock_check keeps the current one), and taken, in a subtransaction:
 * if the try fails, rolling it back drops any row lock its statements took
 * (a row that changed under us is locked before it is re-checked), so nobody
 * waits on an acquirer that is sleeping in backoff.  A lease bound to a
 * session that has ended counts as stale; a session-bound acquire binds the
 * lease to this backend.  taken->logged says whether the ledger row is
 * written already.
 */
static bool
lease_try(HcCall *call, const char *resource, const char *owner, Datum stale_after,
		  bool session, LeaseTaken *taken)
{
	HcArgs		args;
	HcArgs		judge;
	LeaseTake	t = {call, resource, &judge, &args, taken};

	call->now = GetCurrentTimestamp();
	lease_acquire_args(&args, &new_lease, resource, owner, stale_after, session);
	hc_bind_text(&args, "detail", lease_detail(owner, 1, NULL));
	if (hc_run(call, &args, SPI_OK_INSERT_RETURNING) == 1)
	{
		taken->token = 1;
		taken->previous_owner = NULL;
		taken->previous_token = 0;
		taken->version = hc_int64(0, "seq");
		taken->logged = true;
		return true;
	}

	hc_args(&judge, &judge_lease);
	hc_bind_text(&judge, "resource", resource);
	hc_bind_text(&judge, "owner", owner);
	hc_bind_null(&judge, "ended_pid");
	hc_bind_null(&judge, "ended_started");
	lease_bind_ended_session(call, &judge, resource);
	lease_acquire_args(&args, &take_lease, resource, owner, stale_after, session);
	return hc_try_in_subxact(call, lease_take, &t);
}

/*
 * Sleep before retry n, in the caller's backend, which holds no worker
 * meanwhile: cancel and statement_timeout end the sleep at once, a client
 * gone ends the session, postmaster death ends the backend.
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
						 Min(left, CLIENT_CHECK_MS), PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		hc_autonomous_check_client();
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
 * A session-bound acquire, in the caller: the binding's lock is the
 * session's, the lease the worker's to commit.
 */
static Datum
lease_acquire_bound(FunctionCallInfo fcinfo, const char *function, const char *resource)
{
	bool		held;
	Datum		token;

	/* Refused before the binding's lock, which would outlive the refusal. */
	hc_autonomous_require_writable(function);
	held = hc_lease_session_take(fcinfo, function, resource);
	PG_TRY();
	{
		token = hc_autonomous(fcinfo, function);
	}
	PG_CATCH();
	{
		/*
		 * Refused before any worker ran the call (55000: the transaction
		 * that creates the extension; 53000: no worker): nothing is bound,
		 * so the lock goes.  After any other error the worker may have
		 * committed the binding: the lock stays, as for a lease bound here.
		 */
		MemoryContext cxt = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
		ErrorData  *edata = CopyErrorData();

		MemoryContextSwitchTo(cxt);
		if (!held && (edata->sqlerrcode == ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE ||
					  edata->sqlerrcode == ERRCODE_INSUFFICIENT_RESOURCES))
		{
			FlushErrorState();
			hc_lease_session_let_go(resource);
			ReThrowError(edata);
		}
		PG_RE_THROW();
	}
	PG_END_TRY();

	if (fcinfo->isnull && !held)
		hc_lease_session_let_go(resource);
	return token;
}

/*
 * In the caller: each try is a call of its own in a worker, which tries
 * once and commits; the backoff between tries is slept here, so a worker
 * is busy only while it tries, and no transaction stays open in it.
 */
static Datum
lease_acquire_tries(FunctionCallInfo fcinfo, const char *function, bool session,
					const char *resource, int32 max_retries)
{
	LOCAL_FCINFO(once, 4);
	Datum		token;
	int			retry;

	Assert(fcinfo->nargs == 4);
	memcpy(once, fcinfo, SizeForFunctionCallInfo(4));
	once->args[3].value = Int32GetDatum(0);
	for (retry = 0;; retry++)
	{
		token = session ? lease_acquire_bound(once, function, resource)
			: hc_autonomous(once, function);
		if (!once->isnull || retry >= max_retries)
			break;
		lease_backoff(retry + 1);
	}
	fcinfo->isnull = once->isnull;
	return token;
}

/*
 * Begin a call on resource's lease or attempt where it runs: handed from
 * the caller to a worker of its own (autonomous.c), there on the node of
 * the resource's rows.  true when it ran elsewhere, its result in *result
 * and fcinfo->isnull; false in the worker with the call begun.  A lease
 * bound to its session needs every row on this node: whether the binding's
 * session is alive only its own node can say.
 */
bool
hc_lease_begin(HcCall *call, FunctionCallInfo fcinfo, const char *function,
			   const char *resource, bool session, Datum *result)
{
	bool		isnull;

	if (!hc_autonomous_here())
	{
		*result = hc_autonomous(fcinfo, function);
		return true;
	}
	hc_call_begin(call, fcinfo, function);
	if (session)
		hc_require_single_node(call, "a lease bound to its session");
	if (!hc_route(call, fcinfo, resource, result, &isnull))
		return false;
	hc_call_end(call);
	fcinfo->isnull = isnull;
	return true;
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
	Datum		routed;

	(void) hc_arg_ttl(fcinfo, 2, "stale_after");
	stale_after = PG_GETARG_DATUM(2);
	max_retries = hc_arg_int(fcinfo, 3, "max_retries");
	if (max_retries < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_retries must not be negative"),
				 errhint("Use 0 to try once.")));
	/* A 0.2.0 database, served until it is updated, keeps 0.2.0's range. */
	if (max_retries > LEASE_MAX_RETRIES && hc_sql_at_least("0.3.0"))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_retries must be at most %d", LEASE_MAX_RETRIES),
				 errhint("Retry in the application to wait longer for a busy lease.")));
	if (!hc_autonomous_here())
		return lease_acquire_tries(fcinfo, function, session, resource, max_retries);
	if (hc_lease_begin(&call, fcinfo, function, resource, session, &routed))
		return routed;
	/* In the worker: one try (the caller retries). */
	if (!lease_try(&call, resource, owner, stale_after, session, &taken))
	{
		hc_call_end(&call);
		PG_RETURN_NULL();
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
	HcLeaseHolder holder;
	HcCall		call;
	Datum		result;

	hc_lease_holder_args(fcinfo, &holder);
	if (hc_lease_begin(&call, fcinfo, "hc_lock_heartbeat", holder.resource, false, &result))
		return result;
	lease_as_holder(&call, &beat_lease, SPI_OK_UPDATE_RETURNING, &holder);
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
	HcLeaseHolder holder;
	HcCall		call;
	HcArgs		args;
	bool		released;
	Datum		result;

	hc_lease_holder_args(fcinfo, &holder);
	if (hc_lease_begin(&call, fcinfo, "hc_lock_release", holder.resource, false, &result))
	{
		/* In the caller: a release that freed nothing leaves the binding as it is. */
		if (!hc_autonomous_here() && DatumGetBool(result))
			hc_lease_session_let_go(holder.resource);
		return result;
	}
	lease_args(&args, &free_lease, &holder);
	hc_bind_text(&args, "detail", lease_detail(holder.owner, holder.token, NULL));
	released = hc_run(&call, &args, SPI_OK_INSERT_RETURNING) == 1;
	hc_call_end(&call);
	PG_RETURN_BOOL(released);
}
