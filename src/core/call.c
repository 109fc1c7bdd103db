/*
 * call.c
 *		The life of one SQL call: one clock reading, the extension owner's
 *		rights in a security-restricted operation, table names bound to the
 *		extension's schema by OID, SPI.
 *
 * The functions are not SECURITY DEFINER, so that the caller's role can be
 * recorded in the ledger; instead the call switches to the owner of the
 * function (the extension's owner) for its SPI work, as PostgreSQL does when
 * it runs maintenance code as a table's owner.
 *
 * Invariants:
 *   1. Nothing the caller or the owner of the extension's schema controls
 *      is reached by name: tables are looked up in pg_catalog, then the
 *      extension's schema found by OID (core/search_path.c), pushed before
 *      the call's first statement through SPI, so renaming the schema and
 *      creating look-alikes under its old name redirects nothing, even when
 *      a statement is re-planned; functions and operators are written
 *      pg_catalog-qualified (statement.h).  The point reads of the hot
 *      paths skip SPI altogether (fetch.c): they find the table in that
 *      schema by OID, and a call that ends with them (a refusal) pushes no
 *      search path.
 *   2. A call starts with no scope (call->scope NULL: the extension's own
 *      tables); only the placement (placement.h) sets one.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_proc.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/syscache.h"

#include "core/call.h"
#include "core/search_path.h"
#include "core/standby.h"
#include "core/version.h"

/*
 * Start a call: read the clock, become the extension's owner in a
 * security-restricted operation, connect SPI (its statements' names resolve
 * in pg_catalog and the extension's schema only: hc_call_search_path).
 * actor is who the ledger names.
 */
static void
hc_call_start(HcCall *call, Oid owner, Oid schema, const char *function, const char *actor,
			  bool point_lookups)
{
	hc_require_served_sql();
	call->function = function;
	call->now = GetCurrentTimestamp();
	call->outer = CurrentMemoryContext;
	call->schema = schema;
	call->point_lookups = point_lookups;
	call->latest = false;
	call->scope = NULL;
	call->routing_id = NULL;

	GetUserIdAndSecContext(&call->save_userid, &call->save_sec_context);
	call->actor = actor;
	SetUserIdAndSecContext(owner, call->save_sec_context |
						   SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);

	call->search_path_pushed = false;
	call->xact_level = GetCurrentTransactionNestLevel();

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	/*
	 * Work in the caller's context, not SPI's: the ids, statuses and lines we
	 * collect make up the result, which is built after SPI_finish.
	 */
	MemoryContextSwitchTo(call->outer);
}

/* The pg_proc row of the function being called; ReleaseSysCache() it. */
HeapTuple
hc_call_proc(FunctionCallInfo fcinfo)
{
	HeapTuple	proctup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fcinfo->flinfo->fn_oid));

	if (!HeapTupleIsValid(proctup))
		elog(ERROR, "cache lookup failed for function %u", fcinfo->flinfo->fn_oid);
	return proctup;
}

/*
 * The owner and schema of the function being called: the extension's.
 */
static void
hc_call_function(FunctionCallInfo fcinfo, Oid *owner, Oid *schema)
{
	HeapTuple	proctup = hc_call_proc(fcinfo);
	Form_pg_proc proc = (Form_pg_proc) GETSTRUCT(proctup);

	*owner = proc->proowner;
	*schema = proc->pronamespace;
	ReleaseSysCache(proctup);
}

/* Refuse a transaction snapshot for a call that changes state. */
static void
hc_call_require_read_committed(const char *function)
{
	if (IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("%s cannot run in a %s transaction", function,
						IsolationIsSerializable() ? "SERIALIZABLE" : "REPEATABLE READ"),
				 errdetail("holdcommit decides on the latest committed state, which only READ COMMITTED shows."),
				 errhint("Call it in autocommit mode or in a READ COMMITTED transaction.")));
}

/*
 * Start a call that changes state.  Every check must see the latest
 * committed state, as each statement of a READ COMMITTED transaction does; a
 * transaction snapshot would see an asset as held after its hold was
 * released.  On a standby it is refused before it reads anything.
 */
static void
call_begin(HcCall *call, FunctionCallInfo fcinfo, const char *function, bool keyed)
{
	Oid			owner;
	Oid			schema;

	hc_call_require_read_committed(function);
	if (!keyed)
		hc_refuse_read_only(function);
	hc_call_function(fcinfo, &owner, &schema);
	hc_call_start(call, owner, schema, function, NULL, true);
}

void
hc_call_begin(HcCall *call, FunctionCallInfo fcinfo, const char *function)
{
	call_begin(call, fcinfo, function, false);
}

/*
 * The same for a call that takes an idempotency key: on a standby or in a
 * read-only transaction it goes as far as the key, whose replay is answered
 * there (idempotency.c refuses a new one).
 */
void
hc_call_begin_keyed(HcCall *call, FunctionCallInfo fcinfo, const char *function)
{
	call_begin(call, fcinfo, function, true);
}

/*
 * Start a call that only reads, whole tables perhaps (hc_check): any
 * isolation level will do, and any plan.
 */
void
hc_call_begin_read(HcCall *call, FunctionCallInfo fcinfo, const char *function)
{
	Oid			owner;
	Oid			schema;

	hc_call_function(fcinfo, &owner, &schema);
	hc_call_start(call, owner, schema, function, NULL, false);
}

/*
 * Start a call that changes state without a SQL function call behind it
 * (the background sweeper): the extension's owner and schema are given, and
 * the ledger names actor.
 */
void
hc_call_begin_as(HcCall *call, Oid owner, Oid schema, const char *function, const char *actor)
{
	hc_call_require_read_committed(function);
	hc_call_start(call, owner, schema, function, actor, true);
}

/*
 * Who the ledger names: the given actor, or the caller's current_user,
 * looked up when a call first writes (a refusal never does).
 */
const char *
hc_actor(HcCall *call)
{
	if (call->actor == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(call->outer);

		call->actor = GetUserNameFromId(call->save_userid, false);
		MemoryContextSwitchTo(old);
	}
	return call->actor;
}

/*
 * The call's search path, pushed at the call's own transaction level: a
 * subtransaction's end would take it along (subxact.c pushes it first).
 */
void
hc_call_push_search_path(HcCall *call)
{
	if (GetCurrentTransactionNestLevel() != call->xact_level)
		elog(ERROR, "%s: the search path must be pushed outside a subtransaction", call->function);
	call->search_path = hc_search_path_push(call->schema);
	call->search_path_pushed = true;
}

/*
 * End a call normally.  On error, transaction abort undoes all of this.
 */
void
hc_call_end(HcCall *call)
{
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "SPI_finish failed");
	if (call->search_path_pushed)
		hc_search_path_pop(call->search_path);
	SetUserIdAndSecContext(call->save_userid, call->save_sec_context);
}

