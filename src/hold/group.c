/*
 * group.c
 *		Group holds, one reservation over many assets: hc_hold_many (these
 *		seats, every one or none), what it shares with hc_hold_best
 *		(best.c), hc_commit, hc_release and hc_extend of a group's id
 *		(hold.c sends them here), and the end of an expired group hold
 *		whose seat another hold takes.
 *
 * Invariants:
 *   1. A group hold is a row per seat in hc_reservations, each with the
 *      group's id, buyer, expiry and creation, and `seats`, their number.
 *      The key and the request's fingerprint are on the row of its first
 *      seat (bytewise by asset_id) alone: the one key space stays the
 *      unique index on the key.
 *   2. Each seat changes as hold.c changes one asset: under its asset's
 *      lock, checked on the locked row, with its ledger row.  A hold never
 *      waits for a seat (FOR NO KEY UPDATE SKIP LOCKED): two buyers whose
 *      sets overlap never deadlock; one gets the seats, the other RS001.
 *      A call on the group's id waits for its seats' assets, bytewise by
 *      asset_id, so two calls on one group wait in the same order.
 *   3. An expired group ends as a whole: a hold that takes one of its seats
 *      locks every one (never waiting) and ends them all, or refuses the
 *      seat as held by a call in flight.  The sweeper ends its seats one by
 *      one, each exactly once.
 *   4. On Citus, a group's seats are one pool's, whose rows are all on
 *      the pool's shards (scope_id): a group hold there is one shard's
 *      statements, committed in one phase.  hc_hold_many finds the pool of
 *      its seats where it is called and is sent there in the form given it
 *      (hc_hold_many_scoped); seats of several pools are refused (0A000).
 *      A database distributed by 0.3.0, by asset id, refuses group holds.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/tuplestore.h"

#include "common/errors.h"
#include "common/idempotency.h"
#include "common/ids.h"
#include "common/ledger.h"
#include "common/notify.h"
#include "common/result.h"
#include "common/settings.h"
#include "common/validate.h"
#include "core/placement.h"
#include "core/version.h"
#include "hold/group.h"

PG_FUNCTION_INFO_V1(hc_hold_many);
PG_FUNCTION_INFO_V1(hc_hold_many_scoped);

/* A reservation's seats as they are now (one, seats NULL, for hc_hold's). */
static HcStatement group_seats = {
	"SELECT asset_id, buyer_id, status, expires_at, created_at, seats, scope_id FROM hc_reservations"
	" WHERE id" EQ ":reservation_id",
	{{"reservation_id", TEXTOID}}
};


/*
 * The group hold itself, its seats locked and free: each asset HELD by it,
 * a reservation per seat (the key and fingerprint on the first), the
 * ledger.  Returns a row per seat.
 */
static HcStatement group_take = {
	"WITH taken AS ("
	"  UPDATE hc_assets"
	"     SET status = 'HELD', hold_expires_at = :expires_at,"
	"         current_reservation_id = :reservation_id,"
	"         version = version" PLUS "1, updated_at = :now"
	"   WHERE id" EQ "ANY (:asset_ids) AND status" EQ "'AVAILABLE'"
	"  RETURNING id, version),"
	" held AS ("
	"  INSERT INTO hc_reservations (id, asset_id, buyer_id, idempotency_key, fingerprint,"
	"                               status, expires_at, created_at, seats)"
	"  SELECT :reservation_id, t.id, :buyer_id,"
	"         CASE WHEN t.id" EQ ":first" " THEN :key END,"
	"         CASE WHEN t.id" EQ ":first" " THEN :fingerprint END,"
	"         'HELD', :expires_at, :now, :seats FROM taken t)"
	HC_LEDGER_ROWS("'asset'", "t.id", "t.version", "'hold'", "'call'", ":reservation_id",
				   ":buyer_id", "1", "0", "NULL")
	" FROM taken t RETURNING seq",
	{{"asset_ids", TEXTARRAYOID}, {"reservation_id", TEXTOID}, {"expires_at", TIMESTAMPTZOID},
	 {"buyer_id", TEXTOID}, {"first", TEXTOID}, {"key", TEXTOID}, {"fingerprint", BYTEAOID},
	 {"seats", INT4OID}, HC_LEDGER_PARAMS}
};


static int
seat_order(const void *a, const void *b)
{
	return strcmp(((const HoldReservation *) a)->asset_id,
				  ((const HoldReservation *) b)->asset_id);
}

static int
id_order(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/* Refuse a group hold where a pool's seats are spread over the nodes. */
void
hc_group_seats_together(HcCall *call)
{
	if (!hc_seats_together(call))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s is not available on a database distributed by holdcommit 0.3.0", call->function),
				 errdetail("Its tables are distributed by asset id, which spreads a pool's seats over the nodes."),
				 errhint("Hold each asset with hc_hold(), in one transaction; doc/scale-out.md, \"Updating\", says what a database needs for them.")));
}

/* The seats of reservation id as they are, bytewise by asset_id; *n of them. */
static HoldReservation *
group_load(HcCall *call, const char *id, int *n)
{
	HcArgs		args;
	HoldReservation *seats;
	int			i;

	hc_args(&args, &group_seats);
	hc_bind_text(&args, "reservation_id", id);
	*n = (int) hc_run(call, &args, SPI_OK_SELECT);
	seats = palloc0(sizeof(HoldReservation) * Max(*n, 1));
	for (i = 0; i < *n; i++)
	{
		HoldReservation *r = &seats[i];
		bool		null;
		Datum		d = hc_datum(i, "seats", &null);

		r->id = pstrdup(id);
		r->asset_id = hc_text(call, i, "asset_id");
		r->buyer_id = hc_text(call, i, "buyer_id");
		r->status = hc_text(call, i, "status");
		r->expires_at = hc_timestamptz(i, "expires_at");
		r->created_at = hc_timestamptz(i, "created_at");
		r->seats = null ? 0 : DatumGetInt32(d);
		d = hc_datum(i, "scope_id", &null);
		r->scope_id = null ? NULL : hc_text(call, i, "scope_id");
	}
	qsort(seats, *n, sizeof(HoldReservation), seat_order);
	return seats;
}

/* The asset of seat r, locked as fetch locks it: false if skipped. */
static bool
group_lock_seat(HcCall *call, HcFetch *fetch, HoldReservation *r)
{
	Datum		values[4];
	bool		nulls[4];

	if (!hc_fetch_tid(call, fetch, r->asset_id, values, nulls, &r->asset_tid))
		return false;
	r->asset_status = TextDatumGetCString(values[0]);
	r->asset_reservation_id = nulls[1] ? NULL : TextDatumGetCString(values[1]);
	r->asset_version = DatumGetInt32(values[3]);
	return true;
}

/*
 * A group's seats for a call on its id (and, in the forms given an asset,
 * that asset's, which must be one of them, or on Citus their routing id,
 * which hc_route_reservation gives): each seat's asset locked, waiting,
 * bytewise, then the seats read again as they are under the locks.
 */
static HoldReservation *
group_lock(HcCall *call, const char *id, const char *asset_id, int *n)
{
	HoldReservation *locked;
	HoldReservation *seats;
	int			i;

	hc_group_seats_together(call);
	locked = group_load(call, id, n);
	for (i = 0; asset_id != NULL && i < *n; i++)
		if (strcmp(locked[i].asset_id, asset_id) == 0 ||
			(locked[i].scope_id != NULL && strcmp(locked[i].scope_id, asset_id) == 0))
			break;
	if (*n == 0 || (asset_id != NULL && i == *n))
		hc_reservation_not_found(id, asset_id == NULL ? "hold" :
								 psprintf("hold of asset \"%s\"", asset_id),
								 "Use the reservation_id (and an asset_id) that hc_hold_many() or hc_hold_best() returned.");
	for (i = 0; i < *n; i++)
		if (!group_lock_seat(call, &hc_hold_lock_asset, &locked[i]))
			elog(ERROR, "asset \"%s\" of reservation \"%s\" vanished", locked[i].asset_id, id);
	/* A group's seats never change: the same ones, in the same order. */
	seats = group_load(call, id, n);
	for (i = 0; i < *n; i++)
	{
		seats[i].asset_status = locked[i].asset_status;
		seats[i].asset_reservation_id = locked[i].asset_reservation_id;
		seats[i].asset_version = locked[i].asset_version;
		seats[i].asset_tid = locked[i].asset_tid;
	}
	return seats;
}

/*
 * hold.c's hc_hold (a hold taking a seat of an expired hold, in its
 * statements): if reservation_id is a group's, end every seat still held
 * by it (the caller holds one of them), each asset locked without waiting.
 */
int
hc_group_expire(HcCall *call, const char *reservation_id)
{
	HoldReservation *seats;
	int			n;
	int			i;

	if (!hc_sql_at_least("0.4.0"))
		return 0;
	seats = group_load(call, reservation_id, &n);
	if (n == 0 || seats[0].seats == 0)
		return 0;
	for (i = 0; i < n; i++)
		if (strcmp(seats[i].status, "HELD") == 0 &&
			!group_lock_seat(call, &hc_hold_take_asset, &seats[i]))
			return -1;
	for (i = 0; i < n; i++)
	{
		HoldReservation *r = &seats[i];

		if (strcmp(r->status, "HELD") != 0 || !hold_is_current(r))
			continue;
		if (r->expires_at > call->now)
			elog(ERROR, "reservation \"%s\" has not expired", reservation_id);
		hc_hold_free(call, r, "EXPIRED", "expire", "reclaim");
	}
	return 1;
}

/*
 * The state of a group locked by group_lock, for a call on it: COMMITTED,
 * RELEASED, EXPIRED (a seat has ended as such, or the hold's end has
 * passed) or HELD.  A mix that no sequence of calls makes is an error.
 */
static const char *
group_state(HcCall *call, HoldReservation *seats, int n)
{
	int			committed = 0;
	int			released = 0;
	bool		expired = false;
	int			i;

	for (i = 0; i < n; i++)
	{
		committed += strcmp(seats[i].status, "COMMITTED") == 0;
		released += strcmp(seats[i].status, "RELEASED") == 0;
		expired = expired || strcmp(seats[i].status, "EXPIRED") == 0 ||
			seats[i].expires_at <= call->now;
	}
	if ((committed > 0 && committed < n) || (released > 0 && released < n))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("the seats of reservation \"%s\" disagree", seats[0].id),
				 errhint("Run hc_check() to list the broken invariants.")));
	return committed ? "COMMITTED" : released ? "RELEASED" : expired ? "EXPIRED" : "HELD";
}

/* The row a call on a group returns: its first seat's, with the group's state. */
static Datum
group_result(HcCall *call, FunctionCallInfo fcinfo, HoldReservation *first, const char *state,
			 bool replayed)
{
	Datum		values[7];
	bool		nulls[7];

	hc_call_end(call);
	first->status = (char *) state;
	first->replayed = replayed;
	hc_hold_values(first, values, nulls);
	return hc_result_tuple(fcinfo, values, nulls);
}

static void
group_not_active(HoldReservation *seats, int n, const char *state, const char *hint)
{
	hc_reservation_not_active(seats[0].id, psprintf(" of %d assets", n), state, hint);
}

/* hc_commit of a group: every seat sold, or none. */
Datum
hc_group_commit(HcCall *call, FunctionCallInfo fcinfo, const char *asset_id, const char *id,
				bool late_ok)
{
	int			n;
	HoldReservation *seats = group_lock(call, id, asset_id, &n);
	const char *state = group_state(call, seats, n);
	int			i;

	if (strcmp(state, "COMMITTED") == 0)
		return group_result(call, fcinfo, &seats[0], state, true);
	if (strcmp(state, "RELEASED") == 0)
		group_not_active(seats, n, state, "The buyer cancelled this hold: refund the payment.");
	if (strcmp(state, "EXPIRED") == 0 && !late_ok)
		hc_reservation_expired(id, psprintf(" of %d assets", n), seats[0].expires_at,
							   "Refund the payment, or commit with late_ok => true if the assets may still be free.");
	for (i = 0; i < n; i++)
	{
		HoldReservation *r = &seats[i];

		if (strcmp(r->status, "HELD") == 0 && hold_is_current(r))
			continue;
		if (strcmp(state, "HELD") == 0)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("held reservation \"%s\" does not hold asset \"%s\"", id, r->asset_id),
					 errhint("Run hc_check() to list the broken invariants.")));
		if (hc_hold_taken_since(call, r))
			hc_reservation_expired(id, psprintf(" of %d assets", n), r->expires_at,
								   psprintf("Another buyer has taken asset \"%s\" since: refund the payment.",
											r->asset_id));
	}
	/* A seat the sweeper has ended is sold from EXPIRED, as a late commit. */
	for (i = 0; i < n; i++)
		hc_hold_sell(call, &seats[i]);
	return group_result(call, fcinfo, &seats[0], "COMMITTED", false);
}

/* hc_release of a group: every seat given back; an expired one ends as EXPIRED. */
Datum
hc_group_release(HcCall *call, FunctionCallInfo fcinfo, const char *asset_id, const char *id)
{
	int			n;
	HoldReservation *seats = group_lock(call, id, asset_id, &n);
	const char *state = group_state(call, seats, n);
	bool		expired = strcmp(state, "EXPIRED") == 0;
	int			i;

	if (strcmp(state, "COMMITTED") == 0)
		group_not_active(seats, n, state, "Sold assets cannot be released; refund through your payment flow.");
	if (strcmp(state, "RELEASED") == 0)
		return group_result(call, fcinfo, &seats[0], state, true);
	for (i = 0; i < n; i++)
		if (strcmp(seats[i].status, "HELD") == 0 && hold_is_current(&seats[i]))
			hc_hold_free(call, &seats[i], expired ? "EXPIRED" : "RELEASED",
						 expired ? "expire" : "release", expired ? "reclaim" : "call");
	return group_result(call, fcinfo, &seats[0], expired ? "EXPIRED" : "RELEASED", expired);
}

/* hc_extend of a group: every seat's end moved, never past created_at + max_hold. */
Datum
hc_group_extend(HcCall *call, FunctionCallInfo fcinfo, const char *asset_id, const char *id,
				int64 ttl)
{
	int			n;
	HoldReservation *seats = group_lock(call, id, asset_id, &n);
	const char *state = group_state(call, seats, n);
	TimestampTz until;
	int			i;

	if (strcmp(state, "COMMITTED") == 0 || strcmp(state, "RELEASED") == 0)
		group_not_active(seats, n, state, "Only a held reservation can be extended.");
	if (strcmp(state, "EXPIRED") == 0)
		hc_reservation_expired(id, psprintf(" of %d assets", n), seats[0].expires_at,
							   "Hold the assets again if they are still available.");
	until = Min(call->now + ttl, seats[0].created_at + (int64) hc_max_hold * USECS_PER_SEC);
	for (i = 0; i < n; i++)
	{
		if (!hold_is_current(&seats[i]))
			elog(ERROR, "held reservation \"%s\" does not hold asset \"%s\"", id, seats[i].asset_id);
		if (until > seats[i].expires_at)
			hc_hold_move_end(call, &seats[i], until);
	}
	return group_result(call, fcinfo, &seats[0], state, false);
}

/* ---------------------------------------------------------------------------
 * Taking seats
 */


/*
 * Lock seat asset_id for a hold, never waiting: NULL if it does not exist;
 * else its state, "LOCKED" if a call in flight has it.
 */
const char *
hc_seat_lock(HcCall *call, const char *asset_id, Seat *seat)
{
	Datum		values[4];
	bool		nulls[4];

	seat->asset_id = (char *) asset_id;
	seat->holder = NULL;
	if (!hc_fetch_tid(call, &hc_hold_take_asset, asset_id, values, nulls, &seat->tid))
	{
		if (!hc_fetch(call, &hc_hold_peek_asset, asset_id, values, nulls))
			return NULL;
		return "LOCKED";
	}
	seat->status = TextDatumGetCString(values[0]);
	seat->until = nulls[2] ? 0 : DatumGetTimestampTz(values[2]);
	seat->version = DatumGetInt32(values[3]);
	if (strcmp(seat->status, "HELD") == 0 && !nulls[1])
		seat->holder = TextDatumGetCString(values[1]);
	return seat->status;
}

/*
 * Free a locked seat that an expired hold has: the hold ends (a group's
 * wholly).  false if a call in flight has a seat of that group.
 */
bool
hc_seat_reclaim(HcCall *call, Seat *seat)
{
	HoldReservation r = {0};
	int			group;

	if (seat->holder == NULL || strcmp(seat->status, "HELD") != 0)
		return true;
	group = hc_group_expire(call, seat->holder);
	if (group != 0)
		return group > 0;
	r.id = seat->holder;
	r.asset_id = seat->asset_id;
	r.asset_status = "HELD";
	r.asset_reservation_id = seat->holder;
	r.asset_version = seat->version;
	r.asset_tid = seat->tid;
	hc_hold_free(call, &r, "EXPIRED", "expire", "reclaim");
	return true;
}


void
hc_group_request(HcCall *call, GroupHold *g, const char *buyer_id, const char *key, int64 ttl)
{
	g->buyer_id = buyer_id;
	g->key = key;
	g->ttl = ttl;
	hc_fingerprint_init(&g->fp, call->function);
	hc_fingerprint_add(&g->fp, buyer_id);
	hc_fingerprint_add_int64(&g->fp, ttl);
}

/* A replay: the hold as this key's request made it, true; false if the key is new. */
bool
hc_group_replay(HcCall *call, GroupHold *g)
{
	HcKnownKey	known;
	HoldReservation *seats;
	int			i;

	if (!hc_idempotency_find(call, g->key, &g->fp, &known))
		return false;
	seats = group_load(call, known.id, &g->n);
	g->ids = palloc(sizeof(char *) * Max(g->n, 1));
	for (i = 0; i < g->n; i++)
		g->ids[i] = seats[i].asset_id;
	g->r.id = known.id;
	g->r.created_at = known.created_at;
	g->r.expires_at = known.created_at + g->ttl;
	g->r.replayed = true;
	return true;
}

/* Hold g->ids, each locked and free now (reclaimed), as one group. */
void
hc_group_write(HcCall *call, GroupHold *g)
{
	HcArgs		args;
	int			i;

	qsort(g->ids, g->n, sizeof(char *), id_order);
	g->r.id = hc_new_reservation_id(call->now);
	g->r.created_at = call->now;
	g->r.expires_at = call->now + g->ttl;
	hc_args(&args, &group_take);
	hc_bind(&args, "asset_ids", hc_text_array(g->ids, g->n));
	hc_bind_text(&args, "reservation_id", g->r.id);
	hc_bind(&args, "expires_at", TimestampTzGetDatum(g->r.expires_at));
	hc_bind_text(&args, "buyer_id", g->buyer_id);
	hc_bind_text(&args, "first", g->ids[0]);
	hc_bind_text(&args, "key", g->key);
	hc_bind(&args, "fingerprint", PointerGetDatum(hc_fingerprint_digest(&g->fp)));
	hc_bind(&args, "seats", Int32GetDatum(g->n));
	if (hc_run(call, &args, SPI_OK_INSERT_RETURNING) != (uint64) g->n)
		elog(ERROR, "a group hold of %d locked assets took fewer", g->n);
	for (i = 0; i < g->n; i++)
		hc_notify("asset", g->ids[i], "HELD");
}

/* The rows of a group hold, one per seat, into the function's result. */
void
hc_group_rows(FunctionCallInfo fcinfo, GroupHold *g)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			i;

	for (i = 0; i < g->n; i++)
	{
		HoldReservation r = g->r;
		Datum		values[7];
		bool		nulls[7];

		r.asset_id = g->ids[i];
		r.buyer_id = (char *) g->buyer_id;
		r.status = "HELD";
		hc_hold_values(&r, values, nulls);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
}

/*
 * asset_ids: 1 to HC_GROUP_MAX_SEATS ids, none null or twice; bytewise in
 * *ids.
 */
static char **
group_arg_ids(FunctionCallInfo fcinfo, int argno, int *n)
{
	ArrayType  *array;
	Datum	   *elems;
	bool	   *nulls;
	char	  **ids;
	int			i;

	hc_arg_not_null(fcinfo, argno, "asset_ids");
	array = PG_GETARG_ARRAYTYPE_P(argno);
	if (ARR_NDIM(array) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("asset_ids must be a one-dimensional array")));
	deconstruct_array(array, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, n);
	if (*n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("asset_ids must not be empty")));
	if (*n > HC_GROUP_MAX_SEATS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("asset_ids has too many assets"),
				 errdetail("It has %d; one hold takes at most %d.", *n, HC_GROUP_MAX_SEATS)));
	ids = palloc(sizeof(char *) * *n);
	for (i = 0; i < *n; i++)
	{
		text	   *t;

		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("asset_ids must not contain null")));
		t = DatumGetTextPP(elems[i]);
		if (VARSIZE_ANY_EXHDR(t) == 0 || VARSIZE_ANY_EXHDR(t) > HC_MAX_ID_BYTES)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("asset_ids must hold ids of 1 to %d bytes", HC_MAX_ID_BYTES),
					 errdetail("Element %d is %d bytes long.", i + 1, (int) VARSIZE_ANY_EXHDR(t))));
		ids[i] = text_to_cstring(t);
	}
	qsort(ids, *n, sizeof(char *), id_order);
	for (i = 1; i < *n; i++)
		if (strcmp(ids[i - 1], ids[i]) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("asset_ids names asset \"%s\" twice", ids[i])));
	return ids;
}

/* On Citus, an asset of :asset_ids that is not of the pool :scope_id, if any. */
static HcStatement seat_elsewhere = {
	"SELECT id FROM hc_assets WHERE id" EQ "ANY (:asset_ids)"
	"   AND scope_id IS DISTINCT FROM :scope_id LIMIT 1",
	{{"asset_ids", TEXTARRAYOID}, {"scope_id", TEXTOID}}
};

/* On Citus, the one routing id of the n assets ids: RS006 for an asset that does not exist. */
static char *
group_scope(HcCall *call, char **ids, int n)
{
	const char *unknown = NULL;
	char	   *scope = hc_assets_scope(call, ids, n, &unknown);

	if (unknown != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_HC_NOT_FOUND),
				 errmsg("asset \"%s\" does not exist", unknown),
				 errdetail("There is no row for asset \"%s\" in hc_assets.", unknown),
				 errhint("Add the asset with hc_asset_add() first.")));
	return scope;
}

/*
 * On Citus, refuse seats given with a routing id that is not theirs (the
 * form given it is granted to applications): 22023.  Another routing id's
 * rows may share its shard.
 */
static void
group_in_scope(HcCall *call, char **ids, int n, const char *scope_id)
{
	HcArgs		args;

	hc_args(&args, &seat_elsewhere);
	hc_bind(&args, "asset_ids", hc_text_array(ids, n));
	hc_bind_text(&args, "scope_id", scope_id);
	if (hc_run(call, &args, SPI_OK_SELECT) > 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("asset \"%s\" is not of pool \"%s\"", hc_text(call, 0, "id"), scope_id),
				 errhint("Call hc_hold_many(asset_ids, ...), which finds their pool.")));
}

/*
 * hc_hold_many(asset_ids, buyer_id, idempotency_key, ttl): hold every asset
 * or none, as one reservation; RS001 names those not available.  On Citus,
 * sent to the node of the assets' pool as hc_hold_many(scope_id, ...).
 */
static Datum
hold_many(FunctionCallInfo fcinfo, int first)
{
	int			n;
	char	  **ids = group_arg_ids(fcinfo, first, &n);
	char	   *buyer_id = hc_arg_id(fcinfo, first + 1, "buyer_id");
	char	   *key = hc_arg_key(fcinfo, first + 2, "idempotency_key");
	int64		ttl = hc_arg_ttl(fcinfo, first + 3, "ttl");
	HcCall		call;
	GroupHold	g = {0};
	int			i;

	InitMaterializedSRF(fcinfo, 0);
	hc_call_begin_keyed(&call, fcinfo, "hc_hold_many");
	hc_require_sql_at_least("0.4.0", call.function);
	hc_group_seats_together(&call);
	if (first > 0)
	{
		char	   *scope_id = hc_arg_id(fcinfo, 0, "scope_id");

		HC_ROUTE(&call, fcinfo, scope_id);
		if (hc_distributed(&call))
			group_in_scope(&call, ids, n, scope_id);
	}
	else if (hc_distributed(&call))
	{
		hc_send_prefixed(&call, fcinfo, group_scope(&call, ids, n));
		hc_call_end(&call);
		return (Datum) 0;
	}
	hc_group_request(&call, &g, buyer_id, key, ttl);
	for (i = 0; i < n; i++)
		hc_fingerprint_add(&g.fp, ids[i]);

	if (!hc_group_replay(&call, &g))
	{
		StringInfoData refused;
		int			nrefused = 0;
		Seat	   *seats = palloc(sizeof(Seat) * n);

		initStringInfo(&refused);
		for (i = 0; i < n; i++)
		{
			const char *status = hc_seat_lock(&call, ids[i], &seats[i]);

			if (status == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_HC_NOT_FOUND),
						 errmsg("asset \"%s\" does not exist", ids[i]),
						 errdetail("There is no row for asset \"%s\" in hc_assets.", ids[i]),
						 errhint("Add the asset with hc_asset_add() first.")));
			if (strcmp(status, "LOCKED") != 0 &&
				hc_hold_can_take(&call, status, seats[i].until) && hc_seat_reclaim(&call, &seats[i]))
				continue;
			appendStringInfo(&refused, "%s\"%s\" (%s)", nrefused++ > 0 ? ", " : "", ids[i],
							 strcmp(status, "LOCKED") == 0 || strcmp(status, "HELD") == 0 ?
							 "held" : "sold");
		}
		if (nrefused > 0)
			ereport(ERROR,
					(errcode(ERRCODE_HC_ASSET_UNAVAILABLE),
					 errmsg("%d of the %d assets are not available", nrefused, n),
					 errdetail("Not available: %s.", refused.data),
					 errhint("Nothing was held. Offer the buyer other assets.")));
		g.ids = ids;
		g.n = n;
		hc_group_write(&call, &g);
	}
	hc_call_end(&call);
	hc_group_rows(fcinfo, &g);
	return (Datum) 0;
}

Datum
hc_hold_many(PG_FUNCTION_ARGS)
{
	return hold_many(fcinfo, 0);
}

/* hc_hold_many(scope_id, asset_ids, ...): the form Citus sends it as. */
Datum
hc_hold_many_scoped(PG_FUNCTION_ARGS)
{
	return hold_many(fcinfo, 1);
}

