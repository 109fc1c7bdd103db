/*
 * ledger.c
 *		hc_ledger: one append-only row per state change.  Nobody but the
 *		extension's owner may write the table, so it stays append-only
 *		without triggers.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"
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
 * The ledger row written without the executor (core/write.c), by a writer
 * whose writes include it: every column set, as append_entry sets them.
 */
HcWrite		hc_ledger_row = {"hc_ledger", HC_WRITE_INSERT, 13,
	{"kind", "entity_id", "seq", "event", "source", "reservation_id", "buyer_id",
	 "reserved_delta", "stock_delta", "detail", "at", "function", "actor"}};

/* A text column's value: NULL for a null. */
static void
ledger_text(Datum *value, bool *null, const char *s)
{
	*null = s == NULL;
	*value = s == NULL ? (Datum) 0 : CStringGetTextDatum(s);
}

/* Append one entry as hc_ledger_append does, through the writer. */
void
hc_ledger_write(HcWriter *writer, const HcLedgerEntry *entry)
{
	HcCall	   *call = writer->call;
	Datum		values[13];
	bool		nulls[13] = {false};

	ledger_text(&values[0], &nulls[0], entry->kind);
	ledger_text(&values[1], &nulls[1], entry->entity_id);
	values[2] = Int64GetDatum(entry->seq);
	ledger_text(&values[3], &nulls[3], entry->event);
	ledger_text(&values[4], &nulls[4], entry->source);
	ledger_text(&values[5], &nulls[5], entry->reservation_id);
	ledger_text(&values[6], &nulls[6], entry->buyer_id);
	values[7] = Int32GetDatum(entry->reserved_delta);
	values[8] = Int32GetDatum(entry->stock_delta);
	ledger_text(&values[9], &nulls[9], entry->detail);
	values[10] = TimestampTzGetDatum(call->now);
	ledger_text(&values[11], &nulls[11], call->function);
	ledger_text(&values[12], &nulls[12], hc_actor(call));
	hc_write_insert(writer, &hc_ledger_row, values, nulls);
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
