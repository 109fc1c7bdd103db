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
	"INSERT INTO @extschema@.hc_ledger"
	" (at, kind, entity_id, event, source, function, reservation_id, buyer_id,"
	"  reserved_delta, stock_delta, actor, detail)"
	" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
	12, {TIMESTAMPTZOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID,
	TEXTOID, INT4OID, INT4OID, TEXTOID, TEXTOID}
};

/* Append one entry, stamped with the call's clock reading, function and actor. */
void
hc_ledger_append(HcCall *call, const HcLedgerEntry *entry)
{
	Datum		values[12];
	char		nulls[12];

	memset(nulls, ' ', sizeof(nulls));
	values[0] = TimestampTzGetDatum(call->now);
	values[1] = HC_TEXT(entry->kind);
	values[2] = HC_TEXT(entry->entity_id);
	values[3] = HC_TEXT(entry->event);
	values[4] = HC_TEXT(entry->source);
	values[5] = HC_TEXT(call->function);
	values[6] = HC_TEXT(entry->reservation_id);
	values[7] = HC_TEXT(entry->buyer_id);
	values[8] = Int32GetDatum(entry->reserved_delta);
	values[9] = Int32GetDatum(entry->stock_delta);
	values[10] = HC_TEXT(call->actor);
	values[11] = HC_TEXT(entry->detail);
	if (entry->reservation_id == NULL)
		nulls[6] = 'n';
	if (entry->buyer_id == NULL)
		nulls[7] = 'n';
	if (entry->detail == NULL)
		nulls[11] = 'n';
	hc_run(&append_entry, values, nulls, SPI_OK_INSERT);
}
