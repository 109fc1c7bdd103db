/*
 * fetch.c
 *		Point reads and row locks that bypass the planner and the executor.
 *
 * Every place where holdcommit reads or locks a row itself is here, to be
 * reviewed against each PostgreSQL major version: hc_fetch does what
 * "SELECT columns FROM table WHERE key = $1 [FOR NO KEY UPDATE [SKIP
 * LOCKED]]" does in a READ COMMITTED transaction, for one row found through
 * a unique btree index on the key; HC_FETCH_SKIP_SEEN (below) is a lock no
 * statement can take.
 *
 * Locks, in the order they are taken:
 *   1. the table, RowShareLock to lock a row (AccessShareLock to read), as
 *      the statement would; invalidations arrive then, so the cached OIDs
 *      are trusted only after it (an index dropped or rebuilt meanwhile is
 *      found again);
 *   2. the index, AccessShareLock, until the transaction ends;
 *   3. the row, FOR NO KEY UPDATE (LockTupleNoKeyExclusive): its newest
 *      version, with TUPLE_LOCK_FLAG_FIND_LAST_VERSION as ExecLockRows
 *      passes in READ COMMITTED, and its key re-checked if it is a newer
 *      version (EvalPlanQual's re-check).
 * The row lock waits (HC_FETCH_WAIT) or skips a row another transaction
 * has locked (HC_FETCH_SKIP).  Both also pass
 * TUPLE_LOCK_FLAG_LOCK_UPDATE_IN_PROGRESS, as ExecLockRows does; that makes
 * heap_lock_tuple lock the versions an update chain leads to, which can
 * wait whatever the wait policy (heap_lock_updated_tuple).  The sweeper
 * must never wait on a live call, which may be waiting for a row the
 * sweeper holds, so it locks with HC_FETCH_SKIP_NOWAIT: the newest version
 * only, skipped if anyone has it.  HC_FETCH_SKIP_SEEN locks no version but
 * the one read, and only if the caller's look at its columns admits it
 * (hc_fetch_part_if): without TUPLE_LOCK_FLAG_FIND_LAST_VERSION,
 * heap_lock_tuple refuses a version that anyone has updated since
 * (TM_Updated), or is updating or holds in a conflicting mode
 * (TM_WouldBlock), so the row locked is the row the caller looked at, with
 * the values it looked at.  A lock that a re-check would have found unwanted is
 * never taken, and the caller needs no subtransaction to give it back.
 *
 * HC_FETCH_MINE takes no lock: it tells whether this transaction holds the
 * row already (it locked it, updated it or inserted it), from the version
 * read's xmin and xmax, as heap_lock_tuple tells whether it holds a lock it
 * is asked for.  A caller about to wait for someone who waits for that row
 * must not.
 *
 * The read uses a fresh snapshot after CommandCounterIncrement, as SPI
 * does for each statement, so a call sees what it has written so far.
 * Outside READ COMMITTED, or in a read-only transaction, the lock is
 * refused as the statement would refuse it.
 *
 * A locked fetch can hand the TID of the version it locked to an update of
 * that row without the executor (hc_fetch_tid, write.c): the newest
 * version, which nobody else can change until the transaction ends.
 *
 * hc_fetch_changing looks at a version by its TID with a dirty snapshot
 * (as a unique index check does), takes no lock, and says whether a
 * transaction in flight has updated or deleted it: SKIP LOCKED's answer
 * for such a row, without the lock a subtransaction would have to give
 * back.
 *
 * Review on a new major: what ExecLockRows, EvalPlanQual and an index scan
 * do for such a statement (heap_lock_tuple's flags, table_tuple_lock's
 * results, index_beginscan's arguments: compat.h), the btree metapage's
 * btm_root (fetch_index_empty), the heap tuple header's xmin, xmax and
 * multixact members (fetch_mine), what a dirty snapshot reports of a
 * version (hc_fetch_changing), and the relcache callback that forgets the
 * OIDs.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/multixact.h"
#include "access/nbtree.h"
#include "access/relscan.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "compat.h"
#include "core/fetch.h"
#include "core/placement.h"

/* Does the fetch lock the row it finds? */
#define FETCH_LOCKS(fetch)	((fetch)->lock != HC_FETCH_READ && (fetch)->lock != HC_FETCH_MINE)

/* Every HcFetch found so far, to forget on a relcache invalidation. */
#define HC_MAX_FETCHES 32
static HcFetch *fetches[HC_MAX_FETCHES];
static int	nfetches = 0;
static bool fetch_callback = false;

static void
fetch_invalidate(Datum arg, Oid relid)
{
	int			i;

	for (i = 0; i < nfetches; i++)
		if (!OidIsValid(relid) || relid == fetches[i]->relid ||
			relid == fetches[i]->indexid)
			fetches[i]->relid = InvalidOid;
}

/* Have the relcache callback forget what fetch finds, from its first use on. */
static void
fetch_register(HcFetch *fetch)
{
	int			i;

	if (!fetch_callback)
	{
		CacheRegisterRelcacheCallback(fetch_invalidate, (Datum) 0);
		fetch_callback = true;
	}
	for (i = 0; i < nfetches; i++)
		if (fetches[i] == fetch)
			return;
	if (nfetches == HC_MAX_FETCHES)
		elog(ERROR, "too many holdcommit fetches");
	fetches[nfetches++] = fetch;
}

/* A column's value copied into the current memory context, detoasted. */
static Datum
fetch_copy(Datum value, Form_pg_attribute attr)
{
	if (attr->attlen == -1)
		return PointerGetDatum(PG_DETOAST_DATUM_COPY(value));
	return datumCopy(value, attr->attbyval, attr->attlen);
}

/*
 * Find the table's columns and the index to read it by: valid, unique and
 * immediate, btree, the text key column as its only key with the column's
 * own collation (or first key, the smallint part or the text column
 * `then` second), no predicate (InvalidOid if there is none).  The table must
 * be a plain table of the extension.  With Citus in the database there is
 * none: a distributed table's rows are in its shards, not in the table on
 * this node, and only a statement reaches them.
 */
static void
fetch_find(HcFetch *fetch, Relation heap)
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
	fetch->partattnum = InvalidAttrNumber;
	if (fetch->part != NULL)
	{
		fetch->partattnum = get_attnum(relid, fetch->part);
		if (fetch->partattnum == InvalidAttrNumber || get_atttype(relid, fetch->partattnum) != INT2OID)
			elog(ERROR, "column %s of %s is missing", fetch->part, fetch->table);
	}
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
			form->indkey.values[0] == key &&
			(fetch->part != NULL ?
			 (form->indnkeyatts == 2 && form->indkey.values[1] == fetch->partattnum &&
			  index->rd_opcintype[1] == INT2OID) :
			 (form->indnkeyatts == 1 ||
			  (fetch->then != NULL && form->indnkeyatts == 2 &&
			   form->indkey.values[1] == get_attnum(relid, fetch->then) &&
			   index->rd_opcintype[1] == TEXTOID))) &&
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
fetch_statement(HcCall *call, HcFetch *fetch, const char *key, int16 part, Datum *values,
				bool *nulls)
{
	HcStatement *stmt = &fetch->statement;
	HcArgs		args;
	uint64		n;
	int			i;

	if (stmt->sql == NULL)
	{
		StringInfoData sql;

		initStringInfo(&sql);
		appendStringInfoString(&sql, "SELECT ");
		for (i = 0; i < fetch->ncolumns; i++)
			appendStringInfo(&sql, "%s%s", i > 0 ? ", " : "", fetch->columns[i]);
		appendStringInfo(&sql, " FROM %s WHERE %s" EQ ":key", fetch->table, fetch->key);
		if (fetch->part != NULL)
			appendStringInfo(&sql, " AND %s" EQ ":part", fetch->part);
		if (fetch->then != NULL)
			appendStringInfo(&sql, " ORDER BY %s LIMIT 1", fetch->then);
		appendStringInfoString(&sql, fetch->lock == HC_FETCH_READ ? "" :
						 fetch->lock == HC_FETCH_WAIT ? " FOR NO KEY UPDATE" :
						 " FOR NO KEY UPDATE SKIP LOCKED");
		stmt->sql = MemoryContextStrdup(TopMemoryContext, sql.data);
		stmt->params[0].name = "key";
		stmt->params[0].type = TEXTOID;
		stmt->params[1].name = fetch->part != NULL ? "part" : NULL;
		stmt->params[1].type = INT2OID;
	}
	hc_args(&args, stmt);
	hc_bind_text(&args, "key", key);
	if (fetch->part != NULL)
		hc_bind(&args, "part", Int16GetDatum(part));
	n = hc_run(call, &args, SPI_OK_SELECT);
	if (n > 1)
		elog(ERROR, "%s has more than one row with the same %s", fetch->table, fetch->key);
	if (n == 1)
	{
		MemoryContext old = MemoryContextSwitchTo(call->outer);

		for (i = 0; i < fetch->ncolumns; i++)
		{
			Form_pg_attribute attr = TupleDescAttr(SPI_tuptable->tupdesc, i);

			values[i] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, i + 1,
									  &nulls[i]);
			if (!nulls[i])
				values[i] = fetch_copy(values[i], attr);
		}
		MemoryContextSwitchTo(old);
	}
	return n == 1;
}

/*
 * Open fetch->table, locked as the statement would lock it, and find (again)
 * what fetch needs of it.  The table is locked first: that is when
 * invalidations arrive, and one may clear what was found before (an index
 * dropped or rebuilt); find again until nothing clears it while finding.
 * With the table locked, no index of it can be dropped until this
 * transaction ends.
 */
static Relation
fetch_open(HcCall *call, HcFetch *fetch)
{
	Oid			relid = fetch->relid;
	Relation	heap;

	if (!OidIsValid(relid) || fetch->schema != call->schema)
	{
		fetch_register(fetch);
		relid = get_relname_relid(fetch->table, call->schema);
	}
	if (!OidIsValid(relid))
		elog(ERROR, "relation %s of holdcommit is missing", fetch->table);
	heap = table_open(relid, FETCH_LOCKS(fetch) ? RowShareLock : AccessShareLock);
	while (fetch->relid != relid || fetch->schema != call->schema)
	{
		fetch->relid = relid;
		fetch->schema = call->schema;
		fetch_find(fetch, heap);
	}
	return heap;
}

/*
 * Lock the row found in slot as ExecLockRows does: wait or skip, then lock
 * its newest version, which must still have the key asked for (skey).
 * HC_FETCH_SKIP_SEEN: that version itself, or nothing.  false if the row is
 * gone or skipped.
 */
static bool
fetch_lock(HcFetch *fetch, Relation heap, TupleTableSlot *slot, ScanKey skey, int nkeys)
{
	ItemPointerData tid = slot->tts_tid;
	TM_FailureData tmfd;
	TM_Result	result;
	bool		isnull;
	Datum		now_key;

	ExecClearTuple(slot);
	if (fetch->lock == HC_FETCH_SKIP_SEEN)
		return table_tuple_lock(heap, &tid, GetActiveSnapshot(), slot, GetCurrentCommandId(true),
								LockTupleNoKeyExclusive, LockWaitSkip, 0, &tmfd) == TM_Ok;
	result = table_tuple_lock(heap, &tid, GetActiveSnapshot(), slot,
							  GetCurrentCommandId(true), LockTupleNoKeyExclusive,
							  fetch->lock == HC_FETCH_WAIT ? LockWaitBlock : LockWaitSkip,
							  fetch->lock == HC_FETCH_SKIP_NOWAIT ? TUPLE_LOCK_FLAG_FIND_LAST_VERSION :
							  TUPLE_LOCK_FLAG_LOCK_UPDATE_IN_PROGRESS |
							  TUPLE_LOCK_FLAG_FIND_LAST_VERSION, &tmfd);
	if (result == TM_Deleted || result == TM_SelfModified ||
		(result == TM_WouldBlock && fetch->lock != HC_FETCH_WAIT))
		return false;
	if (result != TM_Ok)
		elog(ERROR, "could not lock a row of %s: unexpected result %d", fetch->table, (int) result);
	if (!tmfd.traversed)
		return true;
	/* A newer version: is it still the row asked for (EvalPlanQual's re-check)? */
	for (int i = 0; i < nkeys; i++)
	{
		now_key = slot_getattr(slot, i == 0 ? fetch->keyattnum : fetch->partattnum, &isnull);
		if (isnull || !DatumGetBool(FunctionCall2Coll(&skey[i].sk_func, skey[i].sk_collation,
													  now_key, skey[i].sk_argument)))
			return false;
	}
	return true;
}

/*
 * Does this transaction hold the heap row version in slot: did it insert
 * it (or the update that made it), or does its xmax (or a member of its
 * multixact) name this transaction?
 */
static bool
fetch_mine(TupleTableSlot *slot)
{
	BufferHeapTupleTableSlot *bslot = (BufferHeapTupleTableSlot *) slot;
	HeapTupleHeader tuple;
	uint16		infomask;
	TransactionId xmax;
	bool		mine;
	MultiXactMember *members;
	int			n;

	Assert(TTS_IS_BUFFERTUPLE(slot));
	LockBuffer(bslot->buffer, BUFFER_LOCK_SHARE);
	tuple = bslot->base.tuple->t_data;
	infomask = tuple->t_infomask;
	xmax = HeapTupleHeaderGetRawXmax(tuple);
	mine = TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetRawXmin(tuple));
	LockBuffer(bslot->buffer, BUFFER_LOCK_UNLOCK);
	if (mine || (infomask & HEAP_XMAX_INVALID))
		return mine;
	if (!(infomask & HEAP_XMAX_IS_MULTI))
		return TransactionIdIsCurrentTransactionId(xmax);
	n = GetMultiXactIdMembers(xmax, &members, false, HEAP_XMAX_IS_LOCKED_ONLY(infomask));
	for (int i = 0; i < n; i++)
		mine |= TransactionIdIsCurrentTransactionId(members[i].xid);
	if (n > 0)
		pfree(members);
	return mine;
}

/* The columns of the row in slot, copied into the caller's memory. */
static void
fetch_columns(HcCall *call, HcFetch *fetch, TupleTableSlot *slot, Datum *values, bool *nulls)
{
	MemoryContext old = MemoryContextSwitchTo(call->outer);
	int			i;

	for (i = 0; i < fetch->ncolumns; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(slot->tts_tupleDescriptor, fetch->attnums[i] - 1);

		/* Detoasted while the snapshot is still pushed. */
		values[i] = slot_getattr(slot, fetch->attnums[i], &nulls[i]);
		if (!nulls[i])
			values[i] = fetch_copy(values[i], attr);
	}
	MemoryContextSwitchTo(old);
}

/*
 * Has the btree never had an entry (no root)?  Then no scan can find
 * anything.  Never stale: every row, committed or not, has its entry (NULL
 * keys too), and a btree keeps its root once it has one; only a new
 * relfilenode (TRUNCATE, REINDEX: under a lock that conflicts with ours)
 * starts without.  Its metapage alone, not the table's size (an lseek).
 */
static bool
fetch_index_empty(Relation index)
{
	Buffer		meta = ReadBuffer(index, BTREE_METAPAGE);
	bool		empty;

	LockBuffer(meta, BUFFER_LOCK_SHARE);
	empty = BTPageGetMeta(BufferGetPage(meta))->btm_root == P_NONE;
	UnlockReleaseBuffer(meta);
	return empty;
}

/*
 * Look the row of fetch->table whose key column equals key (and part column,
 * part) up, locked as fetch->lock says (see the top of this file); with
 * HC_FETCH_SKIP_SEEN, only if admit(values, nulls, arg) says so.  Copy its
 * columns into values and nulls in the caller's memory.  false if there is
 * no such row, or it was skipped (or not admitted).
 */
static bool
fetch_row(HcCall *call, HcFetch *fetch, const char *key, int16 part, HcAdmit admit, void *arg,
		  Datum *values, bool *nulls, ItemPointer tid)
{
	Relation	heap;
	Relation	index;
	IndexScanDesc scan;
	TupleTableSlot *slot;
	ScanKeyData skey[2];
	int			nkeys = fetch->part != NULL ? 2 : 1;
	bool		found;

	if (FETCH_LOCKS(fetch))
	{
		/* What SELECT ... FOR NO KEY UPDATE refuses, so does this. */
		PreventCommandIfReadOnly("SELECT FOR NO KEY UPDATE");
		if (IsolationUsesXactSnapshot())
			elog(ERROR, "a holdcommit row lock needs READ COMMITTED");
	}
	if (tid != NULL)
		ItemPointerSetInvalid(tid);
	heap = fetch_open(call, fetch);
	if (!OidIsValid(fetch->indexid))
	{
		table_close(heap, NoLock);
		/* A statement cannot look before it locks, nor see whose: no row, the caller goes on without it. */
		if (fetch->lock == HC_FETCH_SKIP_SEEN || fetch->lock == HC_FETCH_MINE)
			return false;
		return fetch_statement(call, fetch, key, part, values, nulls);
	}
	index = index_open(fetch->indexid, AccessShareLock);
	if (fetch->maybe_empty && fetch_index_empty(index))
	{
		index_close(index, NoLock);
		table_close(heap, NoLock);
		return false;
	}

	/* As SPI does for each statement: see what this call has written so far. */
	CommandCounterIncrement();
	PushActiveSnapshot(GetTransactionSnapshot());
	ScanKeyEntryInitialize(&skey[0], 0, 1, BTEqualStrategyNumber, InvalidOid,
						   index->rd_indcollation[0], F_TEXTEQ, HC_TEXT(key));
	if (nkeys == 2)
		ScanKeyEntryInitialize(&skey[1], 0, 2, BTEqualStrategyNumber, InvalidOid,
							   InvalidOid, F_INT2EQ, Int16GetDatum(part));
	slot = table_slot_create(heap, NULL);
	scan = hc_index_beginscan(heap, index, GetActiveSnapshot(), nkeys, 0);
	index_rescan(scan, skey, nkeys, NULL, 0);
	found = index_getnext_slot(scan, ForwardScanDirection, slot);
	index_endscan(scan);
	if (found && fetch->lock == HC_FETCH_SKIP_SEEN)
	{
		fetch_columns(call, fetch, slot, values, nulls);
		found = admit(values, nulls, arg) && fetch_lock(fetch, heap, slot, skey, nkeys);
	}
	else if (found && fetch->lock == HC_FETCH_MINE)
		found = fetch_mine(slot);
	else
	{
		if (found && fetch->lock != HC_FETCH_READ)
			found = fetch_lock(fetch, heap, slot, skey, nkeys);
		if (found)
			fetch_columns(call, fetch, slot, values, nulls);
	}
	/* The version locked: the one a write (write.c) replaces. */
	if (found && tid != NULL && FETCH_LOCKS(fetch))
		*tid = slot->tts_tid;
	ExecDropSingleTupleTableSlot(slot);
	PopActiveSnapshot();
	index_close(index, NoLock);
	table_close(heap, NoLock);
	return found;
}

bool
hc_fetch(HcCall *call, HcFetch *fetch, const char *key, Datum *values, bool *nulls)
{
	Assert(fetch->part == NULL && fetch->lock != HC_FETCH_SKIP_SEEN);
	return fetch_row(call, fetch, key, 0, NULL, NULL, values, nulls, NULL);
}

/*
 * The same, and the TID of the row locked, for an update of it by write.c;
 * an invalid TID if the read ran as a statement (then so must the write).
 */
bool
hc_fetch_tid(HcCall *call, HcFetch *fetch, const char *key, Datum *values, bool *nulls,
			 ItemPointer tid)
{
	Assert(fetch->part == NULL && fetch->lock != HC_FETCH_READ &&
		   fetch->lock != HC_FETCH_SKIP_SEEN);
	return fetch_row(call, fetch, key, 0, NULL, NULL, values, nulls, tid);
}

/* The same for a fetch by key and part. */
bool
hc_fetch_part(HcCall *call, HcFetch *fetch, const char *key, int16 part, Datum *values, bool *nulls)
{
	Assert(fetch->part != NULL && fetch->lock != HC_FETCH_SKIP_SEEN);
	return fetch_row(call, fetch, key, part, NULL, NULL, values, nulls, NULL);
}

bool
hc_fetch_part_tid(HcCall *call, HcFetch *fetch, const char *key, int16 part, Datum *values,
				  bool *nulls, ItemPointer tid)
{
	Assert(fetch->part != NULL && fetch->lock != HC_FETCH_READ &&
		   fetch->lock != HC_FETCH_SKIP_SEEN);
	return fetch_row(call, fetch, key, part, NULL, NULL, values, nulls, tid);
}

/*
 * The same, HC_FETCH_SKIP_SEEN: locked only if admit says so of what it
 * read; with the TID of the version locked (as hc_fetch_tid).
 */
bool
hc_fetch_part_if(HcCall *call, HcFetch *fetch, const char *key, int16 part, HcAdmit admit,
				 void *arg, Datum *values, bool *nulls, ItemPointer tid)
{
	Assert(fetch->part != NULL && fetch->lock == HC_FETCH_SKIP_SEEN);
	return fetch_row(call, fetch, key, part, admit, arg, values, nulls, tid);
}

/*
 * Is the row version at tid of table being changed by another transaction
 * in flight (an update or a delete it has not committed)?  A look without
 * a lock, for a caller that skips such a row anyway and would otherwise
 * find out by trying to lock it.  A row only locked, or changed since, is
 * not: the caller's lock says.
 */
bool
hc_fetch_changing(HcCall *call, const char *table, ItemPointer tid)
{
	Relation	heap = table_open(get_relname_relid(call->scope == NULL ? table :
													hc_placement->scope_relation(call->scope, table,
																				 table),
													call->schema), AccessShareLock);
	TupleTableSlot *slot = table_slot_create(heap, NULL);
	SnapshotData dirty;
	bool		found;

	InitDirtySnapshot(dirty);
	found = table_tuple_fetch_row_version(heap, tid, &dirty, slot);
	ExecDropSingleTupleTableSlot(slot);
	table_close(heap, AccessShareLock);
	return found && TransactionIdIsValid(dirty.xmax);
}
