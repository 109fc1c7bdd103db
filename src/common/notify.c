/*
 * notify.c
 *		With holdcommit.notify on, a NOTIFY on channel "holdcommit" whenever
 *		an asset or a product's units become AVAILABLE or SOLD, so that a
 *		listing page can refresh.  The payload is JSON:
 *		{"kind": "asset", "id": "LOT-17", "status": "AVAILABLE"}.
 *
 * NOTIFY is delivered at commit, only if the transaction commits, and it
 * serializes the commits of every transaction that notifies (a global lock
 * on the notification queue): README.md gives its cost on hold throughput.
 */
#include "postgres.h"

#include "commands/async.h"
#include "lib/stringinfo.h"
#include "utils/json.h"

#include "common/notify.h"
#include "common/settings.h"

/* Queue the notification if holdcommit.notify is on. */
void
hc_notify(const char *kind, const char *id, const char *status)
{
	StringInfoData payload;

	if (!hc_notify_enabled)
		return;
	initStringInfo(&payload);
	appendStringInfoString(&payload, "{\"kind\": ");
	escape_json(&payload, kind);
	appendStringInfoString(&payload, ", \"id\": ");
	escape_json(&payload, id);
	appendStringInfoString(&payload, ", \"status\": ");
	escape_json(&payload, status);
	appendStringInfoChar(&payload, '}');
	Async_Notify(HC_NOTIFY_CHANNEL, payload.data);
	pfree(payload.data);
}
