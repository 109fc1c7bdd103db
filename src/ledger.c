/*
 * ledger.c
 *		hc_ledger: one append-only row per state change.  Nobody but the
 *		extension's owner may write the table, so it stays append-only
 *		without triggers.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

#include "ledger.h"

static HcStatement append_entry = {
	HC_LEDGER_INSERT
	" VALUES ($2, $3, $13, $1, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
	13, {TIMESTAMPTZOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID,
	TEXTOID, INT4OID, INT4OID, TEXTOID, TEXTOID, INT8OID}
};

/* A nullable text argument: the value, or a null marked as such. */
static void
ledger_text(Datum *values, char *nulls, int i, const char *s)
{
	values[i] = s ? HC_TEXT(s) : (Datum) 0;
	nulls[i] = s ? ' ' : 'n';
}

/* Append one entry, stamped with the call's clock reading, function and actor. */
void
hc_ledger_append(HcCall *call, const HcLedgerEntry *entry)
{
	Datum		values[13];
	char		nulls[13];

	memset(nulls, ' ', sizeof(nulls));
	values[0] = TimestampTzGetDatum(call->now);
	values[1] = HC_TEXT(entry->kind);
	values[2] = HC_TEXT(entry->entity_id);
	values[3] = HC_TEXT(entry->event);
	values[4] = HC_TEXT(entry->source);
	values[5] = HC_TEXT(call->function);
	ledger_text(values, nulls, 6, entry->reservation_id);
	ledger_text(values, nulls, 7, entry->buyer_id);
	values[8] = Int32GetDatum(entry->reserved_delta);
	values[9] = Int32GetDatum(entry->stock_delta);
	values[10] = HC_TEXT(hc_actor(call));
	ledger_text(values, nulls, 11, entry->detail);
	values[12] = Int64GetDatum(entry->seq);
	hc_run(&append_entry, values, nulls, SPI_OK_INSERT);
}
