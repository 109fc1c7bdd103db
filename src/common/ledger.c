/*
 * ledger.c
 *		hc_ledger: one append-only row per state change.  Nobody but the
 *		extension's owner may write the table, so it stays append-only
 *		without triggers.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/json.h"

#include "common/ledger.h"

static HcStatement append_entry = {
	HC_LEDGER_ROWS(":kind", ":entity_id", ":seq", ":event", ":source", ":reservation_id",
				   ":buyer_id", ":reserved_delta", ":stock_delta", ":detail"),
	{{"kind", TEXTOID}, {"entity_id", TEXTOID}, {"seq", INT8OID}, {"event", TEXTOID},
	 {"source", TEXTOID}, {"reservation_id", TEXTOID}, {"buyer_id", TEXTOID},
	 {"reserved_delta", INT4OID}, {"stock_delta", INT4OID}, {"detail", TEXTOID},
	 HC_LEDGER_PARAMS}
};

/* Append one entry, stamped with the call's clock reading, function and actor. */
void
hc_ledger_append(HcCall *call, const HcLedgerEntry *entry)
{
	HcArgs		args;

	hc_args(&args, &append_entry);
	hc_bind_text(&args, "kind", entry->kind);
	hc_bind_text(&args, "entity_id", entry->entity_id);
	hc_bind(&args, "seq", Int64GetDatum(entry->seq));
	hc_bind_text(&args, "event", entry->event);
	hc_bind_text(&args, "source", entry->source);
	hc_bind_text(&args, "reservation_id", entry->reservation_id);
	hc_bind_text(&args, "buyer_id", entry->buyer_id);
	hc_bind(&args, "reserved_delta", Int32GetDatum(entry->reserved_delta));
	hc_bind(&args, "stock_delta", Int32GetDatum(entry->stock_delta));
	hc_bind_text(&args, "detail", entry->detail);
	hc_run(call, &args, SPI_OK_INSERT);
}

/*
 * The ledger detail of a lease or attempt row, a small JSON object built key
 * by key: hc_detail_init, then hc_detail_text / hc_detail_int, then
 * hc_detail_done for the string.  hc_check() reads owner, token and marker
 * back from it.
 */
void
hc_detail_init(StringInfo buf)
{
	initStringInfo(buf);
	appendStringInfoChar(buf, '{');
}

/* A text member ("key": "value", or null). */
void
hc_detail_text(StringInfo buf, const char *key, const char *value)
{
	if (buf->len > 1)
		appendStringInfoString(buf, ", ");
	escape_json(buf, key);
	appendStringInfoString(buf, ": ");
	if (value == NULL)
		appendStringInfoString(buf, "null");
	else
		escape_json(buf, value);
}

/* An integer member. */
void
hc_detail_int(StringInfo buf, const char *key, int64 value)
{
	if (buf->len > 1)
		appendStringInfoString(buf, ", ");
	escape_json(buf, key);
	appendStringInfo(buf, ": " INT64_FORMAT, value);
}

/* The finished object. */
char *
hc_detail_done(StringInfo buf)
{
	appendStringInfoChar(buf, '}');
	return buf->data;
}
