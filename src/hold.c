/*
 * hold.c
 *		Unique assets (quantity 1): hc_asset_add, hc_hold, hc_commit,
 *		hc_release, hc_extend.
 *
 * An asset is AVAILABLE, HELD by one reservation until hold_expires_at, or
 * SOLD.  Every call that changes a reservation first locks its asset row, so
 * the asset row serialises everything that happens to the asset; locks are
 * always taken asset first, then reservation.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "utils/builtins.h"

#include "call.h"
#include "errors.h"
#include "holdcommit.h"
#include "idempotency.h"
#include "ids.h"
#include "ledger.h"
#include "validate.h"

PG_FUNCTION_INFO_V1(hc_asset_add);
PG_FUNCTION_INFO_V1(hc_hold);
PG_FUNCTION_INFO_V1(hc_commit);
PG_FUNCTION_INFO_V1(hc_release);
PG_FUNCTION_INFO_V1(hc_extend);

/* A reservation of an asset, as the functions return it (hc_reservation). */
typedef struct HoldReservation
{
	char	   *id;
	char	   *asset_id;
	char	   *buyer_id;
	char	   *status;
	TimestampTz expires_at;
	TimestampTz created_at;
	bool		replayed;
	/* the asset, as locked */
	char	   *asset_status;
	char	   *asset_reservation_id;
} HoldReservation;

static HcStatement add_asset = {
	"INSERT INTO hc_assets (id, name, created_at, updated_at)"
	" VALUES ($1, $2, $3, $3) ON CONFLICT DO NOTHING RETURNING *",
	3, {TEXTOID, TEXTOID, TIMESTAMPTZOID}
};

/*
 * The hold itself, one atomic conditional step: take the asset if it is
 * AVAILABLE or its hold has expired, and skip (never wait for) a row that
 * another transaction has locked.  Returns what the asset was before.
 */
static HcStatement take_asset = {
	"WITH target AS ("
	"  SELECT id, status, current_reservation_id"
	"    FROM hc_assets"
	"   WHERE id OPERATOR(pg_catalog.=) $1"
	"     AND (status OPERATOR(pg_catalog.=) 'AVAILABLE'"
	"          OR (status OPERATOR(pg_catalog.=) 'HELD'"
	"              AND hold_expires_at OPERATOR(pg_catalog.<=) $3))"
	"     FOR NO KEY UPDATE SKIP LOCKED)"
	" UPDATE hc_assets a"
	"    SET status = 'HELD', hold_expires_at = $4, current_reservation_id = $2,"
	"        version = a.version OPERATOR(pg_catalog.+) 1, updated_at = $3"
	"   FROM target t"
	"  WHERE a.id OPERATOR(pg_catalog.=) t.id"
	" RETURNING t.status, t.current_reservation_id",
	4, {TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID}
};

/* Why a hold failed: read the asset without locking it. */
static HcStatement peek_asset = {
	"SELECT status, hold_expires_at FROM hc_assets"
	" WHERE id OPERATOR(pg_catalog.=) $1",
	1, {TEXTOID}
};

static HcStatement insert_reservation = {
	"INSERT INTO hc_reservations"
	" (id, asset_id, buyer_id, idempotency_key, status, expires_at, created_at)"
	" VALUES ($1, $2, $3, $4, 'HELD', $5, $6)",
	6, {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID}
};

/* End a reservation that is still HELD; returns its buyer. */
static HcStatement end_reservation = {
	"UPDATE hc_reservations SET status = $3, ended_at = $4"
	" WHERE asset_id OPERATOR(pg_catalog.=) $1 AND id OPERATOR(pg_catalog.=) $2"
	"   AND status OPERATOR(pg_catalog.=) ANY ($5)"
	" RETURNING buyer_id",
	5, {TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID, TEXTARRAYOID}
};

static HcStatement find_reservation = {
	"SELECT asset_id FROM hc_reservations WHERE id OPERATOR(pg_catalog.=) $1",
	1, {TEXTOID}
};

static HcStatement lock_asset = {
	"SELECT status, current_reservation_id FROM hc_assets"
	" WHERE id OPERATOR(pg_catalog.=) $1 FOR NO KEY UPDATE",
	1, {TEXTOID}
};

static HcStatement read_reservation = {
	"SELECT buyer_id, status, expires_at, created_at FROM hc_reservations"
	" WHERE asset_id OPERATOR(pg_catalog.=) $1 AND id OPERATOR(pg_catalog.=) $2",
	2, {TEXTOID, TEXTOID}
};

/* Has another buyer held the asset since this reservation was made? */
static HcStatement taken_since = {
	"SELECT 1 FROM hc_reservations"
	" WHERE asset_id OPERATOR(pg_catalog.=) $1 AND id OPERATOR(pg_catalog.<>) $2"
	"   AND created_at OPERATOR(pg_catalog.>=) $3 LIMIT 1",
	3, {TEXTOID, TEXTOID, TIMESTAMPTZOID}
};

static HcStatement sell_asset = {
	"UPDATE hc_assets"
	"   SET status = 'SOLD', hold_expires_at = NULL, current_reservation_id = $2,"
	"       version = version OPERATOR(pg_catalog.+) 1, updated_at = $3"
	" WHERE id OPERATOR(pg_catalog.=) $1",
	3, {TEXTOID, TEXTOID, TIMESTAMPTZOID}
};

/* Make the asset AVAILABLE, if this reservation is what holds it. */
static HcStatement free_asset = {
	"UPDATE hc_assets"
	"   SET status = 'AVAILABLE', hold_expires_at = NULL, current_reservation_id = NULL,"
	"       version = version OPERATOR(pg_catalog.+) 1, updated_at = $3"
	" WHERE id OPERATOR(pg_catalog.=) $1 AND status OPERATOR(pg_catalog.=) 'HELD'"
	"   AND current_reservation_id OPERATOR(pg_catalog.=) $2",
	3, {TEXTOID, TEXTOID, TIMESTAMPTZOID}
};

static HcStatement extend_hold = {
	"WITH r AS ("
	"  UPDATE hc_reservations SET expires_at = $3"
	"   WHERE asset_id OPERATOR(pg_catalog.=) $1 AND id OPERATOR(pg_catalog.=) $2)"
	" UPDATE hc_assets"
	"    SET hold_expires_at = $3, version = version OPERATOR(pg_catalog.+) 1, updated_at = $4"
	"  WHERE id OPERATOR(pg_catalog.=) $1 AND status OPERATOR(pg_catalog.=) 'HELD'"
	"    AND current_reservation_id OPERATOR(pg_catalog.=) $2",
	4, {TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID}
};

/* Build the hc_reservation row a function returns. */
static Datum
hold_result(FunctionCallInfo fcinfo, const HoldReservation *r)
{
	TupleDesc	tupdesc;
	Datum		values[7];
	bool		nulls[7] = {false};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);
	values[0] = CStringGetTextDatum(r->id);
	values[1] = CStringGetTextDatum(r->asset_id);
	values[2] = CStringGetTextDatum(r->buyer_id);
	values[3] = CStringGetTextDatum(r->status);
	values[4] = TimestampTzGetDatum(r->expires_at);
	values[5] = TimestampTzGetDatum(r->created_at);
	values[6] = BoolGetDatum(r->replayed);
	return HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls));
}

/* A text[] of one or two statuses, for "status = ANY ($n)". */
static Datum
status_array(const char *a, const char *b)
{
	Datum		elems[2];

	elems[0] = CStringGetTextDatum(a);
	elems[1] = CStringGetTextDatum(b ? b : a);
	return PointerGetDatum(construct_array(elems, 2, TEXTOID, -1, false, TYPALIGN_INT));
}

/* A ledger entry for an asset and one of its reservations. */
static void
hold_ledger(HcCall *call, const HoldReservation *r, const char *event,
			const char *source, int reserved_delta, int stock_delta)
{
	HcLedgerEntry e = {0};

	e.kind = "asset";
	e.entity_id = r->asset_id;
	e.event = event;
	e.source = source;
	e.reservation_id = r->id;
	e.buyer_id = r->buyer_id;
	e.reserved_delta = reserved_delta;
	e.stock_delta = stock_delta;
	hc_ledger_append(call, &e);
}

/*
 * hc_asset_add(id, name): add an AVAILABLE asset.
 */
Datum
hc_asset_add(PG_FUNCTION_ARGS)
{
	char	   *id = hc_arg_id(fcinfo, 0, "id");
	char	   *name = hc_arg_text(fcinfo, 1, "name");
	HcCall		call;
	Datum		values[3];
	Datum		row;
	HcLedgerEntry e = {0};

	hc_call_begin(&call, fcinfo, "hc_asset_add");
	values[0] = HC_TEXT(id);
	values[1] = HC_TEXT(name);
	values[2] = TimestampTzGetDatum(call.now);
	if (hc_run(&add_asset, values, NULL, SPI_OK_INSERT_RETURNING) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNIQUE_VIOLATION),
				 errmsg("asset \"%s\" already exists", id),
				 errdetail("hc_assets already has a row for asset \"%s\".", id),
				 errhint("Choose another id; an existing asset keeps its state.")));
	row = hc_result_row(&call, fcinfo);

	e.kind = "asset";
	e.entity_id = id;
	e.event = "add";
	e.source = "adjustment";
	e.stock_delta = 1;
	hc_ledger_append(&call, &e);
	hc_call_end(&call);
	PG_RETURN_DATUM(row);
}

/*
 * Raise RS001 or RS006 for a hold that could not take the asset.
 */
static void
hold_refused(HcCall *call, const char *asset_id)
{
	Datum		values[1];
	char	   *status;
	TimestampTz until;

	values[0] = HC_TEXT(asset_id);
	if (hc_run(&peek_asset, values, NULL, SPI_OK_SELECT) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_HC_NOT_FOUND),
				 errmsg("asset \"%s\" does not exist", asset_id),
				 errdetail("There is no row for asset \"%s\" in hc_assets.", asset_id),
				 errhint("Add the asset with hc_asset_add() first.")));
	status = hc_text(call, 0, 1);
	if (strcmp(status, "SOLD") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_HC_ASSET_UNAVAILABLE),
				 errmsg("asset \"%s\" is not available", asset_id),
				 errdetail("Asset \"%s\" is sold.", asset_id),
				 errhint("Offer the buyer another asset.")));
	if (strcmp(status, "HELD") == 0 && (until = hc_timestamptz(0, 2)) > call->now)
		ereport(ERROR,
				(errcode(ERRCODE_HC_ASSET_UNAVAILABLE),
				 errmsg("asset \"%s\" is not available", asset_id),
				 errdetail("Asset \"%s\" is held by another buyer until %s.",
						   asset_id, timestamptz_to_str(until)),
				 errhint("Offer the buyer another asset, or try again after the hold ends.")));
	ereport(ERROR,
			(errcode(ERRCODE_HC_ASSET_UNAVAILABLE),
			 errmsg("asset \"%s\" is not available", asset_id),
			 errdetail("Another transaction is holding asset \"%s\" right now.", asset_id),
			 errhint("Offer the buyer another asset, or try again in a moment.")));
}

/*
 * hc_hold(asset_id, buyer_id, idempotency_key, ttl): hold an asset for a
 * buyer, reclaiming an expired hold; RS001 at once if it is not free.
 */
Datum
hc_hold(PG_FUNCTION_ARGS)
{
	char	   *asset_id = hc_arg_id(fcinfo, 0, "asset_id");
	char	   *buyer_id = hc_arg_id(fcinfo, 1, "buyer_id");
	char	   *key = hc_arg_key(fcinfo, 2, "idempotency_key");
	int64		ttl = hc_arg_ttl(fcinfo, 3, "ttl");
	HcCall		call;
	HcFingerprint fp;
	HcStoredResponse fresh;
	HcStoredResponse stored;
	HoldReservation r = {0};

	hc_call_begin(&call, fcinfo, "hc_hold");
	fresh.reservation_id = hc_new_reservation_id(call.now);
	fresh.status = "HELD";
	fresh.created_at = call.now;
	fresh.expires_at = call.now + ttl;

	hc_fingerprint_init(&fp, call.function);
	hc_fingerprint_add(&fp, asset_id);
	hc_fingerprint_add(&fp, buyer_id);
	hc_fingerprint_add(&fp, psprintf(INT64_FORMAT, ttl));

	r.asset_id = asset_id;
	r.buyer_id = buyer_id;
	if (!hc_idempotency_claim(&call, key, asset_id, &fp, &fresh, &stored))
	{
		r.id = stored.reservation_id;
		r.status = stored.status;
		r.expires_at = stored.expires_at;
		r.created_at = stored.created_at;
		r.replayed = true;
	}
	else
	{
		Datum		values[6];

		r.id = fresh.reservation_id;
		r.status = fresh.status;
		r.expires_at = fresh.expires_at;
		r.created_at = fresh.created_at;

		values[0] = HC_TEXT(asset_id);
		values[1] = HC_TEXT(r.id);
		values[2] = TimestampTzGetDatum(call.now);
		values[3] = TimestampTzGetDatum(r.expires_at);
		if (hc_run(&take_asset, values, NULL, SPI_OK_UPDATE_RETURNING) == 0)
			hold_refused(&call, asset_id);

		/* Passive reclamation: the expired hold we just took over ends. */
		if (strcmp(hc_text(&call, 0, 1), "HELD") == 0)
		{
			HoldReservation old = r;

			old.id = hc_text(&call, 0, 2);
			values[1] = HC_TEXT(old.id);
			values[2] = HC_TEXT("EXPIRED");
			values[3] = TimestampTzGetDatum(call.now);
			values[4] = status_array("HELD", NULL);
			if (hc_run(&end_reservation, values, NULL, SPI_OK_UPDATE_RETURNING) != 1)
				elog(ERROR, "held asset \"%s\" has no held reservation \"%s\"", asset_id, old.id);
			old.buyer_id = hc_text(&call, 0, 1);
			hold_ledger(&call, &old, "reclaim", "reclaim", -1, 0);
		}

		values[0] = HC_TEXT(r.id);
		values[1] = HC_TEXT(asset_id);
		values[2] = HC_TEXT(buyer_id);
		values[3] = HC_TEXT(key);
		values[4] = TimestampTzGetDatum(r.expires_at);
		values[5] = TimestampTzGetDatum(r.created_at);
		hc_run(&insert_reservation, values, NULL, SPI_OK_INSERT);
		hold_ledger(&call, &r, "hold", "call", 1, 0);
	}
	hc_call_end(&call);
	PG_RETURN_DATUM(hold_result(fcinfo, &r));
}

/*
 * Find a reservation, lock its asset, and read the reservation again under
 * that lock: what it says then cannot change until we commit.
 */
static void
hold_lock(HcCall *call, const char *reservation_id, HoldReservation *r)
{
	Datum		values[2];

	values[0] = HC_TEXT(reservation_id);
	if (hc_run(&find_reservation, values, NULL, SPI_OK_SELECT) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_HC_NOT_FOUND),
				 errmsg("reservation \"%s\" does not exist", reservation_id),
				 errdetail("No hold has the id \"%s\".", reservation_id),
				 errhint("Use the reservation_id that hc_hold() returned.")));
	r->id = pstrdup(reservation_id);
	r->asset_id = hc_text(call, 0, 1);

	values[0] = HC_TEXT(r->asset_id);
	if (hc_run(&lock_asset, values, NULL, SPI_OK_SELECT) != 1)
		elog(ERROR, "asset \"%s\" of reservation \"%s\" does not exist", r->asset_id, r->id);
	r->asset_status = hc_text(call, 0, 1);
	r->asset_reservation_id = hc_text(call, 0, 2);

	values[1] = HC_TEXT(r->id);
	if (hc_run(&read_reservation, values, NULL, SPI_OK_SELECT) != 1)
		elog(ERROR, "reservation \"%s\" vanished", r->id);
	r->buyer_id = hc_text(call, 0, 1);
	r->status = hc_text(call, 0, 2);
	r->expires_at = hc_timestamptz(0, 3);
	r->created_at = hc_timestamptz(0, 4);
	r->replayed = false;
}

/* Is this reservation what currently holds its asset? */
static bool
hold_is_current(const HoldReservation *r)
{
	return strcmp(r->asset_status, "HELD") == 0 &&
		r->asset_reservation_id != NULL &&
		strcmp(r->asset_reservation_id, r->id) == 0;
}

/* Move the reservation from one of the from-states to its new status. */
static void
hold_set_status(HcCall *call, HoldReservation *r, const char *status)
{
	Datum		values[5];

	values[0] = HC_TEXT(r->asset_id);
	values[1] = HC_TEXT(r->id);
	values[2] = HC_TEXT(status);
	values[3] = TimestampTzGetDatum(call->now);
	values[4] = status_array("HELD", "EXPIRED");
	if (hc_run(&end_reservation, values, NULL, SPI_OK_UPDATE_RETURNING) != 1)
		elog(ERROR, "reservation \"%s\" could not become %s", r->id, status);
	r->status = pstrdup(status);
}

/* Give the asset back, if this reservation still holds it. */
static void
hold_free_asset(HcCall *call, const HoldReservation *r)
{
	Datum		values[3];

	values[0] = HC_TEXT(r->asset_id);
	values[1] = HC_TEXT(r->id);
	values[2] = TimestampTzGetDatum(call->now);
	hc_run(&free_asset, values, NULL, SPI_OK_UPDATE);
}

/* An expired hold that nobody swept yet: end it now. */
static void
hold_expire(HcCall *call, HoldReservation *r)
{
	hold_free_asset(call, r);
	hold_set_status(call, r, "EXPIRED");
	hold_ledger(call, r, "expire", "reclaim", -1, 0);
}

/* RS004 and RS003 for a hold. */
static void
hold_not_active(const HoldReservation *r, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_HC_RESERVATION_NOT_ACTIVE),
			 errmsg("reservation \"%s\" is not active", r->id),
			 errdetail("Reservation \"%s\" of asset \"%s\" is %s.", r->id, r->asset_id, r->status),
			 errhint("%s", hint)));
}

static void
hold_expired(const HoldReservation *r, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_HC_RESERVATION_EXPIRED),
			 errmsg("reservation \"%s\" has expired", r->id),
			 errdetail("Reservation \"%s\" of asset \"%s\" expired at %s.",
					   r->id, r->asset_id, timestamptz_to_str(r->expires_at)),
			 errhint("%s", hint)));
}

/*
 * hc_commit(reservation_id, late_ok): the payment went through, sell the
 * asset.  A repeat replays; after expiry RS003 unless late_ok and the asset
 * is still free for this reservation.
 */
Datum
hc_commit(PG_FUNCTION_ARGS)
{
	char	   *reservation_id = hc_arg_id(fcinfo, 0, "reservation_id");
	bool		late_ok = hc_arg_bool(fcinfo, 1, "late_ok");
	HcCall		call;
	HoldReservation r;
	bool		expired;
	Datum		values[3];

	hc_call_begin(&call, fcinfo, "hc_commit");
	hold_lock(&call, reservation_id, &r);

	if (strcmp(r.status, "COMMITTED") == 0)
		r.replayed = true;
	else if (strcmp(r.status, "RELEASED") == 0)
		hold_not_active(&r, "The buyer cancelled this hold: refund the payment.");
	else
	{
		expired = strcmp(r.status, "EXPIRED") == 0 || r.expires_at <= call.now;
		if (!expired && !hold_is_current(&r))
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("held reservation \"%s\" does not hold asset \"%s\"", r.id, r.asset_id),
					 errhint("Run hc_check() to list the broken invariants.")));
		if (expired && !late_ok)
			hold_expired(&r, "Refund the payment, or commit with late_ok => true if the asset may still be free.");
		values[0] = HC_TEXT(r.asset_id);
		values[1] = HC_TEXT(r.id);
		values[2] = TimestampTzGetDatum(r.created_at);
		if (expired && !hold_is_current(&r) &&
			(strcmp(r.asset_status, "AVAILABLE") != 0 ||
			 hc_run(&taken_since, values, NULL, SPI_OK_SELECT) > 0))
			hold_expired(&r, "Another buyer has taken the asset since: refund the payment.");

		values[2] = TimestampTzGetDatum(call.now);
		if (hc_run(&sell_asset, values, NULL, SPI_OK_UPDATE) != 1)
			elog(ERROR, "asset \"%s\" vanished", r.asset_id);
		hold_ledger(&call, &r, "commit", "call",
					strcmp(r.status, "HELD") == 0 ? -1 : 0, -1);
		hold_set_status(&call, &r, "COMMITTED");
	}
	hc_call_end(&call);
	PG_RETURN_DATUM(hold_result(fcinfo, &r));
}

/*
 * hc_release(reservation_id): the buyer cancels; the asset is AVAILABLE at
 * once.  A repeat, or an expired hold, is returned unchanged as a replay.
 */
Datum
hc_release(PG_FUNCTION_ARGS)
{
	char	   *reservation_id = hc_arg_id(fcinfo, 0, "reservation_id");
	HcCall		call;
	HoldReservation r;

	hc_call_begin(&call, fcinfo, "hc_release");
	hold_lock(&call, reservation_id, &r);

	if (strcmp(r.status, "COMMITTED") == 0)
		hold_not_active(&r, "A sold asset cannot be released; refund through your payment flow.");
	else if (strcmp(r.status, "HELD") != 0)
		r.replayed = true;
	else if (r.expires_at <= call.now)
	{
		hold_expire(&call, &r);
		r.replayed = true;
	}
	else
	{
		hold_free_asset(&call, &r);
		hold_set_status(&call, &r, "RELEASED");
		hold_ledger(&call, &r, "release", "call", -1, 0);
	}
	hc_call_end(&call);
	PG_RETURN_DATUM(hold_result(fcinfo, &r));
}

/*
 * hc_extend(reservation_id, ttl): keep a live hold for ttl from now, never
 * shortening it and never past created_at + holdcommit.max_hold.
 */
Datum
hc_extend(PG_FUNCTION_ARGS)
{
	char	   *reservation_id = hc_arg_id(fcinfo, 0, "reservation_id");
	int64		ttl = hc_arg_ttl(fcinfo, 1, "ttl");
	HcCall		call;
	HoldReservation r;
	TimestampTz until;
	TimestampTz cap;

	hc_call_begin(&call, fcinfo, "hc_extend");
	hold_lock(&call, reservation_id, &r);

	if (strcmp(r.status, "COMMITTED") == 0 || strcmp(r.status, "RELEASED") == 0)
		hold_not_active(&r, "Only a held reservation can be extended.");
	if (strcmp(r.status, "EXPIRED") == 0 || r.expires_at <= call.now)
		hold_expired(&r, "Hold the asset again if it is still available.");

	cap = r.created_at + (int64) hc_max_hold * USECS_PER_SEC;
	until = Min(call.now + ttl, cap);
	if (until > r.expires_at)
	{
		Datum		values[4];
		HcLedgerEntry e = {0};

		values[0] = HC_TEXT(r.asset_id);
		values[1] = HC_TEXT(r.id);
		values[2] = TimestampTzGetDatum(until);
		values[3] = TimestampTzGetDatum(call.now);
		if (hc_run(&extend_hold, values, NULL, SPI_OK_UPDATE) != 1)
			elog(ERROR, "held reservation \"%s\" does not hold asset \"%s\"", r.id, r.asset_id);

		e.kind = "asset";
		e.entity_id = r.asset_id;
		e.event = "extend";
		e.source = "call";
		e.reservation_id = r.id;
		e.buyer_id = r.buyer_id;
		/* timestamptz_to_str() returns a static buffer: copy the first. */
		e.detail = psprintf("expires_at %s -> %s", pstrdup(timestamptz_to_str(r.expires_at)),
							timestamptz_to_str(until));
		hc_ledger_append(&call, &e);
		r.expires_at = until;
	}
	hc_call_end(&call);
	PG_RETURN_DATUM(hold_result(fcinfo, &r));
}
