/*
 * call.c
 *		The life of one SQL call: one clock reading, the extension owner's
 *		rights in a security-restricted operation, table names bound to the
 *		extension's schema by OID, SPI, and prepared statements.
 *
 * The functions are not SECURITY DEFINER, so that the caller's role can be
 * recorded in the ledger; instead the call switches to the owner of the
 * function (the extension's owner) for its SPI work, as PostgreSQL does when
 * it runs maintenance code as a table's owner.  Nothing the caller or the
 * owner of the extension's schema controls is reached by name: tables are
 * looked up through an override search path made of schema OIDs (pg_catalog,
 * then the extension's schema), so renaming the schema and creating
 * look-alikes under its old name redirects nothing, even when a statement is
 * re-planned; functions and operators are written pg_catalog-qualified.
 * The point reads of the hot paths skip SPI altogether (hc_fetch): they find
 * the table in that schema by OID and read it through its unique index.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relscan.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "commands/extension.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/plancache.h"
#include "utils/rel.h"
#include "utils/resowner.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "call.h"

/* The schema of the extension, from the function being called. */
static Oid	hc_schema = InvalidOid;

/* Does the current call plan for point lookups (every call but hc_check)? */
static bool hc_point_lookups = true;

/*
 * Start a call: read the clock, become the extension's owner in a
 * security-restricted operation whose names resolve in pg_catalog and the
 * extension's schema only, connect SPI.  actor is who the ledger names.
 */
static void
hc_call_start(HcCall *call, Oid owner, Oid schema, const char *function, const char *actor,
			  bool point_lookups)
{
	OverrideSearchPath path = {0};

	call->function = function;
	call->now = GetCurrentTimestamp();
	call->outer = CurrentMemoryContext;
	hc_schema = schema;

	GetUserIdAndSecContext(&call->save_userid, &call->save_sec_context);
	call->actor = actor;
	SetUserIdAndSecContext(owner, call->save_sec_context |
						   SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);

	hc_point_lookups = point_lookups;
	path.schemas = list_make1_oid(hc_schema);
	path.addCatalog = true;
	path.addTemp = false;
	PushOverrideSearchPath(&path);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	/*
	 * Work in the caller's context, not SPI's: the ids, statuses and lines we
	 * collect make up the result, which is built after SPI_finish.
	 */
	MemoryContextSwitchTo(call->outer);
}

/*
 * The owner and schema of the function being called: the extension's.
 */
static void
hc_call_function(FunctionCallInfo fcinfo, Oid *owner, Oid *schema)
{
	HeapTuple	proctup;
	Form_pg_proc proc;

	proctup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fcinfo->flinfo->fn_oid));
	if (!HeapTupleIsValid(proctup))
		elog(ERROR, "cache lookup failed for function %u", fcinfo->flinfo->fn_oid);
	proc = (Form_pg_proc) GETSTRUCT(proctup);
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
 * released.
 */
void
hc_call_begin(HcCall *call, FunctionCallInfo fcinfo, const char *function)
{
	Oid			owner;
	Oid			schema;

	hc_call_require_read_committed(function);
	hc_call_function(fcinfo, &owner, &schema);
	hc_call_start(call, owner, schema, function, NULL, true);
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
 * End a call normally.  On error, transaction abort undoes all of this.
 */
void
hc_call_end(HcCall *call)
{
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "SPI_finish failed");
	PopOverrideSearchPath();
	SetUserIdAndSecContext(call->save_userid, call->save_sec_context);
}

/*
 * Prepare the statement for the current schema if not done yet, keep it.
 *
 * A call's statements reach their rows through indexes, by parameters: they
 * get one generic plan, made now with sequential and bitmap scans off, so
 * that a plan made while the tables are empty (right after CREATE EXTENSION)
 * is not a scan kept for the life of the backend.  A later re-plan (after an
 * ANALYZE) is the planner's, with real statistics.  hc_check's statements,
 * which read whole tables, are planned as usual.
 */
static SPIPlanPtr
hc_prepare(HcStatement *stmt)
{
	SPIPlanPtr	plan;
	int			guc_level = 0;

	if (stmt->plan != NULL && stmt->schema == hc_schema)
		return stmt->plan;
	if (stmt->plan != NULL)
		SPI_freeplan(stmt->plan);
	stmt->plan = NULL;

	if (hc_point_lookups)
	{
		guc_level = NewGUCNestLevel();
		(void) set_config_option("enable_seqscan", "off", PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
		(void) set_config_option("enable_bitmapscan", "off", PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
	}
	plan = SPI_prepare_cursor(stmt->sql, stmt->nargs, stmt->argtypes,
							  hc_point_lookups ? CURSOR_OPT_GENERIC_PLAN : 0);
	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed for \"%s\": %s", stmt->sql,
			 SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "SPI_keepplan failed");
	if (hc_point_lookups)
	{
		ReleaseCachedPlan(SPI_plan_get_cached_plan(plan), CurrentResourceOwner);
		AtEOXact_GUC(true, guc_level);
	}
	stmt->plan = plan;
	stmt->schema = hc_schema;
	return plan;
}

/*
 * Run a prepared statement with a fresh snapshot (read_only = false), check
 * that SPI answered as expected, return the number of rows.  The rows stay in
 * SPI_tuptable until the next statement; copy what must outlive it.
 */
uint64
hc_run(HcStatement *stmt, Datum *values, const char *nulls, int expected)
{
	MemoryContext mine = CurrentMemoryContext;
	int			rc;

	rc = SPI_execute_plan(hc_prepare(stmt), values, nulls, false, 0);
	/* SPI leaves us in its procedure context; stay where the caller was. */
	MemoryContextSwitchTo(mine);
	if (rc != expected)
		elog(ERROR, "unexpected SPI result %s for \"%s\"",
			 SPI_result_code_string(rc), stmt->sql);
	return SPI_processed;
}

/* Every HcFetch found so far, to forget on a relcache invalidation. */
#define HC_MAX_FETCHES 16
static HcFetch *hc_fetches[HC_MAX_FETCHES];
static int	hc_nfetches = 0;
static bool hc_fetch_callback = false;

static void
hc_fetch_invalidate(Datum arg, Oid relid)
{
	int			i;

	for (i = 0; i < hc_nfetches; i++)
		if (!OidIsValid(relid) || relid == hc_fetches[i]->relid ||
			relid == hc_fetches[i]->indexid)
			hc_fetches[i]->relid = InvalidOid;
}

/* Have the relcache callback forget what fetch finds, from its first use on. */
static void
hc_fetch_register(HcFetch *fetch)
{
	int			i;

	if (!hc_fetch_callback)
	{
		CacheRegisterRelcacheCallback(hc_fetch_invalidate, (Datum) 0);
		hc_fetch_callback = true;
	}
	for (i = 0; i < hc_nfetches; i++)
		if (hc_fetches[i] == fetch)
			return;
	if (hc_nfetches == HC_MAX_FETCHES)
		elog(ERROR, "too many holdcommit fetches");
	hc_fetches[hc_nfetches++] = fetch;
}

/* A column's value copied into the current memory context, detoasted. */
static Datum
hc_fetch_copy(Datum value, Form_pg_attribute attr)
{
	if (attr->attlen == -1)
		return PointerGetDatum(PG_DETOAST_DATUM_COPY(value));
	return datumCopy(value, attr->attbyval, attr->attlen);
}

/*
 * Find the table's columns and the index to read it by: valid, unique and
 * immediate, btree, the text key column as its only key with the column's
 * own collation, no predicate (InvalidOid if there is none).  The table must
 * be a plain table of the extension.  With Citus in the database there is
 * none: a distributed table's rows are in its shards, not in the table on
 * this node, and only a statement reaches them.
 */
static void
hc_fetch_find(HcFetch *fetch, Relation heap)
{
	Oid			relid = RelationGetRelid(heap);
	AttrNumber	key = get_attnum(relid, fetch->key);
	List	   *indexes;
	ListCell   *lc;
	int			i;

	if (heap->rd_rel->relkind != RELKIND_RELATION ||
		getExtensionOfObject(RelationRelationId, relid) != get_extension_oid("holdcommit", false))
		elog(ERROR, "%s is not the table of holdcommit", fetch->table);
	if (key == InvalidAttrNumber || get_atttype(relid, key) != TEXTOID)
		elog(ERROR, "column %s of %s is missing", fetch->key, fetch->table);
	fetch->keyattnum = key;
	for (i = 0; i < fetch->ncolumns; i++)
	{
		fetch->attnums[i] = get_attnum(relid, fetch->columns[i]);
		if (fetch->attnums[i] == InvalidAttrNumber)
			elog(ERROR, "column %s of %s is missing", fetch->columns[i], fetch->table);
	}

	fetch->indexid = InvalidOid;
	if (OidIsValid(get_extension_oid("citus", true)))
		return;
	indexes = RelationGetIndexList(heap);
	foreach(lc, indexes)
	{
		Relation	index = index_open(lfirst_oid(lc), AccessShareLock);
		Form_pg_index form = index->rd_index;

		if (form->indisunique && form->indimmediate && form->indisvalid &&
			form->indnkeyatts == 1 && form->indkey.values[0] == key &&
			index->rd_rel->relam == BTREE_AM_OID && index->rd_opcintype[0] == TEXTOID &&
			index->rd_indcollation[0] == TupleDescAttr(RelationGetDescr(heap), key - 1)->attcollation &&
			RelationGetIndexPredicate(index) == NIL)
			fetch->indexid = RelationGetRelid(index);
		index_close(index, AccessShareLock);
		if (OidIsValid(fetch->indexid))
			break;
	}
	list_free(indexes);
}

/*
 * The fetch as a statement, for a table without the index: the same columns,
 * the same lock.  A fetch is either always locked or never.
 */
static bool
hc_fetch_statement(HcCall *call, HcFetch *fetch, const char *key, int lock,
				   Datum *values, bool *nulls)
{
	HcStatement *stmt = &fetch->statement;
	Datum		arg = HC_TEXT(key);
	uint64		n;
	int			i;

	if (stmt->sql == NULL)
	{
		StringInfoData sql;

		initStringInfo(&sql);
		appendStringInfoString(&sql, "SELECT ");
		for (i = 0; i < fetch->ncolumns; i++)
			appendStringInfo(&sql, "%s%s", i > 0 ? ", " : "", fetch->columns[i]);
		appendStringInfo(&sql, " FROM %s WHERE %s OPERATOR(pg_catalog.=) $1%s",
						 fetch->table, fetch->key,
						 lock == HC_FETCH_READ ? "" :
						 lock == LockWaitSkip ? " FOR NO KEY UPDATE SKIP LOCKED" :
						 " FOR NO KEY UPDATE");
		stmt->sql = MemoryContextStrdup(TopMemoryContext, sql.data);
		stmt->nargs = 1;
		stmt->argtypes[0] = TEXTOID;
		fetch->lock = lock;
	}
	if (lock != fetch->lock)
		elog(ERROR, "fetch of %s used with two kinds of lock", fetch->table);
	n = hc_run(stmt, &arg, NULL, SPI_OK_SELECT);
	if (n > 1)
		elog(ERROR, "%s has more than one row with %s \"%s\"", fetch->table, fetch->key, key);
	if (n == 1)
	{
		MemoryContext old = MemoryContextSwitchTo(call->outer);

		for (i = 0; i < fetch->ncolumns; i++)
		{
			Form_pg_attribute attr = TupleDescAttr(SPI_tuptable->tupdesc, i);

			values[i] = hc_datum(0, i + 1, &nulls[i]);
			if (!nulls[i])
				values[i] = hc_fetch_copy(values[i], attr);
		}
		MemoryContextSwitchTo(old);
	}
	return n == 1;
}

/*
 * Look the row of fetch->table whose key column equals key up with a fresh
 * snapshot, as a statement of a READ COMMITTED transaction would, and lock
 * it unless lock is HC_FETCH_READ, as SELECT ... FOR NO KEY UPDATE does:
 * waiting for a holder of the lock (LockWaitBlock) or skipping the row
 * (LockWaitSkip), then taking the row's newest version.  Copy its columns
 * into values and nulls in the caller's memory.  false if there is no such
 * row, or it was skipped.  As the extension's owner, with the table locks
 * such a statement takes.
 */
static bool
hc_fetch_row(HcCall *call, HcFetch *fetch, const char *key, int lock,
			 Datum *values, bool *nulls)
{
	LOCKMODE	mode = lock != HC_FETCH_READ ? RowShareLock : AccessShareLock;
	Oid			relid;
	Relation	heap;
	Relation	index;
	IndexScanDesc scan;
	TupleTableSlot *slot;
	ScanKeyData skey;
	bool		found;
	int			i;

	if (lock != HC_FETCH_READ)
	{
		/* What SELECT ... FOR NO KEY UPDATE refuses, so does this. */
		PreventCommandIfReadOnly("SELECT FOR NO KEY UPDATE");
		if (IsolationUsesXactSnapshot())
			elog(ERROR, "a holdcommit row lock needs READ COMMITTED");
	}
	/*
	 * Lock the table first: that is when invalidations arrive, and one may
	 * clear what was found before (an index dropped or rebuilt).  Find again
	 * until nothing clears it while finding.  With the table locked, no index
	 * of it can be dropped until this transaction ends.
	 */
	relid = fetch->relid;
	if (!OidIsValid(relid) || fetch->schema != hc_schema)
	{
		hc_fetch_register(fetch);
		relid = get_relname_relid(fetch->table, hc_schema);
	}
	if (!OidIsValid(relid))
		elog(ERROR, "relation %s of holdcommit is missing", fetch->table);
	heap = table_open(relid, mode);
	while (fetch->relid != relid || fetch->schema != hc_schema)
	{
		fetch->relid = relid;
		fetch->schema = hc_schema;
		hc_fetch_find(fetch, heap);
	}
	if (!OidIsValid(fetch->indexid))
	{
		table_close(heap, NoLock);
		return hc_fetch_statement(call, fetch, key, lock, values, nulls);
	}
	index = index_open(fetch->indexid, AccessShareLock);

	/* As SPI does for each statement: see what this call has written so far. */
	CommandCounterIncrement();
	PushActiveSnapshot(GetTransactionSnapshot());
	ScanKeyEntryInitialize(&skey, 0, 1, BTEqualStrategyNumber, InvalidOid,
						   index->rd_indcollation[0], F_TEXTEQ, HC_TEXT(key));
	slot = table_slot_create(heap, NULL);
	scan = index_beginscan(heap, index, GetActiveSnapshot(), 1, 0);
	index_rescan(scan, &skey, 1, NULL, 0);
	found = index_getnext_slot(scan, ForwardScanDirection, slot);
	index_endscan(scan);
	if (found && lock != HC_FETCH_READ)
	{
		ItemPointerData tid = slot->tts_tid;
		TM_FailureData tmfd;
		TM_Result	result;

		/* As ExecLockRows does: wait or skip, then lock the newest version. */
		ExecClearTuple(slot);
		result = table_tuple_lock(heap, &tid, GetActiveSnapshot(), slot,
								  GetCurrentCommandId(true), LockTupleNoKeyExclusive,
								  lock,
								  TUPLE_LOCK_FLAG_LOCK_UPDATE_IN_PROGRESS |
								  TUPLE_LOCK_FLAG_FIND_LAST_VERSION, &tmfd);
		if (result == TM_Deleted || result == TM_SelfModified ||
			(result == TM_WouldBlock && lock == LockWaitSkip))
			found = false;
		else if (result != TM_Ok)
			elog(ERROR, "could not lock the row of %s \"%s\": unexpected result %d",
				 fetch->table, key, (int) result);
		else if (tmfd.traversed)
		{
			/* A newer version: is it still the row asked for (EvalPlanQual's re-check)? */
			bool		isnull;
			Datum		now_key = slot_getattr(slot, fetch->keyattnum, &isnull);

			found = !isnull && DatumGetBool(FunctionCall2Coll(&skey.sk_func, skey.sk_collation,
															  now_key, skey.sk_argument));
		}
	}
	if (found)
	{
		MemoryContext old = MemoryContextSwitchTo(call->outer);

		for (i = 0; i < fetch->ncolumns; i++)
		{
			Form_pg_attribute attr = TupleDescAttr(slot->tts_tupleDescriptor,
												   fetch->attnums[i] - 1);

			/* Detoasted while the snapshot is still pushed. */
			values[i] = slot_getattr(slot, fetch->attnums[i], &nulls[i]);
			if (!nulls[i])
				values[i] = hc_fetch_copy(values[i], attr);
		}
		MemoryContextSwitchTo(old);
	}
	ExecDropSingleTupleTableSlot(slot);
	PopActiveSnapshot();
	index_close(index, NoLock);
	table_close(heap, NoLock);
	return found;
}

/* A row by its key: see hc_fetch_row. */
bool
hc_fetch(HcCall *call, HcFetch *fetch, const char *key, Datum *values, bool *nulls)
{
	return hc_fetch_row(call, fetch, key, HC_FETCH_READ, values, nulls);
}

/* A row by its key, locked FOR NO KEY UPDATE: see hc_fetch_row. */
bool
hc_fetch_lock(HcCall *call, HcFetch *fetch, const char *key, Datum *values, bool *nulls)
{
	return hc_fetch_row(call, fetch, key, LockWaitBlock, values, nulls);
}

/*
 * A row by its key, locked FOR NO KEY UPDATE SKIP LOCKED: false also when
 * another transaction has it locked.
 */
bool
hc_fetch_lock_free(HcCall *call, HcFetch *fetch, const char *key, Datum *values, bool *nulls)
{
	return hc_fetch_row(call, fetch, key, LockWaitSkip, values, nulls);
}

/* Column col (1-based) of row row of the last statement's result. */
Datum
hc_datum(int row, int col, bool *isnull)
{
	return SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col, isnull);
}

/* A column that must not be null: the schema says NOT NULL. */
static Datum
hc_required(int row, int col)
{
	bool		isnull;
	Datum		d = hc_datum(row, col, &isnull);

	if (isnull)
		elog(ERROR, "column %d of a holdcommit row is unexpectedly null", col);
	return d;
}

/* A text column as a C string that outlives SPI_finish, or NULL. */
char *
hc_text(HcCall *call, int row, int col)
{
	bool		isnull;
	Datum		d = hc_datum(row, col, &isnull);
	MemoryContext old;
	char	   *s;

	if (isnull)
		return NULL;
	old = MemoryContextSwitchTo(call->outer);
	s = TextDatumGetCString(d);
	MemoryContextSwitchTo(old);
	return s;
}

/* NOT NULL columns of the last statement's result. */
TimestampTz
hc_timestamptz(int row, int col)
{
	return DatumGetTimestampTz(hc_required(row, col));
}

int32
hc_int32(int row, int col)
{
	return DatumGetInt32(hc_required(row, col));
}

/* A statement argument from a C string; a NULL here is a bug, not a null. */
Datum
hc_text_datum(const char *s)
{
	if (s == NULL)
		elog(ERROR, "null string passed as a holdcommit statement argument");
	return PointerGetDatum(cstring_to_text(s));
}

/*
 * The first row of the last statement as the function's declared row type
 * (hc_assets, hc_inventory, ...), matched column by column by name, so that
 * the result can be stored and read by any session, whatever columns the
 * table has dropped.  Call before hc_call_end.
 */
Datum
hc_result_row(HcCall *call, FunctionCallInfo fcinfo)
{
	MemoryContext old = MemoryContextSwitchTo(call->outer);
	TupleDesc	tupdesc;
	Datum	   *values;
	bool	   *nulls;
	int			i;
	HeapTuple	tuple;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	values = palloc(sizeof(Datum) * tupdesc->natts);
	nulls = palloc(sizeof(bool) * tupdesc->natts);
	for (i = 0; i < tupdesc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(tupdesc, i);
		int			col;

		values[i] = (Datum) 0;
		nulls[i] = true;
		if (attr->attisdropped)
			continue;
		col = SPI_fnumber(SPI_tuptable->tupdesc, NameStr(attr->attname));
		if (col <= 0)
			elog(ERROR, "column \"%s\" of the result is missing", NameStr(attr->attname));
		values[i] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, col, &nulls[i]);
	}
	tuple = heap_form_tuple(tupdesc, values, nulls);
	MemoryContextSwitchTo(old);
	return HeapTupleGetDatum(tuple);
}
