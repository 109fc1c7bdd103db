/*
 * sweep.c
 *		hc_sweep(batch_size): expired holds back on sale, expired stock
 *		reservations released once, idempotency keys past retention
 *		forgotten; and what the background worker records of its runs.
 *
 * Every kind of work is set-based and bounded: one statement per batch for
 * holds, for orders and for keys, one per product for stock lines (the
 * bounded reclaim of stock.c).  Rows are taken with FOR NO KEY UPDATE SKIP
 * LOCKED, and products by stock.c's stock_try_lock_product (SKIP LOCKED can
 * still wait when it follows an update chain, and a call holding a product
 * may be waiting for an order this sweep holds), so a sweep never waits on a
 * live call: a row a call has locked is left for the next batch or run.  Each transition checks the row's own
 * status under its lock, so two sweeps at once (or a sweep and a call)
 * release each reservation exactly once.  hc_sweep() called by hand runs in
 * the caller's transaction and commits nothing itself; the worker
 * (worker.c) commits after every batch.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"

#include "call.h"
#include "holdcommit.h"
#include "ledger.h"
#include "notify.h"
#include "stock.h"
#include "sweep.h"

PG_FUNCTION_INFO_V1(hc_sweep);

/*
 * Expired holds, oldest first from $5 on: lock each one's asset unless
 * another transaction has it (the limit counts only the rows locked, so two
 * sweeps at once take different rows), give the asset back if it is still
 * HELD by that reservation and its hold has still ended (both checked again
 * on the locked row), end the reservation as EXPIRED, write the ledger.  The
 * lateral lock makes the plan walk the expiry index in order and stop at
 * the limit.  Returns the assets freed, whether each had its reservation
 * ended with it, and the hold's end (the next batch starts there).
 *   $1 now  $2 batch size  $3 function  $4 actor  $5 resume from
 */
static HcStatement sweep_holds = {
	"WITH doomed AS ("
	"  SELECT a.id, a.rid, r.expires_at"
	"    FROM hc_reservations r"
	"   CROSS JOIN LATERAL ("
	"     SELECT l.id, l.current_reservation_id AS rid FROM hc_assets l"
	"      WHERE l.id OPERATOR(pg_catalog.=) r.asset_id"
	"        AND l.current_reservation_id OPERATOR(pg_catalog.=) r.id"
	"        AND l.status OPERATOR(pg_catalog.=) 'HELD'"
	"        AND l.hold_expires_at OPERATOR(pg_catalog.<=) $1"
	"        FOR NO KEY UPDATE SKIP LOCKED) a"
	"   WHERE r.status OPERATOR(pg_catalog.=) 'HELD' AND r.expires_at OPERATOR(pg_catalog.<=) $1"
	"     AND r.expires_at OPERATOR(pg_catalog.>=) $5"
	"   ORDER BY r.expires_at LIMIT $2),"
" freed AS ("
	"  UPDATE hc_assets a"
	"     SET status = 'AVAILABLE', hold_expires_at = NULL, current_reservation_id = NULL,"
	"         version = a.version OPERATOR(pg_catalog.+) 1, updated_at = $1"
	"    FROM doomed d"
	"   WHERE a.id OPERATOR(pg_catalog.=) d.id"
	"  RETURNING a.id, d.rid, a.version),"
	" ended AS ("
	"  UPDATE hc_reservations r SET status = 'EXPIRED', ended_at = $1"
	"    FROM freed f"
	"   WHERE r.asset_id OPERATOR(pg_catalog.=) f.id AND r.id OPERATOR(pg_catalog.=) f.rid"
	"     AND r.status OPERATOR(pg_catalog.=) 'HELD'"
	"  RETURNING r.asset_id, r.id, r.buyer_id),"
	" logged AS (" HC_LEDGER_INSERT
	"  SELECT 'asset', f.id, f.version, $1, 'expire', 'sweep', $3, e.id, e.buyer_id, -1, 0, $4, NULL"
	"    FROM freed f"
	"    JOIN ended e ON e.asset_id OPERATOR(pg_catalog.=) f.id AND e.id OPERATOR(pg_catalog.=) f.rid)"
	" SELECT f.id, EXISTS (SELECT FROM ended e WHERE e.asset_id OPERATOR(pg_catalog.=) f.id),"
	"        d.expires_at"
	"   FROM freed f JOIN doomed d ON d.id OPERATOR(pg_catalog.=) f.id",
	5, {TIMESTAMPTZOID, INT4OID, TEXTOID, TEXTOID, TIMESTAMPTZOID}
};

/* Products with expired lines that still count, in lock order.  $1 now, $2 limit. */
static HcStatement expired_products = {
	"SELECT DISTINCT product_id COLLATE \"C\" FROM hc_stock_reservation_lines"
	" WHERE status OPERATOR(pg_catalog.=) 'RESERVED' AND expires_at OPERATOR(pg_catalog.<=) $1"
	" ORDER BY 1 LIMIT $2",
	2, {TIMESTAMPTZOID, INT4OID}
};

/*
 * Expired orders still RESERVED although none of their lines counts any
 * more (a reclaimer expired the lines but skipped the order's locked row):
 * they end as EXPIRED.  $1 now, $2 limit.
 */
static HcStatement end_orders = {
	"WITH doomed AS ("
	"  SELECT r.scope_id, r.id FROM hc_stock_reservations r"
	"   WHERE r.status OPERATOR(pg_catalog.=) 'RESERVED' AND r.expires_at OPERATOR(pg_catalog.<=) $1"
	"     AND NOT EXISTS (SELECT FROM hc_stock_reservation_lines l"
	"                      WHERE l.reservation_id OPERATOR(pg_catalog.=) r.id"
	"                        AND l.status OPERATOR(pg_catalog.=) 'RESERVED')"
	"   ORDER BY r.expires_at LIMIT $2"
	"     FOR NO KEY UPDATE SKIP LOCKED)"
	" UPDATE hc_stock_reservations r SET status = 'EXPIRED', ended_at = $1"
	"   FROM doomed d"
	"  WHERE r.scope_id OPERATOR(pg_catalog.=) d.scope_id AND r.id OPERATOR(pg_catalog.=) d.id"
	"    AND r.status OPERATOR(pg_catalog.=) 'RESERVED'",
	2, {TIMESTAMPTZOID, INT4OID}
};

/*
 * Forget the idempotency keys of reservations of both kinds made at or
 * before $1 (now - holdcommit.idempotency_retention), oldest first, $2 of
 * each kind at most.
 */
static HcStatement forget_keys = {
	"WITH h AS ("
	"  UPDATE hc_reservations r SET idempotency_key = NULL"
	"    FROM (SELECT asset_id, id FROM hc_reservations"
	"           WHERE idempotency_key IS NOT NULL AND created_at OPERATOR(pg_catalog.<=) $1"
	"           ORDER BY created_at LIMIT $2 FOR NO KEY UPDATE SKIP LOCKED) d"
	"   WHERE r.asset_id OPERATOR(pg_catalog.=) d.asset_id AND r.id OPERATOR(pg_catalog.=) d.id"
	"  RETURNING 1),"
	" s AS ("
	"  UPDATE hc_stock_reservations r SET idempotency_key = NULL"
	"    FROM (SELECT scope_id, id FROM hc_stock_reservations"
	"           WHERE idempotency_key IS NOT NULL AND created_at OPERATOR(pg_catalog.<=) $1"
	"           ORDER BY created_at LIMIT $2 FOR NO KEY UPDATE SKIP LOCKED) d"
	"   WHERE r.scope_id OPERATOR(pg_catalog.=) d.scope_id AND r.id OPERATOR(pg_catalog.=) d.id"
	"  RETURNING 1)"
	" SELECT (SELECT pg_catalog.count(*) FROM h), (SELECT pg_catalog.count(*) FROM s)",
	2, {TIMESTAMPTZOID, INT4OID}
};

/*
 * The worker's record of its last run in this database: one row, replaced
 * (a row left under another name by a renamed database goes).
 *   $1 pid  $2 actor  $3 start  $4 end  $5 holds  $6 reservations  $7 keys
 *   $8 error (NULL: none)  $9 next run (NULL: off)
 */
static HcStatement record_run = {
	"WITH gone AS ("
	"  DELETE FROM hc_sweeper_status"
	"   WHERE database OPERATOR(pg_catalog.<>) pg_catalog.current_database())"
	" INSERT INTO hc_sweeper_status AS s"
	"   (database, pid, actor, last_start, last_end, expired_holds, expired_reservations,"
	"    purged_keys, runs, total_expired_holds, total_expired_reservations, total_purged_keys,"
	"    last_error, last_error_at, next_run)"
	" VALUES (pg_catalog.current_database(), $1, $2, $3, $4, $5, $6, $7, 1, $5, $6, $7, $8,"
	"         CASE WHEN $8 IS NOT NULL THEN $4 END, $9)"
	" ON CONFLICT (database) DO UPDATE"
	"   SET pid = EXCLUDED.pid, actor = EXCLUDED.actor, last_start = EXCLUDED.last_start,"
	"       last_end = EXCLUDED.last_end, expired_holds = EXCLUDED.expired_holds,"
	"       expired_reservations = EXCLUDED.expired_reservations,"
	"       purged_keys = EXCLUDED.purged_keys, runs = s.runs OPERATOR(pg_catalog.+) 1,"
	"       total_expired_holds = s.total_expired_holds OPERATOR(pg_catalog.+) $5,"
	"       total_expired_reservations = s.total_expired_reservations OPERATOR(pg_catalog.+) $6,"
	"       total_purged_keys = s.total_purged_keys OPERATOR(pg_catalog.+) $7,"
	"       last_error = COALESCE(EXCLUDED.last_error, s.last_error),"
	"       last_error_at = COALESCE(EXCLUDED.last_error_at, s.last_error_at),"
	"       next_run = EXCLUDED.next_run",
	9, {INT4OID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID, INT8OID, INT8OID, TEXTOID,
	TIMESTAMPTZOID}
};

/*
 * Expired holds: one statement for up to batch_size of them, from where the
 * last batch of this sweep stopped (holds it skipped are left to the next
 * sweep), so that a sweep does not walk again over the index entries of the
 * holds it has just ended.
 */
static int64
sweep_batch_holds(HcCall *call, int batch_size, HcSweepCounts *counts)
{
	Datum		values[5];
	uint64		n;
	uint64		i;

	values[0] = TimestampTzGetDatum(call->now);
	values[1] = Int32GetDatum(batch_size);
	values[2] = HC_TEXT(call->function);
	values[3] = HC_TEXT(hc_actor(call));
	values[4] = TimestampTzGetDatum(counts->resumed ? counts->holds_from : DT_NOBEGIN);
	n = hc_run(&sweep_holds, values, NULL, SPI_OK_SELECT);
	for (i = 0; i < n; i++)
	{
		bool		isnull;
		char	   *asset_id = hc_text(call, (int) i, 1);
		TimestampTz expires_at = hc_timestamptz((int) i, 3);

		if (!DatumGetBool(hc_datum((int) i, 2, &isnull)))
			elog(ERROR, "expired hold of asset \"%s\" has no held reservation", asset_id);
		if (!counts->resumed || expires_at > counts->holds_from)
			counts->holds_from = expires_at;
		counts->resumed = true;
		hc_notify("asset", asset_id, "AVAILABLE");
	}
	return (int64) n;
}

/*
 * Expired stock lines of up to batch_size products, one product at a time
 * in product order (each under its row lock, skipped if a call has it),
 * then the expired orders that were left RESERVED.
 */
static void
sweep_batch_stock(HcCall *call, int batch_size, HcSweepCounts *counts)
{
	Datum		values[2];
	uint64		n;
	uint64		i;
	char	  **products;

	values[0] = TimestampTzGetDatum(call->now);
	values[1] = Int32GetDatum(batch_size);
	n = hc_run(&expired_products, values, NULL, SPI_OK_SELECT);
	products = palloc(sizeof(char *) * (n + 1));
	for (i = 0; i < n; i++)
		products[i] = hc_text(call, (int) i, 1);
	for (i = 0; i < n; i++)
	{
		int64		units;
		int64		ended;

		if (!hc_stock_sweep_product(call, products[i], &units, &ended) || units == 0)
			continue;
		counts->released_units += units;
		counts->expired_reservations += ended;
		hc_notify("product", products[i], "AVAILABLE");
	}
	counts->expired_reservations += (int64) hc_run(&end_orders, values, NULL, SPI_OK_UPDATE);
}

/* Idempotency keys past holdcommit.idempotency_retention. */
static int64
sweep_batch_keys(HcCall *call, int batch_size)
{
	Datum		values[2];
	bool		isnull;

	values[0] = TimestampTzGetDatum(call->now - (int64) hc_idempotency_retention * USECS_PER_SEC);
	values[1] = Int32GetDatum(batch_size);
	hc_run(&forget_keys, values, NULL, SPI_OK_SELECT);
	return DatumGetInt64(hc_datum(0, 1, &isnull)) + DatumGetInt64(hc_datum(0, 2, &isnull));
}

/*
 * One batch of every kind of work, at the call's clock reading.  Adds what
 * it did to *counts and says whether it did anything.
 */
bool
hc_sweep_batch(HcCall *call, int batch_size, HcSweepCounts *counts)
{
	HcSweepCounts before = *counts;

	counts->expired_holds += sweep_batch_holds(call, batch_size, counts);
	sweep_batch_stock(call, batch_size, counts);
	counts->purged_keys += sweep_batch_keys(call, batch_size);
	return counts->expired_holds != before.expired_holds ||
		counts->expired_reservations != before.expired_reservations ||
		counts->released_units != before.released_units ||
		counts->purged_keys != before.purged_keys;
}

/*
 * Record a run of the worker in hc_sweeper_status: its counts, the error
 * that ended it (NULL if none), and when the next run is due (interval_s 0:
 * none).
 */
void
hc_sweeper_record(HcCall *call, TimestampTz started, const HcSweepCounts *counts,
				  const char *error, int interval_s)
{
	Datum		values[9];
	char		nulls[9];

	memset(nulls, ' ', sizeof(nulls));
	values[0] = Int32GetDatum(MyProcPid);
	values[1] = HC_TEXT(hc_actor(call));
	values[2] = TimestampTzGetDatum(started);
	values[3] = TimestampTzGetDatum(call->now);
	values[4] = Int64GetDatum(counts->expired_holds);
	values[5] = Int64GetDatum(counts->expired_reservations);
	values[6] = Int64GetDatum(counts->purged_keys);
	values[7] = error ? HC_TEXT(error) : (Datum) 0;
	nulls[7] = error ? ' ' : 'n';
	values[8] = TimestampTzGetDatum(call->now + (int64) interval_s * USECS_PER_SEC);
	nulls[8] = interval_s > 0 ? ' ' : 'n';
	hc_run(&record_run, values, nulls, SPI_OK_INSERT);
}

/*
 * hc_sweep(batch_size): sweep in batches until a batch finds nothing left,
 * in the caller's transaction; one row of counts.
 */
Datum
hc_sweep(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	HcSweepCounts counts = {0};
	HcCall		call;
	int32		batch_size;
	Datum		out[3];
	bool		nulls[3] = {false};

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("batch_size must not be null")));
	batch_size = PG_GETARG_INT32(0);
	if (batch_size < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("batch_size must be positive"),
				 errdetail("batch_size is %d.", batch_size)));

	InitMaterializedSRF(fcinfo, 0);
	hc_call_begin(&call, fcinfo, "hc_sweep");
	while (hc_sweep_batch(&call, batch_size, &counts))
		CHECK_FOR_INTERRUPTS();
	hc_call_end(&call);

	out[0] = Int64GetDatum(counts.expired_holds);
	out[1] = Int64GetDatum(counts.expired_reservations);
	out[2] = Int64GetDatum(counts.purged_keys);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, nulls);
	return (Datum) 0;
}
