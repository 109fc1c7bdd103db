/*
 * order_steps.c
 *		Orders of several products on Citus: hc_order_step, and the calls'
 *		steps on the nodes of their rows, which stock/ runs through the
 *		operations registered here (stock/orders.h, hc_order_steps_register).
 *
 * Each line is on the node of its product's rows, the order's row on its
 * first product's (scope_id), so a call on such an order runs each of its
 * steps where the step's rows are: here, against this node's shards, or sent
 * to that node as hc_order_step(routing_id, step, args), as the caller, in
 * the caller's transaction, which Citus then commits in two phases.  A step
 * is the single-node code on one product or on the order's row; the call
 * keeps the decisions, so that it decides as on a single node, and the
 * locks are taken in the single node's order: the products in order, then
 * the order's row.  Steps exchange text arrays, timestamps as microseconds.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"

#include "common/errors.h"
#include "common/ids.h"
#include "common/settings.h"
#include "common/validate.h"
#include "core/version.h"
#include "scaleout/route.h"
#include "scaleout/order_steps.h"
#include "stock/orders.h"
#include "stock/stock.h"

PG_FUNCTION_INFO_V1(hc_order_step);

static Datum
order_array(const char *const *items, int n)
{
	Datum	   *values = palloc0(sizeof(Datum) * Max(n, 1));
	bool	   *nulls = palloc0(sizeof(bool) * Max(n, 1));
	int			dims[1] = {n};
	int			lbs[1] = {1};
	int			i;

	if (n == 0)
		return PointerGetDatum(construct_empty_array(TEXTOID));
	for (i = 0; i < n; i++)
	{
		nulls[i] = items[i] == NULL;
		if (!nulls[i])
			values[i] = CStringGetTextDatum(items[i]);
	}
	return PointerGetDatum(construct_md_array(values, nulls, 1, dims, lbs, TEXTOID, -1, false,
											  TYPALIGN_INT));
}

static char **
order_unarray(Datum array, int *n)
{
	Datum	   *values;
	bool	   *nulls;
	char	  **items;
	int			i;

	deconstruct_array(DatumGetArrayTypeP(array), TEXTOID, -1, false, TYPALIGN_INT, &values,
					  &nulls, n);
	items = palloc0(sizeof(char *) * Max(*n, 1));
	for (i = 0; i < *n; i++)
		items[i] = nulls[i] ? NULL : TextDatumGetCString(values[i]);
	return items;
}

static char *
order_us(TimestampTz t)
{
	return psprintf(INT64_FORMAT, (int64) t);
}

/* A step's argument n, which must be there (a step may be called by hand). */
static const char *
order_arg(char **args, int nargs, int n)
{
	if (n >= nargs || args[n] == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("hc_order_step needs argument %d", n + 1)));
	return args[n];
}

static int32
order_int(char **args, int nargs, int n)
{
	return pg_strtoint32(order_arg(args, nargs, n));
}

static TimestampTz
order_time(char **args, int nargs, int n)
{
	return (TimestampTz) pg_strtoint64(order_arg(args, nargs, n));
}

/*
 * The expiry a step is given: no later than holdcommit.max_ttl from now,
 * give or take a minute between the nodes' clocks.
 */
static TimestampTz
order_expiry(HcCall *call, char **args, int nargs, int n)
{
	TimestampTz expires_at = order_time(args, nargs, n);

	if (expires_at > call->now + ((int64) hc_max_ttl + SECS_PER_MINUTE) * USECS_PER_SEC)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ttl must not exceed holdcommit.max_ttl"),
				 errdetail("holdcommit.max_ttl is %d seconds.", hc_max_ttl)));
	return expires_at;
}

/* An order's row, written by the call that makes it. */
static HcStatement insert_header = {
	"INSERT INTO hc_stock_orders"
	" (scope_id, id, buyer_id, idempotency_key, fingerprint, status, expires_at, created_at, products)"
	" VALUES (:scope_id, :reservation_id, :buyer_id, :key, :fingerprint, 'RESERVED', :expires_at,"
	"         :created_at, :products)",
	{{"scope_id", TEXTOID}, {"reservation_id", TEXTOID}, {"buyer_id", TEXTOID}, {"key", TEXTOID},
	 {"fingerprint", BYTEAOID}, {"expires_at", TIMESTAMPTZOID}, {"created_at", TIMESTAMPTZOID},
	 {"products", TEXTARRAYOID}}
};

/* One line, once its product's units are taken. */
static HcStatement insert_line = {
	"INSERT INTO hc_stock_order_lines"
	" (product_id, reservation_id, qty, status, expires_at, buyer_id, part, scope_id)"
	" VALUES (:product_id, :reservation_id, :qty, 'RESERVED', :expires_at, :buyer_id, :part,"
	"         :scope_id)",
	{{"product_id", TEXTOID}, {"reservation_id", TEXTOID}, {"qty", INT4OID},
	 {"expires_at", TIMESTAMPTZOID}, {"buyer_id", TEXTOID}, {"part", INT2OID}, {"scope_id", TEXTOID}}
};

/* An order's row; an order of one product names its one product (its scope). */
#define ORDER_HEADER \
	"SELECT status, buyer_id, expires_at, created_at, COALESCE(products, ARRAY[scope_id]) AS products" \
	"  FROM hc_stock_orders WHERE id" EQ ":reservation_id" " AND scope_id" EQ ":scope_id"
static HcStatement read_header = {
	ORDER_HEADER,
	{{"scope_id", TEXTOID}, {"reservation_id", TEXTOID}}
};
static HcStatement lock_header = {
	ORDER_HEADER " FOR NO KEY UPDATE",
	{{"scope_id", TEXTOID}, {"reservation_id", TEXTOID}}
};

/*
 * One line of an order of several products, as order_products reads each:
 * the part to lock (stock/lines.c), and the line's own.
 */
static HcStatement read_line = {
	"SELECT CASE WHEN l.status" EQ "'RESERVED' THEN l.part"
	"            WHEN EXISTS (SELECT FROM hc_stock_parts s WHERE s.product_id" EQ ":product_id"
	"                            AND s.part" EQ "l.part) THEN l.part"
	"            ELSE 0 END::pg_catalog.int4 AS lock_part,"
	"       l.part::pg_catalog.int4 AS part, l.qty, l.status, l.scope_id, l.buyer_id,"
	"       l.status" EQ "'EXPIRED'"
	"       AND EXISTS (SELECT FROM hc_stock_parts s"
	"                    WHERE s.product_id" EQ ":product_id" " AND s.part" GT "0) AS may_retake"
	"  FROM hc_stock_order_lines l"
	" WHERE l.product_id" EQ ":product_id" " AND l.reservation_id" EQ ":reservation_id",
	{{"product_id", TEXTOID}, {"reservation_id", TEXTOID}}
};

/*
 * A step on a line whose order's row is on this node (the line's product is
 * the order's first) checks it: there, RESERVED or EXPIRED, of several
 * products, this one first.  Of a line of another product nothing can be
 * checked here; the call checks the row where it is (stock/finalize.c's
 * stock_require_open_lines).
 */
static void
order_require_row(HcCall *call, const char *scope_id, const char *reservation_id, bool lock)
{
	HcArgs		args;
	bool		isnull;
	char	  **products;
	int			nproducts = 0;
	char	   *status = NULL;

	hc_args(&args, lock ? &lock_header : &read_header);
	hc_bind_text(&args, "scope_id", scope_id);
	hc_bind_text(&args, "reservation_id", reservation_id);
	if (hc_run(call, &args, SPI_OK_SELECT) == 1)
	{
		status = hc_text(call, 0, "status");
		products = order_unarray(hc_datum(0, "products", &isnull), &nproducts);
		if (nproducts > 0 && strcmp(products[0], scope_id) != 0)
			nproducts = 0;
	}
	if (status == NULL || nproducts < 2 ||
		(strcmp(status, "RESERVED") != 0 && strcmp(status, "EXPIRED") != 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("reservation \"%s\" is not an open order of several products whose first is \"%s\"",
						reservation_id, scope_id),
				 errhint("hc_order_step is a step of hc_reserve_items, hc_finalize and hc_unreserve on Citus.")));
}

static char **order_here(HcCall *call, const char *routing_id, const char *step, char **args,
						 int nargs, int *n);

/* Run a step on the node of routing_id's rows; its answer (n items). */
static char **
order_step(HcCall *call, const char *routing_id, const char *step, const char *const *args,
		   int nargs, int *n)
{
	HcShards   *saved = call->scope;
	Oid			types[2] = {TEXTOID, TEXTARRAYOID};
	Datum		values[2];
	bool		isnull;
	Datum		answer;
	char	  **result;
	const char *nested;

	if (hc_route_local(call, routing_id) != NULL)
	{
		result = order_here(call, routing_id, step, (char **) args, nargs, n);
		call->scope = saved;
		return result;
	}
	/*
	 * Citus refuses to reach another node from a query it sent to a shard;
	 * a role may allow it, but then the step would commit apart from the
	 * caller's transaction.
	 */
	nested = GetConfigOption("citus.allow_nested_distributed_execution", true, false);
	if (nested != NULL && strcmp(nested, "on") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s cannot reach another node with citus.allow_nested_distributed_execution on",
						call->function),
				 errhint("Call it with a bare SELECT, not inside a query that Citus sends to a shard.")));
	values[0] = CStringGetTextDatum(step);
	values[1] = order_array(args, nargs);
	answer = hc_route_send(call, routing_id, "hc_order_step", 2, types, values, TEXTARRAYOID,
						   &isnull);
	if (isnull)
	{
		*n = 0;
		return NULL;
	}
	return order_unarray(answer, n);
}

static char **
order_answer(int n, int *nresult, ...)
{
	char	  **items = palloc0(sizeof(char *) * Max(n, 1));
	va_list		ap;
	int			i;

	va_start(ap, nresult);
	for (i = 0; i < n; i++)
		items[i] = va_arg(ap, char *);
	va_end(ap);
	*nresult = n;
	return items;
}

/*
 * open (on the first product's node): the key, as a single node judges it
 * (replay: "replay", id, created_at); else the order's row ("new").
 */
static char **
order_open_here(HcCall *call, const char *scope_id, char **a, int na, int *n)
{
	const char *key = na > 2 ? a[2] : NULL;
	bytea	   *fingerprint = DatumGetByteaPP(DirectFunctionCall1(byteain,
																  CStringGetDatum(order_arg(a, na, 3))));
	HcArgs		args;
	Datum	   *products;
	int			i;

	if (key != NULL)
	{
		HcFingerprint fp = {0};
		HcKnownKey	known;

		fp.digest = fingerprint;
		if (hc_idempotency_find(call, key, &fp, &known))
			return order_answer(3, n, "replay", known.id, order_us(known.created_at));
	}
	/* Its products in lock order, the first this node's, as hc_reserve_items makes them. */
	if (na < 8 || na - 6 > hc_max_items || strcmp(order_arg(a, na, 6), scope_id) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("an order of several products names 2 to holdcommit.max_items products, \"%s\" first",
						scope_id)));
	products = palloc(sizeof(Datum) * (na - 6));
	for (i = 6; i < na; i++)
	{
		if (i > 6 && strcmp(order_arg(a, na, i - 1), order_arg(a, na, i)) >= 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("the products of an order are named once each, in byte order")));
		products[i - 6] = CStringGetTextDatum(order_arg(a, na, i));
	}
	if (order_time(a, na, 5) < call->now - SECS_PER_MINUTE * USECS_PER_SEC ||
		order_time(a, na, 5) > call->now + SECS_PER_MINUTE * USECS_PER_SEC ||
		order_expiry(call, a, na, 4) <= order_time(a, na, 5))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("an order is made now, and expires after it is made")));
	hc_args(&args, &insert_header);
	hc_bind_text(&args, "scope_id", scope_id);
	hc_bind_text(&args, "reservation_id", order_arg(a, na, 0));
	hc_bind_text(&args, "buyer_id", order_arg(a, na, 1));
	hc_bind_text(&args, "key", key);
	hc_bind(&args, "fingerprint", PointerGetDatum(fingerprint));
	hc_bind(&args, "expires_at", TimestampTzGetDatum(order_expiry(call, a, na, 4)));
	hc_bind(&args, "created_at", TimestampTzGetDatum(order_time(a, na, 5)));
	hc_bind(&args, "products", PointerGetDatum(construct_array(products, na - 6, TEXTOID, -1, false,
															   TYPALIGN_INT)));
	(void) hc_run(call, &args, SPI_OK_INSERT);
	return order_answer(1, n, "new");
}

/*
 * take (on the product's node): its units, as a single node takes them, and
 * its line: "ok"; "missing" or "short", stock, reserved, having written
 * nothing (the call raises the single node's error once it knows them all).
 */
static char **
order_take_here(HcCall *call, const char *product_id, char **a, int na, int *n)
{
	const char *reservation_id = order_arg(a, na, 0);
	int32		qty = order_int(a, na, 1);
	const char *buyer_id = order_arg(a, na, 2);
	HcArgs		args;
	int32		parts;
	int16		part;
	int32		stock;
	int32		reserved;

	if (qty <= 0)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("qty must be positive")));
	if (strcmp(order_arg(a, na, 4), product_id) == 0)
		order_require_row(call, product_id, reservation_id, false);
	parts = hc_stock_count_parts(call, product_id);
	if (parts == 0)
		return order_answer(1, n, "missing");
	part = parts > 1 ? (int16) (MyProcPid % parts) : 0;
	if (!hc_stock_take(call, product_id, parts, false, &part, qty, reservation_id, buyer_id, &stock, &reserved))
		return order_answer(3, n, "short", psprintf("%d", stock), psprintf("%d", reserved));
	hc_args(&args, &insert_line);
	hc_bind_text(&args, "product_id", product_id);
	hc_bind_text(&args, "reservation_id", reservation_id);
	hc_bind(&args, "qty", Int32GetDatum(qty));
	hc_bind(&args, "expires_at", TimestampTzGetDatum(order_expiry(call, a, na, 3)));
	hc_bind_text(&args, "buyer_id", buyer_id);
	hc_bind(&args, "part", Int16GetDatum(part));
	hc_bind_text(&args, "scope_id", order_arg(a, na, 4));
	(void) hc_run(call, &args, SPI_OK_INSERT);
	return order_answer(1, n, "ok");
}

/*
 * header (on the first product's node), locked if asked: status, buyer_id,
 * expires_at, created_at, then the products; nothing if there is none.
 */
static char **
order_header_here(HcCall *call, const char *scope_id, char **a, int na, int *n)
{
	HcArgs		args;
	bool		isnull;
	char	  **products;
	int			nproducts;
	char	  **items;
	int			i;

	hc_args(&args, strcmp(order_arg(a, na, 1), "lock") == 0 ? &lock_header : &read_header);
	hc_bind_text(&args, "scope_id", scope_id);
	hc_bind_text(&args, "reservation_id", order_arg(a, na, 0));
	if (hc_run(call, &args, SPI_OK_SELECT) != 1)
	{
		*n = 0;
		return NULL;
	}
	products = order_unarray(hc_datum(0, "products", &isnull), &nproducts);
	items = palloc(sizeof(char *) * (4 + nproducts));
	items[0] = hc_text(call, 0, "status");
	items[1] = hc_text(call, 0, "buyer_id");
	items[2] = order_us(hc_timestamptz(0, "expires_at"));
	items[3] = order_us(hc_timestamptz(0, "created_at"));
	for (i = 0; i < nproducts; i++)
		items[4 + i] = products[i];
	*n = 4 + nproducts;
	return items;
}

/*
 * Lock a line's part, or all of its product's parts for a late finalize
 * whose line may have to find its units again (retake), as hc_stock_lock locks
 * each product; then read the line under that lock into *line (parts: how
 * many parts are locked, 0 for the line's alone).  False if there is no
 * such line.
 */
static bool
order_lock_line(HcCall *call, const char *product_id, const char *reservation_id, bool retake,
				StockLine *line)
{
	HcArgs		args;
	bool		isnull;
	Datum		may_retake;
	int16		part;
	int32		locked;
	StockLockedPart locked_part;

	hc_args(&args, &read_line);
	hc_bind_text(&args, "product_id", product_id);
	hc_bind_text(&args, "reservation_id", reservation_id);
	if (hc_run(call, &args, SPI_OK_SELECT) != 1)
		return false;
	part = (int16) hc_int32(0, "lock_part");
	may_retake = hc_datum(0, "may_retake", &isnull);
	locked = hc_stock_lock_line_part(call, product_id, reservation_id, part,
								  retake && !isnull && DatumGetBool(may_retake), &locked_part);
	if (locked < 0)
		hc_stock_parts_changed(product_id);
	hc_args(&args, &read_line);
	hc_bind_text(&args, "product_id", product_id);
	hc_bind_text(&args, "reservation_id", reservation_id);
	if (hc_run(call, &args, SPI_OK_SELECT) != 1)
		elog(ERROR, "line of product \"%s\" in reservation \"%s\" vanished", product_id, reservation_id);
	if (locked == 0 && strcmp(hc_text(call, 0, "status"), "RESERVED") == 0 &&
		hc_int32(0, "part") != part)
		hc_stock_parts_changed(product_id);
	line->product_id = pstrdup(product_id);
	line->part = (int16) hc_int32(0, "part");
	line->qty = hc_int32(0, "qty");
	line->status = hc_text(call, 0, "status");
	line->parts = locked;
	return true;
}

/* lock (on the product's node): the line locked: part, qty, status, parts locked. */
static char **
order_lock_here(HcCall *call, const char *product_id, char **a, int na, int *n)
{
	StockLine	line;

	if (!order_lock_line(call, product_id, order_arg(a, na, 0),
						 strcmp(order_arg(a, na, 1), "retake") == 0, &line))
	{
		*n = 0;
		return NULL;
	}
	return order_answer(4, n, psprintf("%d", line.part), psprintf("%d", line.qty), line.status,
						psprintf("%d", line.parts));
}

/*
 * finish (on the product's node): the line, locked as the lock step locked
 * it, moves from RESERVED to FINALIZED, RELEASED or EXPIRED with the
 * single node's changes to stock and reserved, decided here from the line
 * itself; to FINALIZED also from EXPIRED, once its units are taken again
 * ("gone" if they are not there).  A step called by hand can do no more
 * than a finalize or an unreserve could to that line.
 */
static char **
order_finish_here(HcCall *call, const char *product_id, char **a, int na, int *n)
{
	StockReservation r = {0};
	StockLine	line;
	const char *status = order_arg(a, na, 1);
	bool		finalize = strcmp(status, "FINALIZED") == 0;

	r.id = (char *) order_arg(a, na, 0);
	if (!finalize && strcmp(status, "RELEASED") != 0 && strcmp(status, "EXPIRED") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a line cannot end as \"%s\"", status)));
	if (!order_lock_line(call, product_id, r.id, strcmp(order_arg(a, na, 3), "retake") == 0, &line))
	{
		/* No such line here: an order of one product, or none (22023), or a line gone. */
		order_require_row(call, product_id, r.id, false);
		elog(ERROR, "line of product \"%s\" in reservation \"%s\" vanished", product_id, r.id);
	}
	if (strcmp(hc_text(call, 0, "scope_id"), product_id) == 0)
		order_require_row(call, product_id, r.id, true);
	r.buyer_id = hc_text(call, 0, "buyer_id");
	if (finalize && strcmp(line.status, "EXPIRED") == 0)
	{
		if (!hc_stock_retake_line(call, &r, &line))
			return order_answer(1, n, "gone");
	}
	else if (strcmp(line.status, "RESERVED") != 0)
		elog(ERROR, "line of product \"%s\" in reservation \"%s\" is %s, not RESERVED",
			 product_id, r.id, line.status);
	if (finalize)
		hc_stock_move_line(call, &r, &line, status, -line.qty, -line.qty, "finalize", "call", false);
	else if (strcmp(status, "RELEASED") == 0)
		hc_stock_move_line(call, &r, &line, status, 0, -line.qty, "release", "call", false);
	else
		hc_stock_move_line(call, &r, &line, status, 0, -line.qty, "expire", "reclaim", false);
	return order_answer(1, n, "ok");
}

/*
 * end (on the first product's node): the order's row, from RESERVED or
 * EXPIRED to the status its first product's line, here, already has.
 */
static char **
order_end_here(HcCall *call, const char *scope_id, char **a, int na, int *n)
{
	StockReservation r = {0};
	const char *status = order_arg(a, na, 2);
	StockLine	line;
	char	   *line_status;

	r.id = (char *) order_arg(a, na, 0);
	r.scope_id = (char *) scope_id;
	r.status = (char *) order_arg(a, na, 1);
	if ((strcmp(r.status, "RESERVED") != 0 && strcmp(r.status, "EXPIRED") != 0) ||
		(strcmp(status, "FINALIZED") != 0 && strcmp(status, "RELEASED") != 0 &&
		 strcmp(status, "EXPIRED") != 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("an order does not end from \"%s\" as \"%s\"", r.status, status)));
	line_status = order_lock_line(call, scope_id, r.id, false, &line) ? line.status : NULL;
	if (line_status == NULL ||
		(strcmp(status, "EXPIRED") == 0 ? strcmp(line_status, "RESERVED") == 0
		 : strcmp(line_status, status) != 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("reservation \"%s\" cannot end as %s: the line of its first product is %s",
						r.id, status, line_status ? line_status : "missing")));
	hc_stock_end(call, &r, status);
	return order_answer(1, n, "ok");
}

/* The steps, by name. */
static const struct
{
	const char *name;
	char	  **(*run) (HcCall *call, const char *routing_id, char **a, int na, int *n);
}			order_steps_here[] = {
	{"open", order_open_here},
	{"take", order_take_here},
	{"header", order_header_here},
	{"lock", order_lock_here},
	{"finish", order_finish_here},
	{"end", order_end_here},
};

static char **
order_here(HcCall *call, const char *routing_id, const char *step, char **a, int na, int *n)
{
	int			i;

	for (i = 0; i < (int) lengthof(order_steps_here); i++)
		if (strcmp(step, order_steps_here[i].name) == 0)
			return order_steps_here[i].run(call, routing_id, a, na, n);
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("hc_order_step has no step \"%s\"", step)));
	return NULL;
}

/*
 * hc_reserve_items on Citus: the key and the order's row on its first
 * product's node, then each line on its product's; the single node's
 * errors, existence first.
 */
static void
order_reserve(HcCall *call, StockReservation *r, const char *key, HcFingerprint *fp, int64 ttl)
{
	const char **open = palloc(sizeof(char *) * (6 + r->nlines));
	char	  **answer;
	int			n;
	int			missing = -1;
	int			short_line = -1;
	int32		stock = 0;
	int32		reserved = 0;
	int			i;

	r->id = hc_new_reservation_id(call->now);
	r->scope_id = r->lines[0].product_id;
	open[0] = r->id;
	open[1] = r->buyer_id;
	open[2] = key;
	open[3] = DatumGetCString(DirectFunctionCall1(byteaout,
												  PointerGetDatum(hc_fingerprint_digest(fp))));
	open[4] = order_us(r->expires_at);
	open[5] = order_us(r->created_at);
	for (i = 0; i < r->nlines; i++)
		open[6 + i] = r->lines[i].product_id;
	answer = order_step(call, r->scope_id, "open", open, 6 + r->nlines, &n);
	if (n == 3 && strcmp(answer[0], "replay") == 0)
	{
		r->id = answer[1];
		r->created_at = (TimestampTz) pg_strtoint64(answer[2]);
		r->expires_at = r->created_at + ttl;
		r->replayed = true;
		return;
	}
	for (i = 0; i < r->nlines; i++)
	{
		const char *take[5] = {r->id, psprintf("%d", r->lines[i].qty), r->buyer_id,
		order_us(r->expires_at), r->scope_id};

		answer = order_step(call, r->lines[i].product_id, "take", take, 5, &n);
		if (n >= 1 && strcmp(answer[0], "missing") == 0 && missing < 0)
			missing = i;
		else if (n == 3 && strcmp(answer[0], "short") == 0 && short_line < 0)
		{
			short_line = i;
			stock = pg_strtoint32(answer[1]);
			reserved = pg_strtoint32(answer[2]);
		}
	}
	if (missing >= 0)
		hc_product_not_found(r->lines[missing].product_id);
	if (short_line >= 0)
		hc_stock_insufficient(r->lines[short_line].product_id, r->lines[short_line].qty, stock, reserved);
}

/*
 * On Citus, how many products the reservation's row on scope_id's node
 * names (0: there is none).  For several, r has its scope and its products,
 * and the call runs its steps where they are (r->spread).
 */
static int
order_spread(HcCall *call, const char *scope_id, const char *reservation_id, StockReservation *r)
{
	const char *header[2] = {reservation_id, "read"};
	char	  **answer;
	int			n;
	int			i;

	answer = order_step(call, scope_id, "header", header, 2, &n);
	if (n <= 5)
		return n == 0 ? 0 : 1;
	r->spread = true;
	r->scope_id = pstrdup(scope_id);
	r->nlines = n - 4;
	r->lines = palloc0(sizeof(StockLine) * r->nlines);
	for (i = 0; i < r->nlines; i++)
		r->lines[i].product_id = answer[4 + i];
	return r->nlines;
}

/* hc_stock_lock for an order of several products on Citus. */
static void
order_lock(HcCall *call, const char *reservation_id, bool retake, StockReservation *r)
{
	const char *lock[2] = {reservation_id, retake ? "retake" : "line"};
	const char *header[2] = {reservation_id, "lock"};
	char	  **answer;
	int			n;
	int			i;

	for (i = 0; i < r->nlines; i++)
	{
		StockLine  *line = &r->lines[i];

		answer = order_step(call, line->product_id, "lock", lock, 2, &n);
		if (n != 4)
			elog(ERROR, "line of product \"%s\" in reservation \"%s\" vanished", line->product_id,
				 reservation_id);
		line->part = (int16) pg_strtoint32(answer[0]);
		line->qty = pg_strtoint32(answer[1]);
		line->status = answer[2];
		line->parts = pg_strtoint32(answer[3]);
	}
	answer = order_step(call, r->scope_id, "header", header, 2, &n);
	if (n < 4)
		elog(ERROR, "reservation \"%s\" has lines but no row", reservation_id);
	r->id = pstrdup(reservation_id);
	r->status = answer[0];
	r->buyer_id = answer[1];
	r->expires_at = (TimestampTz) pg_strtoint64(answer[2]);
	r->created_at = (TimestampTz) pg_strtoint64(answer[3]);
	r->replayed = false;
	r->retake = retake;
}

/*
 * A line's end on its product's node (finish): false if a late finalize
 * found its units gone.  lock is how order_lock locked it.
 */
static bool
order_move(HcCall *call, StockReservation *r, StockLine *line, const char *status, bool retake)
{
	const char *finish[4] = {r->id, status, r->buyer_id, retake ? "retake" : "line"};
	char	  **answer;
	int			n;

	answer = order_step(call, line->product_id, "finish", finish, 4, &n);
	return n == 1 && strcmp(answer[0], "ok") == 0;
}

static void
order_end(HcCall *call, StockReservation *r, const char *status)
{
	const char *end[3] = {r->id, r->status, status};
	int			n;

	(void) order_step(call, r->scope_id, "end", end, 3, &n);
}

/*
 * hc_order_step(routing_id, step, args): one step of a call on an order of
 * several products, sent to this node (on Citus only).
 */
Datum
hc_order_step(PG_FUNCTION_ARGS)
{
	char	   *routing_id = hc_arg_id(fcinfo, 0, "routing_id");
	char	   *step = hc_arg_text(fcinfo, 1, "step");
	HcCall		call;
	char	  **args;
	char	  **answer;
	int			nargs;
	int			n;

	hc_arg_not_null(fcinfo, 2, "args");
	hc_call_begin(&call, fcinfo, "hc_order_step");
	hc_require_sql_at_least("0.4.0", call.function);
	if (!hc_distributed(&call))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("hc_order_step runs only on Citus"),
				 errdetail("It is a step of a call on an order of several products, sent to the node of its rows.")));
	if (hc_route_local(&call, routing_id) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("the shards of \"%s\" are not on this node", routing_id),
				 errhint("Call again: Citus sends the call to their new node.")));
	args = order_unarray(PG_GETARG_DATUM(2), &nargs);
	answer = order_here(&call, routing_id, step, args, nargs, &n);
	hc_call_end(&call);
	if (answer == NULL)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(order_array((const char *const *) answer, n));
}

/* The operations stock/ runs on an order of several products (stock/orders.h). */
static const HcStockOrders order_steps = {
	.reserve = order_reserve,
	.spread = order_spread,
	.lock = order_lock,
	.move = order_move,
	.end = order_end,
};

void
hc_order_steps_register(void)
{
	hc_stock_orders_register(&order_steps);
}
