/*
 * lines.c
 *		A stored reservation's lines: lock the reservation with what its
 *		lines count in, move a line to its new status, end the reservation,
 *		expire it; and its refusals RS006 and RS003.  finalize.c decides,
 *		this file does.
 *
 * Invariants:
 *   1. A reservation is locked product by product in order, each line's
 *      part alone (or, for a late finalize, every part of a product of
 *      several parts whose line may have to find its units again), then
 *      its row, and only then read with its lines (hc_stock_lock).
 *   2. A line whose part is gone between the look and the lock (a gather
 *      or hc_stock_spread merged it into part 0) is looked at again, its
 *      product's parts not locked yet; one that moved to another part that
 *      is still there (a late finalize of the same reservation) is 40001:
 *      the caller retries.  A line that no longer counts is locked at part
 *      0 if its part is gone (stock.h's 2): nothing of it counts in any
 *      part.
 *   3. A move takes a line from the status it had under the lock to its new
 *      one, with its part's stock and reserved and its ledger row, in one
 *      statement (the last line's with the reservation's end): a line that
 *      changed meanwhile is an internal error, never a second count.
 *   4. An order of several products on Citus (r->spread) is locked, moved
 *      and ended by the operations the scale-out layer registered
 *      (orders.h), step by step on the nodes of its rows.
 *   5. An order of one product (r->single) is its own line: its row is
 *      locked and read once, and a move of its line is the move of the
 *      order, in one write: without the executor where the tables allow it
 *      (direct.c; its row and its part at the versions locked here), else
 *      one statement.  One that is RESERVED when looked at is looked at and
 *      locked without the executor too (stock_lock_single), in the same
 *      order and with the same reads as the statements.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

#include "common/errors.h"
#include "common/ledger.h"
#include "common/notify.h"
#include "core/fetch.h"
#include "stock/orders.h"
#include "stock/stock.h"

/* RS006 for a stock reservation that is not there (or not of product_id, if given). */
void
hc_stock_not_found(const char *product_id, const char *reservation_id)
{
	if (product_id == NULL)
		hc_reservation_not_found(reservation_id, "stock reservation",
								 "Use the reservation_id that hc_reserve() or hc_reserve_items() returned.");
	hc_reservation_not_found(reservation_id,
							 psprintf("stock reservation whose first product is \"%s\"", product_id),
							 "Use the first product of the order and the reservation_id that hc_reserve() or hc_reserve_items() returned.");
}

/* RS003 for a stock reservation. */
void
hc_stock_expired(const StockReservation *r, const char *hint)
{
	hc_reservation_expired(r->id, "", r->expires_at, hint);
}

/*
 * The products of a reservation and the parts to lock for their lines, in
 * the order they are locked in: a line's part, or part 0 for a line that no
 * longer counts whose part is gone.  And, for a late finalize, whether a
 * line of a product in several parts must find its units again (it was
 * expired: a line still RESERVED, expired or not, still counts, and one
 * reclaimed between this look and its lock takes the fallback of
 * stock_retake).  Only then are all of the product's parts locked, so that
 * a replayed or refused finalize waits for no part but its line's.  The
 * line of an order of one product is the order's row.
 */
#define ORDER_LINE_PARTS(line) \
	"CASE WHEN " line ".status" EQ "'RESERVED' THEN " line ".part" \
	"     WHEN EXISTS (SELECT FROM hc_stock_parts s WHERE s.product_id" EQ line ".product_id" \
	"                     AND s.part" EQ line ".part) THEN " line ".part" \
	"     ELSE 0 END::pg_catalog.int4 AS part," \
	" " line ".status" EQ "'EXPIRED'" \
	" AND EXISTS (SELECT FROM hc_stock_parts s" \
	"              WHERE s.product_id" EQ line ".product_id" " AND s.part" GT "0) AS may_retake"
static HcStatement order_products = {
	"SELECT l.product_id, " ORDER_LINE_PARTS("l")
	"  FROM (SELECT o.scope_id AS product_id, o.part, o.status FROM hc_stock_orders o"
	"         WHERE o.id" EQ ":reservation_id" " AND o.qty IS NOT NULL"
	"        UNION ALL"
	"        SELECT l.product_id, l.part, l.status FROM hc_stock_order_lines l"
	"         WHERE l.reservation_id" EQ ":reservation_id) l"
	" ORDER BY l.product_id COLLATE \"C\"",
	{{"reservation_id", TEXTOID}}
};

/*
 * Lock a reservation and read it with its lines (its products are locked):
 * an order of one product, its own line, or the lines of an order of
 * several.
 */
static HcStatement lock_order = {
	"SELECT r.scope_id, r.buyer_id, r.status, r.expires_at, r.created_at, r.qty IS NOT NULL AS single,"
	"       COALESCE(l.product_id, r.scope_id) AS product_id,"
	"       COALESCE(l.part, r.part)::pg_catalog.int4 AS part, COALESCE(l.qty, r.qty) AS qty,"
	"       COALESCE(l.status, r.status) AS line_status, r.ctid AS tid"
	"  FROM hc_stock_orders r"
	"  LEFT JOIN hc_stock_order_lines l ON r.qty IS NULL AND l.reservation_id" EQ "r.id"
	" WHERE r.id" EQ ":reservation_id"
	" ORDER BY COALESCE(l.product_id, r.scope_id) COLLATE \"C\""
	" FOR NO KEY UPDATE OF r",
	{{"reservation_id", TEXTOID}}
};

/*
 * An order of one product, as a look sees it, and locked: the rows the two
 * statements above read of it, without the executor (core/fetch.c).
 */
static HcFetch look_single = {"hc_stock_orders", "id", HC_FETCH_READ, 4,
	{"scope_id", "part", "status", "qty"}};
static HcFetch lock_single = {"hc_stock_orders", "id", HC_FETCH_WAIT, 7,
	{"scope_id", "buyer_id", "status", "expires_at", "created_at", "qty", "part"}};

/*
 * hc_stock_lock of an order of one product that is RESERVED when looked at
 * (every finalize and unreserve in time): its part, then its row, as the
 * statements lock them, with what they read.  False, with nothing locked,
 * for any other order, or if its part is gone meanwhile: the statements
 * then look and lock.
 */
static bool
stock_lock_single(HcCall *call, const char *product_id, const char *reservation_id,
				  StockReservation *r)
{
	Datum		values[7];
	bool		nulls[7];
	MemoryContext old;
	StockLine  *line;
	int16		part;

	if (!hc_fetch(call, &look_single, reservation_id, values, nulls) || nulls[3] ||
		strcmp(TextDatumGetCString(values[2]), "RESERVED") != 0)
		return false;
	part = DatumGetInt16(values[1]);
	if (hc_stock_lock_line_part(call, TextDatumGetCString(values[0]), reservation_id, part, false,
								&r->locked) < 0)
		return false;
	if (!hc_fetch_tid(call, &lock_single, reservation_id, values, nulls, &r->order_tid))
		elog(ERROR, "reservation \"%s\" has lines but no row", reservation_id);

	old = MemoryContextSwitchTo(call->outer);
	r->id = pstrdup(reservation_id);
	r->scope_id = TextDatumGetCString(values[0]);
	r->buyer_id = TextDatumGetCString(values[1]);
	r->status = TextDatumGetCString(values[2]);
	r->lines = palloc(sizeof(StockLine));
	MemoryContextSwitchTo(old);
	if (product_id != NULL && strcmp(r->scope_id, product_id) != 0)
		hc_stock_not_found(product_id, reservation_id);
	r->expires_at = DatumGetTimestampTz(values[3]);
	r->created_at = DatumGetTimestampTz(values[4]);
	r->replayed = false;
	r->single = true;
	r->nlines = 1;
	line = &r->lines[0];
	line->product_id = r->scope_id;
	line->qty = DatumGetInt32(values[5]);
	line->part = DatumGetInt16(values[6]);
	line->status = r->status;
	line->parts = 0;
	/* The line moved to another part meanwhile (a late finalize of this order). */
	if (strcmp(line->status, "RESERVED") == 0 && line->part != part)
		hc_stock_parts_changed(line->product_id);
	if (line->part != part)
		ItemPointerSetInvalid(&r->locked.tid);
	return true;
}

/*
 * The part to lock for the line of product_id in the reservation, looked at
 * anew (ORDER_LINE_PARTS); -1 if there is no such line.
 */
static int16
stock_look_again(HcCall *call, const char *reservation_id, const char *product_id)
{
	HcArgs		args;
	uint64		n;

	hc_args(&args, &order_products);
	hc_bind_text(&args, "reservation_id", reservation_id);
	n = hc_run(call, &args, SPI_OK_SELECT);
	for (uint64 i = 0; i < n; i++)
		if (strcmp(hc_text(call, (int) i, "product_id"), product_id) == 0)
			return (int16) hc_int32((int) i, "part");
	return -1;
}

/*
 * Lock a reservation for finalize or unreserve: its products one at a time
 * in order, then the reservation row, and read it with its lines under
 * those locks.  Of each product, the line's part; for a late finalize
 * (retake), every part of a product in several parts whose line may have
 * to find its units again, so that it can reclaim and spread them as a
 * reserve does (the line's .parts says how many are locked, else 0).
 */
void
hc_stock_lock(HcCall *call, const char *product_id, const char *reservation_id, bool retake,
		   StockReservation *r)
{
	HcArgs		args;
	char	  **products;
	int16	   *parts;
	int32	   *locked;
	StockLockedPart *locked_part;
	uint64		n;
	uint64		i;
	bool		isnull;

	if (r->spread)
	{
		hc_stock_orders()->lock(call, reservation_id, retake, r);
		return;
	}
	if (stock_lock_single(call, product_id, reservation_id, r))
		return;
	hc_args(&args, &order_products);
	hc_bind_text(&args, "reservation_id", reservation_id);
	n = hc_run(call, &args, SPI_OK_SELECT);
	if (n == 0)
		hc_stock_not_found(NULL, reservation_id);
	products = palloc(sizeof(char *) * n);
	parts = palloc(sizeof(int16) * n);
	locked = palloc0(sizeof(int32) * n);
	locked_part = palloc(sizeof(StockLockedPart) * n);
	for (i = 0; i < n; i++)
	{
		Datum		may_retake = hc_datum((int) i, "may_retake", &isnull);

		products[i] = hc_text(call, (int) i, "product_id");
		parts[i] = (int16) hc_int32((int) i, "part");
		if (retake && !isnull && DatumGetBool(may_retake))
			locked[i] = -1;
	}
	for (i = 0; i < n; i++)
	{
		bool		all_parts = locked[i] != 0;

		/*
		 * Its part merged into part 0 since the look (a gather, hc_stock_spread):
		 * holding nothing of the product, look again and lock that one.
		 */
		for (int tries = 0;
			 (locked[i] = hc_stock_lock_line_part(call, products[i], reservation_id, parts[i],
												  all_parts, &locked_part[i])) < 0;
			 tries++)
		{
			int16		part = stock_look_again(call, reservation_id, products[i]);

			if (tries == 2 || part < 0 || part == parts[i])
				hc_stock_parts_changed(products[i]);
			parts[i] = part;
		}
	}

	hc_args(&args, &lock_order);
	hc_bind_text(&args, "reservation_id", reservation_id);
	n = hc_run(call, &args, SPI_OK_SELECT);
	if (n == 0)
		elog(ERROR, "reservation \"%s\" has lines but no row", reservation_id);
	r->id = pstrdup(reservation_id);
	r->scope_id = hc_text(call, 0, "scope_id");
	if (product_id != NULL && strcmp(r->scope_id, product_id) != 0)
		hc_stock_not_found(product_id, reservation_id);
	r->buyer_id = hc_text(call, 0, "buyer_id");
	r->status = hc_text(call, 0, "status");
	r->expires_at = hc_timestamptz(0, "expires_at");
	r->created_at = hc_timestamptz(0, "created_at");
	r->replayed = false;
	r->single = DatumGetBool(hc_datum(0, "single", &isnull));
	/* The version locked of each row, for a write of an order of one product (direct.c). */
	r->order_tid = *(ItemPointer) DatumGetPointer(hc_datum(0, "tid", &isnull));
	r->nlines = (int) n;
	r->lines = palloc(sizeof(StockLine) * n);
	for (i = 0; i < n; i++)
	{
		r->lines[i].product_id = hc_text(call, (int) i, "product_id");
		r->lines[i].part = (int16) hc_int32((int) i, "part");
		r->lines[i].qty = hc_int32((int) i, "qty");
		r->lines[i].status = hc_text(call, (int) i, "line_status");
		r->lines[i].parts = locked[i];
		/* The line moved to another part meanwhile (hc_stock_spread, a late finalize). */
		if (locked[i] == 0 && strcmp(r->lines[i].status, "RESERVED") == 0 &&
			r->lines[i].part != parts[i])
			hc_stock_parts_changed(products[i]);
	}
	/* Its line's part as locked, if that is the part it counts in. */
	r->locked = locked_part[0];
	if (!r->single || n != 1 || r->lines[0].part != parts[0])
		ItemPointerSetInvalid(&r->locked.tid);
}

/*
 * Move one line from :line_status, as read under the lock, to :status,
 * change its product's stock by :stock_delta and reserved by
 * :reserved_delta, and write the ledger row (:event from :source).
 */
#define MOVE_PART_CTE \
	" i AS (" \
	"  UPDATE hc_stock_parts" \
	"     SET stock = stock" PLUS ":stock_delta, reserved = reserved" PLUS ":reserved_delta," \
	"         version = version" PLUS "1, updated_at = :now" \
	"   WHERE product_id" EQ ":product_id" " AND part" EQ ":part" " AND EXISTS (SELECT FROM l)" \
	"  RETURNING part, version)"
#define MOVE_LINE_CTES \
	"WITH l AS (" \
	"  UPDATE hc_stock_order_lines SET status = :status" \
	"   WHERE product_id" EQ ":product_id" " AND reservation_id" EQ ":reservation_id" \
	"     AND status" EQ ":line_status" " RETURNING buyer_id)," \
	MOVE_PART_CTE
#define MOVE_LINE_LEDGER \
	HC_LEDGER_ROWS("'product'", ":product_id", PART_SEQ("i.part", "i.version"), ":event", \
				   ":source", ":reservation_id", "l.buyer_id", ":reserved_delta", ":stock_delta", \
				   "NULL")
#define MOVE_LINE_PARAMS \
	{"product_id", TEXTOID}, {"part", INT2OID}, {"reservation_id", TEXTOID}, {"status", TEXTOID}, \
	{"line_status", TEXTOID}, {"stock_delta", INT4OID}, {"reserved_delta", INT4OID}, \
	{"event", TEXTOID}, {"source", TEXTOID}, HC_LEDGER_PARAMS

static HcStatement move_line = {
	MOVE_LINE_CTES MOVE_LINE_LEDGER " FROM l, i RETURNING seq",
	{MOVE_LINE_PARAMS}
};

/*
 * move_line for the last line of a reservation that ends with it: the same
 * statement moves the reservation (of :scope_id) from :reservation_status,
 * as read under the lock, to :status.
 */
static HcStatement move_last_line = {
	MOVE_LINE_CTES ","
	" o AS ("
	"  UPDATE hc_stock_orders SET status = :status, ended_at = :now"
	"   WHERE id" EQ ":reservation_id" " AND scope_id" EQ ":scope_id"
	"     AND status" EQ ":reservation_status" " AND EXISTS (SELECT FROM l)"
	"  RETURNING id)"
	MOVE_LINE_LEDGER " FROM l, i, o RETURNING seq",
	{MOVE_LINE_PARAMS, {"reservation_status", TEXTOID}, {"scope_id", TEXTOID}}
};

/*
 * move_line for an order of one product, its own line: the order moves from
 * :line_status to :status and ends.
 */
static HcStatement move_single = {
	"WITH l AS ("
	"  UPDATE hc_stock_orders SET status = :status, ended_at = :now"
	"   WHERE id" EQ ":reservation_id" " AND scope_id" EQ ":product_id" " AND qty IS NOT NULL"
	"     AND status" EQ ":line_status" " RETURNING buyer_id),"
	MOVE_PART_CTE
	MOVE_LINE_LEDGER " FROM l, i RETURNING seq",
	{MOVE_LINE_PARAMS}
};

/* hc_stock_move_line's statement: move_single, move_last_line or move_line. */
static void
stock_move_statement(HcCall *call, StockReservation *r, StockLine *line, const char *status,
					 int32 stock_delta, int32 reserved_delta, const char *event,
					 const char *source, bool last)
{
	HcArgs		args;

	hc_args(&args, r->single ? &move_single : last ? &move_last_line : &move_line);
	hc_bind_text(&args, "product_id", line->product_id);
	hc_bind(&args, "part", Int16GetDatum(line->part));
	hc_bind_text(&args, "reservation_id", r->id);
	hc_bind_text(&args, "status", status);
	hc_bind_text(&args, "line_status", line->status);
	hc_bind(&args, "stock_delta", Int32GetDatum(stock_delta));
	hc_bind(&args, "reserved_delta", Int32GetDatum(reserved_delta));
	hc_bind_text(&args, "event", event);
	hc_bind_text(&args, "source", source);
	if (last && !r->single)
	{
		hc_bind_text(&args, "reservation_status", r->status);
		hc_bind_text(&args, "scope_id", r->scope_id);
	}
	if (hc_run(call, &args, SPI_OK_INSERT_RETURNING) != 1)
		elog(ERROR, "line of product \"%s\" in reservation \"%s\" is no longer %s%s",
			 line->product_id, r->id, line->status,
			 last ? psprintf(", or the reservation is no longer %s", r->status) : "");
}

/*
 * Move one line of the reservation from the status it had under the lock to
 * its new one, with its product's stock and reserved and the ledger; with
 * last, the reservation ends with the same status in the same statement.
 * An order of one product's, without the executor where the tables allow
 * it (direct.c).
 */
void
hc_stock_move_line(HcCall *call, StockReservation *r, StockLine *line, const char *status,
				int32 stock_delta, int32 reserved_delta, const char *event, const char *source,
				bool last)
{
	if (r->spread)
	{
		if (!hc_stock_orders()->move(call, r, line, status, r->retake))
			hc_stock_expired(r, psprintf("The stock of product \"%s\" is gone: refund the payment.",
									  line->product_id));
		line->status = pstrdup(status);
		if (last)
			hc_stock_end(call, r, status);
		return;
	}
	if (!r->single ||
		!hc_stock_write_move(call, r, line, status, stock_delta, reserved_delta, event, source))
		stock_move_statement(call, r, line, status, stock_delta, reserved_delta, event, source,
							 last);
	line->status = pstrdup(status);
	if (last || r->single)
		r->status = pstrdup(status);
	hc_notify("product", line->product_id,
			  strcmp(status, "FINALIZED") == 0 ? "SOLD" : "AVAILABLE");
}

/* End a reservation that is still :reservation_status as read under the lock. */
static HcStatement end_order = {
	"UPDATE hc_stock_orders SET status = :status, ended_at = :now"
	" WHERE id" EQ ":reservation_id" " AND scope_id" EQ ":scope_id"
	"   AND status" EQ ":reservation_status",
	{{"scope_id", TEXTOID}, {"reservation_id", TEXTOID}, {"status", TEXTOID},
	 {"reservation_status", TEXTOID}, {"now", TIMESTAMPTZOID}}
};

/* End the reservation with its final status. */
void
hc_stock_end(HcCall *call, StockReservation *r, const char *status)
{
	HcArgs		args;

	if (r->spread)
	{
		hc_stock_orders()->end(call, r, status);
		r->status = pstrdup(status);
		return;
	}
	hc_args(&args, &end_order);
	hc_bind_text(&args, "scope_id", r->scope_id);
	hc_bind_text(&args, "reservation_id", r->id);
	hc_bind_text(&args, "status", status);
	hc_bind_text(&args, "reservation_status", r->status);
	if (hc_run(call, &args, SPI_OK_UPDATE) != 1)
		elog(ERROR, "reservation \"%s\" is no longer %s", r->id, r->status);
	r->status = pstrdup(status);
}

/* An expired reservation: its lines that still count stop counting. */
void
hc_stock_expire(HcCall *call, StockReservation *r)
{
	int			i;

	for (i = 0; i < r->nlines; i++)
		if (strcmp(r->lines[i].status, "RESERVED") == 0)
			hc_stock_move_line(call, r, &r->lines[i], "EXPIRED", 0, -r->lines[i].qty,
							"expire", "reclaim", false);
	if (strcmp(r->status, "RESERVED") == 0)
		hc_stock_end(call, r, "EXPIRED");
}
