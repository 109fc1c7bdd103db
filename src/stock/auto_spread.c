/*
 * auto_spread.c
 *		An automatic spread or gather of one product, as the spreader
 *		worker (bgw/spreader/) runs it in a transaction of its own, and as
 *		hc_stock_auto_spread() runs it in the caller's; their record in
 *		hc_stock_spreads.
 *
 * Invariants:
 *   1. It takes part 0 first, waiting for it (a reserve of a product of one
 *      part holds it until its commit), and never waits for another part,
 *      which would hold part 0, and with it every reserve of the product,
 *      while it waits.  A spread takes the parts that nobody holds (SKIP
 *      LOCKED) and shares their available units with the new parts; the
 *      parts that reserves hold keep theirs.  A gather takes every part
 *      without waiting (NOWAIT: 55P03 if one is held), as it moves their
 *      lines to part 0.  So part 0 is held only for the run's own
 *      statements; the worker bounds that too
 *      (holdcommit.stock_spread_stall), and rolls back past it.
 *   2. It moves only available units between parts it holds, and a gather
 *      merges parts as hc_stock_spread does (admin.c), every part locked:
 *      no product's stock changes and no line stops counting, so it is
 *      exact at every moment and writes no ledger row.
 *   3. A gather never goes below the product's floor (min_parts, the
 *      parts an operator last set with hc_stock_spread; 1 without a row);
 *      a spread never above STOCK_MAX_PARTS.  It does nothing when the
 *      product has the parts asked for already.
 *   4. It reclaims nothing: expired lines stay for the sweeper and the
 *      reserves, which reclaim them with every part locked anyway.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "utils/array.h"

#include "common/validate.h"
#include "core/fetch.h"
#include "core/placement.h"
#include "core/version.h"
#include "stock/auto_spread.h"
#include "stock/stock.h"

PG_FUNCTION_INFO_V1(hc_stock_auto_spread);

/* Part 0 of a product, locked FOR NO KEY UPDATE, waiting. */
static HcFetch lock_part_0 = {"hc_stock_parts", "product_id", HC_FETCH_WAIT, 1, {"stock"}, "part"};

/* The parts of a product from :from on, part 0 held already, without waiting. */
static HcStatement lock_parts_nowait = {
	"SELECT pg_catalog.count(*)::pg_catalog.int4 AS parts FROM ("
	"  SELECT part FROM hc_stock_parts WHERE product_id" EQ ":product_id" " AND part" GE ":from"
	"   ORDER BY part FOR NO KEY UPDATE NOWAIT) p",
	{{"product_id", TEXTOID}, {"from", INT4OID}}
};

/* The parts of a product that nobody holds, part 0 held already, with their numbers. */
static HcStatement lock_free_parts = {
	"SELECT part::pg_catalog.int4 AS part, stock, reserved FROM hc_stock_parts"
	" WHERE product_id" EQ ":product_id"
	" ORDER BY part FOR NO KEY UPDATE SKIP LOCKED",
	{{"product_id", TEXTOID}}
};

/* Part (:parts)[i]'s stock becomes (:stocks)[i], all of them locked. */
static HcStatement share_units = {
	"UPDATE hc_stock_parts p SET stock = u.stock, updated_at = :now"
	"  FROM ROWS FROM (pg_catalog.unnest(:parts), pg_catalog.unnest(:stocks)) AS u (part, stock)"
	" WHERE p.product_id" EQ ":product_id" " AND p.part" EQ "u.part" " AND p.stock" NE "u.stock",
	{{"product_id", TEXTOID}, {"parts", INT2ARRAYOID}, {"stocks", INT4ARRAYOID},
	 {"now", TIMESTAMPTZOID}}
};

/* The product's floor: the parts an operator set; 1 without a row. */
static HcStatement read_floor = {
	"SELECT COALESCE((SELECT min_parts::pg_catalog.int4 FROM hc_stock_spreads"
	"                  WHERE product_id" EQ ":product_id" "), 1) AS min_parts",
	{{"product_id", TEXTOID}}
};

/*
 * Spread: new parts have..want - 1, and the available units of the parts
 * nobody holds (part 0 among them) shared evenly between those and the
 * new ones.  The parts that reserves hold keep their units: it never waits
 * for them, and it moves units only between parts it holds.
 */
static void
auto_spread_grow(HcCall *call, const char *product_id, int32 have, int32 want)
{
	HcArgs		args;
	int			held;
	int			n;
	int16	   *parts;
	int32	   *reserved;
	Datum	   *stocks;
	int64		pool = 0;
	int			i;

	hc_args(&args, &lock_free_parts);
	hc_bind_text(&args, "product_id", product_id);
	held = (int) hc_run(call, &args, SPI_OK_SELECT);
	n = held + (want - have);
	parts = palloc(sizeof(int16) * n);
	reserved = palloc0(sizeof(int32) * n);
	stocks = palloc(sizeof(Datum) * n);
	for (i = 0; i < held; i++)
	{
		parts[i] = (int16) hc_int32(i, "part");
		reserved[i] = hc_int32(i, "reserved");
		pool += hc_int32(i, "stock") - reserved[i];
	}
	for (; i < n; i++)
		parts[i] = (int16) (have + i - held);
	for (i = 0; i < n; i++)
		stocks[i] = Int32GetDatum((int32) (reserved[i] + pool / n + (i < pool % n ? 1 : 0)));
	hc_stock_add_parts(call, product_id, have, want);
	hc_args(&args, &share_units);
	hc_bind_text(&args, "product_id", product_id);
	hc_bind(&args, "parts", hc_stock_parts_array(parts, n));
	hc_bind(&args, "stocks", PointerGetDatum(construct_array(stocks, n, INT4OID, 4, true,
															 TYPALIGN_INT)));
	(void) hc_run(call, &args, SPI_OK_UPDATE);
}

/*
 * An automatic spread (:spread) or a step of a gather that changed the
 * parts; :done: the step that ends a gather, which counts it.
 */
static HcStatement record_change = {
	"INSERT INTO hc_stock_spreads AS s"
	"  (product_id, changed_at, spreads, gathers, last_spread_at, last_gather_at, last_waiters,"
	"   last_parts_from, last_parts_to)"
	" VALUES (:product_id, :now, CASE WHEN :spread THEN 1 ELSE 0 END,"
	"         CASE WHEN :spread OR NOT :done THEN 0 ELSE 1 END, CASE WHEN :spread THEN :now END,"
	"         CASE WHEN NOT :spread THEN :now END, :waiters, :from, :to)"
	" ON CONFLICT (product_id) DO UPDATE"
	"   SET changed_at = EXCLUDED.changed_at, spreads = s.spreads" PLUS "EXCLUDED.spreads,"
	"       gathers = s.gathers" PLUS "EXCLUDED.gathers,"
	"       last_spread_at = COALESCE(EXCLUDED.last_spread_at, s.last_spread_at),"
	"       last_gather_at = COALESCE(EXCLUDED.last_gather_at, s.last_gather_at),"
	"       last_waiters = COALESCE(EXCLUDED.last_waiters, s.last_waiters),"
	"       last_parts_from = EXCLUDED.last_parts_from, last_parts_to = EXCLUDED.last_parts_to",
	{{"product_id", TEXTOID}, {"spread", BOOLOID}, {"done", BOOLOID}, {"waiters", INT4OID},
	 {"from", INT2OID}, {"to", INT2OID}, {"now", TIMESTAMPTZOID}}
};

/*
 * Spread product_id into target parts, or gather it into target (never
 * below its floor), in the caller's transaction; see the invariants.  A
 * gather by_part merges only its last part into part 0 (done->more: it
 * has more than target still): each step locks two parts and moves the
 * lines of one, so its stall stays short whatever the product has sold.
 * waiters: the reserves at once that decided a spread (0: none); grow_only:
 * a spread, which leaves a product with more parts than target as it is.  locked,
 * if given, is called once part 0 is held.  True if the parts changed;
 * done says what it found and did (parts_from: kept from the first step of
 * a gather, zero it to start).
 */
bool
hc_stock_auto_spread_run(HcCall *call, const char *product_id, int32 target, int32 waiters,
						 bool by_part, bool grow_only, void (*locked) (void), HcSpreadDone *done)
{
	HcArgs		args;
	Datum		value;
	bool		isnull;
	int32		have;
	int32		want;
	int32		to;

	done->found = done->more = false;
	done->locked_at = 0;
	/* Read first what it reads again under the lock: its plans and caches are made then. */
	(void) hc_stock_count_parts(call, product_id);
	hc_args(&args, &read_floor);
	hc_bind_text(&args, "product_id", product_id);
	(void) hc_run(call, &args, SPI_OK_SELECT);
	if (!hc_fetch_part(call, &lock_part_0, product_id, 0, &value, &isnull))
		return false;
	done->found = true;
	done->locked_at = GetCurrentTimestamp();
	if (locked != NULL)
		locked();

	/* Every change to the set of parts holds part 0: it cannot change now. */
	have = hc_stock_count_parts(call, product_id);
	hc_args(&args, &read_floor);
	hc_bind_text(&args, "product_id", product_id);
	(void) hc_run(call, &args, SPI_OK_SELECT);
	want = Min(Max(target, hc_int32(0, "min_parts")), STOCK_MAX_PARTS);
	if (done->parts_from == 0)
		done->parts_from = have;
	done->parts_to = have;
	/*
	 * A spread only grows the product: its slot may have forgotten the parts
	 * (idle, a restart) and sized a later, smaller rush below them.
	 */
	if (want == have || (grow_only && want < have))
		return false;
	to = want < have && by_part ? have - 1 : want;
	if (want > have)
		auto_spread_grow(call, product_id, have, want);
	else
	{
		hc_args(&args, &lock_parts_nowait);
		hc_bind_text(&args, "product_id", product_id);
		hc_bind(&args, "from", Int32GetDatum(to));
		(void) hc_run(call, &args, SPI_OK_SELECT);
		if (by_part)
			hc_stock_merge_parts(call, product_id, to);
		else
			hc_stock_set_parts(call, product_id, have, to);
	}
	done->parts_to = to;
	done->more = to > want;
	hc_args(&args, &record_change);
	hc_bind_text(&args, "product_id", product_id);
	hc_bind(&args, "spread", BoolGetDatum(want > have));
	hc_bind(&args, "done", BoolGetDatum(!done->more));
	if (want > have && waiters > 0)
		hc_bind(&args, "waiters", Int32GetDatum(waiters));
	else
		hc_bind_null(&args, "waiters");
	hc_bind(&args, "from", Int16GetDatum((int16) done->parts_from));
	hc_bind(&args, "to", Int16GetDatum((int16) to));
	(void) hc_run(call, &args, SPI_OK_INSERT);
	return true;
}

/* How long the last automatic run held part 0, its commit included. */
static HcStatement record_stall = {
	"UPDATE hc_stock_spreads"
	"   SET last_stall_ms = :stall_ms, max_stall_ms = GREATEST(max_stall_ms, :stall_ms)"
	" WHERE product_id" EQ ":product_id",
	{{"product_id", TEXTOID}, {"stall_ms", FLOAT8OID}}
};

void
hc_stock_spread_record_stall(HcCall *call, const char *product_id, double stall_ms)
{
	HcArgs		args;

	hc_args(&args, &record_stall);
	hc_bind_text(&args, "product_id", product_id);
	hc_bind(&args, "stall_ms", Float8GetDatum(stall_ms));
	(void) hc_run(call, &args, SPI_OK_UPDATE);
}

/* An automatic run that rolled back: why, and how long it held part 0 (NaN: not at all). */
static HcStatement record_failure = {
	"INSERT INTO hc_stock_spreads AS s"
	"  (product_id, changed_at, failures, last_failure, last_failure_at, last_stall_ms, max_stall_ms)"
	" VALUES (:product_id, :now, 1, :why, :now, :stall_ms, :stall_ms)"
	" ON CONFLICT (product_id) DO UPDATE"
	"   SET failures = s.failures" PLUS "1, last_failure = EXCLUDED.last_failure,"
	"       last_failure_at = EXCLUDED.last_failure_at,"
	"       last_stall_ms = COALESCE(EXCLUDED.last_stall_ms, s.last_stall_ms),"
	"       max_stall_ms = GREATEST(s.max_stall_ms, EXCLUDED.max_stall_ms)",
	{{"product_id", TEXTOID}, {"why", TEXTOID}, {"stall_ms", FLOAT8OID}, {"now", TIMESTAMPTZOID}}
};

void
hc_stock_spread_record_failure(HcCall *call, const char *product_id, const char *why,
							   double stall_ms)
{
	HcArgs		args;

	hc_args(&args, &record_failure);
	hc_bind_text(&args, "product_id", product_id);
	hc_bind_text(&args, "why", why);
	if (isnan(stall_ms))
		hc_bind_null(&args, "stall_ms");
	else
		hc_bind(&args, "stall_ms", Float8GetDatum(stall_ms));
	(void) hc_run(call, &args, SPI_OK_INSERT);
}

/*
 * hc_stock_auto_spread(product_id, parts): what an automatic spread or
 * gather runs, in the caller's transaction (which holds the parts until it
 * ends: the worker commits at once); for operators and tests.  Returns the
 * parts the product has.
 */
Datum
hc_stock_auto_spread(PG_FUNCTION_ARGS)
{
	char	   *product_id = hc_arg_id(fcinfo, 0, "product_id");
	int32		parts = hc_arg_int(fcinfo, 1, "parts");
	HcSpreadDone done;
	HcCall		call;

	if (parts < 1 || parts > STOCK_MAX_PARTS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("parts must be between 1 and %d", STOCK_MAX_PARTS),
				 errdetail("parts is %d.", parts)));
	hc_call_begin(&call, fcinfo, "hc_stock_auto_spread");
	hc_require_sql_at_least("0.4.0", call.function);
	if (hc_distributed(&call))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("hc_stock_auto_spread does not run on Citus"),
				 errhint("Use hc_stock_spread().")));
	memset(&done, 0, sizeof(done));
	(void) hc_stock_auto_spread_run(&call, product_id, parts, 0, false, false, NULL, &done);
	if (!done.found)
		hc_product_not_found(product_id);
	hc_stock_watch_parts(product_id, done.parts_to);
	hc_call_end(&call);
	PG_RETURN_INT32(done.parts_to);
}
