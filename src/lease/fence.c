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
 * then, and a check must not keep them out longer (lease.c).  For the same
 * reason a transaction that ran a check cannot be prepared (PREPARE
 * TRANSACTION): it would keep the lease until someone ends it by hand.
 * The deployment's own two-phase commit may prepare it: on Citus the check
 * runs on the node of the lease's row, in the caller's distributed
 * transaction, which Citus prepares there when it wrote on another node
 * too, then commits, or its recovery does (placement.h, own_prepare).
 */
#include "postgres.h"

#include "access/xact.h"

#include "core/placement.h"
#include "core/version.h"
#include "lease/lease.h"
#include "lease/register.h"

PG_FUNCTION_INFO_V1(hc_lock_check);

/*
 * Has this transaction run a check?  Is it being prepared by the
 * deployment's own two-phase commit?  (The callback below is registered
 * once.)
 */
static bool fenced = false;
static bool own_prepare = false;
static bool fence_callback_registered = false;

static void
fence_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_PRE_PREPARE && fenced && !own_prepare)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot PREPARE a transaction that has run hc_lock_check"),
				 errdetail("A prepared transaction would keep the lease from being taken over until COMMIT PREPARED or ROLLBACK PREPARED, past its stale_after."),
				 errhint("Commit the writes fenced by the token in a transaction of their own.")));
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT || event == XACT_EVENT_PREPARE ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT)
		fenced = own_prepare = false;
}

/* The ProcessUtility_hook (holdcommit.c): PREPARE TRANSACTION gid is under way. */
void
hc_fence_prepare_named(const char *gid)
{
	if (fenced)
		own_prepare = hc_placement_own_prepare(gid);
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

	hc_lease_holder_args(fcinfo, &holder);
	hc_call_begin(&call, fcinfo, "hc_lock_check");
	hc_require_sql_at_least("0.4.0", call.function);
	HC_ROUTE(&call, fcinfo, holder.resource);
	if (!fence_callback_registered)
	{
		RegisterXactCallback(fence_xact_callback, NULL);
		fence_callback_registered = true;
	}
	hc_lease_fence(&call, &holder);
	fenced = true;
	hc_call_end(&call);
	PG_RETURN_VOID();
}
