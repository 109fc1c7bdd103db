/*
 * fence.c
 *		hc_lock_check: the application's own writes fenced by the token.
 *
 * A fencing token protects a write only where the write is refused for an
 * older token.  hc_lock_check makes the application's transaction such a
 * place: it runs in the caller's backend, in the caller's transaction, and
 * either refuses (RS007) or keeps the token current until that transaction
 * ends, so that the application's write and the token commit or fail
 * together.
 *
 * It locks the resource's lease row FOR KEY SHARE.  That lock waits for no
 * heartbeat, release or attempt call (no-key updates, which the holder's
 * pool workers commit meanwhile); it blocks only FOR UPDATE, which every
 * take of a lease (a new token) takes first with SKIP LOCKED (lease.c): the
 * takeover is busy, and backs off in its caller's backend, never waiting in
 * a pool worker.  The lock is the (sub)transaction's, as any row lock: a
 * rollback to a savepoint set before the check lets it go.
 *
 * A lease past its stale_after, or bound to a session that has ended, is
 * refused although nobody has taken it over yet: anyone may take it over
 * now, as etcd refuses a compare on an expired lease.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/timestamp.h"

#include "common/validate.h"
#include "core/placement.h"
#include "core/statement.h"
#include "core/version.h"
#include "lease/lease.h"

PG_FUNCTION_INFO_V1(hc_lock_check);

/* The lease row, locked against a new token until the transaction ends. */
static HcStatement fence_check = {
	"SELECT owner, token, heartbeat_at" PLUS "stale_after" GT ":now" " AS fresh,"
	"       session_pid, session_started"
	"  FROM hc_locks WHERE resource" EQ ":resource" " FOR KEY SHARE",
	{{"resource", TEXTOID}, {"now", TIMESTAMPTZOID}}
};

/*
 * Why the lease, as fence_check read it, is not the holder's to write
 * under; NULL if it is.
 */
static const char *
fence_refusal(HcCall *call, const HcLeaseHolder *holder)
{
	char	   *owner = hc_text(call, 0, "owner");
	bool		isnull;

	if (owner == NULL || strcmp(owner, holder->owner) != 0 ||
		hc_int64(0, "token") != holder->token)
		return NULL;
	if (!DatumGetBool(hc_datum(0, "fresh", &isnull)))
		return psprintf("The lease of resource \"%s\" is stale: its last heartbeat is older than its stale_after, and any worker may take it over.",
						holder->resource);
	(void) hc_datum(0, "session_pid", &isnull);
	if (!isnull &&
		!hc_lease_session_alive(holder->resource, hc_int32(0, "session_pid"),
								hc_timestamptz(0, "session_started")))
		return psprintf("The lease of resource \"%s\" was bound to a session that has ended, and any worker may take it over.",
						holder->resource);
	return "";
}

/*
 * hc_lock_check(resource, owner, token): RS007 unless owner holds the
 * resource's lease with token; otherwise no new token until the caller's
 * transaction ends.
 */
Datum
hc_lock_check(PG_FUNCTION_ARGS)
{
	HcLeaseHolder holder;
	HcCall		call;
	HcArgs		args;
	const char *why = NULL;

	hc_lease_holder_args(fcinfo, &holder);
	hc_call_begin(&call, fcinfo, "hc_lock_check");
	hc_require_sql_at_least("0.4.0", call.function);
	hc_require_single_node(&call, "a check of a lease in the caller's transaction");
	hc_args(&args, &fence_check);
	hc_bind_text(&args, "resource", holder.resource);
	hc_bind(&args, "now", TimestampTzGetDatum(GetCurrentTimestamp()));
	if (hc_run(&call, &args, SPI_OK_SELECT) == 1)
		why = fence_refusal(&call, &holder);
	if (why == NULL || why[0] != '\0')
		hc_lease_refuse(&call, &holder, why);
	hc_call_end(&call);
	PG_RETURN_VOID();
}
