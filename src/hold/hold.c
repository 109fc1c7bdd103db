/*
 * hold.c
 *		Unique assets (quantity 1): hc_asset_add, hc_hold, hc_commit,
 *		hc_release, hc_extend, and the sweep of expired holds.
 *
 * Invariants:
 *   1. An asset is AVAILABLE, HELD by one reservation until
 *      hold_expires_at, or SOLD.
 *   2. Every call that changes a reservation first locks its asset row, so
 *      the asset row serialises everything that happens to the asset; locks
 *      are always taken asset first, then reservation.
 *   3. Each change moves the asset and the reservation and writes the
 *      ledger row, whose seq is the asset's new version: without the
 *      executor (direct.c), or where the tables need it (core/write.c) as
 *      one statement.
 *   4. Each call routes by its asset (HC_ROUTE, hc_route_reservation:
 *      core/placement.h) before it reads anything.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

#include "compat.h"
#include "common/errors.h"
#include "common/idempotency.h"
#include "common/ids.h"
#include "common/ledger.h"
#include "common/notify.h"
#include "common/result.h"
#include "common/settings.h"
#include "common/sweep.h"
#include "common/validate.h"
#include "core/fetch.h"
#include "core/placement.h"
#include "core/version.h"
#include "hold/group.h"
#include "hold/hold.h"

PG_FUNCTION_INFO_V1(hc_asset_add);
PG_FUNCTION_INFO_V1(hc_asset_add_scoped);
PG_FUNCTION_INFO_V1(hc_hold);
PG_FUNCTION_INFO_V1(hc_commit);
PG_FUNCTION_INFO_V1(hc_release);
PG_FUNCTION_INFO_V1(hc_extend);
PG_FUNCTION_INFO_V1(hc_commit_asset);
PG_FUNCTION_INFO_V1(hc_release_asset);
PG_FUNCTION_INFO_V1(hc_extend_asset);

#define ADD_ASSET(columns, values, conflict) \
	"WITH a AS (" \
	"  INSERT INTO hc_assets (id, name, created_at, updated_at" columns ")" \
	"  VALUES (:asset_id, :name, :now, :now" values ")" \
	conflict " RETURNING *)," \
	" logged AS (" \
	HC_LEDGER_ROWS("'asset'", ":asset_id", "a.version", "'add'", "'adjustment'", "NULL", "NULL", \
				   "0", "1", "NULL") " FROM a)" \
	" SELECT * FROM a"

/*
 * An asset of 0.2.0's and 0.3.0's hc_assets; of 0.4.0's, with its place in a
 * pool.  Only its id is a conflict it answers (an asset outside a pool has
 * no place; on Citus, where the primary key holds the routing id too, the
 * id was recorded first, in hc_asset_routes): a place that holds an asset
 * already is hc_assets_pool's unique violation.
 */
#define ADD_SEAT_PARAMS \
	{{"asset_id", TEXTOID}, {"name", TEXTOID}, {"pool", TEXTOID}, {"rank", INT4OID}, \
	 {"grp", TEXTOID}, {"pos", INT4OID}, HC_LEDGER_PARAMS}
static HcStatement add_asset = {
	ADD_ASSET("", "", " ON CONFLICT DO NOTHING"),
	{{"asset_id", TEXTOID}, {"name", TEXTOID}, HC_LEDGER_PARAMS}
};
static HcStatement add_seat = {
	ADD_ASSET(", pool, rank, grp, pos", ", :pool, :rank, :grp, :pos", " ON CONFLICT (id) DO NOTHING"),
	ADD_SEAT_PARAMS
};
static HcStatement add_seat_routed = {
	ADD_ASSET(", pool, rank, grp, pos", ", :pool, :rank, :grp, :pos", ""), ADD_SEAT_PARAMS
};

/*
 * On Citus, an asset id's routing id (its pool's, or its own), on the shard
 * of the id: false if the id is taken.
 */
static HcStatement record_route = {
	"INSERT INTO hc_asset_routes (asset_id, scope_id) VALUES (:asset_id, :scope_id)"
	" ON CONFLICT (asset_id) DO NOTHING",
	{{"asset_id", TEXTOID}, {"scope_id", TEXTOID}}
};
static HcStatement find_route = {
	"SELECT scope_id FROM hc_asset_routes WHERE asset_id" EQ ":asset_id",
	{{"asset_id", TEXTOID}}
};

/*
 * The hold itself, under the asset's lock, for a new key (which the key's
 * lock keeps new): take the asset if it is still free, insert the
 * reservation, write the ledger.  The version goes up by :version_step: 2
 * when an expired hold is taken over, whose end (end_expired_hold) is the
 * change before.  Returns the hold's seq.
 */
static HcStatement hold_asset = {
	"WITH taken AS ("
	"  UPDATE hc_assets"
	"     SET status = 'HELD', hold_expires_at = :expires_at,"
	"         current_reservation_id = :reservation_id,"
	"         version = version" PLUS ":version_step, updated_at = :now"
	"   WHERE id" EQ ":asset_id"
	"     AND (status" EQ "'AVAILABLE'"
	"          OR (status" EQ "'HELD' AND hold_expires_at" LE ":now))"
	"  RETURNING version),"
	" held AS ("
	"  INSERT INTO hc_reservations"
	"    (id, asset_id, buyer_id, idempotency_key, fingerprint, status, expires_at, created_at)"
	"  SELECT :reservation_id, :asset_id, :buyer_id, :key, :fingerprint, 'HELD', :expires_at,"
	"         :now FROM taken)"
	HC_LEDGER_ROWS("'asset'", ":asset_id", "version", "'hold'", "'call'", ":reservation_id",
				   ":buyer_id", "1", "0", "NULL")
	" FROM taken RETURNING seq",
	{{"asset_id", TEXTOID}, {"reservation_id", TEXTOID}, {"expires_at", TIMESTAMPTZOID},
	 {"buyer_id", TEXTOID}, {"key", TEXTOID}, {"fingerprint", BYTEAOID},
	 {"version_step", INT4OID}, HC_LEDGER_PARAMS}
};

/*
 * End the expired hold that a hold of the asset just took over (passive
 * reclamation), with its ledger row at :seq (the one before the hold's).
 */
static HcStatement end_expired_hold = {
	"WITH r AS ("
	"  UPDATE hc_reservations SET status = 'EXPIRED', ended_at = :now"
	"   WHERE asset_id" EQ ":asset_id" " AND id" EQ ":reservation_id"
	"     AND status" EQ "'HELD' RETURNING buyer_id)"
	HC_LEDGER_ROWS("'asset'", ":asset_id", ":seq", "'reclaim'", "'reclaim'", ":reservation_id",
				   "r.buyer_id", "-1", "0", "NULL")
	" FROM r RETURNING seq",
	{{"asset_id", TEXTOID}, {"reservation_id", TEXTOID}, {"seq", INT8OID}, HC_LEDGER_PARAMS}
};

/*
 * A reservation's asset (a group's first seat, and its number of seats, in
 * 0.4.0).
 */
static HcFetch reservation_asset = {"hc_reservations", "id", HC_FETCH_READ, 1, {"asset_id"},
.then = "asset_id"};
static HcFetch reservation_seats = {"hc_reservations", "id", HC_FETCH_READ, 3,
{"asset_id", "seats", "scope_id"}, .then = "asset_id"};

/* The reservation as it is under its asset's lock. */
static HcFetch read_reservation = {"hc_reservations", "id", HC_FETCH_READ, 4,
{"buyer_id", "status", "expires_at", "created_at"}, .then = "asset_id"};

/*
 * The sweeper's expired holds, oldest first from :resume_from on: lock each
 * one's asset unless another transaction has it (the limit counts only the
 * rows locked, so two sweeps at once take different rows), give the asset
 * back if it is still HELD by that reservation and its hold has still ended
 * (both checked again on the locked row), end the reservation as EXPIRED,
 * write the ledger.  The lateral lock makes the plan walk the expiry index
 * in order and stop at the limit.  Returns the assets freed, with the hold's
 * end (the next batch starts there), and on every row the number of
 * reservations ended (one per asset freed).
 *
 * Each step reads the one before it once, and meets a table only through
 * that table's unique index: no CTE is joined to another, whatever the
 * planner estimates for them (doc/architecture.md, "Plan policy").  What a
 * later step needs travels down in RETURNING: the hold's end from doomed,
 * the asset's new version from freed.  The reservation's status is tested
 * IS NOT DISTINCT FROM, which no index serves, so that the partial expiry
 * index of HELD reservations cannot become the way into the join.
 */
#define SWEEP_HOLDS(ledger_rows) \
	"WITH doomed AS (" \
	"  SELECT a.id, a.rid, r.expires_at" \
	"    FROM hc_reservations r" \
	"   CROSS JOIN LATERAL (" \
	"     SELECT l.id, l.current_reservation_id AS rid FROM hc_assets l" \
	"      WHERE l.id" EQ "r.asset_id" " AND l.current_reservation_id" EQ "r.id" \
	"        AND l.status" EQ "'HELD'" " AND l.hold_expires_at" LE ":now" \
	"        FOR NO KEY UPDATE SKIP LOCKED) a" \
	"   WHERE r.status" EQ "'HELD'" " AND r.expires_at" LE ":now" \
	"     AND r.expires_at" GE ":resume_from" \
	"   ORDER BY r.expires_at LIMIT :batch_size)," \
	" freed AS (" \
	"  UPDATE hc_assets a" \
	"     SET status = 'AVAILABLE', hold_expires_at = NULL, current_reservation_id = NULL," \
	"         version = a.version" PLUS "1, updated_at = :now" \
	"    FROM doomed d" \
	"   WHERE a.id" EQ "d.id" \
	"  RETURNING a.id, d.rid, a.version, d.expires_at)," \
	" ended AS (" \
	"  UPDATE hc_reservations r SET status = 'EXPIRED', ended_at = :now" \
	"    FROM freed f" \
	"   WHERE r.asset_id" EQ "f.id" " AND r.id" EQ "f.rid" \
	"     AND r.status IS NOT DISTINCT FROM 'HELD'" \
	"  RETURNING r.*, f.version AS asset_version)," \
	" logged AS (" \
	ledger_rows \
	"    FROM ended e)" \
	" SELECT f.id AS asset_id, f.expires_at, (SELECT pg_catalog.count(*) FROM ended) AS ended" \
	"   FROM freed f"
#define SWEEP_HOLDS_PARAMS {{"resume_from", TIMESTAMPTZOID}, {"batch_size", INT4OID}, HC_LEDGER_PARAMS}

/* 0.2.0's and 0.3.0's tables; from 0.4.0 on, each ledger row with its routing id. */
static HcStatement sweep_holds_03 = {
	SWEEP_HOLDS(HC_LEDGER_ROWS("'asset'", "e.asset_id", "e.asset_version", "'expire'", "'sweep'", "e.id",
							   "e.buyer_id", "-1", "0", "NULL")),
	SWEEP_HOLDS_PARAMS
};
static HcStatement sweep_holds = {
	SWEEP_HOLDS(HC_LEDGER_ROWS_SCOPED("e.scope_id", "'asset'", "e.asset_id", "e.asset_version", "'expire'",
									  "'sweep'", "e.id", "e.buyer_id", "-1", "0", "NULL")),
	SWEEP_HOLDS_PARAMS
};

/* The hc_reservation row a function returns. */
static Datum
hold_result(FunctionCallInfo fcinfo, const HoldReservation *r)
{
	Datum		values[7];
	bool		nulls[7];

	hc_hold_values(r, values, nulls);
	return hc_result_tuple(fcinfo, values, nulls);
}

/* An asset's place in its pool, argument argno: null, an id, or an integer. */
static void
bind_place(HcArgs *args, FunctionCallInfo fcinfo, int argno, const char *name, bool id)
{
	if (PG_ARGISNULL(argno))
		hc_bind_null(args, name);
	else if (id)
		hc_bind_text(args, name, hc_arg_id(fcinfo, argno, name));
	else
		hc_bind(args, name, PG_GETARG_DATUM(argno));
}

/* The error of an asset id that is taken. */
static void
asset_exists(const char *id)
{
	ereport(ERROR,
			(errcode(ERRCODE_UNIQUE_VIOLATION),
			 errmsg("asset \"%s\" already exists", id),
			 errdetail("hc_assets already has a row for asset \"%s\".", id),
			 errhint("Choose another id; an existing asset keeps its state.")));
}

/* Are the tables on Citus, distributed by scope_id (hc_asset_routes in use)? */
static bool
routes_recorded(HcCall *call)
{
	return hc_distributed(call) && hc_seats_together(call);
}

/*
 * On Citus, record asset id's routing id: an error if the id is taken.  Read
 * first where it runs unscoped (where hc_asset_add is called), so that Citus
 * checks the insert for two-phase commit (scaleout/route.c, route_touch).
 */
static void
record_asset_route(HcCall *call, const char *id, const char *scope_id)
{
	HcArgs		args;

	hc_args(&args, &find_route);
	hc_bind_text(&args, "asset_id", id);
	if (hc_run(call, &args, SPI_OK_SELECT) > 0)
		asset_exists(id);
	hc_args(&args, &record_route);
	hc_bind_text(&args, "asset_id", id);
	hc_bind_text(&args, "scope_id", scope_id);
	if (hc_run(call, &args, SPI_OK_INSERT) == 0)
		asset_exists(id);
}

/*
 * hc_asset_add(id, name[, pool, rank, grp, pos]): add an AVAILABLE asset.
 * On Citus a seat of a pool records its id where it is called (on the id's
 * shard of hc_asset_routes), then is sent to the pool's node as
 * hc_asset_add(scope_id, id, name, pool, ...), first > 0.
 */
static Datum
asset_add(FunctionCallInfo fcinfo, int first)
{
	char	   *id = hc_arg_id(fcinfo, first, "id");
	char	   *name = hc_arg_text(fcinfo, first + 1, "name");
	bool		seat = PG_NARGS() > first + 2;
	char	   *pool = seat && !PG_ARGISNULL(first + 2) ? hc_arg_id(fcinfo, first + 2, "pool") : NULL;
	HcCall		call;
	HcArgs		args;
	Datum		row;

	hc_call_begin(&call, fcinfo, "hc_asset_add");
	if (first > 0)
	{
		char	   *scope_id = hc_arg_id(fcinfo, 0, "scope_id");

		if (pool == NULL || strcmp(scope_id, pool) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("scope_id must be the pool of the asset")));
		hc_group_seats_together(&call);
		HC_ROUTE(&call, fcinfo, scope_id);
	}
	else if (pool != NULL && routes_recorded(&call))
	{
		record_asset_route(&call, id, pool);
		row = hc_send_prefixed(&call, fcinfo, pool);
		hc_call_end(&call);
		return row;
	}
	else
	{
		HC_ROUTE(&call, fcinfo, id);
		if (routes_recorded(&call))
			record_asset_route(&call, id, id);
	}
	hc_args(&args, !seat ? &add_asset : routes_recorded(&call) ? &add_seat_routed : &add_seat);
	hc_bind_text(&args, "asset_id", id);
	hc_bind_text(&args, "name", name);
	if (seat)
	{
		bind_place(&args, fcinfo, first + 2, "pool", true);
		bind_place(&args, fcinfo, first + 3, "rank", false);
		bind_place(&args, fcinfo, first + 4, "grp", true);
		bind_place(&args, fcinfo, first + 5, "pos", false);
	}
	if (hc_run(&call, &args, SPI_OK_SELECT) == 0)
		asset_exists(id);
	row = hc_result_row(&call, fcinfo);
	hc_call_end(&call);
	return row;
}

Datum
hc_asset_add(PG_FUNCTION_ARGS)
{
#ifdef HC_SANITIZE_CANARY
	{
		/*
		 * test/packaging/sanitize.sh's canary build only: an off-by-one loop that reads
		 * one byte past a palloc'd buffer, which AddressSanitizer must report.
		 * 16 kB is above aset.c's allocChunkLimit (8 kB), so the chunk is a
		 * malloc'd block of its own and the byte past it is ASan's redzone; a
		 * small chunk sits inside a larger block, where ASan sees nothing.
		 */
		Size		len = 16 * 1024;
		char	   *buf = palloc0(len);
		volatile int sum = 0;
		Size		i;

		for (i = 0; i <= len; i++)
			sum += buf[i];
		pfree(buf);
	}
#endif
	PG_RETURN_DATUM(asset_add(fcinfo, 0));
}

/* hc_asset_add(scope_id, id, name, pool, rank, grp, pos): the form Citus sends a seat's as. */
Datum
hc_asset_add_scoped(PG_FUNCTION_ARGS)
{
	PG_RETURN_DATUM(asset_add(fcinfo, 1));
}

/*
 * Raise RS006 or RS001 for a hold that cannot take the asset, as a read found
 * it: status NULL if there is no such asset, "LOCKED" if a call in flight
 * has it, else held until its hold_expires_at.  RS001 is a hot path (a flash
 * sale refuses thousands a second): its texts are not looked up in a
 * message catalog, which holdcommit does not have, at ~2,000 instructions a
 * look.
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
				 errmsg_internal("asset \"%s\" is not available", asset_id),
				 errdetail_internal("Asset \"%s\" is sold.", asset_id),
				 hc_errhint_internal("Offer the buyer another asset.")));
	if (strcmp(status, "HELD") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_HC_ASSET_UNAVAILABLE),
				 errmsg_internal("asset \"%s\" is not available", asset_id),
				 errdetail_internal("Asset \"%s\" is held by another buyer until %s.",
									asset_id, timestamptz_to_str(until)),
				 hc_errhint_internal("Offer the buyer another asset, or try again after the hold ends.")));
	ereport(ERROR,
			(errcode(ERRCODE_HC_ASSET_UNAVAILABLE),
			 errmsg_internal("asset \"%s\" is not available", asset_id),
			 errdetail_internal("Another transaction is holding asset \"%s\" right now.", asset_id),
			 hc_errhint_internal("Offer the buyer another asset, or try again in a moment.")));
}

/*
 * On Citus, refuse a call given a seat of a pool by its id (hc_hold, and the
 * forms of hc_commit, hc_release and hc_extend given an asset): Citus sent it
 * to the node of the id, and the seat is on its pool's.
 */
static void
hold_refuse_seat(HcCall *call, const char *asset_id)
{
	HcArgs		args;
	char	   *pool;

	hc_args(&args, &find_route);
	hc_bind_text(&args, "asset_id", asset_id);
	if (hc_run(call, &args, SPI_OK_SELECT) == 0)
		return;
	pool = hc_text(call, 0, "scope_id");
	if (strcmp(pool, asset_id) == 0)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("asset \"%s\" is a seat of pool \"%s\", held on Citus with the group holds",
					asset_id, pool),
			 errdetail("Its rows are on the node of its pool, which a call given the seat's id does not reach."),
			 errhint("Hold it with hc_hold_many(ARRAY['%s'], ...); call hc_commit, hc_release and hc_extend by reservation id alone.",
					 asset_id)));
}

/*
 * The hold's statements, where direct.c cannot write it: the asset taken
 * (locked, and free), the reservation, the ledger; and if expired_id, the
 * expired hold taken over ends.
 */
static void
hold_take(HcCall *call, const HoldReservation *r, const char *key, HcFingerprint *fp,
		  const char *expired_id)
{
	HcArgs		args;
	int64		seq;

	/* A group's seat: the whole group ends, and the asset is free. */
	if (expired_id != NULL)
	{
		int			group = hc_group_expire(call, expired_id);

		if (group < 0)
			hold_refuse(call, r->asset_id, "LOCKED", 0);
		if (group > 0)
			expired_id = NULL;
	}
	hc_args(&args, &hold_asset);
	hc_bind_text(&args, "asset_id", r->asset_id);
	hc_bind_text(&args, "reservation_id", r->id);
	hc_bind(&args, "expires_at", TimestampTzGetDatum(r->expires_at));
	hc_bind_text(&args, "buyer_id", r->buyer_id);
	hc_bind_text(&args, "key", key);
	hc_bind(&args, "fingerprint", PointerGetDatum(hc_fingerprint_digest(fp)));
	hc_bind(&args, "version_step", Int32GetDatum(expired_id != NULL ? 2 : 1));
	if (hc_run(call, &args, SPI_OK_INSERT_RETURNING) != 1)
		elog(ERROR, "hold of locked asset \"%s\" changed no row", r->asset_id);
	seq = hc_int64(0, "seq");
	if (expired_id != NULL)
	{
		/* Passive reclamation: the expired hold just taken over ends. */
		hc_args(&args, &end_expired_hold);
		hc_bind_text(&args, "asset_id", r->asset_id);
		hc_bind_text(&args, "reservation_id", expired_id);
		hc_bind(&args, "seq", Int64GetDatum(seq - 1));
		if (hc_run(call, &args, SPI_OK_INSERT_RETURNING) != 1)
			elog(ERROR, "held asset \"%s\" has no held reservation \"%s\"",
				 r->asset_id, expired_id);
	}
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

	hc_call_begin_keyed(&call, fcinfo, "hc_hold");
	HC_ROUTE(&call, fcinfo, asset_id);
	if (routes_recorded(&call))
		hold_refuse_seat(&call, asset_id);
	hc_fingerprint_init(&fp, call.function);
	hc_fingerprint_add(&fp, asset_id);
	hc_fingerprint_add(&fp, buyer_id);
	hc_fingerprint_add_int64(&fp, ttl);

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
		Datum		asset[4];
		bool		nulls[4];
		char	   *status = NULL;
		char	   *expired_id;
		TimestampTz until = 0;

		if (hc_fetch(&call, &hc_hold_peek_asset, asset_id, asset, nulls))
		{
			status = TextDatumGetCString(asset[0]);
			until = nulls[1] ? 0 : DatumGetTimestampTz(asset[1]);
		}
		if (status == NULL || !hc_hold_can_take(&call, status, until))
			hold_refuse(&call, asset_id, status, until);
		if (!hc_fetch_tid(&call, &hc_hold_take_asset, asset_id, asset, nulls, &r.asset_tid))
			hold_refuse(&call, asset_id, "LOCKED", 0);
		status = TextDatumGetCString(asset[0]);
		until = nulls[2] ? 0 : DatumGetTimestampTz(asset[2]);
		if (!hc_hold_can_take(&call, status, until))
			hold_refuse(&call, asset_id, status, until);
		if (strcmp(status, "HELD") == 0 && nulls[1])
			elog(ERROR, "held asset \"%s\" names no hold", asset_id);

		r.id = hc_new_reservation_id(call.now);
		r.asset_version = DatumGetInt32(asset[3]);
		expired_id = strcmp(status, "HELD") == 0 ? TextDatumGetCString(asset[1]) : NULL;
		if (!hc_hold_write_take(&call, &r, key, PointerGetDatum(hc_fingerprint_digest(&fp)),
								expired_id))
			hold_take(&call, &r, key, &fp, expired_id);
	}
	hc_call_end(&call);
	PG_RETURN_DATUM(hold_result(fcinfo, &r));
}

/* RS006 for a hold that is not there (or not of asset_id, if given). */
static void
hold_not_found(const char *asset_id, const char *reservation_id)
{
	if (asset_id == NULL)
		hc_reservation_not_found(reservation_id, "hold",
								 "Use the reservation_id that hc_hold() returned.");
	hc_reservation_not_found(reservation_id, psprintf("hold of asset \"%s\"", asset_id),
							 "Use the asset_id and reservation_id that hc_hold() returned.");
}

/*
 * Find a reservation and lock its asset.  What the asset row says cannot
 * change until we commit: if it names the reservation as its live hold, the
 * reservation is HELD until the asset's hold_expires_at (its buyer and
 * created_at come back from the write); otherwise, or if whole, the
 * reservation is read again under the lock.  A group hold's (r->seats > 0)
 * is left to group.c, nothing locked.
 */
static void
hold_lock(HcCall *call, const char *asset_id, const char *reservation_id, HoldReservation *r,
		  bool whole)
{
	Datum		values[4];
	bool		nulls[4];
	bool		seats = hc_sql_at_least("0.4.0");

	if (asset_id != NULL && routes_recorded(call))
		hold_refuse_seat(call, asset_id);
	if (!hc_fetch(call, seats ? &reservation_seats : &reservation_asset, reservation_id,
				  values, nulls))
		hold_not_found(asset_id, reservation_id);
	r->id = pstrdup(reservation_id);
	r->seats = seats && !nulls[1] ? DatumGetInt32(values[1]) : 0;
	if (r->seats > 0)
		return;
	/* Given its asset, or on Citus its routing id (hc_route_reservation's). */
	if (asset_id != NULL && strcmp(TextDatumGetCString(values[0]), asset_id) != 0 &&
		!(seats && !nulls[2] && strcmp(TextDatumGetCString(values[2]), asset_id) == 0))
		hold_not_found(asset_id, reservation_id);
	r->asset_id = TextDatumGetCString(values[0]);
	if (!hc_fetch_tid(call, &hc_hold_lock_asset, r->asset_id, values, nulls, &r->asset_tid))
		elog(ERROR, "asset \"%s\" of reservation \"%s\" vanished", r->asset_id, r->id);
	r->asset_status = TextDatumGetCString(values[0]);
	r->asset_reservation_id = nulls[1] ? NULL : TextDatumGetCString(values[1]);
	r->asset_version = DatumGetInt32(values[3]);
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

/*
 * The start of a call on a reservation (hc_commit, hc_release, hc_extend),
 * after its arguments: true if it was sent to the node of its asset
 * (core/placement.h), its result in *result; false with the reservation
 * locked here (hold_lock, whole as given).
 */
static bool
hold_begin(HcCall *call, FunctionCallInfo fcinfo, const char *function, const char *asset_id,
		   const char *reservation_id, bool whole, HoldReservation *r, Datum *result)
{
	hc_call_begin(call, fcinfo, function);
	if (hc_route_reservation(call, fcinfo, asset_id, "hc_reservations",
							 hc_sql_at_least("0.4.0") ? "COALESCE(scope_id, asset_id)" : "asset_id",
							 reservation_id, hold_not_found, result))
	{
		hc_call_end(call);
		return true;
	}
	hold_lock(call, asset_id, reservation_id, r, whole);
	return false;
}

/* RS004 and RS003 for a hold: the detail names its asset. */
static void
hold_not_active(const HoldReservation *r, const char *hint)
{
	hc_reservation_not_active(r->id, psprintf(" of asset \"%s\"", r->asset_id), r->status, hint);
}

static void
hold_expired(const HoldReservation *r, const char *hint)
{
	hc_reservation_expired(r->id, psprintf(" of asset \"%s\"", r->asset_id), r->expires_at, hint);
}

/*
 * hc_commit(reservation_id, late_ok): the payment went through, sell the
 * asset.  A repeat replays; after expiry RS003 unless late_ok and the asset
 * is still free for this reservation.
 */
static Datum
hold_commit(FunctionCallInfo fcinfo, int first)
{
	char	   *asset_id = first > 0 ? hc_arg_id(fcinfo, 0, "asset_id") : NULL;
	char	   *reservation_id = hc_arg_id(fcinfo, first, "reservation_id");
	bool		late_ok = hc_arg_bool(fcinfo, first + 1, "late_ok");
	HcCall		call;
	HoldReservation r = {0};
	Datum		routed;
	bool		expired;

	if (hold_begin(&call, fcinfo, "hc_commit", asset_id, reservation_id, false, &r, &routed))
		return routed;
	if (r.seats > 0)
		return hc_group_commit(&call, fcinfo, asset_id, r.id, late_ok);

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
		if (expired && !hold_is_current(&r) && hc_hold_taken_since(&call, &r))
			hold_expired(&r, "Another buyer has taken the asset since: refund the payment.");
		hc_hold_sell(&call, &r);
	}
	hc_call_end(&call);
	return hold_result(fcinfo, &r);
}

/* hc_commit(reservation_id, late_ok), hc_commit(asset_id, reservation_id, late_ok) */
HC_RESERVATION_FUNCTIONS(hc_commit, hc_commit_asset, hold_commit)

/*
 * hc_release(reservation_id): the buyer cancels; the asset is AVAILABLE at
 * once.  A repeat, or an expired hold, is returned unchanged as a replay.
 */
static Datum
hold_release(FunctionCallInfo fcinfo, int first)
{
	char	   *asset_id = first > 0 ? hc_arg_id(fcinfo, 0, "asset_id") : NULL;
	char	   *reservation_id = hc_arg_id(fcinfo, first, "reservation_id");
	HcCall		call;
	HoldReservation r = {0};
	Datum		routed;

	if (hold_begin(&call, fcinfo, "hc_release", asset_id, reservation_id, false, &r, &routed))
		return routed;
	if (r.seats > 0)
		return hc_group_release(&call, fcinfo, asset_id, r.id);

	if (strcmp(r.status, "COMMITTED") == 0)
		hold_not_active(&r, "A sold asset cannot be released; refund through your payment flow.");
	else if (strcmp(r.status, "HELD") != 0)
		r.replayed = true;
	else if (r.expires_at <= call.now)
	{
		/* An expired hold that nobody swept yet: end it now. */
		hc_hold_free(&call, &r, "EXPIRED", "expire", "reclaim");
		r.replayed = true;
	}
	else
		hc_hold_free(&call, &r, "RELEASED", "release", "call");
	hc_call_end(&call);
	return hold_result(fcinfo, &r);
}

/* hc_release(reservation_id), hc_release(asset_id, reservation_id) */
HC_RESERVATION_FUNCTIONS(hc_release, hc_release_asset, hold_release)

/*
 * hc_extend(reservation_id, ttl): keep a live hold for ttl from now, never
 * shortening it and never past created_at + holdcommit.max_hold.
 */
static Datum
hold_extend(FunctionCallInfo fcinfo, int first)
{
	char	   *asset_id = first > 0 ? hc_arg_id(fcinfo, 0, "asset_id") : NULL;
	char	   *reservation_id = hc_arg_id(fcinfo, first, "reservation_id");
	int64		ttl = hc_arg_ttl(fcinfo, first + 1, "ttl");
	HcCall		call;
	HoldReservation r = {0};
	Datum		routed;
	TimestampTz until;
	TimestampTz cap;

	if (hold_begin(&call, fcinfo, "hc_extend", asset_id, reservation_id, true, &r, &routed))
		return routed;
	if (r.seats > 0)
		return hc_group_extend(&call, fcinfo, asset_id, r.id, ttl);

	if (strcmp(r.status, "COMMITTED") == 0 || strcmp(r.status, "RELEASED") == 0)
		hold_not_active(&r, "Only a held reservation can be extended.");
	if (strcmp(r.status, "EXPIRED") == 0 || r.expires_at <= call.now)
		hold_expired(&r, "Hold the asset again if it is still available.");

	cap = r.created_at + (int64) hc_max_hold * USECS_PER_SEC;
	until = Min(call.now + ttl, cap);
	if (until > r.expires_at)
		hc_hold_move_end(&call, &r, until);
	hc_call_end(&call);
	return hold_result(fcinfo, &r);
}

/* hc_extend(reservation_id, ttl), hc_extend(asset_id, reservation_id, ttl) */
HC_RESERVATION_FUNCTIONS(hc_extend, hc_extend_asset, hold_extend)

/*
 * The sweeper's part for holds (sweep.c): up to batch_size expired holds,
 * from where the last batch of this sweep stopped (holds it skipped are left
 * to the next sweep), so that a sweep does not walk again over the index
 * entries of the holds it has just ended.  Returns how many it ended.
 */
int64
hc_hold_sweep(HcCall *call, int batch_size, HcSweepCounts *counts)
{
	uint64		n;
	uint64		i;

	n = hc_sweep_run(call, hc_sql_at_least("0.4.0") ? &sweep_holds : &sweep_holds_03, "resume_from",
					 &counts->holds, batch_size, SPI_OK_SELECT);
	if (n > 0 && (uint64) hc_int64(0, "ended") != n)
		elog(ERROR, "of " UINT64_FORMAT " expired holds swept, " INT64_FORMAT " had a held reservation",
			 n, hc_int64(0, "ended"));
	for (i = 0; i < n; i++)
		hc_notify("asset", hc_text(call, (int) i, "asset_id"), "AVAILABLE");
	return (int64) n;
}
