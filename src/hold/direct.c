/*
 * direct.c
 *		The writes of hc_hold, hc_commit, hc_release and hc_extend without
 *		the executor (core/write.h): the rows hold.c's statements write,
 *		the same values, the same checks, where the tables allow it
 *		(core/write.c says when they do not; then hold.c runs its
 *		statements).
 *
 * Invariants (hold.c's, kept here):
 *   1. The asset row is locked first (hold.c, by hc_fetch_tid); its TID
 *      and version are the ones locked, so the update cannot miss it.
 *   2. A reservation is changed only under its asset's lock, and locked
 *      itself (FOR NO KEY UPDATE, its newest version) before it is
 *      changed, as the statement's UPDATE locks it: the key sweep may be
 *      forgetting its key meanwhile.  What the statement's WHERE tests is
 *      tested on that locked version; where it fails, the call fails as
 *      hold.c fails when its statement changed no row.
 *   3. The ledger row's seq is the asset's new version, as the statement's
 *      RETURNING gives it.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

#include "common/ledger.h"
#include "core/version.h"
#include "core/fetch.h"
#include "core/write.h"
#include "hold/hold.h"

/* The asset's state: taken, sold or given back. */
static HcWrite asset_state = {"hc_assets", HC_WRITE_UPDATE, 5,
{"status", "hold_expires_at", "current_reservation_id", "version", "updated_at"}};

/* A live hold's end moved. */
static HcWrite asset_extend = {"hc_assets", HC_WRITE_UPDATE, 3,
{"hold_expires_at", "version", "updated_at"}};

static HcWrite reservation_new = {"hc_reservations", HC_WRITE_INSERT, 8,
{"id", "asset_id", "buyer_id", "idempotency_key", "fingerprint", "status", "expires_at",
 "created_at"}};

/* A reservation ended: COMMITTED, RELEASED or EXPIRED. */
static HcWrite reservation_end = {"hc_reservations", HC_WRITE_UPDATE, 2, {"status", "ended_at"}};

static HcWrite reservation_extend = {"hc_reservations", HC_WRITE_UPDATE, 1, {"expires_at"}};

/*
 * A reservation locked before it changes (invariant 2); in 0.4.0 with its
 * seats, to leave a group's (found by its first seat) to the statements.
 */
static HcFetch lock_reservation = {"hc_reservations", "id", HC_FETCH_WAIT, 5,
{"asset_id", "buyer_id", "status", "expires_at", "created_at"}, .then = "asset_id"};
static HcFetch lock_reservation_seats = {"hc_reservations", "id", HC_FETCH_WAIT, 6,
{"asset_id", "buyer_id", "status", "expires_at", "created_at", "seats"}, .then = "asset_id"};

/* The reservation as lock_reservation found it. */
typedef struct LockedReservation
{
	ItemPointerData tid;
	char	   *buyer_id;
	char	   *status;
	TimestampTz expires_at;
	TimestampTz created_at;
} LockedReservation;

/*
 * Lock reservation id of asset_id: false if it ran as a statement, or if it
 * is a group's (then so must the writes; nothing is written yet).  found:
 * is there such a reservation of that asset?
 */
static bool
lock_one(HcCall *call, const char *asset_id, const char *id, LockedReservation *l, bool *found)
{
	Datum		values[6];
	bool		nulls[6];
	bool		seats = hc_sql_at_least("0.4.0");

	*found = hc_fetch_tid(call, seats ? &lock_reservation_seats : &lock_reservation, id, values,
						  nulls, &l->tid);
	if (*found && (!ItemPointerIsValid(&l->tid) || (seats && !nulls[5])))
		return false;
	*found = *found && strcmp(TextDatumGetCString(values[0]), asset_id) == 0;
	if (*found)
	{
		l->buyer_id = TextDatumGetCString(values[1]);
		l->status = TextDatumGetCString(values[2]);
		l->expires_at = DatumGetTimestampTz(values[3]);
		l->created_at = DatumGetTimestampTz(values[4]);
	}
	return true;
}

/* The asset's state as asset_state sets it, at the next version (version_step on). */
static int32
set_asset(HcWriter *w, const HoldReservation *r, const char *status, TimestampTz until,
		  const char *reservation_id, int version_step)
{
	int32		version = hc_write_add(r->asset_version, version_step);
	Datum		values[5];
	bool		nulls[5] = {false};

	values[0] = CStringGetTextDatum(status);
	values[1] = TimestampTzGetDatum(until);
	nulls[1] = until == DT_NOBEGIN;
	nulls[2] = reservation_id == NULL;
	values[2] = nulls[2] ? (Datum) 0 : CStringGetTextDatum(reservation_id);
	values[3] = Int32GetDatum(version);
	values[4] = TimestampTzGetDatum(w->call->now);
	hc_write_update(w, &asset_state, (ItemPointer) &r->asset_tid, values, nulls);
	return version;
}

/* The reservation at tid ended as status. */
static void
end_reservation(HcWriter *w, ItemPointer tid, const char *status)
{
	Datum		values[2] = {CStringGetTextDatum(status), TimestampTzGetDatum(w->call->now)};
	bool		nulls[2] = {false};

	hc_write_update(w, &reservation_end, tid, values, nulls);
}

/* The ledger row of a change to the asset. */
static void
log_change(HcWriter *w, const HoldReservation *r, int64 seq, const char *event,
		   const char *source, const char *reservation_id, const char *buyer_id,
		   int32 reserved_delta, int32 stock_delta, const char *detail)
{
	HcLedgerEntry e = {"asset", r->asset_id, seq, event, source, reservation_id, buyer_id,
	reserved_delta, stock_delta, detail};

	hc_ledger_write(w, &e);
}

/*
 * hold.c's hold_asset (and end_expired_hold if expired_id, the expired hold
 * taken over): the asset, locked and free, HELD by r until r->expires_at,
 * the reservation inserted, the ledger rows.
 */
bool
hc_hold_write_take(HcCall *call, const HoldReservation *r, const char *key, Datum fingerprint,
				   const char *expired_id)
{
	HcWrite    *writes[] = {&asset_state, &reservation_new, &hc_ledger_row, &reservation_end};
	HcWriter	w;
	LockedReservation expired = {{{0}}};
	bool		found = false;
	int32		version;
	Datum		values[8];
	bool		nulls[8] = {false};

	if (!ItemPointerIsValid(&r->asset_tid) || r->seats > 0 ||
		!hc_writer_begin(call, &w, writes, expired_id != NULL ? 4 : 3))
		return false;
	if (expired_id != NULL && !lock_one(call, r->asset_id, expired_id, &expired, &found))
	{
		hc_writer_end(&w);
		return false;
	}

	version = set_asset(&w, r, "HELD", r->expires_at, r->id, expired_id != NULL ? 2 : 1);
	values[0] = CStringGetTextDatum(r->id);
	values[1] = CStringGetTextDatum(r->asset_id);
	values[2] = CStringGetTextDatum(r->buyer_id);
	values[3] = CStringGetTextDatum(key);
	values[4] = fingerprint;
	values[5] = CStringGetTextDatum("HELD");
	values[6] = TimestampTzGetDatum(r->expires_at);
	values[7] = TimestampTzGetDatum(r->created_at);
	hc_write_insert(&w, &reservation_new, values, nulls);
	log_change(&w, r, version, "hold", "call", r->id, r->buyer_id, 1, 0, NULL);

	if (expired_id != NULL)
	{
		if (!found || strcmp(expired.status, "HELD") != 0)
			elog(ERROR, "held asset \"%s\" has no held reservation \"%s\"", r->asset_id,
				 expired_id);
		end_reservation(&w, &expired.tid, "EXPIRED");
		log_change(&w, r, version - 1, "reclaim", "reclaim", expired_id, expired.buyer_id, -1, 0,
				   NULL);
	}
	hc_writer_end(&w);
	return true;
}

/*
 * The asset r holds leaves the hold: sold (SOLD to r, which must still be
 * r->status: HELD, or EXPIRED for a late commit) or freed (AVAILABLE
 * again; r HELD and holding it); r ends as status, with the ledger's row,
 * event from source.  r gets the reservation's buyer and times, as the
 * statement returns them.
 */
static bool
end_hold(HcCall *call, HoldReservation *r, bool sold, const char *status, const char *event,
		 const char *source, int32 reserved_delta)
{
	HcWrite    *writes[] = {&asset_state, &reservation_end, &hc_ledger_row};
	HcWriter	w;
	LockedReservation l;
	bool		found;
	int32		version;

	if (!ItemPointerIsValid(&r->asset_tid) || r->seats > 0 ||
		!hc_writer_begin(call, &w, writes, 3))
		return false;
	if (!lock_one(call, r->asset_id, r->id, &l, &found))
	{
		hc_writer_end(&w);
		return false;
	}
	if (!found || (sold ? strcmp(l.status, r->status) != 0 :
				   strcmp(l.status, "HELD") != 0 || !hold_is_current(r)))
		elog(ERROR, "reservation \"%s\" of asset \"%s\" could not become %s", r->id, r->asset_id,
			 status);
	version = set_asset(&w, r, sold ? "SOLD" : "AVAILABLE", DT_NOBEGIN, sold ? r->id : NULL, 1);
	end_reservation(&w, &l.tid, status);
	log_change(&w, r, version, event, source, r->id, l.buyer_id, reserved_delta, sold ? -1 : 0,
			   NULL);
	hc_writer_end(&w);
	r->buyer_id = l.buyer_id;
	r->expires_at = l.expires_at;
	r->created_at = l.created_at;
	return true;
}

/* hold.c's sell_asset: the asset SOLD to r, COMMITTED. */
bool
hc_hold_write_sell(HcCall *call, HoldReservation *r, int32 reserved_delta)
{
	return end_hold(call, r, true, "COMMITTED", "commit", "call", reserved_delta);
}

/* hold.c's free_asset: the asset AVAILABLE again; r, HELD, ends as status. */
bool
hc_hold_write_free(HcCall *call, HoldReservation *r, const char *status, const char *event,
				   const char *source)
{
	return end_hold(call, r, false, status, event, source, -1);
}

/*
 * hold.c's extend_hold: the live hold r, HELD and holding its asset, moved
 * to until, both ends in the ledger's detail.
 */
bool
hc_hold_write_extend(HcCall *call, HoldReservation *r, TimestampTz until, const char *detail)
{
	HcWrite    *writes[] = {&reservation_extend, &asset_extend, &hc_ledger_row};
	HcWriter	w;
	LockedReservation l;
	bool		found;
	Datum		values[3];
	bool		nulls[3] = {false};

	if (!ItemPointerIsValid(&r->asset_tid) || r->seats > 0 ||
		!hc_writer_begin(call, &w, writes, 3))
		return false;
	if (!lock_one(call, r->asset_id, r->id, &l, &found))
	{
		hc_writer_end(&w);
		return false;
	}
	if (!found || strcmp(l.status, "HELD") != 0 || !hold_is_current(r))
		elog(ERROR, "held reservation \"%s\" does not hold asset \"%s\"", r->id, r->asset_id);
	values[0] = TimestampTzGetDatum(until);
	hc_write_update(&w, &reservation_extend, &l.tid, values, nulls);
	values[0] = TimestampTzGetDatum(until);
	values[1] = Int32GetDatum(hc_write_add(r->asset_version, 1));
	values[2] = TimestampTzGetDatum(call->now);
	hc_write_update(&w, &asset_extend, &r->asset_tid, values, nulls);
	log_change(&w, r, hc_write_add(r->asset_version, 1), "extend", "call", r->id, l.buyer_id, 0, 0, detail);
	hc_writer_end(&w);
	return true;
}
