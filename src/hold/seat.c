/*
 * seat.c
 *		One asset's part of a hold, which hc_hold's calls (hold.c) and a
 *		group's (group.c) share: the asset read and locked, and each change
 *		of one seat, without the executor (direct.c) where it can, else as
 *		a statement.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

#include "common/ledger.h"
#include "common/notify.h"
#include "core/fetch.h"
#include "hold/hold.h"

/*
 * What a hold looks at first, after the key: the asset, read without a
 * statement.  A refusal of an asset that is sold or held ends here.
 */
HcFetch		hc_hold_peek_asset = {"hc_assets", "id", HC_FETCH_READ, 2, {"status", "hold_expires_at"}};

/*
 * Then the asset locked FOR NO KEY UPDATE SKIP LOCKED: a hold never waits
 * for another call in flight.  Locked, the newest version says whether the
 * asset can still be taken.
 */
HcFetch		hc_hold_take_asset = {"hc_assets", "id", HC_FETCH_SKIP, 4,
{"status", "current_reservation_id", "hold_expires_at", "version"}};

/* The asset locked FOR NO KEY UPDATE, waiting: a call on a reservation. */
HcFetch		hc_hold_lock_asset = {"hc_assets", "id", HC_FETCH_WAIT, 4,
{"status", "current_reservation_id", "hold_expires_at", "version"}};

/* Has another buyer held the asset since this reservation was made? */
static HcStatement taken_since = {
	"SELECT 1 FROM hc_reservations"
	" WHERE asset_id" EQ ":asset_id" " AND id" NE ":reservation_id"
	"   AND created_at" GE ":created_at" " LIMIT 1",
	{{"asset_id", TEXTOID}, {"reservation_id", TEXTOID}, {"created_at", TIMESTAMPTZOID}}
};

/*
 * Sell the asset to a reservation that is still :status (HELD, or EXPIRED
 * for a late commit).  :reserved_delta is -1 if the hold still counted.
 * Returns the reservation as it was.
 */
static HcStatement sell_asset = {
	"WITH a AS ("
	"  UPDATE hc_assets"
	"     SET status = 'SOLD', hold_expires_at = NULL, current_reservation_id = :reservation_id,"
	"         version = version" PLUS "1, updated_at = :now"
	"   WHERE id" EQ ":asset_id" " RETURNING version),"
	" r AS ("
	"  UPDATE hc_reservations SET status = 'COMMITTED', ended_at = :now"
	"   WHERE asset_id" EQ ":asset_id" " AND id" EQ ":reservation_id"
	"     AND status" EQ ":status" " RETURNING buyer_id, expires_at, created_at),"
	" logged AS ("
	HC_LEDGER_ROWS("'asset'", ":asset_id", "a.version", "'commit'", "'call'", ":reservation_id",
				   "r.buyer_id", ":reserved_delta", "-1", "NULL") " FROM a, r)"
	" SELECT r.buyer_id, r.expires_at, r.created_at FROM a, r",
	{{"asset_id", TEXTOID}, {"reservation_id", TEXTOID}, {"status", TEXTOID},
	 {"reserved_delta", INT4OID}, HC_LEDGER_PARAMS}
};

/*
 * Give the asset back from a HELD reservation, which ends as :status
 * (RELEASED, or EXPIRED), with the ledger's :event from :source.  Returns
 * the reservation as it was.
 */
static HcStatement free_asset = {
	"WITH a AS ("
	"  UPDATE hc_assets"
	"     SET status = 'AVAILABLE', hold_expires_at = NULL, current_reservation_id = NULL,"
	"         version = version" PLUS "1, updated_at = :now"
	"   WHERE id" EQ ":asset_id" " AND status" EQ "'HELD'"
	"     AND current_reservation_id" EQ ":reservation_id" " RETURNING version),"
	" r AS ("
	"  UPDATE hc_reservations SET status = :status, ended_at = :now"
	"   WHERE asset_id" EQ ":asset_id" " AND id" EQ ":reservation_id"
	"     AND status" EQ "'HELD' RETURNING buyer_id, expires_at, created_at),"
	" logged AS ("
	HC_LEDGER_ROWS("'asset'", ":asset_id", "a.version", ":event", ":source", ":reservation_id",
				   "r.buyer_id", "-1", "0", "NULL") " FROM a, r)"
	" SELECT r.buyer_id, r.expires_at, r.created_at FROM a, r",
	{{"asset_id", TEXTOID}, {"reservation_id", TEXTOID}, {"status", TEXTOID},
	 {"event", TEXTOID}, {"source", TEXTOID}, HC_LEDGER_PARAMS}
};

/* Move a live hold's end to :until, with both ends in the ledger's :detail. */
static HcStatement extend_hold = {
	"WITH r AS ("
	"  UPDATE hc_reservations SET expires_at = :until"
	"   WHERE asset_id" EQ ":asset_id" " AND id" EQ ":reservation_id"
	"     AND status" EQ "'HELD' RETURNING buyer_id),"
	" a AS ("
	"  UPDATE hc_assets"
	"     SET hold_expires_at = :until, version = version" PLUS "1, updated_at = :now"
	"   WHERE id" EQ ":asset_id" " AND status" EQ "'HELD'"
	"     AND current_reservation_id" EQ ":reservation_id" " RETURNING version)"
	HC_LEDGER_ROWS("'asset'", ":asset_id", "a.version", "'extend'", "'call'", ":reservation_id",
				   "r.buyer_id", "0", "0", ":detail")
	" FROM r, a RETURNING seq",
	{{"asset_id", TEXTOID}, {"reservation_id", TEXTOID}, {"until", TIMESTAMPTZOID},
	 {"detail", TEXTOID}, HC_LEDGER_PARAMS}
};

/* The columns of the hc_reservation row that the functions return. */
void
hc_hold_values(const HoldReservation *r, Datum *values, bool *nulls)
{
	memset(nulls, 0, 7 * sizeof(bool));
	values[0] = CStringGetTextDatum(r->id);
	values[1] = CStringGetTextDatum(r->asset_id);
	values[2] = CStringGetTextDatum(r->buyer_id);
	values[3] = CStringGetTextDatum(r->status);
	values[4] = TimestampTzGetDatum(r->expires_at);
	values[5] = TimestampTzGetDatum(r->created_at);
	values[6] = BoolGetDatum(r->replayed);
}

/* Can a hold take an asset in this state (sold or held until until)? */
bool
hc_hold_can_take(HcCall *call, const char *status, TimestampTz until)
{
	return strcmp(status, "AVAILABLE") == 0 ||
		(strcmp(status, "HELD") == 0 && until <= call->now);
}

/* The reservation as sell_asset or free_asset returned it, before it ended. */
static void
hold_written(HcCall *call, HoldReservation *r)
{
	r->buyer_id = hc_text(call, 0, "buyer_id");
	r->expires_at = hc_timestamptz(0, "expires_at");
	r->created_at = hc_timestamptz(0, "created_at");
}

/*
 * End a HELD reservation as status (RELEASED or EXPIRED), giving its asset
 * back, with the ledger event from source.
 */
void
hc_hold_free(HcCall *call, HoldReservation *r, const char *status, const char *event,
			 const char *source)
{
	HcArgs		args;

	if (!hc_hold_write_free(call, r, status, event, source))
	{
		hc_args(&args, &free_asset);
		hc_bind_text(&args, "asset_id", r->asset_id);
		hc_bind_text(&args, "reservation_id", r->id);
		hc_bind_text(&args, "status", status);
		hc_bind_text(&args, "event", event);
		hc_bind_text(&args, "source", source);
		if (hc_run(call, &args, SPI_OK_SELECT) != 1)
			elog(ERROR, "held reservation \"%s\" does not hold asset \"%s\"", r->id, r->asset_id);
		hold_written(call, r);
	}
	r->status = pstrdup(status);
	hc_notify("asset", r->asset_id, "AVAILABLE");
}

/* Sell r's asset to r, which is still r->status: HELD, or EXPIRED for a late commit. */
void
hc_hold_sell(HcCall *call, HoldReservation *r)
{
	int32		reserved_delta = strcmp(r->status, "HELD") == 0 ? -1 : 0;
	HcArgs		args;

	if (!hc_hold_write_sell(call, r, reserved_delta))
	{
		hc_args(&args, &sell_asset);
		hc_bind_text(&args, "asset_id", r->asset_id);
		hc_bind_text(&args, "reservation_id", r->id);
		hc_bind_text(&args, "status", r->status);
		hc_bind(&args, "reserved_delta", Int32GetDatum(reserved_delta));
		if (hc_run(call, &args, SPI_OK_SELECT) != 1)
			elog(ERROR, "reservation \"%s\" could not become COMMITTED", r->id);
		hold_written(call, r);
	}
	r->status = "COMMITTED";
	hc_notify("asset", r->asset_id, "SOLD");
}

/*
 * Has another buyer taken r's asset since r was made (a late commit's
 * question)?
 */
bool
hc_hold_taken_since(HcCall *call, const HoldReservation *r)
{
	HcArgs		args;

	if (strcmp(r->asset_status, "AVAILABLE") != 0)
		return true;
	hc_args(&args, &taken_since);
	hc_bind_text(&args, "asset_id", r->asset_id);
	hc_bind_text(&args, "reservation_id", r->id);
	hc_bind(&args, "created_at", TimestampTzGetDatum(r->created_at));
	return hc_run(call, &args, SPI_OK_SELECT) > 0;
}

/* Move the end of r, a live hold, to until (later than its end). */
void
hc_hold_move_end(HcCall *call, HoldReservation *r, TimestampTz until)
{
	HcArgs		args;

	/* timestamptz_to_str() returns a static buffer: copy the first. */
	char	   *detail = psprintf("expires_at %s -> %s",
								  pstrdup(timestamptz_to_str(r->expires_at)),
								  timestamptz_to_str(until));

	if (!hc_hold_write_extend(call, r, until, detail))
	{
		hc_args(&args, &extend_hold);
		hc_bind_text(&args, "asset_id", r->asset_id);
		hc_bind_text(&args, "reservation_id", r->id);
		hc_bind(&args, "until", TimestampTzGetDatum(until));
		hc_bind_text(&args, "detail", detail);
		if (hc_run(call, &args, SPI_OK_INSERT_RETURNING) != 1)
			elog(ERROR, "held reservation \"%s\" does not hold asset \"%s\"", r->id, r->asset_id);
	}
	r->expires_at = until;
}
