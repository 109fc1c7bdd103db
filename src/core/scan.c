/*
 * scan.c
 *		The rows of one key of an index, in the index's order, read a row
 *		at a time without the executor.
 *
 * For a read that stops once it has what it needs: a statement's plan is
 * the planner's, which may sort every row of the key first (with
 * statistics, after a re-plan), where this reads the index in its order
 * whatever the statistics.  The rows are those of one snapshot, taken when
 * the read opens (after what the call has written so far); statements,
 * locks and subtransactions may come between two rows.  The index is
 * named, and must be what the caller counts on: a valid btree on the
 * columns it names, in their order (an index that a failed CREATE INDEX
 * CONCURRENTLY left behind would miss rows; one made again descending
 * would give them in another order).
 *
 * Review on a new major: index_beginscan's arguments (compat.h),
 * index_getnext_slot, and the snapshot registered for the read's life.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_am_d.h"
#include "catalog/pg_index.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "compat.h"
#include "core/placement.h"
#include "core/scan.h"
#include "core/statement.h"

/*
 * Is index a valid btree of relid whose first keys are the columns named,
 * ascending, nulls last, and the first in the collation of its column?
 * The order of the read is what its caller counts on.
 */
static bool
scan_index_is(Relation index, Relation heap, const char *const *keys, int nkeys)
{
	Form_pg_index form = index->rd_index;
	Oid			relid = RelationGetRelid(heap);
	int			i;

	if (!form->indisvalid || form->indrelid != relid || index->rd_rel->relam != BTREE_AM_OID ||
		form->indnkeyatts < nkeys || form->indkey.values[0] <= 0 ||
		index->rd_indcollation[0] !=
		TupleDescAttr(RelationGetDescr(heap), form->indkey.values[0] - 1)->attcollation)
		return false;
	for (i = 0; i < nkeys; i++)
		if (form->indkey.values[i] != get_attnum(relid, keys[i]) ||
			(index->rd_indoption[i] & (INDOPTION_DESC | INDOPTION_NULLS_FIRST)) != 0)
			return false;
	return true;
}

/*
 * Open the read of index's rows (of table) whose first key, keys[0], is
 * key, a text; the index's first keys must be keys[0 .. nkeys - 1].
 */
void
hc_scan_open(HcCall *call, HcScan *s, const char *table, const char *index,
			 const char *const *keys, int nkeys, const char *key)
{
	Oid			relid;
	Oid			indexid;
	ScanKeyData skey;

	/* On Citus, the scope's shard of the table and its index. */
	if (call->scope != NULL)
	{
		index = hc_placement->scope_relation(call->scope, table, index);
		table = hc_placement->scope_relation(call->scope, table, table);
	}
	relid = get_relname_relid(table, call->schema);
	indexid = get_relname_relid(index, call->schema);

	if (!OidIsValid(relid) || !OidIsValid(indexid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("index %s of holdcommit is missing", index),
				 errhint("ALTER EXTENSION holdcommit UPDATE, or make the extension again.")));
	s->heap = table_open(relid, AccessShareLock);
	s->index = index_open(indexid, AccessShareLock);
	if (!scan_index_is(s->index, s->heap, keys, nkeys))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("index %s of holdcommit is not what it was made as", index),
				 errhint("Make it again as the extension's script makes it, or REINDEX it if it is not valid.")));
	/* As SPI does for each statement: see what this call has written so far. */
	CommandCounterIncrement();
	s->snapshot = RegisterSnapshot(GetTransactionSnapshot());
	ScanKeyEntryInitialize(&skey, 0, 1, BTEqualStrategyNumber, InvalidOid,
						   s->index->rd_indcollation[0], F_TEXTEQ, HC_TEXT(key));
	s->slot = table_slot_create(s->heap, NULL);
	s->scan = hc_index_beginscan(s->heap, s->index, s->snapshot, 1, 0);
	s->done = false;
	index_rescan(s->scan, &skey, 1, NULL, 0);
}

/* The number of a column of the table, for slot_getattr(s->slot, ...). */
AttrNumber
hc_scan_column(HcScan *s, const char *column)
{
	AttrNumber	attnum = get_attnum(RelationGetRelid(s->heap), column);

	if (attnum == InvalidAttrNumber)
		elog(ERROR, "column %s of holdcommit is missing", column);
	return attnum;
}

/* The next row into s->slot; false after the last, and from then on. */
bool
hc_scan_next(HcScan *s)
{
	/* A read of many rows that the call skips can be cancelled. */
	CHECK_FOR_INTERRUPTS();
	s->done = s->done || !index_getnext_slot(s->scan, ForwardScanDirection, s->slot);
	return !s->done;
}

void
hc_scan_close(HcScan *s)
{
	index_endscan(s->scan);
	ExecDropSingleTupleTableSlot(s->slot);
	UnregisterSnapshot(s->snapshot);
	index_close(s->index, NoLock);
	table_close(s->heap, NoLock);
}
