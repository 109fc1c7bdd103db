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
 * named, and must be valid: a read of an index that a failed CREATE INDEX
 * CONCURRENTLY left behind would miss rows.
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
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "compat.h"
#include "core/scan.h"
#include "core/statement.h"

/* Open the read of index's rows (of table) whose first column is key, a text. */
void
hc_scan_open(HcCall *call, HcScan *s, const char *table, const char *index, const char *key)
{
	Oid			relid = get_relname_relid(table, call->schema);
	Oid			indexid = get_relname_relid(index, call->schema);
	ScanKeyData skey;

	if (!OidIsValid(relid) || !OidIsValid(indexid))
		elog(ERROR, "index %s of holdcommit is missing", index);
	s->heap = table_open(relid, AccessShareLock);
	s->index = index_open(indexid, AccessShareLock);
	if (!s->index->rd_index->indisvalid || s->index->rd_index->indrelid != relid)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("index %s of holdcommit is not valid", index),
				 errhint("REINDEX INDEX %s.", index)));
	/* As SPI does for each statement: see what this call has written so far. */
	CommandCounterIncrement();
	s->snapshot = RegisterSnapshot(GetTransactionSnapshot());
	ScanKeyEntryInitialize(&skey, 0, 1, BTEqualStrategyNumber, InvalidOid,
						   s->index->rd_indcollation[0], F_TEXTEQ, HC_TEXT(key));
	s->slot = table_slot_create(s->heap, NULL);
	s->scan = hc_index_beginscan(s->heap, s->index, s->snapshot, 1, 0);
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

/* The next row into s->slot; false after the last. */
bool
hc_scan_next(HcScan *s)
{
	return index_getnext_slot(s->scan, ForwardScanDirection, s->slot);
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
