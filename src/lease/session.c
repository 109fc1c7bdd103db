/*
 * session.c
 *		Leases bound to their session (hc_lock_acquire_session): the
 *		binding's session-level advisory lock, and whether the session it
 *		names still lives.
 *
 * Review on a new major: the lock manager calls on the session's locks
 * (advisory-style LOCKTAGs, LockAcquire, LockHeldByMe: compat.h).
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/memutils.h"

#include "compat.h"
#include "bgw/autonomous/autonomous.h"
#include "core/statement.h"
#include "lease/lease.h"

/*
 * Session locks of session-bound leases use this in field 4 of the lock tag
 * (idempotency keys use 0x4843, the sweep's history 0x4845; pg_advisory_lock() 1 and 2).
 */
#define LEASE_SESSION_LOCK_SPACE	0x4844

/* The session a lease is bound to, if any, without locking it. */
static HcStatement peek_session = {
	"SELECT session_pid, session_started FROM hc_locks"
	" WHERE resource" EQ ":resource" " AND session_pid IS NOT NULL",
	{{"resource", TEXTOID}}
};

/*
 * A session-bound lease is also held as a session-level advisory lock of
 * its own: its tag is a hash of the resource and of the bound session (pid
 * and start time), so each binding has a lock that only its session takes,
 * and PostgreSQL releases it when that session ends, however it ends (a
 * crash restarts every backend).  Whether the session a lease is bound to
 * still lives is whether someone holds that binding's lock: nothing is read
 * from pg_stat_activity, whose snapshot belongs to the caller's
 * transaction.  A lock left by a call that failed after taking it names
 * only a binding that no row has, so nobody asks about it.
 */
static void
session_tag(LOCKTAG *tag, const char *resource, int32 pid, TimestampTz started)
{
	uint64		hash = hash_bytes_extended((const unsigned char *) resource, strlen(resource),
										   (uint64) started ^ ((uint64) (uint32) pid << 32));

	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) (hash >> 32), (uint32) hash,
						 LEASE_SESSION_LOCK_SPACE);
}

/*
 * The resources whose binding lock this session holds.  A lease released or
 * taken over from another session leaves its lock here; bindings that no
 * row names any more are let go before the next one is taken, so a pooled
 * session never piles them up in the shared lock table.
 */
static List *session_bindings = NIL;

/* Let this session's lock of its binding to the resource go, if it holds it. */
void
hc_lease_session_let_go(const char *resource)
{
	LOCKTAG		tag;
	ListCell   *lc;

	session_tag(&tag, resource, MyProcPid, MyStartTimestamp);
	if (hc_lock_held_by_me(&tag, ExclusiveLock))
		(void) LockRelease(&tag, ExclusiveLock, true);
	foreach(lc, session_bindings)
		if (strcmp((char *) lfirst(lc), resource) == 0)
		{
			pfree(lfirst(lc));
			session_bindings = foreach_delete_current(session_bindings, lc);
			break;
		}
}

/* The session the resource's lease is bound to, if any (false: none), without locking it. */
bool
hc_lease_bound_session(HcCall *call, const char *resource, int32 *pid, TimestampTz *started)
{
	HcArgs		args;

	hc_args(&args, &peek_session);
	hc_bind_text(&args, "resource", resource);
	if (hc_run(call, &args, SPI_OK_SELECT) != 1)
		return false;
	*pid = hc_int32(0, "session_pid");
	*started = hc_timestamptz(0, "session_started");
	return true;
}

/* Is the resource's lease still bound to this session? */
static bool
lease_bound_here(HcCall *call, const char *resource)
{
	int32		pid;
	TimestampTz started;

	return hc_lease_bound_session(call, resource, &pid, &started) &&
		pid == hc_session_pid() && started == hc_session_started();
}

/*
 * Hold this session's lock of its binding to the resource, after letting go
 * of the bindings that no row names any more.  It is taken before the
 * binding is committed, so that no acquirer ever sees the binding without
 * its lock.  Was it held already (the lease is bound here)?
 */
bool
hc_lease_session_take(FunctionCallInfo fcinfo, const char *function, const char *resource)
{
	HcCall		call;
	LOCKTAG		tag;
	ListCell   *lc;
	List	   *stale = NIL;
	MemoryContext old;

	hc_call_begin_read(&call, fcinfo, function);
	/* What the workers committed, also under REPEATABLE READ. */
	call.latest = true;
	foreach(lc, session_bindings)
		if (strcmp((char *) lfirst(lc), resource) != 0 && !lease_bound_here(&call, lfirst(lc)))
			stale = lappend(stale, lfirst(lc));
	hc_call_end(&call);
	foreach(lc, stale)
		hc_lease_session_let_go(lfirst(lc));
	list_free(stale);

	session_tag(&tag, resource, MyProcPid, MyStartTimestamp);
	if (hc_lock_held_by_me(&tag, ExclusiveLock))
		return true;
	(void) LockAcquire(&tag, ExclusiveLock, true, false);
	old = MemoryContextSwitchTo(TopMemoryContext);
	session_bindings = lappend(session_bindings, pstrdup(resource));
	MemoryContextSwitchTo(old);
	return false;
}

/* Does the session the lease is bound to (pid, started) still hold its lock? */
bool
hc_lease_session_alive(const char *resource, int32 pid, TimestampTz started)
{
	LOCKTAG		tag;

	if (pid == hc_session_pid() && started == hc_session_started())
		return true;
	session_tag(&tag, resource, pid, started);
	if (LockAcquire(&tag, ExclusiveLock, false, true) == LOCKACQUIRE_NOT_AVAIL)
		return true;
	(void) LockRelease(&tag, ExclusiveLock, false);
	return false;
}
