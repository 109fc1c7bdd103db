/*
 * stock.c
 *		Counted stock: hc_stock_set, hc_stock_adjust, hc_reserve,
 *		hc_reserve_items, hc_finalize, hc_unreserve.
 *
 * hc_inventory keeps stock and reserved per product (CHECK stock >= reserved
 * >= 0); each reservation has one line per product, and a line is counted in
 * reserved exactly while its status is RESERVED.  Product rows are locked in
 * product_id order (bytewise, COLLATE "C"), and a product's lines change only
 * under its row lock, so two orders never deadlock.  The one lock taken
 * between product rows (marking a reclaimed reservation EXPIRED) skips a
 * reservation row that is locked, rather than waiting for it.
 *
 * So a reservation can still say RESERVED while a reclaimer has already
 * expired some of its lines.  Every transition therefore looks at each
 * line's own status under its product's lock: a line stops counting exactly
 * once, and a reservation with an expired line is an expired reservation.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"

#include "call.h"
#include "errors.h"
#include "holdcommit.h"
#include "idempotency.h"
#include "ids.h"
#include "ledger.h"
#include "validate.h"

PG_FUNCTION_INFO_V1(hc_stock_set);
PG_FUNCTION_INFO_V1(hc_stock_adjust);
PG_FUNCTION_INFO_V1(hc_reserve);
PG_FUNCTION_INFO_V1(hc_reserve_items);
PG_FUNCTION_INFO_V1(hc_finalize);
PG_FUNCTION_INFO_V1(hc_unreserve);

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
	char	   *buyer_id;
	char	   *status;
	TimestampTz expires_at;
	TimestampTz created_at;
	bool		replayed;
	StockLine  *lines;
	int			nlines;
} StockReservation;

/* The atomic conditional step: reserved += qty where that much is available. */
static HcStatement reserve_stock = {
	"UPDATE hc_inventory"
	"   SET reserved = reserved OPERATOR(pg_catalog.+) $2,"
	"       version = version OPERATOR(pg_catalog.+) 1, updated_at = $3"
	" WHERE product_id OPERATOR(pg_catalog.=) $1"
	"   AND stock OPERATOR(pg_catalog.-) reserved OPERATOR(pg_catalog.>=) $2",
	3, {TEXTOID, INT4OID, TIMESTAMPTZOID}
};

static HcStatement lock_product = {
	"SELECT stock, reserved FROM hc_inventory"
	" WHERE product_id OPERATOR(pg_catalog.=) $1 FOR NO KEY UPDATE",
	1, {TEXTOID}
};

static HcStatement lock_products = {
	"SELECT product_id, stock, reserved FROM hc_inventory"
	" WHERE product_id OPERATOR(pg_catalog.=) ANY ($1)"
	" ORDER BY product_id COLLATE \"C\" FOR NO KEY UPDATE",
	1, {TEXTARRAYOID}
};

/*
 * Reclaim, in one statement, the oldest expired lines of a product whose row
 * we have locked: just enough of them to free $3 units, and never more than
 * $4 lines, so that no caller pays for a backlog the sweeper should clear.
 * Each line stops counting once (its own status is checked), gets its ledger
 * row, and its reservation becomes EXPIRED unless another reclaim has that
 * row locked.  Returns the units freed, or no row.
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
	"             ORDER BY expires_at, reservation_id LIMIT $4) oldest) s"
	"   WHERE running OPERATOR(pg_catalog.-) qty OPERATOR(pg_catalog.<) $3),"
	" expired AS ("
	"  UPDATE hc_stock_reservation_lines l SET status = 'EXPIRED'"
	"    FROM doomed d"
	"   WHERE l.product_id OPERATOR(pg_catalog.=) $1"
	"     AND l.reservation_id OPERATOR(pg_catalog.=) d.reservation_id"
	"     AND l.status OPERATOR(pg_catalog.=) 'RESERVED'"
	"  RETURNING l.reservation_id, l.qty),"
	" logged AS ("
	"  INSERT INTO hc_ledger (at, kind, entity_id, event, source, function,"
	"                         reservation_id, buyer_id, reserved_delta, stock_delta, actor)"
	"  SELECT $2, 'product', $1, 'reclaim', 'reclaim', $5, e.reservation_id, r.buyer_id,"
	"         OPERATOR(pg_catalog.-) e.qty, 0, $6"
	"    FROM expired e JOIN hc_stock_reservations r"
	"      ON r.id OPERATOR(pg_catalog.=) e.reservation_id),"
	" ended AS ("
	"  UPDATE hc_stock_reservations SET status = 'EXPIRED', ended_at = $2"
	"   WHERE id OPERATOR(pg_catalog.=) ANY ("
	"     SELECT r.id FROM hc_stock_reservations r"
	"      WHERE r.id OPERATOR(pg_catalog.=) ANY (SELECT reservation_id FROM expired)"
	"        AND r.status OPERATOR(pg_catalog.=) 'RESERVED'"
	"        FOR NO KEY UPDATE SKIP LOCKED))"
	" UPDATE hc_inventory i"
	"    SET reserved = i.reserved OPERATOR(pg_catalog.-) t.total,"
	"        version = i.version OPERATOR(pg_catalog.+) 1, updated_at = $2"
	"   FROM (SELECT pg_catalog.sum(qty)::pg_catalog.int4 AS total FROM expired) t"
	"  WHERE i.product_id OPERATOR(pg_catalog.=) $1 AND t.total IS NOT NULL"
	" RETURNING t.total",
	6, {TEXTOID, TIMESTAMPTZOID, INT8OID, INT4OID, TEXTOID, TEXTOID}
};

/* The most expired lines one call reclaims; the sweeper clears the rest. */
#define STOCK_RECLAIM_MAX_LINES 1000

/* Change a product's stock and reserved by the given amounts. */
static HcStatement move_stock = {
	"UPDATE hc_inventory"
	"   SET stock = stock OPERATOR(pg_catalog.+) $2, reserved = reserved OPERATOR(pg_catalog.+) $3,"
	"       version = version OPERATOR(pg_catalog.+) 1, updated_at = $4"
	" WHERE product_id OPERATOR(pg_catalog.=) $1"
	" RETURNING *",
	4, {TEXTOID, INT4OID, INT4OID, TIMESTAMPTZOID}
};

static HcStatement insert_reservation = {
	"INSERT INTO hc_stock_reservations"
	" (scope_id, id, buyer_id, idempotency_key, status, expires_at, created_at)"
	" VALUES ($6, $1, $2, $3, 'RESERVED', $4, $5)",
	6, {TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID, TEXTOID}
};

static HcStatement insert_lines = {
	"INSERT INTO hc_stock_reservation_lines"
	" (product_id, reservation_id, qty, status, expires_at)"
	" SELECT p, $2, q, 'RESERVED', $4 FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($3)) AS u(p, q)",
	4, {TEXTARRAYOID, TEXTOID, INT4ARRAYOID, TIMESTAMPTZOID}
};

static HcStatement reservation_lines = {
	"SELECT product_id, qty, status FROM hc_stock_reservation_lines"
	" WHERE reservation_id OPERATOR(pg_catalog.=) $1"
	" ORDER BY product_id COLLATE \"C\"",
	1, {TEXTOID}
};

static HcStatement lock_reservation = {
	"SELECT buyer_id, status, expires_at, created_at FROM hc_stock_reservations"
	" WHERE id OPERATOR(pg_catalog.=) $1 FOR NO KEY UPDATE",
	1, {TEXTOID}
};

/* Move a line from the status we read under the lock to its new one. */
static HcStatement set_line_status = {
	"UPDATE hc_stock_reservation_lines SET status = $3"
	" WHERE product_id OPERATOR(pg_catalog.=) $1 AND reservation_id OPERATOR(pg_catalog.=) $2"
	"   AND status OPERATOR(pg_catalog.=) $4",
	4, {TEXTOID, TEXTOID, TEXTOID, TEXTOID}
};

static HcStatement end_reservation = {
	"UPDATE hc_stock_reservations SET status = $2, ended_at = $3"
	" WHERE id OPERATOR(pg_catalog.=) $1 AND status OPERATOR(pg_catalog.=) $4",
	4, {TEXTOID, TEXTOID, TIMESTAMPTZOID, TEXTOID}
};

static HcStatement create_product = {
	"INSERT INTO hc_inventory (product_id, stock, reserved, created_at, updated_at)"
	" VALUES ($1, $3, 0, $2, $2) ON CONFLICT (product_id) DO NOTHING RETURNING *",
	3, {TEXTOID, TIMESTAMPTZOID, INT4OID}
};

/* A ledger entry for a product. */
static void
stock_ledger(HcCall *call, const char *product_id, const char *event, const char *source,
			 const char *reservation_id, const char *buyer_id,
			 int32 reserved_delta, int32 stock_delta, const char *detail)
{
	HcLedgerEntry e = {0};

	e.kind = "product";
	e.entity_id = product_id;
	e.event = event;
	e.source = source;
	e.reservation_id = reservation_id;
	e.buyer_id = buyer_id;
	e.reserved_delta = reserved_delta;
	e.stock_delta = stock_delta;
	e.detail = detail;
	hc_ledger_append(call, &e);
}

/* Add the deltas to a product's stock and reserved; the row is in SPI_tuptable. */
static void
stock_move(HcCall *call, const char *product_id, int32 stock_delta, int32 reserved_delta)
{
	Datum		values[4];

	values[0] = HC_TEXT(product_id);
	values[1] = Int32GetDatum(stock_delta);
	values[2] = Int32GetDatum(reserved_delta);
	values[3] = TimestampTzGetDatum(call->now);
	if (hc_run(&move_stock, values, NULL, SPI_OK_UPDATE_RETURNING) != 1)
		elog(ERROR, "product \"%s\" vanished", product_id);
}

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

/*
 * Reclaim expired lines of a product whose row we have locked, enough to
 * free needed units if there are that many (at most STOCK_RECLAIM_MAX_LINES
 * lines).  Returns the units freed.
 */
static int64
stock_reclaim(HcCall *call, const char *product_id, int64 needed)
{
	Datum		values[6];

	values[0] = HC_TEXT(product_id);
	values[1] = TimestampTzGetDatum(call->now);
	values[2] = Int64GetDatum(needed);
	values[3] = Int32GetDatum(STOCK_RECLAIM_MAX_LINES);
	values[4] = HC_TEXT(call->function);
	values[5] = HC_TEXT(call->actor);
	if (hc_run(&reclaim_lines, values, NULL, SPI_OK_UPDATE_RETURNING) == 0)
		return 0;
	return hc_int32(0, 1);
}

/*
 * Reserve qty of one product: the atomic conditional update, which holds the
 * product's row lock for nothing else.  Only if it finds too little, lock the
 * row, reclaim as many expired units as are missing, and try once more.
 * Returns false if there is still too little; RS006 if the product does not
 * exist.
 */
static bool
stock_take(HcCall *call, const char *product_id, int32 qty)
{
	Datum		values[3];
	int64		missing;

	values[0] = HC_TEXT(product_id);
	values[1] = Int32GetDatum(qty);
	values[2] = TimestampTzGetDatum(call->now);
	if (hc_run(&reserve_stock, values, NULL, SPI_OK_UPDATE) == 1)
		return true;
	if (hc_run(&lock_product, values, NULL, SPI_OK_SELECT) == 0)
		product_not_found(product_id);
	missing = (int64) qty - (hc_int32(0, 1) - hc_int32(0, 2));
	return stock_reclaim(call, product_id, missing) >= missing &&
		hc_run(&reserve_stock, values, NULL, SPI_OK_UPDATE) == 1;
}

/* RS002, with the numbers of the product's locked row. */
static void
stock_insufficient(const char *product_id, int32 qty)
{
	Datum		values[1];
	int32		stock;
	int32		reserved;

	values[0] = HC_TEXT(product_id);
	if (hc_run(&lock_product, values, NULL, SPI_OK_SELECT) != 1)
		elog(ERROR, "product \"%s\" vanished", product_id);
	stock = hc_int32(0, 1);
	reserved = hc_int32(0, 2);
	ereport(ERROR,
			(errcode(ERRCODE_HC_INSUFFICIENT_STOCK),
			 errmsg("insufficient stock for product \"%s\"", product_id),
			 errdetail("%d requested, %d available (stock %d, reserved %d).",
					   qty, stock - reserved, stock, reserved),
			 errhint("Offer a smaller quantity, or try again when reservations end.")));
}

/*
 * Lock the products of an order in product_id order and raise RS006 for the
 * first that does not exist, before any of them is checked for stock.
 */
static void
stock_lock_all(HcCall *call, const StockLine *lines, int n)
{
	Datum	   *products = palloc(sizeof(Datum) * n);
	Datum		values[1];
	uint64		found;
	int			i;

	for (i = 0; i < n; i++)
		products[i] = HC_TEXT(lines[i].product_id);
	values[0] = PointerGetDatum(construct_array(products, n, TEXTOID, -1, false, TYPALIGN_INT));
	found = hc_run(&lock_products, values, NULL, SPI_OK_SELECT);
	for (i = 0; i < n && (uint64) i < found; i++)
		if (strcmp(hc_text(call, i, 1), lines[i].product_id) != 0)
			break;
	if (i < n)
		product_not_found(lines[i].product_id);
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

/*
 * The body of hc_reserve and hc_reserve_items: all lines or nothing.
 */
static Datum
stock_reserve(FunctionCallInfo fcinfo, const char *function, StockLine *lines, int n,
			  char *buyer_id, char *key, int64 ttl)
{
	HcCall		call;
	HcFingerprint fp;
	HcStoredResponse fresh;
	HcStoredResponse stored;
	StockReservation r = {0};
	int			i;

	hc_call_begin(&call, fcinfo, function);
	fresh.reservation_id = hc_new_reservation_id(call.now);
	fresh.status = "RESERVED";
	fresh.created_at = call.now;
	fresh.expires_at = call.now + ttl;

	hc_fingerprint_init(&fp, function);
	hc_fingerprint_add(&fp, buyer_id);
	hc_fingerprint_add(&fp, psprintf(INT64_FORMAT, ttl));
	for (i = 0; i < n; i++)
	{
		hc_fingerprint_add(&fp, lines[i].product_id);
		hc_fingerprint_add(&fp, psprintf("%d", lines[i].qty));
	}

	r.buyer_id = buyer_id;
	r.lines = lines;
	r.nlines = n;
	if (!hc_idempotency_claim(&call, key, lines[0].product_id, &fp, &fresh, &stored))
	{
		r.id = stored.reservation_id;
		r.status = stored.status;
		r.expires_at = stored.expires_at;
		r.created_at = stored.created_at;
		r.replayed = true;
	}
	else
	{
		Datum		values[6];
		Datum	   *products = palloc(sizeof(Datum) * n);
		Datum	   *qtys = palloc(sizeof(Datum) * n);

		r.id = fresh.reservation_id;
		r.status = fresh.status;
		r.expires_at = fresh.expires_at;
		r.created_at = fresh.created_at;

		if (n > 1)
			stock_lock_all(&call, lines, n);
		for (i = 0; i < n; i++)
			if (!stock_take(&call, lines[i].product_id, lines[i].qty))
				stock_insufficient(lines[i].product_id, lines[i].qty);

		values[0] = HC_TEXT(r.id);
		values[1] = HC_TEXT(buyer_id);
		values[2] = HC_TEXT(key);
		values[3] = TimestampTzGetDatum(r.expires_at);
		values[4] = TimestampTzGetDatum(r.created_at);
		values[5] = HC_TEXT(lines[0].product_id);
		hc_run(&insert_reservation, values, NULL, SPI_OK_INSERT);

		for (i = 0; i < n; i++)
		{
			products[i] = HC_TEXT(lines[i].product_id);
			qtys[i] = Int32GetDatum(lines[i].qty);
		}
		values[0] = PointerGetDatum(construct_array(products, n, TEXTOID, -1, false, TYPALIGN_INT));
		values[1] = HC_TEXT(r.id);
		values[2] = PointerGetDatum(construct_array(qtys, n, INT4OID, 4, true, TYPALIGN_INT));
		values[3] = TimestampTzGetDatum(r.expires_at);
		if (hc_run(&insert_lines, values, NULL, SPI_OK_INSERT) != (uint64) n)
			elog(ERROR, "could not insert the lines of reservation \"%s\"", r.id);

		for (i = 0; i < n; i++)
			stock_ledger(&call, lines[i].product_id, "reserve", "call", r.id, buyer_id,
						 lines[i].qty, 0, NULL);
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
 * Lock a reservation for finalize or unreserve: its products in order, then
 * the reservation row, and read its lines under those locks.
 */
static void
stock_lock(HcCall *call, const char *reservation_id, StockReservation *r)
{
	Datum		values[1];
	Datum	   *products;
	uint64		n;
	uint64		i;

	values[0] = HC_TEXT(reservation_id);
	n = hc_run(&reservation_lines, values, NULL, SPI_OK_SELECT);
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_HC_NOT_FOUND),
				 errmsg("reservation \"%s\" does not exist", reservation_id),
				 errdetail("No stock reservation has the id \"%s\".", reservation_id),
				 errhint("Use the reservation_id that hc_reserve() or hc_reserve_items() returned.")));
	products = palloc(sizeof(Datum) * n);
	for (i = 0; i < n; i++)
		products[i] = HC_TEXT(hc_text(call, i, 1));

	values[0] = PointerGetDatum(construct_array(products, (int) n, TEXTOID, -1, false, TYPALIGN_INT));
	if (hc_run(&lock_products, values, NULL, SPI_OK_SELECT) != n)
		elog(ERROR, "products of reservation \"%s\" vanished", reservation_id);

	values[0] = HC_TEXT(reservation_id);
	if (hc_run(&lock_reservation, values, NULL, SPI_OK_SELECT) != 1)
		elog(ERROR, "reservation \"%s\" has lines but no row", reservation_id);
	r->id = pstrdup(reservation_id);
	r->buyer_id = hc_text(call, 0, 1);
	r->status = hc_text(call, 0, 2);
	r->expires_at = hc_timestamptz(0, 3);
	r->created_at = hc_timestamptz(0, 4);
	r->replayed = false;

	/* The lines again, now that nobody else can change them. */
	n = hc_run(&reservation_lines, values, NULL, SPI_OK_SELECT);
	r->nlines = (int) n;
	r->lines = palloc(sizeof(StockLine) * n);
	for (i = 0; i < n; i++)
	{
		r->lines[i].product_id = hc_text(call, i, 1);
		r->lines[i].qty = hc_int32(i, 2);
		r->lines[i].status = hc_text(call, i, 3);
	}
}

/* Give one line of the reservation its new status. */
static void
stock_set_line(HcCall *call, StockReservation *r, StockLine *line, const char *status)
{
	Datum		values[4];

	values[0] = HC_TEXT(line->product_id);
	values[1] = HC_TEXT(r->id);
	values[2] = HC_TEXT(status);
	values[3] = HC_TEXT(line->status);
	if (hc_run(&set_line_status, values, NULL, SPI_OK_UPDATE) != 1)
		elog(ERROR, "line of product \"%s\" in reservation \"%s\" is no longer %s",
			 line->product_id, r->id, line->status);
	line->status = pstrdup(status);
}

/* End the reservation with its final status. */
static void
stock_end(HcCall *call, StockReservation *r, const char *status)
{
	Datum		values[4];

	values[0] = HC_TEXT(r->id);
	values[1] = HC_TEXT(status);
	values[2] = TimestampTzGetDatum(call->now);
	values[3] = HC_TEXT(r->status);
	if (hc_run(&end_reservation, values, NULL, SPI_OK_UPDATE) != 1)
		elog(ERROR, "reservation \"%s\" is no longer %s", r->id, r->status);
	r->status = pstrdup(status);
}

/* An expired reservation: its lines that still count stop counting. */
static void
stock_expire(HcCall *call, StockReservation *r)
{
	int			i;

	for (i = 0; i < r->nlines; i++)
	{
		StockLine  *line = &r->lines[i];

		if (strcmp(line->status, "RESERVED") != 0)
			continue;
		stock_move(call, line->product_id, 0, -line->qty);
		stock_set_line(call, r, line, "EXPIRED");
		stock_ledger(call, line->product_id, "expire", "reclaim", r->id, r->buyer_id,
					 -line->qty, 0, NULL);
	}
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

			if (strcmp(line->status, "RESERVED") != 0 &&
				!stock_take(&call, line->product_id, line->qty))
				stock_expired(&r, psprintf("The stock of product \"%s\" is gone: refund the payment.",
										   line->product_id));
		}
		for (i = 0; i < r.nlines; i++)
		{
			StockLine  *line = &r.lines[i];
			bool		counted = strcmp(line->status, "RESERVED") == 0;

			stock_move(&call, line->product_id, -line->qty, -line->qty);
			stock_set_line(&call, &r, line, "FINALIZED");
			stock_ledger(&call, line->product_id, "finalize", "call", r.id, r.buyer_id,
						 counted ? -line->qty : 0, -line->qty, NULL);
		}
		stock_end(&call, &r, "FINALIZED");
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
		{
			StockLine  *line = &r.lines[i];

			stock_move(&call, line->product_id, 0, -line->qty);
			stock_set_line(&call, &r, line, "RELEASED");
			stock_ledger(&call, line->product_id, "release", "call", r.id, r.buyer_id,
						 -line->qty, 0, NULL);
		}
		stock_end(&call, &r, "RELEASED");
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
	*reserved -= (int32) stock_reclaim(call, product_id, PG_INT64_MAX);
}

/* Set stock to new_stock, refusing to go below reserved; return the row. */
static Datum
stock_change(HcCall *call, FunctionCallInfo fcinfo, const char *product_id, int64 new_stock,
			 int32 stock, int32 reserved, const char *event, const char *detail)
{
	Datum		row;

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

	stock_move(call, product_id, (int32) (new_stock - stock), 0);
	row = hc_result_row(call, fcinfo);
	if (new_stock != stock)
		stock_ledger(call, product_id, event, "adjustment", NULL, NULL, 0,
					 (int32) (new_stock - stock), detail);
	return row;
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
	Datum		values[3];
	Datum		row;

	if (new_stock < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("stock must not be negative")));
	hc_call_begin(&call, fcinfo, "hc_stock_set");
	values[0] = HC_TEXT(product_id);
	values[1] = TimestampTzGetDatum(call.now);
	values[2] = Int32GetDatum(new_stock);
	if (hc_run(&create_product, values, NULL, SPI_OK_INSERT_RETURNING) == 1)
	{
		row = hc_result_row(&call, fcinfo);
		stock_ledger(&call, product_id, "stock_set", "adjustment", NULL, NULL, 0, new_stock,
					 "created");
	}
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
