/*
 * hold.c
 *		Unique assets (quantity 1): hc_asset_add, hc_hold, hc_commit,
 *		hc_release, hc_extend.
 *
 * An asset is AVAILABLE, HELD by one reservation until hold_expires_at, or
 * SOLD.  Every call that changes a reservation first locks its asset row, so
 * the asset row serialises everything that happens to the asset; locks are
 * always taken asset first, then reservation.  Each change is one statement
 * that moves the asset and the reservation and writes the ledger row, whose
 * seq is the asset's new version.
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
#include "notify.h"
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
	"WITH a AS ("
	"  INSERT INTO hc_assets (id, name, created_at, updated_at) VALUES ($1, $2, $3, $3)"
	"  ON CONFLICT DO NOTHING RETURNING *),"
	" logged AS (" HC_LEDGER_INSERT
	"  SELECT 'asset', $1, a.version, $3, 'add', 'adjustment', $4, NULL, NULL, 0, 1, $5, NULL FROM a)"
	" SELECT * FROM a",
	5, {TEXTOID, TEXTOID, TIMESTAMPTZOID, TEXTOID, TEXTOID}
};

/*
 * What a hold looks at first, after the key: the asset, read without a
 * statement.  A refusal of an asset that is sold or held ends here.
 */
static HcFetch peek_asset = {"hc_assets", "id", 2, {"status", "hold_expires_at"}};

/*
 * Then the asset locked FOR NO KEY UPDATE SKIP LOCKED: a hold never waits
 * for another call in flight.  Locked, the newest version says whether the
 * asset can still be taken.
 */
static HcFetch take_asset = {"hc_assets", "id", 3,
{"status", "current_reservation_id", "hold_expires_at"}};

/*
 * The hold itself, under the asset's lock, for a new key (which the key's
 * lock keeps new): take the asset if it is still free, insert the
 * reservation, write the ledger.  The version goes up by $10: 2 when an
 * expired hold is taken over, whose end (end_expired_hold) is the change
 * before.  Returns the hold's seq.
 *   $1 asset  $2 new reservation id  $3 now  $4 expires_at  $5 buyer
 *   $6 key  $7 fingerprint  $8 function  $9 actor  $10 version step
 */
static HcStatement hold_asset = {
	"WITH taken AS ("
	"  UPDATE hc_assets"
	"     SET status = 'HELD', hold_expires_at = $4, current_reservation_id = $2,"
	"         version = version OPERATOR(pg_catalog.+) $10, updated_at = $3"
	"   WHERE id OPERATOR(pg_catalog.=) $1"
	"     AND (status OPERATOR(pg_catalog.=) 'AVAILABLE'"
	"          OR (status OPERATOR(pg_catalog.=) 'HELD'"
	"              AND hold_expires_at OPERATOR(pg_catalog.<=) $3))"
	"  RETURNING version),"
	" held AS ("
	"  INSERT INTO hc_reservations"
	"    (id, asset_id, buyer_id, idempotency_key, fingerprint, status, expires_at, created_at)"
	"  SELECT $2, $1, $5, $6, $7, 'HELD', $4, $3 FROM taken)"
	HC_LEDGER_INSERT
	" SELECT 'asset', $1, version, $3, 'hold', 'call', $8, $2, $5, 1, 0, $9, NULL FROM taken"
	" RETURNING seq",
	10, {TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID, TEXTOID, TEXTOID, BYTEAOID,
	TEXTOID, TEXTOID, INT4OID}
};

/*
 * End the expired hold $2 that a hold of asset $1 just took over (passive
 * reclamation), with its ledger row at seq $4 (the one before the hold's).
 * $3 now, $5 function, $6 actor.
 */
static HcStatement end_expired_hold = {
	"WITH r AS ("
	"  UPDATE hc_reservations SET status = 'EXPIRED', ended_at = $3"
	"   WHERE asset_id OPERATOR(pg_catalog.=) $1 AND id OPERATOR(pg_catalog.=) $2"
	"     AND status OPERATOR(pg_catalog.=) 'HELD' RETURNING buyer_id)"
	HC_LEDGER_INSERT
	" SELECT 'asset', $1, $4, $3, 'reclaim', 'reclaim', $5, $2, r.buyer_id, -1, 0, $6, NULL"
	"   FROM r RETURNING seq",
	6, {TEXTOID, TEXTOID, TIMESTAMPTZOID, INT8OID, TEXTOID, TEXTOID}
};

/* A reservation's asset, and the asset, locked FOR NO KEY UPDATE. */
static HcFetch reservation_asset = {"hc_reservations", "id", 1, {"asset_id"}};
static HcFetch lock_asset = {"hc_assets", "id", 3,
{"status", "current_reservation_id", "hold_expires_at"}};

/* The reservation as it is under its asset's lock. */
static HcFetch read_reservation = {"hc_reservations", "id", 4,
{"buyer_id", "status", "expires_at", "created_at"}};

/* Has another buyer held the asset since this reservation was made? */
static HcStatement taken_since = {
	"SELECT 1 FROM hc_reservations"
	" WHERE asset_id OPERATOR(pg_catalog.=) $1 AND id OPERATOR(pg_catalog.<>) $2"
	"   AND created_at OPERATOR(pg_catalog.>=) $3 LIMIT 1",
	3, {TEXTOID, TEXTOID, TIMESTAMPTZOID}
};

/*
 * Sell the asset to a reservation that is still $4 (HELD, or EXPIRED for a
 * late commit).  $5 is the ledger's reserved_delta: -1 if the hold still
 * counted.  $6 function, $7 actor.  Returns the reservation as it was.
 */
static HcStatement sell_asset = {
	"WITH a AS ("
	"  UPDATE hc_assets"
	"     SET status = 'SOLD', hold_expires_at = NULL, current_reservation_id = $2,"
	"         version = version OPERATOR(pg_catalog.+) 1, updated_at = $3"
	"   WHERE id OPERATOR(pg_catalog.=) $1 RETURNING version),"
	" r AS ("
	"  UPDATE hc_reservations SET status = 'COMMITTED', ended_at = $3"
	"   WHERE asset_id OPERATOR(pg_catalog.=) $1 AND id OPERATOR(pg_catalog.=) $2"
	"     AND status OPERATOR(pg_catalog.=) $4 RETURNING buyer_id, expires_at, created_at),"
	" logged AS (" HC_LEDGER_INSERT
	"  SELECT 'asset', $1, a.version, $3, 'commit', 'call', $6, $2, r.buyer_id, $5, -1, $7, NULL"
	"    FROM a, r)"
	" SELECT r.buyer_id, r.expires_at, r.created_at FROM a, r",
	7, {TEXTOID, TEXTOID, TIMESTAMPTZOID, TEXTOID, INT4OID, TEXTOID, TEXTOID}
};

/*
 * Give the asset back from a HELD reservation, which ends as $4 (RELEASED,
 * or EXPIRED), with ledger event $5 from source $6.  $7 function, $8 actor.
 * Returns the reservation as it was.
 */
static HcStatement free_asset = {
	"WITH a AS ("
	"  UPDATE hc_assets"
	"     SET status = 'AVAILABLE', hold_expires_at = NULL, current_reservation_id = NULL,"
	"         version = version OPERATOR(pg_catalog.+) 1, updated_at = $3"
	"   WHERE id OPERATOR(pg_catalog.=) $1 AND status OPERATOR(pg_catalog.=) 'HELD'"
	"     AND current_reservation_id OPERATOR(pg_catalog.=) $2 RETURNING version),"
	" r AS ("
	"  UPDATE hc_reservations SET status = $4, ended_at = $3"
	"   WHERE asset_id OPERATOR(pg_catalog.=) $1 AND id OPERATOR(pg_catalog.=) $2"
	"     AND status OPERATOR(pg_catalog.=) 'HELD' RETURNING buyer_id, expires_at, created_at),"
	" logged AS (" HC_LEDGER_INSERT
	"  SELECT 'asset', $1, a.version, $3, $5, $6, $7, $2, r.buyer_id, -1, 0, $8, NULL"
	"    FROM a, r)"
	" SELECT r.buyer_id, r.expires_at, r.created_at FROM a, r",
	8, {TEXTOID, TEXTOID, TIMESTAMPTZOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID}
};

/* Move a live hold's end to $3, with both ends in the ledger's detail ($7). */
static HcStatement extend_hold = {
	"WITH r AS ("
	"  UPDATE hc_reservations SET expires_at = $3"
	"   WHERE asset_id OPERATOR(pg_catalog.=) $1 AND id OPERATOR(pg_catalog.=) $2"
	"     AND status OPERATOR(pg_catalog.=) 'HELD' RETURNING buyer_id),"
	" a AS ("
	"  UPDATE hc_assets"
	"     SET hold_expires_at = $3, version = version OPERATOR(pg_catalog.+) 1, updated_at = $4"
	"   WHERE id OPERATOR(pg_catalog.=) $1 AND status OPERATOR(pg_catalog.=) 'HELD'"
	"     AND current_reservation_id OPERATOR(pg_catalog.=) $2 RETURNING version)"
	HC_LEDGER_INSERT
	" SELECT 'asset', $1, a.version, $4, 'extend', 'call', $5, $2, r.buyer_id, 0, 0, $6, $7"
	"   FROM r, a RETURNING seq",
	7, {TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID, TEXTOID, TEXTOID, TEXTOID}
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

/*
 * hc_asset_add(id, name): add an AVAILABLE asset.
 */
Datum
hc_asset_add(PG_FUNCTION_ARGS)
{
	char	   *id = hc_arg_id(fcinfo, 0, "id");
	char	   *name = hc_arg_text(fcinfo, 1, "name");
	HcCall		call;
	Datum		values[5];
	Datum		row;

	hc_call_begin(&call, fcinfo, "hc_asset_add");
	values[0] = HC_TEXT(id);
	values[1] = HC_TEXT(name);
	values[2] = TimestampTzGetDatum(call.now);
	values[3] = HC_TEXT(call.function);
	values[4] = HC_TEXT(hc_actor(&call));
	if (hc_run(&add_asset, values, NULL, SPI_OK_SELECT) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNIQUE_VIOLATION),
				 errmsg("asset \"%s\" already exists", id),
				 errdetail("hc_assets already has a row for asset \"%s\".", id),
				 errhint("Choose another id; an existing asset keeps its state.")));
	row = hc_result_row(&call, fcinfo);
	hc_call_end(&call);
	PG_RETURN_DATUM(row);
}

/*
 * Raise RS006 or RS001 for a hold that cannot take the asset, as a read found
 * it: status NULL if there is no such asset, "LOCKED" if a call in flight
 * has it, else held until its hold_expires_at.
 */
static void
hold_refuse(HcCall *call, const char *asset_id, const char *status, TimestampTz until)
{
	if (status == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_HC_NOT_FOUND),
				 errmsg("asset \"%s\" does not exist", asset_id),
				 errdetail("There is no row for asset \"%s\" in hc_assets.", asset_id),
				 errhint("Add the asset with hc_asset_add() first.")));
	if (strcmp(status, "SOLD") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_HC_ASSET_UNAVAILABLE),
				 errmsg("asset \"%s\" is not available", asset_id),
				 errdetail("Asset \"%s\" is sold.", asset_id),
				 errhint("Offer the buyer another asset.")));
	if (strcmp(status, "HELD") == 0)
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

/* Can a hold take an asset in this state (sold or held until until)? */
static bool
hold_can_take(HcCall *call, const char *status, TimestampTz until)
{
	return strcmp(status, "AVAILABLE") == 0 ||
		(strcmp(status, "HELD") == 0 && until <= call->now);
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
	HcKnownKey	known;
	HoldReservation r = {0};
	Datum		values[10];

	hc_call_begin(&call, fcinfo, "hc_hold");
	hc_fingerprint_init(&fp, call.function);
	hc_fingerprint_add(&fp, asset_id);
	hc_fingerprint_add(&fp, buyer_id);
	hc_fingerprint_add(&fp, psprintf(INT64_FORMAT, ttl));

	r.asset_id = asset_id;
	r.buyer_id = buyer_id;
	r.status = "HELD";
	r.created_at = call.now;
	r.expires_at = call.now + ttl;

	if (hc_idempotency_find(&call, key, &fp, &known))
	{
		/* The stored response: the reservation as this request made it. */
		r.id = known.id;
		r.created_at = known.created_at;
		r.expires_at = known.created_at + ttl;
		r.replayed = true;
	}
	else
	{
		Datum		asset[3];
		bool		nulls[3];
		char	   *status = NULL;
		TimestampTz until = 0;
		int64		seq;

		if (hc_fetch(&call, &peek_asset, asset_id, asset, nulls))
		{
			status = TextDatumGetCString(asset[0]);
			until = nulls[1] ? 0 : DatumGetTimestampTz(asset[1]);
		}
		if (status == NULL || !hold_can_take(&call, status, until))
			hold_refuse(&call, asset_id, status, until);
		if (!hc_fetch_lock_free(&call, &take_asset, asset_id, asset, nulls))
			hold_refuse(&call, asset_id, "LOCKED", 0);
		status = TextDatumGetCString(asset[0]);
		until = nulls[2] ? 0 : DatumGetTimestampTz(asset[2]);
		if (!hold_can_take(&call, status, until))
			hold_refuse(&call, asset_id, status, until);

		r.id = hc_new_reservation_id(call.now);
		values[0] = HC_TEXT(asset_id);
		values[1] = HC_TEXT(r.id);
		values[2] = TimestampTzGetDatum(call.now);
		values[3] = TimestampTzGetDatum(r.expires_at);
		values[4] = HC_TEXT(buyer_id);
		values[5] = HC_TEXT(key);
		values[6] = PointerGetDatum(hc_fingerprint_digest(&fp));
		values[7] = HC_TEXT(call.function);
		values[8] = HC_TEXT(hc_actor(&call));
		values[9] = Int32GetDatum(strcmp(status, "HELD") == 0 ? 2 : 1);
		if (hc_run(&hold_asset, values, NULL, SPI_OK_INSERT_RETURNING) != 1)
			elog(ERROR, "hold of locked asset \"%s\" changed no row", asset_id);
		seq = DatumGetInt64(hc_datum(0, 1, &nulls[0]));
		if (strcmp(status, "HELD") == 0)
		{
			Datum		reclaim[6];

			if (nulls[1])
				elog(ERROR, "held asset \"%s\" names no hold", asset_id);

			/* Passive reclamation: the expired hold just taken over ends. */
			reclaim[0] = HC_TEXT(asset_id);
			reclaim[1] = asset[1];
			reclaim[2] = TimestampTzGetDatum(call.now);
			reclaim[3] = Int64GetDatum(seq - 1);
			reclaim[4] = HC_TEXT(call.function);
			reclaim[5] = HC_TEXT(hc_actor(&call));
			if (hc_run(&end_expired_hold, reclaim, NULL, SPI_OK_INSERT_RETURNING) != 1)
				elog(ERROR, "held asset \"%s\" has no held reservation \"%s\"",
					 asset_id, TextDatumGetCString(asset[1]));
		}
	}
	hc_call_end(&call);
	PG_RETURN_DATUM(hold_result(fcinfo, &r));
}

/* Is this reservation what currently holds its asset? */
static bool
hold_is_current(const HoldReservation *r)
{
	return strcmp(r->asset_status, "HELD") == 0 &&
		r->asset_reservation_id != NULL &&
		strcmp(r->asset_reservation_id, r->id) == 0;
}

/*
 * Find a reservation and lock its asset.  What the asset row says cannot
 * change until we commit: if it names the reservation as its live hold, the
 * reservation is HELD until the asset's hold_expires_at (its buyer and
 * created_at come back from the write); otherwise, or if whole, the
 * reservation is read again under the lock.
 */
static void
hold_lock(HcCall *call, const char *reservation_id, HoldReservation *r, bool whole)
{
	Datum		values[4];
	bool		nulls[4];

	if (!hc_fetch(call, &reservation_asset, reservation_id, values, nulls))
		ereport(ERROR,
				(errcode(ERRCODE_HC_NOT_FOUND),
				 errmsg("reservation \"%s\" does not exist", reservation_id),
				 errdetail("No hold has the id \"%s\".", reservation_id),
				 errhint("Use the reservation_id that hc_hold() returned.")));
	r->id = pstrdup(reservation_id);
	r->asset_id = TextDatumGetCString(values[0]);
	if (!hc_fetch_lock(call, &lock_asset, r->asset_id, values, nulls))
		elog(ERROR, "asset \"%s\" of reservation \"%s\" vanished", r->asset_id, r->id);
	r->asset_status = TextDatumGetCString(values[0]);
	r->asset_reservation_id = nulls[1] ? NULL : TextDatumGetCString(values[1]);
	r->replayed = false;
	if (hold_is_current(r) && !whole && !nulls[2])
	{
		r->status = "HELD";
		r->expires_at = DatumGetTimestampTz(values[2]);
		return;
	}

	if (!hc_fetch(call, &read_reservation, r->id, values, nulls))
		elog(ERROR, "reservation \"%s\" vanished", r->id);
	r->buyer_id = TextDatumGetCString(values[0]);
	r->status = TextDatumGetCString(values[1]);
	r->expires_at = DatumGetTimestampTz(values[2]);
	r->created_at = DatumGetTimestampTz(values[3]);
}

/* The reservation as sell_asset or free_asset returned it, before it ended. */
static void
hold_written(HcCall *call, HoldReservation *r)
{
	r->buyer_id = hc_text(call, 0, 1);
	r->expires_at = hc_timestamptz(0, 2);
	r->created_at = hc_timestamptz(0, 3);
}

/*
 * End a HELD reservation as status (RELEASED or EXPIRED), giving its asset
 * back, with the ledger event from source.
 */
static void
hold_free(HcCall *call, HoldReservation *r, const char *status, const char *event,
		  const char *source)
{
	Datum		values[8];

	values[0] = HC_TEXT(r->asset_id);
	values[1] = HC_TEXT(r->id);
	values[2] = TimestampTzGetDatum(call->now);
	values[3] = HC_TEXT(status);
	values[4] = HC_TEXT(event);
	values[5] = HC_TEXT(source);
	values[6] = HC_TEXT(call->function);
	values[7] = HC_TEXT(hc_actor(call));
	if (hc_run(&free_asset, values, NULL, SPI_OK_SELECT) != 1)
		elog(ERROR, "held reservation \"%s\" does not hold asset \"%s\"", r->id, r->asset_id);
	hold_written(call, r);
	r->status = pstrdup(status);
	hc_notify("asset", r->asset_id, "AVAILABLE");
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
	HoldReservation r = {0};
	bool		expired;
	Datum		values[7];

	hc_call_begin(&call, fcinfo, "hc_commit");
	hold_lock(&call, reservation_id, &r, false);

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
		values[3] = HC_TEXT(r.status);
		values[4] = Int32GetDatum(strcmp(r.status, "HELD") == 0 ? -1 : 0);
		values[5] = HC_TEXT(call.function);
		values[6] = HC_TEXT(hc_actor(&call));
		if (hc_run(&sell_asset, values, NULL, SPI_OK_SELECT) != 1)
			elog(ERROR, "reservation \"%s\" could not become COMMITTED", r.id);
		hold_written(&call, &r);
		r.status = "COMMITTED";
		hc_notify("asset", r.asset_id, "SOLD");
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
	HoldReservation r = {0};

	hc_call_begin(&call, fcinfo, "hc_release");
	hold_lock(&call, reservation_id, &r, false);

	if (strcmp(r.status, "COMMITTED") == 0)
		hold_not_active(&r, "A sold asset cannot be released; refund through your payment flow.");
	else if (strcmp(r.status, "HELD") != 0)
		r.replayed = true;
	else if (r.expires_at <= call.now)
	{
		/* An expired hold that nobody swept yet: end it now. */
		hold_free(&call, &r, "EXPIRED", "expire", "reclaim");
		r.replayed = true;
	}
	else
		hold_free(&call, &r, "RELEASED", "release", "call");
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
	HoldReservation r = {0};
	TimestampTz until;
	TimestampTz cap;

	hc_call_begin(&call, fcinfo, "hc_extend");
	hold_lock(&call, reservation_id, &r, true);

	if (strcmp(r.status, "COMMITTED") == 0 || strcmp(r.status, "RELEASED") == 0)
		hold_not_active(&r, "Only a held reservation can be extended.");
	if (strcmp(r.status, "EXPIRED") == 0 || r.expires_at <= call.now)
		hold_expired(&r, "Hold the asset again if it is still available.");

	cap = r.created_at + (int64) hc_max_hold * USECS_PER_SEC;
	until = Min(call.now + ttl, cap);
	if (until > r.expires_at)
	{
		Datum		values[7];

		values[0] = HC_TEXT(r.asset_id);
		values[1] = HC_TEXT(r.id);
		values[2] = TimestampTzGetDatum(until);
		values[3] = TimestampTzGetDatum(call.now);
		values[4] = HC_TEXT(call.function);
		values[5] = HC_TEXT(hc_actor(&call));
		/* timestamptz_to_str() returns a static buffer: copy the first. */
		values[6] = HC_TEXT(psprintf("expires_at %s -> %s", pstrdup(timestamptz_to_str(r.expires_at)),
									 timestamptz_to_str(until)));
		if (hc_run(&extend_hold, values, NULL, SPI_OK_INSERT_RETURNING) != 1)
			elog(ERROR, "held reservation \"%s\" does not hold asset \"%s\"", r.id, r.asset_id);
		r.expires_at = until;
	}
	hc_call_end(&call);
	PG_RETURN_DATUM(hold_result(fcinfo, &r));
}
