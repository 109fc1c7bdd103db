/*
 * scan.h
 *		The rows of one key of an index, in the index's order, read a row
 *		at a time without the executor (scan.c).
 */
#ifndef HOLDCOMMIT_SCAN_H
#define HOLDCOMMIT_SCAN_H

#include "access/genam.h"
#include "executor/tuptable.h"

#include "core/call.h"

typedef struct HcScan
{
	Relation	heap;
	Relation	index;
	Snapshot	snapshot;
	IndexScanDesc scan;
	TupleTableSlot *slot;		/* the row read last */
	bool		done;			/* the last row was read */
} HcScan;

extern void hc_scan_open(HcCall *call, HcScan *s, const char *table, const char *index,
						 const char *const *keys, int nkeys, const char *key);
extern AttrNumber hc_scan_column(HcScan *s, const char *column);
extern bool hc_scan_next(HcScan *s);
extern void hc_scan_close(HcScan *s);

#endif							/* HOLDCOMMIT_SCAN_H */
