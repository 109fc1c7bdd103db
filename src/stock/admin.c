/*
 * admin.c
 *		A product's stock as an operator sets it: hc_stock_set (which
 *		creates a product), hc_stock_adjust, hc_stock_spread.
 *
 * Invariants:
 *   1. A change locks every part of the product, then reclaims all its
 *      expired lines (sweep.c), so that a lagging sweeper neither blocks it
 *      nor refuses it as below reserved: an operator's act, not the hot
 *      path.
 *   2. Stock never goes below what is reserved, nor above what an int4
 *      holds; the available units are spread evenly over the parts anew.
 *   3. A change's ledger row is on part 0, with a new version there, and
 *      only if the product's stock changes.
 *   4. A product keeps 1 to STOCK_MAX_PARTS parts.  Parts that go hand
 *      their reserved units, versions and the lines that count to part 0
 *      (a line that no longer counts keeps its part: stock.h's 2); a part
 *      number the product had before goes on from its last seq (stock.h's
 *      6).
 *   5. test/packaging/sanitize.sh's canary (HC_SANITIZE_CANARY) is in hc_stock_set,
 *      in this folder: the script looks for it there.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/array.h"

#include "common/ledger.h"
#include "common/result.h"
#include "common/validate.h"
#include "core/placement.h"
#include "core/version.h"
#include "stock/auto_spread.h"
#include "stock/stock.h"

PG_FUNCTION_INFO_V1(hc_stock_set);
PG_FUNCTION_INFO_V1(hc_stock_adjust);
PG_FUNCTION_INFO_V1(hc_stock_spread);

/*
 * Lock every part of a product for a stock change and reclaim its expired
 * lines, so that a lagging sweeper does not block the change.  RS006 if it
 * does not exist.
 */
static void
stock_lock_product(HcCall *call, const char *product_id, StockParts *p)
{
	TimestampTz from = DT_NOBEGIN;
	bool		reclaimed = false;

	hc_stock_lock_parts(call, product_id, p);

	/*
	 * Reclaim all of them: a stock change is an operator's act, not the hot
	 * path, and a backlog left behind could refuse it as below reserved.
	 * Each round starts where the last one stopped in the lines: the lines
	 * it expired keep their entries in the expiry index until this
	 * transaction ends, and walking them again each round would make a
	 * large backlog quadratic.
	 */
	for (;;)
	{
		StockReclaimed done;

		if (hc_stock_reclaim_as(call, product_id, (Datum) 0, PG_INT64_MAX, from, "reclaim",
							 "reclaim", &done) == 0)
			break;
		reclaimed = true;
		from = done.last;
	}
	if (reclaimed)
		hc_stock_lock_parts(call, product_id, p);
}

/*
 * A product as hc_inventory shows it: its parts' sums, read from the parts
 * (on Citus the view on a node reads that node's empty table, not the
 * shards).
 */
static HcStatement read_product = {
	"SELECT p.product_id,"
	"       pg_catalog.sum(p.stock)::pg_catalog.int4 AS stock,"
	"       pg_catalog.sum(p.reserved)::pg_catalog.int4 AS reserved,"
	"       pg_catalog.sum(p.available)::pg_catalog.int4 AS available,"
	"       pg_catalog.sum(p.version)::pg_catalog.int4 AS version,"
	"       pg_catalog.min(p.created_at) AS created_at,"
	"       pg_catalog.max(p.updated_at) AS updated_at"
	"  FROM hc_stock_parts p WHERE p.product_id" EQ ":product_id"
	" GROUP BY p.product_id",
	{{"product_id", TEXTOID}}
};

/* The product as hc_inventory shows it, as the function's result. */
static Datum
stock_product_row(HcCall *call, FunctionCallInfo fcinfo, const char *product_id)
{
	HcArgs		args;

	hc_args(&args, &read_product);
	hc_bind_text(&args, "product_id", product_id);
	if (hc_run(call, &args, SPI_OK_SELECT) != 1)
		elog(ERROR, "product \"%s\" vanished", product_id);
	return hc_result_row(call, fcinfo);
}

/*
 * Set a product's stock, every part of it locked, from :old_stock to
 * :stock, part p's becoming (:stocks)[p + 1]: the ledger's :event on part 0,
 * with a new version there, unless the product's stock does not change.
 */
static HcStatement set_stock = {
	"WITH i AS ("
	"  UPDATE hc_stock_parts"
	"     SET stock = (:stocks)[part" PLUS "1], updated_at = :now,"
	"         version = version" PLUS "CASE WHEN part" EQ "0 AND :stock" NE ":old_stock"
	"                                       THEN 1 ELSE 0 END"
	"   WHERE product_id" EQ ":product_id" " RETURNING part, version)"
	HC_LEDGER_ROWS("'product'", ":product_id", PART_SEQ("i.part", "i.version"), ":event",
				   "'adjustment'", "NULL", "NULL", "0", ":stock" MINUS ":old_stock", ":detail")
	" FROM i WHERE i.part" EQ "0 AND :stock" NE ":old_stock",
	{{"product_id", TEXTOID}, {"stock", INT4OID}, {"old_stock", INT4OID},
	 {"stocks", INT4ARRAYOID}, {"event", TEXTOID}, {"detail", TEXTOID}, HC_LEDGER_PARAMS}
};

/*
 * Set the stock of a product, every part of it locked, to new_stock,
 * refusing to go below reserved; its available units spread over its parts
 * anew.  Return the product's row.
 */
static Datum
stock_change(HcCall *call, FunctionCallInfo fcinfo, const char *product_id, int64 new_stock,
			 StockParts *p, const char *event, const char *detail)
{
	HcArgs		args;
	Datum	   *stocks;
	int64		available = new_stock - p->total_reserved;
	int			i;

	if (available < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("stock of product \"%s\" cannot go below what is reserved", product_id),
				 errdetail("Stock would be " INT64_FORMAT "; " INT64_FORMAT " units are reserved.",
						   new_stock, p->total_reserved),
				 errhint("Wait for reservations to end, or unreserve them first.")));
	if (new_stock > PG_INT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("stock of product \"%s\" would be out of range", product_id),
				 errdetail("Stock would be " INT64_FORMAT "; the most it can be is %d.", new_stock, PG_INT32_MAX),
				 errhint("Adjust by a smaller delta.")));

	stocks = palloc(sizeof(Datum) * p->n);
	for (i = 0; i < p->n; i++)
		stocks[i] = Int32GetDatum((int32) (p->reserved[i] + available / p->n +
										   (i < available % p->n ? 1 : 0)));
	hc_args(&args, &set_stock);
	hc_bind_text(&args, "product_id", product_id);
	hc_bind(&args, "stock", Int32GetDatum((int32) new_stock));
	hc_bind(&args, "old_stock", Int32GetDatum((int32) p->total_stock));
	hc_bind(&args, "stocks", PointerGetDatum(construct_array(stocks, p->n, INT4OID, 4, true,
															 TYPALIGN_INT)));
	hc_bind_text(&args, "event", event);
	hc_bind_text(&args, "detail", detail);
	(void) hc_run(call, &args, SPI_OK_INSERT);
	return stock_product_row(call, fcinfo, product_id);
}

static HcStatement create_product = {
	"WITH i AS ("
	"  INSERT INTO hc_stock_parts (product_id, stock, reserved, created_at, updated_at)"
	"  VALUES (:product_id, :stock, 0, :now, :now)"
	"  ON CONFLICT (product_id, part) DO NOTHING RETURNING *),"
	" logged AS ("
	HC_LEDGER_ROWS("'product'", ":product_id", PART_SEQ("i.part", "i.version"), "'stock_set'",
				   "'adjustment'",
				   "NULL", "NULL", "0", ":stock", "'created'") " FROM i)"
	" SELECT * FROM i",
	{{"product_id", TEXTOID}, {"stock", INT4OID}, HC_LEDGER_PARAMS}
};

/*
 * A product just created has a floor of 1, whatever a product of that name
 * that was deleted by hand had.
 */
static HcStatement forget_floor = {
	"DELETE FROM hc_stock_spreads WHERE product_id" EQ ":product_id",
	{{"product_id", TEXTOID}}
};

static void
stock_floor_forget(HcCall *call, const char *product_id)
{
	HcArgs		args;

	hc_args(&args, &forget_floor);
	hc_bind_text(&args, "product_id", product_id);
	(void) hc_run(call, &args, SPI_OK_DELETE);
	hc_stock_watch_parts(product_id, 1);
}

/*
 * hc_stock_set(product_id, stock): create a product or set its stock.
 */
Datum
hc_stock_set(PG_FUNCTION_ARGS)
{
	char	   *product_id = hc_arg_id(fcinfo, 0, "product_id");
	int32		new_stock = hc_arg_int(fcinfo, 1, "stock");
	HcCall		call;
	StockParts	p;
	HcArgs		args;
	Datum		row;

	if (new_stock < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("stock must not be negative")));
#ifdef HC_SANITIZE_CANARY
	{
		/*
		 * test/packaging/sanitize.sh's canary build only: an 8-byte integer read at an
		 * odd offset of a byte buffer, which UndefinedBehaviorSanitizer must
		 * report (x86 reads it without a fault: only UBSan sees it).  The
		 * offset is known at run time only: gcc 12 checks the alignment of
		 * buf, not of buf + 1, when the offset is a constant.
		 */
		volatile Size offset = 1;
		char	   *buf = palloc0(16);
		volatile int64 v = *(int64 *) (buf + offset);

		(void) v;
		pfree(buf);
	}
#endif
	hc_call_begin(&call, fcinfo, "hc_stock_set");
	hc_require_sql_at_least("0.4.0", call.function);
	HC_ROUTE(&call, fcinfo, product_id);
	hc_args(&args, &create_product);
	hc_bind_text(&args, "product_id", product_id);
	hc_bind(&args, "stock", Int32GetDatum(new_stock));
	if (hc_run(&call, &args, SPI_OK_SELECT) == 1)
	{
		row = hc_result_row(&call, fcinfo);
		if (!hc_distributed(&call) && hc_sql_at_least("0.4.0"))
			stock_floor_forget(&call, product_id);
	}
	else
	{
		stock_lock_product(&call, product_id, &p);
		row = stock_change(&call, fcinfo, product_id, new_stock, &p, "stock_set", NULL);
	}
	hc_call_end(&call);
	PG_RETURN_DATUM(row);
}

/*
 * hc_stock_adjust(product_id, delta, reason): restock or shrink, with the
 * reason in the ledger.
 */
Datum
hc_stock_adjust(PG_FUNCTION_ARGS)
{
	char	   *product_id = hc_arg_id(fcinfo, 0, "product_id");
	int32		delta = hc_arg_int(fcinfo, 1, "delta");
	char	   *reason = hc_arg_text(fcinfo, 2, "reason");
	HcCall		call;
	StockParts	p;
	Datum		row;

	if (delta == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("delta must not be zero")));
	if (reason[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("reason must not be empty")));
	hc_call_begin(&call, fcinfo, "hc_stock_adjust");
	hc_require_sql_at_least("0.4.0", call.function);
	HC_ROUTE(&call, fcinfo, product_id);
	stock_lock_product(&call, product_id, &p);
	row = stock_change(&call, fcinfo, product_id, p.total_stock + delta, &p, "stock_adjust", reason);
	hc_call_end(&call);
	PG_RETURN_DATUM(row);
}

/*
 * New parts :from..:to of a product, empty.  A part number the product had
 * before goes on from the last seq its ledger rows have (one probe of the
 * ledger's key each), so that no seq repeats.
 */
static HcStatement add_parts = {
	"INSERT INTO hc_stock_parts (product_id, part, stock, reserved, version, created_at, updated_at)"
	" SELECT :product_id, n, 0, 0,"
	"        COALESCE((SELECT (pg_catalog.max(l.seq)" MINUS "(n" TIMES "281474976710656))::pg_catalog.int4"
	"                    FROM hc_ledger l"
	"                   WHERE l.kind" EQ "'product'" " AND l.entity_id" EQ ":product_id"
	"                     AND l.seq" GE "(n" TIMES "281474976710656::pg_catalog.int8)"
	"                     AND l.seq" LT "((n" PLUS "1)" TIMES "281474976710656::pg_catalog.int8)), 0),"
	"        :now, :now"
	"   FROM pg_catalog.generate_series(:from, :to) n",
	{{"product_id", TEXTOID}, {"from", INT4OID}, {"to", INT4OID}, {"now", TIMESTAMPTZOID}}
};

/* New parts have..parts - 1 of a product whose part 0 is locked, empty. */
void
hc_stock_add_parts(HcCall *call, const char *product_id, int32 have, int32 parts)
{
	HcArgs		args;

	hc_args(&args, &add_parts);
	hc_bind_text(&args, "product_id", product_id);
	hc_bind(&args, "from", Int32GetDatum(have));
	hc_bind(&args, "to", Int32GetDatum(parts - 1));
	(void) hc_run(call, &args, SPI_OK_INSERT);
}

/*
 * Part 0 takes the stock, the reserved units and the versions of the parts
 * from :from on, which then go (every part locked): its version jumps
 * ahead, so its seqs stay its own, and the product's version (the sum) does
 * not go back.
 */
static HcStatement merge_parts = {
	"WITH gone AS ("
	"  SELECT pg_catalog.sum(stock)::pg_catalog.int4 AS stock,"
	"         pg_catalog.sum(reserved)::pg_catalog.int4 AS reserved,"
	"         pg_catalog.sum(version)::pg_catalog.int4 AS version"
	"    FROM hc_stock_parts WHERE product_id" EQ ":product_id" " AND part" GE ":from)"
	" UPDATE hc_stock_parts p SET stock = p.stock" PLUS "g.stock, reserved = p.reserved" PLUS "g.reserved,"
	"        version = p.version" PLUS "g.version, updated_at = :now"
	"   FROM gone g WHERE p.product_id" EQ ":product_id" " AND p.part" EQ "0",
	{{"product_id", TEXTOID}, {"from", INT4OID}, {"now", TIMESTAMPTZOID}}
};

/*
 * Parts from :from on, emptied by the caller, go; the lines counted in them
 * count in part 0: orders of one product and lines of orders of several,
 * each through its index of the product's live lines, so that a product's
 * history is not walked (a line that no longer counts keeps its part).
 */
static HcStatement drop_parts = {
	"WITH d AS ("
	"  DELETE FROM hc_stock_parts WHERE product_id" EQ ":product_id" " AND part" GE ":from"
	"  RETURNING part),"
	" o AS ("
	"  UPDATE hc_stock_orders SET part = 0"
	"   WHERE scope_id" EQ ":product_id" " AND qty IS NOT NULL AND status" EQ "'RESERVED'"
	"     AND part" GE ":from" " RETURNING id)"
	" UPDATE hc_stock_order_lines SET part = 0"
	"  WHERE product_id" EQ ":product_id" " AND status" EQ "'RESERVED'" " AND part" GE ":from",
	{{"product_id", TEXTOID}, {"from", INT4OID}}
};

/*
 * Parts from on of a product go, part 0 taking their stock, reserved units
 * and lines, those parts and part 0 locked.  The units stay where they
 * are otherwise: part 0 may then have more than the others.
 */
void
hc_stock_merge_parts(HcCall *call, const char *product_id, int32 from)
{
	HcArgs		args;

	hc_args(&args, &merge_parts);
	hc_bind_text(&args, "product_id", product_id);
	hc_bind(&args, "from", Int32GetDatum(from));
	(void) hc_run(call, &args, SPI_OK_UPDATE);
	hc_args(&args, &drop_parts);
	hc_bind_text(&args, "product_id", product_id);
	hc_bind(&args, "from", Int32GetDatum(from));
	(void) hc_run(call, &args, SPI_OK_UPDATE);
}

/*
 * A product's parts, have of them all locked, become parts: new ones empty,
 * or part 0 taking the reserved units and lines of those that go; then its
 * available units spread evenly over them, if they are not already.  The
 * body of hc_stock_spread and of the automatic spreads and gathers
 * (auto_spread.c).
 */
void
hc_stock_set_parts(HcCall *call, const char *product_id, int32 have, int32 parts)
{
	StockParts	p;
	int			i;

	Assert(parts >= 1 && parts <= STOCK_MAX_PARTS);
	if (parts > have)
		hc_stock_add_parts(call, product_id, have, parts);
	else if (parts < have)
		hc_stock_merge_parts(call, product_id, parts);
	hc_stock_lock_parts(call, product_id, &p);
	for (i = 0; i < p.n && p.stock[i] - p.reserved[i] == (p.total_stock - p.total_reserved) / p.n; i++)
		;
	if (i < p.n)
		hc_stock_respread(call, product_id, &p, 0, 0);
}

/*
 * The floor hc_stock_spread sets (hc_stock_spreads.min_parts), its parts
 * just changed: an automatic gather (auto_spread.c) never goes below it.
 */
static HcStatement set_floor = {
	"INSERT INTO hc_stock_spreads AS s (product_id, min_parts, changed_at)"
	" VALUES (:product_id, :parts, :now)"
	" ON CONFLICT (product_id) DO UPDATE"
	"   SET min_parts = EXCLUDED.min_parts, changed_at = EXCLUDED.changed_at",
	{{"product_id", TEXTOID}, {"parts", INT2OID}, {"now", TIMESTAMPTZOID}}
};

static void
stock_floor_set(HcCall *call, const char *product_id, int32 parts)
{
	HcArgs		args;

	hc_args(&args, &set_floor);
	hc_bind_text(&args, "product_id", product_id);
	hc_bind(&args, "parts", Int16GetDatum((int16) parts));
	(void) hc_run(call, &args, SPI_OK_INSERT);
	hc_stock_watch_parts(product_id, parts);
}

/*
 * hc_stock_spread(product_id, parts): keep a product's stock in that many
 * parts, its available units spread over them, so that reserves of a hot
 * product commit side by side.  Parts that go hand their lines and their
 * units to part 0.  The parts are the product's floor from 0.4.0 on: an
 * automatic gather (auto_spread.c) never goes below them.
 */
Datum
hc_stock_spread(PG_FUNCTION_ARGS)
{
	char	   *product_id = hc_arg_id(fcinfo, 0, "product_id");
	int32		parts = hc_arg_int(fcinfo, 1, "parts");
	HcCall		call;
	StockParts	p;
	Datum		row;

	if (parts < 1 || parts > STOCK_MAX_PARTS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("parts must be between 1 and %d", STOCK_MAX_PARTS),
				 errdetail("parts is %d.", parts)));
	hc_call_begin(&call, fcinfo, "hc_stock_spread");
	hc_require_sql_at_least("0.4.0", call.function);
	HC_ROUTE(&call, fcinfo, product_id);
	stock_lock_product(&call, product_id, &p);
	hc_stock_set_parts(&call, product_id, p.n, parts);
	if (!hc_distributed(&call))
		stock_floor_set(&call, product_id, parts);
	row = stock_product_row(&call, fcinfo, product_id);
	hc_call_end(&call);
	PG_RETURN_DATUM(row);
}
