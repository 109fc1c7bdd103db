/*
 * ledger.h
 *		The ledger (ledger.c).
 */
#ifndef HOLDCOMMIT_LEDGER_H
#define HOLDCOMMIT_LEDGER_H

#include "lib/stringinfo.h"

#include "core/statement.h"
#include "core/write.h"

/*
 * The ledger rows of a statement that writes them itself, one per row of
 * the FROM that follows: each argument is an SQL expression.  seq is the new
 * version of the entity's own row (asset, product, resource), so the order
 * of an entity's changes comes from the entity, not from a global sequence.
 * The statement takes the call's :now, :function and :actor.
 */
#define HC_LEDGER_ROWS(kind, entity_id, seq, event, source, reservation_id, buyer_id, \
					   reserved_delta, stock_delta, detail) \
	" INSERT INTO hc_ledger (kind, entity_id, seq, event, source, reservation_id, buyer_id," \
	" reserved_delta, stock_delta, detail, at, function, actor)" \
	" SELECT " kind ", " entity_id ", " seq ", " event ", " source ", " reservation_id ", " \
	buyer_id ", " reserved_delta ", " stock_delta ", " detail ", :now, :function, :actor"

/*
 * The same with the row's routing id (scope_id, 0.4.0): where one statement
 * writes rows of several routing ids, which the column's default on Citus
 * (the call's, hc_scope_id()) cannot give.
 */
#define HC_LEDGER_ROWS_SCOPED(scope_id, kind, entity_id, seq, event, source, reservation_id, \
							  buyer_id, reserved_delta, stock_delta, detail) \
	" INSERT INTO hc_ledger (kind, entity_id, seq, event, source, reservation_id, buyer_id," \
	" reserved_delta, stock_delta, detail, at, function, actor, scope_id)" \
	" SELECT " kind ", " entity_id ", " seq ", " event ", " source ", " reservation_id ", " \
	buyer_id ", " reserved_delta ", " stock_delta ", " detail ", :now, :function, :actor, " scope_id

/* The parameters HC_LEDGER_ROWS takes from the call. */
#define HC_LEDGER_PARAMS \
	{"now", TIMESTAMPTZOID}, {"function", TEXTOID}, {"actor", TEXTOID}

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

/*
 * The same row written without the executor, by a writer (core/write.h)
 * whose writes include hc_ledger_row.
 */
extern HcWrite hc_ledger_row;
extern void hc_ledger_write(HcWriter *writer, const HcLedgerEntry *entry);

/* The detail of a lease or attempt row: a small JSON object. */
extern void hc_detail_init(StringInfo buf);
extern void hc_detail_text(StringInfo buf, const char *key, const char *value);
extern void hc_detail_int(StringInfo buf, const char *key, int64 value);
extern char *hc_detail_done(StringInfo buf);

#endif							/* HOLDCOMMIT_LEDGER_H */
