/*
 * parts.c
 *		A product's parts (stock.h): count and lock them, take a line's
 *		units from one of them, take them again for a late finalize, spread
 *		the units anew; the refusals that come from the parts (RS006 for a
 *		product, 40001 when its parts changed).
 *
 * Invariants (stock.h's 3 for the parts):
 *   1. A take from a product of one part is the conditional update of that
 *      part (take_stock), which holds the part's lock for nothing else.
 *   2. A take from a product of several parts holds at most one part: any
 *      part that has the units and that nobody holds, its own part first
 *      (probe_stock: SKIP LOCKED, never waiting), then its own part,
 *      waiting for it (it holds nothing else of the product).  Each try
 *      runs in a subtransaction rolled back if it took nothing, so that a
 *      row lock a failed re-check keeps goes with it.  (A probe that took a
 *      part may keep the lock of a part whose re-check failed before it; it
 *      takes nothing else of the product either.)
 *   3. If no try gives the units, every part is locked in order, part 0
 *      first and alone (hc_stock_lock_parts): only then does the call
 *      reclaim expired units (sweep.c), spread the product's units anew,
 *      or refuse.
 *   4. A spread anew moves only the stock of each part; reserved stays with
 *      the lines counted there, and no product's stock changes, so it writes
 *      no ledger row.
 *   5. A late finalize's line with only its own part locked never waits for
 *      another part, which would be taking a second part out of order: if
 *      no part gives the units, 40001, and the retry locks every part.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/array.h"

#include "common/errors.h"
#include "common/ledger.h"
#include "core/fetch.h"
#include "core/subxact.h"
#include "stock/stock.h"

/* RS006 for a product. */
void
hc_product_not_found(const char *product_id)
{
	ereport(ERROR,
			(errcode(ERRCODE_HC_NOT_FOUND),
			 errmsg("product \"%s\" does not exist", product_id),
			 errdetail("There is no row for product \"%s\" in hc_inventory.", product_id),
			 errhint("Create it with hc_stock_set() first.")));
}

/*
 * 40001 when a line's part changed (hc_stock_spread dropped it, a late
 * finalize moved the line) between the look at a reservation and its lock,
 * or a late finalize's line expired meanwhile and its own part cannot take
 * it again: the caller retries, as after any serialization failure.
 */
void
hc_stock_parts_changed(const char *product_id)
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("the parts of product \"%s\" changed during the call", product_id),
			 errhint("Try again: hc_stock_spread() or another call moved its units or lines meanwhile.")));
}

/* How many parts a product has. */
static HcStatement count_parts = {
	"SELECT pg_catalog.count(*)::pg_catalog.int4 AS parts FROM hc_stock_parts"
	" WHERE product_id" EQ ":product_id",
	{{"product_id", TEXTOID}}
};

int32
hc_stock_count_parts(HcCall *call, const char *product_id)
{
	HcArgs		args;

	hc_args(&args, &count_parts);
	hc_bind_text(&args, "product_id", product_id);
	(void) hc_run(call, &args, SPI_OK_SELECT);
	return hc_int32(0, "parts");
}

/* One part of a product, locked FOR NO KEY UPDATE. */
static HcFetch lock_part = {"hc_stock_parts", "product_id", HC_FETCH_WAIT, 3,
	{"stock", "reserved", "version"}, "part"};

/*
 * Lock one part of a product (waiting for it) and read it into *locked,
 * with the TID of the version locked; false if there is no such part.
 */
bool
hc_stock_lock_part(HcCall *call, const char *product_id, int16 part, StockLockedPart *locked)
{
	Datum		numbers[3];
	bool		nulls[3];

	if (!hc_fetch_part_tid(call, &lock_part, product_id, part, numbers, nulls, &locked->tid))
		return false;
	locked->stock = DatumGetInt32(numbers[0]);
	locked->reserved = DatumGetInt32(numbers[1]);
	locked->version = DatumGetInt32(numbers[2]);
	return true;
}

/* Part 0 of a product, found only if this transaction holds it. */
static HcFetch mine_part = {"hc_stock_parts", "product_id", HC_FETCH_MINE, 0, {NULL}, "part"};

/* Does this transaction hold part 0 of the product (locked, written or made it)? */
bool
hc_stock_holds_part0(HcCall *call, const char *product_id)
{
	return hc_fetch_part(call, &mine_part, product_id, 0, NULL, NULL);
}

/* Every part of a product, locked in part order, with its numbers. */
static HcStatement lock_parts = {
	"SELECT part::pg_catalog.int4 AS part, stock, reserved FROM hc_stock_parts"
	" WHERE product_id" EQ ":product_id"
	" ORDER BY part FOR NO KEY UPDATE",
	{{"product_id", TEXTOID}}
};

/*
 * Lock every part of a product, in part order, and read them; RS006 if it
 * does not exist.  Part 0 first, alone: every change to the set of parts
 * (hc_stock_spread) holds it, so the statement that locks them all, whose
 * snapshot is taken after that lock, sees every part there is; a single
 * statement that waited for part 0 would miss the parts added meanwhile.
 * Locking them again (to read them anew) takes no lock the transaction
 * does not hold.
 */
void
hc_stock_lock_parts(HcCall *call, const char *product_id, StockParts *p)
{
	HcArgs		args;
	Datum		numbers[3];
	bool		nulls[3];
	uint64		n;
	uint64		i;

	if (!hc_fetch_part(call, &lock_part, product_id, 0, numbers, nulls))
		hc_product_not_found(product_id);
	hc_args(&args, &lock_parts);
	hc_bind_text(&args, "product_id", product_id);
	n = hc_run(call, &args, SPI_OK_SELECT);
	if (n == 0)
		hc_product_not_found(product_id);
	p->n = (int) n;
	p->stock = palloc(sizeof(int32) * n);
	p->reserved = palloc(sizeof(int32) * n);
	p->total_stock = p->total_reserved = 0;
	for (i = 0; i < n; i++)
	{
		if (hc_int32((int) i, "part") != (int32) i)
			elog(ERROR, "the parts of product \"%s\" are not numbered 0 to %d", product_id, (int) n - 1);
		p->stock[i] = hc_int32((int) i, "stock");
		p->reserved[i] = hc_int32((int) i, "reserved");
		p->total_stock += p->stock[i];
		p->total_reserved += p->reserved[i];
	}
}

/*
 * Lock what a line of reservation_id counts in: its part (read into
 * *locked), or every part of its product (all_parts; locked's tid invalid).
 * Returns how many parts are locked (0: the line's alone), or -1 if the
 * part is gone (a gather or hc_stock_spread merged it into part 0 since the
 * caller looked): nothing of the product is locked then.
 */
int32
hc_stock_lock_line_part(HcCall *call, const char *product_id, const char *reservation_id,
					 int16 part, bool all_parts, StockLockedPart *locked)
{
	ItemPointerSetInvalid(&locked->tid);
	if (all_parts)
	{
		StockParts	p;

		hc_stock_lock_parts(call, product_id, &p);
		return p.n;
	}
	if (!hc_stock_lock_part(call, product_id, part, locked))
	{
		if (hc_stock_count_parts(call, product_id) == 0)
			elog(ERROR, "product \"%s\" of reservation \"%s\" vanished", product_id, reservation_id);
		return -1;
	}
	return 0;
}

/*
 * Spread a product's available units anew over its parts, every one of them
 * locked: part p's stock becomes (:stocks)[p + 1].  Moving units between
 * parts changes no product's stock, so it writes no ledger row.
 */
static HcStatement respread = {
	"UPDATE hc_stock_parts SET stock = (:stocks)[part" PLUS "1], updated_at = :now"
	" WHERE product_id" EQ ":product_id" " AND stock" NE "(:stocks)[part" PLUS "1]",
	{{"product_id", TEXTOID}, {"stocks", INT4ARRAYOID}, {"now", TIMESTAMPTZOID}}
};

/*
 * Spread a product's available units anew over its parts, all of them
 * locked: as evenly as they go, with extra more on part `first` (that part
 * takes extra units next).  Only the stock of each part moves; reserved
 * stays with the lines counted there.
 */
void
hc_stock_respread(HcCall *call, const char *product_id, StockParts *p, int first, int64 extra)
{
	int64		available = p->total_stock - p->total_reserved - extra;
	Datum	   *stocks = palloc(sizeof(Datum) * p->n);
	HcArgs		args;
	int			i;

	Assert(available >= 0 && first < p->n);
	for (i = 0; i < p->n; i++)
	{
		int64		share = available / p->n + (i < available % p->n ? 1 : 0);

		p->stock[i] = (int32) (p->reserved[i] + share + (i == first ? extra : 0));
		stocks[i] = Int32GetDatum(p->stock[i]);
	}
	hc_args(&args, &respread);
	hc_bind_text(&args, "product_id", product_id);
	hc_bind(&args, "stocks", PointerGetDatum(construct_array(stocks, p->n, INT4OID, 4, true,
															 TYPALIGN_INT)));
	(void) hc_run(call, &args, SPI_OK_UPDATE);
}

/*
 * The atomic conditional step on one part, reserved += qty where that much
 * is available, with its ledger row.
 */
#define TAKE_STOCK_LEDGER \
	HC_LEDGER_ROWS("'product'", ":product_id", PART_SEQ("u.part", "u.version"), "'reserve'", \
				   "'call'", ":reservation_id", ":buyer_id", ":qty", "0", "NULL") \
	" FROM u RETURNING seq"
static HcStatement take_stock = {
	"WITH u AS ("
	"  UPDATE hc_stock_parts"
	"     SET reserved = reserved" PLUS ":qty, version = version" PLUS "1, updated_at = :now"
	"   WHERE product_id" EQ ":product_id" " AND part" EQ ":part"
	"     AND stock" MINUS "reserved" GE ":qty"
	"  RETURNING part, version)"
	TAKE_STOCK_LEDGER,
	{{"product_id", TEXTOID}, {"part", INT2OID}, {"qty", INT4OID}, {"reservation_id", TEXTOID},
	 {"buyer_id", TEXTOID}, HC_LEDGER_PARAMS}
};

/*
 * The same on any part that has the units and that nobody holds, :part
 * first, then the parts after it: a probe that never waits.
 */
static HcStatement probe_stock = {
	"WITH s AS ("
	"  SELECT part FROM hc_stock_parts"
	"   WHERE product_id" EQ ":product_id" " AND stock" MINUS "reserved" GE ":qty"
	"   ORDER BY part" NE ":part, part" LT ":part, part LIMIT 1"
	"     FOR NO KEY UPDATE SKIP LOCKED),"
	" u AS ("
	"  UPDATE hc_stock_parts t"
	"     SET reserved = t.reserved" PLUS ":qty, version = t.version" PLUS "1, updated_at = :now"
	"    FROM s WHERE t.product_id" EQ ":product_id" " AND t.part" EQ "s.part"
	"  RETURNING t.part, t.version)"
	TAKE_STOCK_LEDGER,
	{{"product_id", TEXTOID}, {"part", INT2OID}, {"qty", INT4OID}, {"reservation_id", TEXTOID},
	 {"buyer_id", TEXTOID}, HC_LEDGER_PARAMS}
};

/*
 * Take qty of a product for a reservation's line from its part *part
 * (take_stock, which waits for the part), or with stmt probe_stock from any
 * other part that has the units and that nobody holds; with its ledger row.
 * Sets *part to the part taken from; false if none had the units.
 */
static bool
stock_take_part(HcCall *call, HcStatement *stmt, const char *product_id, int16 *part, int32 qty,
				const char *reservation_id, const char *buyer_id)
{
	HcArgs		args;

	hc_args(&args, stmt);
	hc_bind_text(&args, "product_id", product_id);
	hc_bind(&args, "part", Int16GetDatum(*part));
	hc_bind(&args, "qty", Int32GetDatum(qty));
	hc_bind_text(&args, "reservation_id", reservation_id);
	hc_bind_text(&args, "buyer_id", buyer_id);
	if (hc_run(call, &args, SPI_OK_INSERT_RETURNING) != 1)
		return false;
	*part = PART_OF_SEQ(hc_int64(0, "seq"));
	return true;
}

/* The arguments of one try at a part (stock_try_part). */
typedef struct StockTry
{
	HcCall	   *call;
	HcStatement *stmt;
	const char *product_id;
	int16	   *part;
	int32		qty;
	const char *reservation_id;
	const char *buyer_id;
} StockTry;

static bool
stock_try(void *arg)
{
	StockTry   *t = (StockTry *) arg;

	return stock_take_part(t->call, t->stmt, t->product_id, t->part, t->qty, t->reservation_id,
						   t->buyer_id);
}

/*
 * One try of stmt in a subtransaction, rolled back if it took nothing: a
 * row lock that a failed re-check keeps goes with it, so that the caller
 * holds no part it did not take before it waits for another (subxact.c).
 */
static bool
stock_try_part(HcCall *call, HcStatement *stmt, const char *product_id, int16 *part, int32 qty,
			   const char *reservation_id, const char *buyer_id)
{
	StockTry	t = {call, stmt, product_id, part, qty, reservation_id, buyer_id};

	return hc_try_in_subxact(call, stock_try, &t);
}

/*
 * The tries of a product with several parts that hold at most one part:
 * any part that has the units and that nobody holds, *part first (never
 * waiting, so a call that keeps a part in a long transaction delays nobody
 * while other parts have units); else *part, waiting for it.  Each try is
 * rolled back if it took nothing.
 */
static bool
stock_take_unordered(HcCall *call, const char *product_id, int16 *part, int32 qty,
					 const char *reservation_id, const char *buyer_id)
{
	return stock_try_part(call, &probe_stock, product_id, part, qty, reservation_id, buyer_id) ||
		stock_try_part(call, &take_stock, product_id, part, qty, reservation_id, buyer_id);
}

/*
 * Reserve qty of a product for a reservation's line, counted in *part.  A
 * product of one part: the conditional update, which holds the part's lock
 * for nothing else.  Of several: the line's part, then any other (above).
 * If that finds too little, every part is locked in order: reclaim as many
 * expired units as are missing, and if the product has the units, spread
 * them anew so that the line's part has them, and take them there.  Returns
 * false if there is still too little, decided with every part locked, with
 * the product's numbers in *stock and *reserved.  tried: the call's tries
 * in one statement (stock_reserve_line) found nothing and may hold part 0,
 * first in the order: straight to every part.
 */
bool
hc_stock_take(HcCall *call, const char *product_id, int32 parts, bool tried, int16 *part,
		   int32 qty, const char *reservation_id, const char *buyer_id, int32 *stock,
		   int32 *reserved)
{
	StockParts p;
	int64		missing;

	if (!tried &&
		(parts > 1 ?
		 stock_take_unordered(call, product_id, part, qty, reservation_id, buyer_id) :
		 stock_take_part(call, &take_stock, product_id, part, qty, reservation_id, buyer_id)))
		return true;

	hc_stock_lock_parts(call, product_id, &p);
	missing = qty - (p.total_stock - p.total_reserved);
	if (missing > 0 && hc_stock_reclaim(call, product_id, missing) > 0)
		hc_stock_lock_parts(call, product_id, &p);
	*stock = (int32) p.total_stock;
	*reserved = (int32) p.total_reserved;
	if (p.total_stock - p.total_reserved < qty)
		return false;
	if (*part >= p.n)
		*part = 0;
	if (p.stock[*part] - p.reserved[*part] < qty)
		hc_stock_respread(call, product_id, &p, *part, qty);
	if (!stock_take_part(call, &take_stock, product_id, part, qty, reservation_id, buyer_id))
		elog(ERROR, "part %d of product \"%s\" did not have the units it was given", *part, product_id);
	return true;
}

/* A line counted in another part than the one it was written with. */
static HcStatement move_line_part = {
	"UPDATE hc_stock_order_lines SET part = :part"
	" WHERE product_id" EQ ":product_id" " AND reservation_id" EQ ":reservation_id",
	{{"product_id", TEXTOID}, {"reservation_id", TEXTOID}, {"part", INT2OID}}
};

/* The same for an order of one product, which is its own line. */
static HcStatement move_order_part = {
	"UPDATE hc_stock_orders SET part = :part"
	" WHERE id" EQ ":reservation_id" " AND scope_id" EQ ":product_id" " AND qty IS NOT NULL",
	{{"product_id", TEXTOID}, {"reservation_id", TEXTOID}, {"part", INT2OID}}
};

/*
 * The line is counted in another part than the one it was written with
 * (single: the line of an order of one product, its order's row).
 */
void
hc_stock_count_line_in(HcCall *call, const char *product_id, const char *reservation_id, int16 part,
					   bool single)
{
	HcArgs		args;

	hc_args(&args, single ? &move_order_part : &move_line_part);
	hc_bind_text(&args, "product_id", product_id);
	hc_bind_text(&args, "reservation_id", reservation_id);
	hc_bind(&args, "part", Int16GetDatum(part));
	if (hc_run(call, &args, SPI_OK_UPDATE) != 1)
		elog(ERROR, "line of product \"%s\" in reservation \"%s\" vanished", product_id, reservation_id);
}

/*
 * A late finalize's line that no longer counts, locked as hc_stock_lock left
 * it: its units taken again, into line->part.  With every part of its
 * product locked (or a product of one part), the whole way, as a reserve
 * takes them: reclaim, spread anew, or false if the product has too little.
 * With only its own part locked (it expired between hc_stock_lock's look and
 * its lock), from that part or any other that nobody holds, but not by
 * waiting for another part, which would be taking a second part out of
 * order: if that fails, 40001, and the retry locks every part.
 */
static bool
stock_retake(HcCall *call, StockLine *line, const char *reservation_id, const char *buyer_id,
			 int32 *stock, int32 *reserved)
{
	if (line->parts > 0)
		return hc_stock_take(call, line->product_id, line->parts, false, &line->part, line->qty,
						  reservation_id, buyer_id, stock, reserved);
	if (hc_stock_count_parts(call, line->product_id) <= 1)
		return hc_stock_take(call, line->product_id, 1, false, &line->part, line->qty, reservation_id,
						  buyer_id, stock, reserved);
	if (!stock_take_unordered(call, line->product_id, &line->part, line->qty, reservation_id,
							  buyer_id))
		hc_stock_parts_changed(line->product_id);
	return true;
}

/*
 * stock_retake for a line of r, which then counts in the part that gave the
 * units; on Citus on its product's node.
 */
bool
hc_stock_retake_line(HcCall *call, StockReservation *r, StockLine *line)
{
	int16		part = line->part;
	int32		stock;
	int32		reserved;

	/* Its part, and maybe its order's row, are written here: not as hc_stock_lock locked them. */
	ItemPointerSetInvalid(&r->order_tid);
	ItemPointerSetInvalid(&r->locked.tid);
	if (r->spread)
		return true;			/* its move on its node (orders.h) takes the units again */
	if (!stock_retake(call, line, r->id, r->buyer_id, &stock, &reserved))
		return false;
	if (line->part != part)
		hc_stock_count_line_in(call, line->product_id, r->id, line->part, r->single);
	return true;
}
