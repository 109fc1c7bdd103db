/*
 * ledger.h
 *		The ledger (ledger.c).
 */
#ifndef HOLDCOMMIT_LEDGER_H
#define HOLDCOMMIT_LEDGER_H

#include "call.h"

/* The ledger (ledger.c): one row per state change. */
typedef struct HcLedgerEntry
{
	const char *kind;			/* asset, product or resource */
	const char *entity_id;
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
