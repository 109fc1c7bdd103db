/*
 * ledger.h
 *		The ledger (ledger.c).
 */
#ifndef HOLDCOMMIT_LEDGER_H
#define HOLDCOMMIT_LEDGER_H

#include "call.h"

/*
 * The columns of a ledger row, for statements that write their ledger rows
 * themselves (INSERT ... SELECT from what they changed).  seq is the new
 * version of the entity's own row (asset, product, resource), so the order
 * of an entity's changes comes from the entity, not from a global sequence.
 */
#define HC_LEDGER_INSERT \
	"INSERT INTO hc_ledger (kind, entity_id, seq, at, event, source, function," \
	" reservation_id, buyer_id, reserved_delta, stock_delta, actor, detail)"

/* One row of the ledger, for hc_ledger_append(). */
typedef struct HcLedgerEntry
{
	const char *kind;			/* asset, product or resource */
	const char *entity_id;
	int64		seq;			/* the entity's version after this change */
	const char *event;			/* hold, reclaim, commit, ... */
	const char *source;			/* call, reclaim, sweep or adjustment */
	const char *reservation_id;
	const char *buyer_id;
	int32		reserved_delta;
	int32		stock_delta;
	const char *detail;
} HcLedgerEntry;

extern void hc_ledger_append(HcCall *call, const HcLedgerEntry *entry);

#endif							/* HOLDCOMMIT_LEDGER_H */
