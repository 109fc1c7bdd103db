/*
 * stock.c
 *		Counted stock: hc_stock_set, hc_stock_adjust, hc_reserve,
 *		hc_reserve_items, hc_finalize, hc_unreserve.
 *
 * hc_inventory keeps stock and reserved per product (CHECK stock >= reserved
 * >= 0); each reservation has one line per product, and a line is counted in
 * reserved exactly while its status is RESERVED.  Product rows are locked
 * one at a time in product_id order (bytewise, COLLATE "C"), and a product's
 * lines change only under its row lock, so two orders never deadlock.  The
 * one lock taken between product rows (marking a reclaimed reservation
 * EXPIRED) skips a reservation row that is locked, rather than waiting.
 *
 * So a reservation can still say RESERVED while a reclaimer has already
 * expired some of its lines.  Every transition therefore looks at each
 * line's own status under its product's lock: a line stops counting exactly
 * once, and a reservation with an expired line is an expired reservation.
 *
 * A reserve reads first, without locking, and refuses (RS002) or replays
 * from that read alone; it then writes the reservation and its lines, and
 * only last takes each product's row lock, for the conditional update of
 * reserved and its ledger row, so a hot product's row is held for as short
 * a time as the transaction allows.
 */
#include "postgres.h"

#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "funcapi.h"
#include "storage/itemptr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"
#include "utils/snapmgr.h"

#include "call.h"
#include "errors.h"
#include "holdcommit.h"
#include "idempotency.h"
#include "ids.h"
#include "ledger.h"
#include "notify.h"
#include "stock.h"
#include "validate.h"

PG_FUNCTION_INFO_V1(hc_stock_set);
PG_FUNCTION_INFO_V1(hc_stock_adjust);
PG_FUNCTION_INFO_V1(hc_reserve);
PG_FUNCTION_INFO_V1(hc_reserve_items);
PG_FUNCTION_INFO_V1(hc_finalize);
PG_FUNCTION_INFO_V1(hc_unreserve);

/* The most expired lines one call reclaims; the sweeper clears the rest. */
#define STOCK_RECLAIM_MAX_LINES 1000

typedef struct StockLine
{
	char	   *product_id;
	int32		qty;
	char	   *status;			/* of a stored line */
} StockLine;

/* A stock reservation, as the functions return it (hc_stock_reservation). */
typedef struct StockReservation
{
	char	   *id;
	char	   *scope_id;
	char	   *buyer_id;
	char	   *status;
	TimestampTz expires_at;
	TimestampTz created_at;
	bool		replayed;
	StockLine  *lines;
	int			nlines;
} StockReservation;

/* The same, without a statement: the lock of stock_lock. */
static HcFetch lock_product_row = {"hc_inventory", "product_id", 2, {"stock", "reserved"}};

static HcStatement lock_product = {
	"SELECT stock, reserved FROM hc_inventory"
	" WHERE product_id OPERATOR(pg_catalog.=) $1 FOR NO KEY UPDATE",
	1, {TEXTOID}
};

/*
 * Everything a new order must know, in one read: the reservation its key
 * already made, and for each line the product's numbers and, only where too
 * little is free, the units that expired lines still hold (as many as one
 * call may reclaim).  $1 products (sorted), $2 quantities, $3 now, $4 key.
 */
static HcStatement read_order = {
	"WITH " HC_KNOWN_KEY("$4")
	" SELECT p.product_id, i.stock, i.reserved,"
	"        CASE WHEN i.stock OPERATOR(pg_catalog.-) i.reserved OPERATOR(pg_catalog.<) p.qty THEN"
	"          (SELECT COALESCE(pg_catalog.sum(x.qty), 0)"
	"             FROM (SELECT l.qty FROM hc_stock_reservation_lines l"
	"                    WHERE l.product_id OPERATOR(pg_catalog.=) p.product_id"
	"                      AND l.status OPERATOR(pg_catalog.=) 'RESERVED'"
	"                      AND l.expires_at OPERATOR(pg_catalog.<=) $3"
	"                    ORDER BY l.expires_at LIMIT " CppAsString2(STOCK_RECLAIM_MAX_LINES) ") x)"
	"        END, "
	HC_KNOWN_KEY_COLUMNS
	"   FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2))"
	"        WITH ORDINALITY AS p (product_id, qty, n)"
	"   LEFT JOIN hc_inventory i ON i.product_id OPERATOR(pg_catalog.=) p.product_id"
	"   LEFT JOIN known k ON true"
	"  ORDER BY p.n",
	4, {TEXTARRAYOID, INT4ARRAYOID, TIMESTAMPTZOID, TEXTOID}
};

/*
 * The reservation and its lines.  $1 products (sorted; the first is the
 * reservation's scope), $2 quantities, $3 id, $4 buyer, $5 key,
 * $6 fingerprint, $7 expires_at, $8 now.
 */
static HcStatement insert_order = {
	"WITH r AS ("
	"  INSERT INTO hc_stock_reservations"
	"    (scope_id, id, buyer_id, idempotency_key, fingerprint, status, expires_at, created_at)"
	"  VALUES ($1[1], $3, $4, $5, $6, 'RESERVED', $7, $8))"
	" INSERT INTO hc_stock_reservation_lines"
	"   (product_id, reservation_id, qty, status, expires_at, buyer_id)"
	" SELECT p, $3, q, 'RESERVED', $7, $4"
	"   FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) AS u (p, q)",
	8, {TEXTARRAYOID, INT4ARRAYOID, TEXTOID, TEXTOID, TEXTOID, BYTEAOID, TIMESTAMPTZOID,
	TIMESTAMPTZOID}
};

/*
 * The atomic conditional step, reserved += qty where that much is available,
 * with its ledger row.  $1 product, $2 qty, $3 now, $4 function,
 * $5 reservation, $6 buyer, $7 actor.
 */
static HcStatement take_stock = {
	"WITH u AS ("
	"  UPDATE hc_inventory"
	"     SET reserved = reserved OPERATOR(pg_catalog.+) $2,"
	"         version = version OPERATOR(pg_catalog.+) 1, updated_at = $3"
	"   WHERE product_id OPERATOR(pg_catalog.=) $1"
	"     AND stock OPERATOR(pg_catalog.-) reserved OPERATOR(pg_catalog.>=) $2"
	"  RETURNING version)"
	HC_LEDGER_INSERT
	" SELECT 'product', $1, u.version, $3, 'reserve', 'call', $4, $5, $6, $2, 0, $7, NULL"
	"   FROM u RETURNING seq",
	7, {TEXTOID, INT4OID, TIMESTAMPTZOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID}
};

/*
 * Reclaim, in one statement, the oldest expired lines of a product whose row
 * we have locked: just enough of them to free $3 units, and never more than
 * STOCK_RECLAIM_MAX_LINES lines, so that no caller pays for a backlog the
 * sweeper should clear.  Each line stops counting once (its own status is
 * checked), gets its ledger row (event $6 from source $7), and its
 * reservation becomes EXPIRED unless another transaction has that row
 * locked.  Returns the units freed and the reservations ended, or no row.
 * $1 product, $2 now, $3 units wanted, $4 function, $5 actor.
 */
static HcStatement reclaim_lines = {
	"WITH doomed AS ("
	"  SELECT reservation_id FROM ("
	"    SELECT reservation_id, qty,"
	"           pg_catalog.sum(qty) OVER (ORDER BY expires_at, reservation_id) AS running"
	"      FROM (SELECT reservation_id, qty, expires_at FROM hc_stock_reservation_lines"
	"             WHERE product_id OPERATOR(pg_catalog.=) $1"
	"               AND status OPERATOR(pg_catalog.=) 'RESERVED'"
	"               AND expires_at OPERATOR(pg_catalog.<=) $2"
	"             ORDER BY expires_at, reservation_id"
	"             LIMIT " CppAsString2(STOCK_RECLAIM_MAX_LINES) ") oldest) s"
	"   WHERE running OPERATOR(pg_catalog.-) qty OPERATOR(pg_catalog.<) $3),"
	" expired AS ("
	"  UPDATE hc_stock_reservation_lines l SET status = 'EXPIRED'"
	"    FROM doomed d"
	"   WHERE l.product_id OPERATOR(pg_catalog.=) $1"
	"     AND l.reservation_id OPERATOR(pg_catalog.=) d.reservation_id"
	"     AND l.status OPERATOR(pg_catalog.=) 'RESERVED'"
	"  RETURNING l.reservation_id, l.qty, l.buyer_id),"
	" moved AS ("
	"  UPDATE hc_inventory i"
	"     SET reserved = i.reserved OPERATOR(pg_catalog.-) t.total,"
	"         version = i.version OPERATOR(pg_catalog.+) t.n, updated_at = $2"
	"    FROM (SELECT pg_catalog.sum(qty)::pg_catalog.int4 AS total,"
	"                 pg_catalog.count(*)::pg_catalog.int4 AS n FROM expired) t"
	"   WHERE i.product_id OPERATOR(pg_catalog.=) $1 AND t.n OPERATOR(pg_catalog.>) 0"
	"  RETURNING i.version, t.total, t.n),"
	" logged AS (" HC_LEDGER_INSERT
	"  SELECT 'product', $1, m.version OPERATOR(pg_catalog.-) m.n OPERATOR(pg_catalog.+) e.k,"
	"         $2, $6, $7, $4, e.reservation_id, e.buyer_id,"
	"         OPERATOR(pg_catalog.-) e.qty, 0, $5, NULL"
	"    FROM moved m, (SELECT *, pg_catalog.row_number() OVER () AS k FROM expired) e),"
	" ended AS ("
	"  UPDATE hc_stock_reservations SET status = 'EXPIRED', ended_at = $2"
	"   WHERE id OPERATOR(pg_catalog.=) ANY ("
	"     SELECT r.id FROM hc_stock_reservations r"
	"      WHERE r.id OPERATOR(pg_catalog.=) ANY (SELECT reservation_id FROM expired)"
	"        AND r.status OPERATOR(pg_catalog.=) 'RESERVED'"
	"        FOR NO KEY UPDATE SKIP LOCKED)"
	"  RETURNING id)"
	" SELECT total, (SELECT pg_catalog.count(*) FROM ended) FROM moved",
	7, {TEXTOID, TIMESTAMPTZOID, INT8OID, TEXTOID, TEXTOID, TEXTOID, TEXTOID}
};

/* Where a product's row is, for the sweeper to lock it (stock_try_lock_product). */
static HcStatement find_product = {
	"SELECT tableoid, ctid FROM hc_inventory WHERE product_id OPERATOR(pg_catalog.=) $1",
	1, {TEXTOID}
};

/* The products of a reservation, in the order they are locked in. */
static HcStatement order_products = {
	"SELECT product_id FROM hc_stock_reservation_lines"
	" WHERE reservation_id OPERATOR(pg_catalog.=) $1"
	" ORDER BY product_id COLLATE \"C\"",
	1, {TEXTOID}
};

/* Lock a reservation and read it with its lines (its products are locked). */
static HcStatement lock_order = {
	"SELECT r.scope_id, r.buyer_id, r.status, r.expires_at, r.created_at,"
	"       l.product_id, l.qty, l.status"
	"  FROM hc_stock_reservations r"
	"  JOIN hc_stock_reservation_lines l ON l.reservation_id OPERATOR(pg_catalog.=) r.id"
	" WHERE r.id OPERATOR(pg_catalog.=) $1"
	" ORDER BY l.product_id COLLATE \"C\""
	" FOR NO KEY UPDATE OF r",
	1, {TEXTOID}
};

/*
 * Move one line from status $4, as read under the lock, to $3, change its
 * product's stock by $5 and reserved by $6, and write the ledger row (event
 * $8 from source $9).  $1 product, $2 reservation, $7 now, $10 function,
 * $11 actor.
 */
#define MOVE_LINE_CTES \
	"WITH l AS (" \
	"  UPDATE hc_stock_reservation_lines SET status = $3" \
	"   WHERE product_id OPERATOR(pg_catalog.=) $1 AND reservation_id OPERATOR(pg_catalog.=) $2" \
	"     AND status OPERATOR(pg_catalog.=) $4 RETURNING buyer_id)," \
	" i AS (" \
	"  UPDATE hc_inventory" \
	"     SET stock = stock OPERATOR(pg_catalog.+) $5, reserved = reserved OPERATOR(pg_catalog.+) $6," \
	"         version = version OPERATOR(pg_catalog.+) 1, updated_at = $7" \
	"   WHERE product_id OPERATOR(pg_catalog.=) $1 AND EXISTS (SELECT FROM l)" \
	"  RETURNING version)"
#define MOVE_LINE_LEDGER \
	HC_LEDGER_INSERT \
	" SELECT 'product', $1, i.version, $7, $8, $9, $10, $2, l.buyer_id, $6, $5, $11, NULL"
#define MOVE_LINE_TYPES \
	TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT4OID, INT4OID, TIMESTAMPTZOID, TEXTOID, \
	TEXTOID, TEXTOID, TEXTOID

static HcStatement move_line = {
	MOVE_LINE_CTES MOVE_LINE_LEDGER "   FROM l, i RETURNING seq",
	11, {MOVE_LINE_TYPES}
};

/*
 * move_line for the last line of a reservation that ends with it: the same
 * statement moves the reservation from status $12, as read under the lock,
 * to $3 ($13 its scope).
 */
static HcStatement move_last_line = {
	MOVE_LINE_CTES ","
	" o AS ("
	"  UPDATE hc_stock_reservations SET status = $3, ended_at = $7"
	"   WHERE scope_id OPERATOR(pg_catalog.=) $13 AND id OPERATOR(pg_catalog.=) $2"
	"     AND status OPERATOR(pg_catalog.=) $12 AND EXISTS (SELECT FROM l)"
	"  RETURNING id)"
	MOVE_LINE_LEDGER "   FROM l, i, o RETURNING seq",
	13, {MOVE_LINE_TYPES, TEXTOID, TEXTOID}
};

/* End a reservation that is still $5 as read under the lock. */
static HcStatement end_order = {
	"UPDATE hc_stock_reservations SET status = $3, ended_at = $4"
	" WHERE scope_id OPERATOR(pg_catalog.=) $1 AND id OPERATOR(pg_catalog.=) $2"
	"   AND status OPERATOR(pg_catalog.=) $5",
	5, {TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID, TEXTOID}
};

/* $1 product, $2 now, $3 stock, $4 function, $5 actor. */
static HcStatement create_product = {
	"WITH i AS ("
	"  INSERT INTO hc_inventory (product_id, stock, reserved, created_at, updated_at)"
	"  VALUES ($1, $3, 0, $2, $2) ON CONFLICT (product_id) DO NOTHING RETURNING *),"
	" logged AS (" HC_LEDGER_INSERT
	"  SELECT 'product', $1, i.version, $2, 'stock_set', 'adjustment', $4, NULL, NULL, 0, $3,"
	"         $5, 'created' FROM i)"
	" SELECT * FROM i",
	5, {TEXTOID, TIMESTAMPTZOID, INT4OID, TEXTOID, TEXTOID}
};

/*
 * Set a locked product's stock from $6 to $2, with ledger event $4 and a new
 * version unless nothing changes.  $1 product, $3 now, $5 function, $7 actor, $8 detail.
 */
static HcStatement set_stock = {
	"WITH i AS ("
	"  UPDATE hc_inventory"
	"     SET stock = $2, updated_at = $3,"
	"         version = version OPERATOR(pg_catalog.+)"
	"                   CASE WHEN $2 OPERATOR(pg_catalog.<>) $6 THEN 1 ELSE 0 END"
	"   WHERE product_id OPERATOR(pg_catalog.=) $1 RETURNING *),"
	" logged AS (" HC_LEDGER_INSERT
	"  SELECT 'product', $1, i.version, $3, $4, 'adjustment', $5, NULL, NULL, 0,"
	"         $2 OPERATOR(pg_catalog.-) $6, $7, $8"
	"    FROM i WHERE $2 OPERATOR(pg_catalog.<>) $6)"
	" SELECT * FROM i",
	8, {TEXTOID, INT4OID, TIMESTAMPTZOID, TEXTOID, TEXTOID, INT4OID, TEXTOID, TEXTOID}
};

/* RS006 for a product. */
static void
product_not_found(const char *product_id)
{
	ereport(ERROR,
			(errcode(ERRCODE_HC_NOT_FOUND),
			 errmsg("product \"%s\" does not exist", product_id),
			 errdetail("There is no row for product \"%s\" in hc_inventory.", product_id),
			 errhint("Create it with hc_stock_set() first.")));
}

/* RS002, with the product's numbers as last read. */
static void
stock_insufficient(const char *product_id, int32 qty, int32 stock, int32 reserved)
{
	ereport(ERROR,
			(errcode(ERRCODE_HC_INSUFFICIENT_STOCK),
			 errmsg("insufficient stock for product \"%s\"", product_id),
			 errdetail("%d requested, %d available (stock %d, reserved %d).",
					   qty, stock - reserved, stock, reserved),
			 errhint("Offer a smaller quantity, or try again when reservations end.")));
}

/*
 * Reclaim expired lines of a product whose row we have locked, enough to
 * free needed units if there are that many (at most STOCK_RECLAIM_MAX_LINES
 * lines), with ledger event and source as given.  Returns the units freed;
 * *ended counts the reservations that became EXPIRED.
 */
static int64
stock_reclaim_as(HcCall *call, const char *product_id, int64 needed, const char *event,
				 const char *source, int64 *ended)
{
	Datum		values[7];
	bool		isnull;

	values[0] = HC_TEXT(product_id);
	values[1] = TimestampTzGetDatum(call->now);
	values[2] = Int64GetDatum(needed);
	values[3] = HC_TEXT(call->function);
	values[4] = HC_TEXT(hc_actor(call));
	values[5] = HC_TEXT(event);
	values[6] = HC_TEXT(source);
	*ended = 0;
	if (hc_run(&reclaim_lines, values, NULL, SPI_OK_SELECT) == 0)
		return 0;
	*ended = DatumGetInt64(hc_datum(0, 2, &isnull));
	return hc_int32(0, 1);
}

/* A call's inline reclaim: the units freed. */
static int64
stock_reclaim(HcCall *call, const char *product_id, int64 needed)
{
	int64		ended;

	return stock_reclaim_as(call, product_id, needed, "reclaim", "reclaim", &ended);
}

/*
 * Lock a product's row as FOR NO KEY UPDATE does, unless another transaction
 * has it: never wait.  Returns false if the row is locked (skipped) or gone.
 *
 * Not SELECT ... FOR NO KEY UPDATE SKIP LOCKED, which in PostgreSQL 15 can
 * still wait: when the version its snapshot shows was updated by a call that
 * has just ended, it follows the update chain (heap_lock_updated_tuple) and
 * waits, whatever the wait policy, for a live call that has locked the newer
 * version ("while locking updated version ... of tuple" in the log).  The
 * sweeper then holds other rows, an order from end_orders or a product of an
 * earlier batch, that this very call may be waiting for: a deadlock.  Here
 * the newest version is locked without following updates in progress
 * (FIND_LAST_VERSION only), and a row anyone has locked is skipped.
 */
static bool
stock_try_lock_product(const char *product_id)
{
	Datum		values[1];
	bool		isnull;
	Oid			relid;
	ItemPointerData tid;
	Relation	rel;
	TupleTableSlot *slot;
	TM_FailureData tmfd;
	TM_Result	result;

	values[0] = HC_TEXT(product_id);
	if (hc_run(&find_product, values, NULL, SPI_OK_SELECT) == 0)
		return false;
	relid = DatumGetObjectId(hc_datum(0, 1, &isnull));
	ItemPointerCopy((ItemPointer) DatumGetPointer(hc_datum(0, 2, &isnull)), &tid);

	rel = table_open(relid, RowShareLock);
	slot = table_slot_create(rel, NULL);
	result = table_tuple_lock(rel, &tid, GetActiveSnapshot(), slot, GetCurrentCommandId(false),
							  LockTupleNoKeyExclusive, LockWaitSkip,
							  TUPLE_LOCK_FLAG_FIND_LAST_VERSION, &tmfd);
	ExecDropSingleTupleTableSlot(slot);
	table_close(rel, NoLock);

	switch (result)
	{
		case TM_Ok:
			return true;
		case TM_WouldBlock:		/* a live call has it */
		case TM_Deleted:		/* gone */
		case TM_Invisible:		/* newer than this command: not ours to take */
			return false;
		default:
			elog(ERROR, "could not lock product \"%s\": unexpected result %d", product_id,
				 (int) result);
	}
	return false;				/* keep the compiler quiet */
}

/*
 * The sweeper's work on one product (sweep.c): unless a live call has the
 * product's row locked, lock it and expire its oldest expired lines (at most
 * STOCK_RECLAIM_MAX_LINES), each once, with source 'sweep' in the ledger.
 * Returns false if the row was locked (skipped) or is gone; otherwise
 * *units and *ended say what it freed and how many reservations it ended.
 */
bool
hc_stock_sweep_product(HcCall *call, const char *product_id, int64 *units, int64 *ended)
{
	*units = 0;
	*ended = 0;
	if (!stock_try_lock_product(product_id))
		return false;
	*units = stock_reclaim_as(call, product_id, PG_INT64_MAX, "expire", "sweep", ended);
	return true;
}

/*
 * Reserve qty of a product for a reservation: the conditional update, which
 * holds the product's row lock for nothing else.  If it finds too little,
 * lock the row, reclaim as many expired units as are missing, and try once
 * more.  Returns false if there is still too little, with the product's
 * numbers in *stock and *reserved.
 */
static bool
stock_take(HcCall *call, const char *product_id, int32 qty, const char *reservation_id,
		   const char *buyer_id, int32 *stock, int32 *reserved)
{
	Datum		values[7];

	values[0] = HC_TEXT(product_id);
	values[1] = Int32GetDatum(qty);
	values[2] = TimestampTzGetDatum(call->now);
	values[3] = HC_TEXT(call->function);
	values[4] = HC_TEXT(reservation_id);
	values[5] = HC_TEXT(buyer_id);
	values[6] = HC_TEXT(hc_actor(call));
	if (hc_run(&take_stock, values, NULL, SPI_OK_INSERT_RETURNING) == 1)
		return true;
	if (hc_run(&lock_product, values, NULL, SPI_OK_SELECT) == 0)
		product_not_found(product_id);
	*stock = hc_int32(0, 1);
	*reserved = hc_int32(0, 2);
	if (stock_reclaim(call, product_id, (int64) qty - (*stock - *reserved)) == 0)
		return false;
	if (hc_run(&take_stock, values, NULL, SPI_OK_INSERT_RETURNING) == 1)
		return true;
	hc_run(&lock_product, values, NULL, SPI_OK_SELECT);
	*stock = hc_int32(0, 1);
	*reserved = hc_int32(0, 2);
	return false;
}

/* The items as jsonb: [{"product_id": "...", "qty": n}, ...]. */
static Datum
stock_items_jsonb(const StockLine *lines, int n)
{
	StringInfoData buf;
	int			i;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '[');
	for (i = 0; i < n; i++)
	{
		if (i > 0)
			appendStringInfoString(&buf, ", ");
		appendStringInfoString(&buf, "{\"product_id\": ");
		escape_json(&buf, lines[i].product_id);
		appendStringInfo(&buf, ", \"qty\": %d}", lines[i].qty);
	}
	appendStringInfoChar(&buf, ']');
	return DirectFunctionCall1(jsonb_in, CStringGetDatum(buf.data));
}

/* Build the hc_stock_reservation row a function returns. */
static Datum
stock_result(FunctionCallInfo fcinfo, const StockReservation *r)
{
	TupleDesc	tupdesc;
	Datum		values[7];
	bool		nulls[7] = {false};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);
	values[0] = CStringGetTextDatum(r->id);
	values[1] = CStringGetTextDatum(r->buyer_id);
	values[2] = CStringGetTextDatum(r->status);
	values[3] = stock_items_jsonb(r->lines, r->nlines);
	values[4] = TimestampTzGetDatum(r->expires_at);
	values[5] = TimestampTzGetDatum(r->created_at);
	values[6] = BoolGetDatum(r->replayed);
	return HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls));
}

/* Lines sort by product_id bytewise, the order rows are locked in. */
static int
stock_line_cmp(const void *a, const void *b)
{
	return strcmp(((const StockLine *) a)->product_id, ((const StockLine *) b)->product_id);
}

/* 22023 for malformed items, pointing at the line (index < 0: the whole). */
static void
bad_items(const char *message, int index)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid items: %s", message),
			 index >= 0 ? errdetail("The problem is in items[%d].", index) : 0,
			 errhint("Pass a JSON array of objects like {\"product_id\": \"SKU-1\", \"qty\": 2}.")));
}

/*
 * Validate items and return its lines sorted by product_id, with the lines
 * of the same product summed.
 */
static StockLine *
stock_parse_items(FunctionCallInfo fcinfo, int argno, int *nlines)
{
	Jsonb	   *items;
	int			n;
	int			i;
	int			out;
	StockLine  *lines;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("items must not be null")));
	items = PG_GETARG_JSONB_P(argno);
	if (!JsonContainerIsArray(&items->root) || JB_ROOT_IS_SCALAR(items))
		bad_items("not a JSON array", -1);
	n = JsonContainerSize(&items->root);
	if (n == 0)
		bad_items("the array is empty", -1);
	if (n > hc_max_items)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid items: more than holdcommit.max_items lines"),
				 errdetail("%d lines were given; holdcommit.max_items is %d.", n, hc_max_items)));

	lines = palloc(sizeof(StockLine) * n);
	for (i = 0; i < n; i++)
	{
		JsonbValue *item = getIthJsonbValueFromContainer(&items->root, i);
		JsonbValue	product;
		JsonbValue	qty;
		Numeric		num;
		bool		overflow = false;

		if (item->type != jbvBinary || !JsonContainerIsObject(item->val.binary.data))
			bad_items("an item is not an object", i);
		if (getKeyJsonValueFromContainer(item->val.binary.data, "product_id", 10, &product) == NULL ||
			product.type != jbvString)
			bad_items("product_id must be a string", i);
		if (product.val.string.len == 0)
			bad_items("product_id must not be empty", i);
		if (product.val.string.len > 64)
			ereport(ERROR,
					(errcode(ERRCODE_STRING_DATA_RIGHT_TRUNCATION),
					 errmsg("items[%d].product_id is too long", i),
					 errdetail("It is %d bytes long; the limit is 64 bytes.", product.val.string.len)));
		if (getKeyJsonValueFromContainer(item->val.binary.data, "qty", 3, &qty) == NULL ||
			qty.type != jbvNumeric)
			bad_items("qty must be a number", i);
		num = qty.val.numeric;
		if (numeric_is_nan(num) || numeric_is_inf(num) ||
			!DatumGetBool(DirectFunctionCall2(numeric_eq, NumericGetDatum(num),
											  DirectFunctionCall2(numeric_trunc, NumericGetDatum(num),
																  Int32GetDatum(0)))))
			bad_items("qty must be an integer", i);
		lines[i].qty = numeric_int4_opt_error(num, &overflow);
		if (overflow || lines[i].qty <= 0)
			bad_items("qty must be a positive integer", i);
		lines[i].product_id = pnstrdup(product.val.string.val, product.val.string.len);
		lines[i].status = NULL;
	}

	qsort(lines, n, sizeof(StockLine), stock_line_cmp);
	for (i = 1, out = 0; i < n; i++)
	{
		if (strcmp(lines[i].product_id, lines[out].product_id) == 0)
		{
			if ((int64) lines[out].qty + lines[i].qty > PG_INT32_MAX)
				bad_items("the quantities of one product add up to more than an integer holds", i);
			lines[out].qty += lines[i].qty;
		}
		else
			lines[++out] = lines[i];
	}
	*nlines = out + 1;
	return lines;
}

/* A text[] or int4[] of the lines' products or quantities. */
static Datum
stock_products(const StockLine *lines, int n)
{
	Datum	   *products = palloc(sizeof(Datum) * n);
	int			i;

	for (i = 0; i < n; i++)
		products[i] = HC_TEXT(lines[i].product_id);
	return PointerGetDatum(construct_array(products, n, TEXTOID, -1, false, TYPALIGN_INT));
}

static Datum
stock_quantities(const StockLine *lines, int n)
{
	Datum	   *qtys = palloc(sizeof(Datum) * n);
	int			i;

	for (i = 0; i < n; i++)
		qtys[i] = Int32GetDatum(lines[i].qty);
	return PointerGetDatum(construct_array(qtys, n, INT4OID, 4, true, TYPALIGN_INT));
}

/*
 * The body of hc_reserve and hc_reserve_items: all lines or nothing.
 */
static Datum
stock_reserve(FunctionCallInfo fcinfo, const char *function, StockLine *lines, int n,
			  char *buyer_id, char *key, int64 ttl)
{
	HcCall		call;
	HcFingerprint fp;
	HcKnownKey	known;
	StockReservation r = {0};
	Datum		values[8];
	int			i;

	hc_call_begin(&call, fcinfo, function);
	hc_fingerprint_init(&fp, function);
	hc_fingerprint_add(&fp, buyer_id);
	hc_fingerprint_add(&fp, psprintf(INT64_FORMAT, ttl));
	for (i = 0; i < n; i++)
	{
		hc_fingerprint_add(&fp, lines[i].product_id);
		hc_fingerprint_add(&fp, psprintf("%d", lines[i].qty));
	}

	r.buyer_id = buyer_id;
	r.status = "RESERVED";
	r.created_at = call.now;
	r.expires_at = call.now + ttl;
	r.lines = lines;
	r.nlines = n;

	values[0] = stock_products(lines, n);
	values[1] = stock_quantities(lines, n);
	values[2] = TimestampTzGetDatum(call.now);
	values[3] = HC_TEXT(key);
	if (hc_idempotency_run(&call, &read_order, values, n, key, &fp, 5, &known))
	{
		/* The stored response: the reservation as this request made it. */
		r.id = known.id;
		r.created_at = known.created_at;
		r.expires_at = known.created_at + ttl;
		r.replayed = true;
		hc_call_end(&call);
		return stock_result(fcinfo, &r);
	}

	/* Existence first, for every line; then stock, from this read alone. */
	for (i = 0; i < n; i++)
	{
		bool		isnull;

		(void) hc_datum(i, 2, &isnull);
		if (isnull)
			product_not_found(lines[i].product_id);
	}
	for (i = 0; i < n; i++)
	{
		int32		stock = hc_int32(i, 2);
		int32		reserved = hc_int32(i, 3);
		bool		isnull;
		Datum		expired = hc_datum(i, 4, &isnull);

		if (!isnull && (int64) stock - reserved + DatumGetInt64(expired) < lines[i].qty)
			stock_insufficient(lines[i].product_id, lines[i].qty, stock, reserved);
	}

	r.id = hc_new_reservation_id(call.now);
	values[2] = HC_TEXT(r.id);
	values[3] = HC_TEXT(buyer_id);
	values[4] = HC_TEXT(key);
	values[5] = PointerGetDatum(hc_fingerprint_digest(&fp));
	values[6] = TimestampTzGetDatum(r.expires_at);
	values[7] = TimestampTzGetDatum(call.now);
	if (hc_run(&insert_order, values, NULL, SPI_OK_INSERT) != (uint64) n)
		elog(ERROR, "could not insert the lines of reservation \"%s\"", r.id);

	for (i = 0; i < n; i++)
	{
		int32		stock;
		int32		reserved;

		if (!stock_take(&call, lines[i].product_id, lines[i].qty, r.id, buyer_id, &stock, &reserved))
			stock_insufficient(lines[i].product_id, lines[i].qty, stock, reserved);
	}
	hc_call_end(&call);
	return stock_result(fcinfo, &r);
}

/*
 * hc_reserve(product_id, qty, buyer_id, idempotency_key, ttl)
 */
Datum
hc_reserve(PG_FUNCTION_ARGS)
{
	StockLine  *line = palloc0(sizeof(StockLine));
	char	   *buyer_id;
	char	   *key;
	int64		ttl;

	line->product_id = hc_arg_id(fcinfo, 0, "product_id");
	line->qty = hc_arg_int(fcinfo, 1, "qty");
	if (line->qty <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("qty must be positive"),
				 errdetail("qty is %d.", line->qty)));
	buyer_id = hc_arg_id(fcinfo, 2, "buyer_id");
	key = hc_arg_key(fcinfo, 3, "idempotency_key");
	ttl = hc_arg_ttl(fcinfo, 4, "ttl");
	PG_RETURN_DATUM(stock_reserve(fcinfo, "hc_reserve", line, 1, buyer_id, key, ttl));
}

/*
 * hc_reserve_items(items, buyer_id, idempotency_key, ttl)
 */
Datum
hc_reserve_items(PG_FUNCTION_ARGS)
{
	int			n;
	StockLine  *lines = stock_parse_items(fcinfo, 0, &n);
	char	   *buyer_id = hc_arg_id(fcinfo, 1, "buyer_id");
	char	   *key = hc_arg_key(fcinfo, 2, "idempotency_key");
	int64		ttl = hc_arg_ttl(fcinfo, 3, "ttl");

	PG_RETURN_DATUM(stock_reserve(fcinfo, "hc_reserve_items", lines, n, buyer_id, key, ttl));
}

/*
 * Lock a reservation for finalize or unreserve: its products one at a time
 * in order, then the reservation row, and read it with its lines under
 * those locks.
 */
static void
stock_lock(HcCall *call, const char *reservation_id, StockReservation *r)
{
	Datum		values[1];
	char	  **products;
	uint64		n;
	uint64		i;

	values[0] = HC_TEXT(reservation_id);
	n = hc_run(&order_products, values, NULL, SPI_OK_SELECT);
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_HC_NOT_FOUND),
				 errmsg("reservation \"%s\" does not exist", reservation_id),
				 errdetail("No stock reservation has the id \"%s\".", reservation_id),
				 errhint("Use the reservation_id that hc_reserve() or hc_reserve_items() returned.")));
	products = palloc(sizeof(char *) * n);
	for (i = 0; i < n; i++)
		products[i] = hc_text(call, (int) i, 1);
	for (i = 0; i < n; i++)
	{
		Datum		numbers[2];
		bool		nulls[2];

		if (!hc_fetch_lock(call, &lock_product_row, products[i], numbers, nulls))
			elog(ERROR, "product \"%s\" of reservation \"%s\" vanished", products[i], reservation_id);
	}

	values[0] = HC_TEXT(reservation_id);
	n = hc_run(&lock_order, values, NULL, SPI_OK_SELECT);
	if (n == 0)
		elog(ERROR, "reservation \"%s\" has lines but no row", reservation_id);
	r->id = pstrdup(reservation_id);
	r->scope_id = hc_text(call, 0, 1);
	r->buyer_id = hc_text(call, 0, 2);
	r->status = hc_text(call, 0, 3);
	r->expires_at = hc_timestamptz(0, 4);
	r->created_at = hc_timestamptz(0, 5);
	r->replayed = false;
	r->nlines = (int) n;
	r->lines = palloc(sizeof(StockLine) * n);
	for (i = 0; i < n; i++)
	{
		r->lines[i].product_id = hc_text(call, (int) i, 6);
		r->lines[i].qty = hc_int32((int) i, 7);
		r->lines[i].status = hc_text(call, (int) i, 8);
	}
}

/*
 * Move one line of the reservation from the status it had under the lock to
 * its new one, with its product's stock and reserved and the ledger; with
 * last, the reservation ends with the same status in the same statement.
 */
static void
stock_move_line(HcCall *call, StockReservation *r, StockLine *line, const char *status,
				int32 stock_delta, int32 reserved_delta, const char *event, const char *source,
				bool last)
{
	Datum		values[13];

	values[0] = HC_TEXT(line->product_id);
	values[1] = HC_TEXT(r->id);
	values[2] = HC_TEXT(status);
	values[3] = HC_TEXT(line->status);
	values[4] = Int32GetDatum(stock_delta);
	values[5] = Int32GetDatum(reserved_delta);
	values[6] = TimestampTzGetDatum(call->now);
	values[7] = HC_TEXT(event);
	values[8] = HC_TEXT(source);
	values[9] = HC_TEXT(call->function);
	values[10] = HC_TEXT(hc_actor(call));
	values[11] = HC_TEXT(r->status);
	values[12] = HC_TEXT(r->scope_id);
	if (hc_run(last ? &move_last_line : &move_line, values, NULL, SPI_OK_INSERT_RETURNING) != 1)
		elog(ERROR, "line of product \"%s\" in reservation \"%s\" is no longer %s%s",
			 line->product_id, r->id, line->status,
			 last ? psprintf(", or the reservation is no longer %s", r->status) : "");
	line->status = pstrdup(status);
	if (last)
		r->status = pstrdup(status);
	hc_notify("product", line->product_id,
			  strcmp(status, "FINALIZED") == 0 ? "SOLD" : "AVAILABLE");
}

/* End the reservation with its final status. */
static void
stock_end(HcCall *call, StockReservation *r, const char *status)
{
	Datum		values[5];

	values[0] = HC_TEXT(r->scope_id);
	values[1] = HC_TEXT(r->id);
	values[2] = HC_TEXT(status);
	values[3] = TimestampTzGetDatum(call->now);
	values[4] = HC_TEXT(r->status);
	if (hc_run(&end_order, values, NULL, SPI_OK_UPDATE) != 1)
		elog(ERROR, "reservation \"%s\" is no longer %s", r->id, r->status);
	r->status = pstrdup(status);
}

/* An expired reservation: its lines that still count stop counting. */
static void
stock_expire(HcCall *call, StockReservation *r)
{
	int			i;

	for (i = 0; i < r->nlines; i++)
		if (strcmp(r->lines[i].status, "RESERVED") == 0)
			stock_move_line(call, r, &r->lines[i], "EXPIRED", 0, -r->lines[i].qty,
							"expire", "reclaim", false);
	if (strcmp(r->status, "RESERVED") == 0)
		stock_end(call, r, "EXPIRED");
}

/*
 * Has the reservation expired, by the call's one clock reading or because a
 * reclaimer has already expired one of its lines?
 */
static bool
stock_is_expired(HcCall *call, const StockReservation *r)
{
	int			i;

	if (strcmp(r->status, "EXPIRED") == 0 || r->expires_at <= call->now)
		return true;
	for (i = 0; i < r->nlines; i++)
		if (strcmp(r->lines[i].status, "RESERVED") != 0)
			return true;
	return false;
}

/* RS004 and RS003 for a stock reservation. */
static void
stock_not_active(const StockReservation *r, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_HC_RESERVATION_NOT_ACTIVE),
			 errmsg("reservation \"%s\" is not active", r->id),
			 errdetail("Reservation \"%s\" is %s.", r->id, r->status),
			 errhint("%s", hint)));
}

static void
stock_expired(const StockReservation *r, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_HC_RESERVATION_EXPIRED),
			 errmsg("reservation \"%s\" has expired", r->id),
			 errdetail("Reservation \"%s\" expired at %s.", r->id, timestamptz_to_str(r->expires_at)),
			 errhint("%s", hint)));
}

/*
 * hc_finalize(reservation_id, late_ok): the order is paid; stock and
 * reserved go down by each line's qty, once.  After expiry RS003, unless
 * late_ok and every line's stock is still there.
 */
Datum
hc_finalize(PG_FUNCTION_ARGS)
{
	char	   *reservation_id = hc_arg_id(fcinfo, 0, "reservation_id");
	bool		late_ok = hc_arg_bool(fcinfo, 1, "late_ok");
	HcCall		call;
	StockReservation r;
	int			i;

	hc_call_begin(&call, fcinfo, "hc_finalize");
	stock_lock(&call, reservation_id, &r);

	if (strcmp(r.status, "FINALIZED") == 0)
		r.replayed = true;
	else if (strcmp(r.status, "RELEASED") == 0)
		stock_not_active(&r, "The buyer cancelled this order: refund the payment.");
	else
	{
		if (stock_is_expired(&call, &r) && !late_ok)
			stock_expired(&r, "Refund the payment, or finalize with late_ok => true if the stock may still be there.");

		/* A line that no longer counts must find its stock again. */
		for (i = 0; i < r.nlines; i++)
		{
			StockLine  *line = &r.lines[i];
			int32		stock;
			int32		reserved;

			if (strcmp(line->status, "RESERVED") != 0 &&
				!stock_take(&call, line->product_id, line->qty, r.id, r.buyer_id, &stock, &reserved))
				stock_expired(&r, psprintf("The stock of product \"%s\" is gone: refund the payment.",
										   line->product_id));
		}
		for (i = 0; i < r.nlines; i++)
			stock_move_line(&call, &r, &r.lines[i], "FINALIZED", -r.lines[i].qty, -r.lines[i].qty,
							"finalize", "call", i == r.nlines - 1);
	}
	hc_call_end(&call);
	PG_RETURN_DATUM(stock_result(fcinfo, &r));
}

/*
 * hc_unreserve(reservation_id): the buyer cancels; reserved goes down once.
 * A repeat, or an expired reservation, is returned unchanged as a replay.
 */
Datum
hc_unreserve(PG_FUNCTION_ARGS)
{
	char	   *reservation_id = hc_arg_id(fcinfo, 0, "reservation_id");
	HcCall		call;
	StockReservation r;
	int			i;

	hc_call_begin(&call, fcinfo, "hc_unreserve");
	stock_lock(&call, reservation_id, &r);

	if (strcmp(r.status, "FINALIZED") == 0)
		stock_not_active(&r, "A finalized order cannot be cancelled; refund through your payment flow.");
	else if (strcmp(r.status, "RELEASED") == 0)
		r.replayed = true;
	else if (stock_is_expired(&call, &r))
	{
		stock_expire(&call, &r);
		r.replayed = true;
	}
	else
	{
		for (i = 0; i < r.nlines; i++)
			stock_move_line(&call, &r, &r.lines[i], "RELEASED", 0, -r.lines[i].qty,
							"release", "call", i == r.nlines - 1);
	}
	hc_call_end(&call);
	PG_RETURN_DATUM(stock_result(fcinfo, &r));
}

/*
 * Lock a product for a stock change and reclaim its expired lines, so that
 * a lagging sweeper does not block the change.  RS006 if it does not exist.
 */
static void
stock_lock_product(HcCall *call, const char *product_id, int32 *stock, int32 *reserved)
{
	Datum		values[1];

	values[0] = HC_TEXT(product_id);
	if (hc_run(&lock_product, values, NULL, SPI_OK_SELECT) == 0)
		product_not_found(product_id);
	*stock = hc_int32(0, 1);
	*reserved = hc_int32(0, 2);

	/*
	 * Reclaim all of them: a stock change is an operator's act, not the hot
	 * path, and a backlog left behind could refuse it as below reserved.
	 */
	for (;;)
	{
		int64		freed = stock_reclaim(call, product_id, PG_INT64_MAX);

		if (freed == 0)
			break;
		*reserved -= (int32) freed;
	}
}

/* Set stock to new_stock, refusing to go below reserved; return the row. */
static Datum
stock_change(HcCall *call, FunctionCallInfo fcinfo, const char *product_id, int64 new_stock,
			 int32 stock, int32 reserved, const char *event, const char *detail)
{
	Datum		values[8];
	char		nulls[8];

	if (new_stock < reserved)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("stock of product \"%s\" cannot go below what is reserved", product_id),
				 errdetail("Stock would be " INT64_FORMAT "; %d units are reserved.", new_stock, reserved),
				 errhint("Wait for reservations to end, or unreserve them first.")));
	if (new_stock > PG_INT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("stock of product \"%s\" would be out of range", product_id),
				 errdetail("Stock would be " INT64_FORMAT "; the most it can be is %d.", new_stock, PG_INT32_MAX),
				 errhint("Adjust by a smaller delta.")));

	memset(nulls, ' ', sizeof(nulls));
	values[0] = HC_TEXT(product_id);
	values[1] = Int32GetDatum((int32) new_stock);
	values[2] = TimestampTzGetDatum(call->now);
	values[3] = HC_TEXT(event);
	values[4] = HC_TEXT(call->function);
	values[5] = Int32GetDatum(stock);
	values[6] = HC_TEXT(hc_actor(call));
	values[7] = detail ? HC_TEXT(detail) : (Datum) 0;
	if (detail == NULL)
		nulls[7] = 'n';
	if (hc_run(&set_stock, values, nulls, SPI_OK_SELECT) != 1)
		elog(ERROR, "product \"%s\" vanished", product_id);
	return hc_result_row(call, fcinfo);
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
	int32		stock;
	int32		reserved;
	Datum		values[5];
	Datum		row;

	if (new_stock < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("stock must not be negative")));
	hc_call_begin(&call, fcinfo, "hc_stock_set");
	values[0] = HC_TEXT(product_id);
	values[1] = TimestampTzGetDatum(call.now);
	values[2] = Int32GetDatum(new_stock);
	values[3] = HC_TEXT(call.function);
	values[4] = HC_TEXT(hc_actor(&call));
	if (hc_run(&create_product, values, NULL, SPI_OK_SELECT) == 1)
		row = hc_result_row(&call, fcinfo);
	else
	{
		stock_lock_product(&call, product_id, &stock, &reserved);
		row = stock_change(&call, fcinfo, product_id, new_stock, stock, reserved, "stock_set", NULL);
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
	int32		stock;
	int32		reserved;
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
	stock_lock_product(&call, product_id, &stock, &reserved);
	row = stock_change(&call, fcinfo, product_id, (int64) stock + delta, stock, reserved,
					   "stock_adjust", reason);
	hc_call_end(&call);
	PG_RETURN_DATUM(row);
}
