/*
 * reserve.c
 *		hc_reserve and hc_reserve_items: a new stock reservation, all its
 *		lines or nothing; and RS002, the refusal of a reserve.
 *
 * Invariants:
 *   1. A reserve of one line on one node (the common call) looks its key
 *      up, then takes the units from one part it has locked and writes its
 *      ledger row and the order, which is its own line (stock.h's 2;
 *      stock_reserve_line), without the executor where the tables allow it
 *      (direct.c), else in one statement: the part's lock is held a few
 *      index insertions longer, and the call writes once instead of three
 *      times.  A product of one part: part 0 locked, waiting, as the
 *      statement's update would wait, then its units checked; too few, and
 *      the call goes the whole way with part 0 held, first in the order.
 *   2. Its first try is the backend's home part (home_part.c), locked only
 *      if nobody holds it and it has the units (a lock of the version it
 *      looked at, so there is nothing to give back); then the tries of
 *      parts.c's 2.
 *   3. If that takes nothing, the call goes the whole way, as a reserve of
 *      several lines does: it reads first, without locking, and refuses
 *      (RS006 for any line first, then RS002) or replays from that read
 *      alone; it then writes the reservation and its lines, and only last
 *      takes each product's lock, in product order, for the conditional
 *      update of reserved and its ledger row (but for part 0 of a product
 *      of one part, which the one statement may have kept: see
 *      stock_reserve_line).
 *   4. On Citus a reserve of one product goes to that product's node; an
 *      order of several products runs its steps on their nodes (orders.h).
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "miscadmin.h"

#include "common/errors.h"
#include "common/idempotency.h"
#include "common/ids.h"
#include "common/ledger.h"
#include "common/validate.h"
#include "core/fetch.h"
#include "core/placement.h"
#include "core/subxact.h"
#include "core/version.h"
#include "stock/orders.h"
#include "stock/stock.h"

PG_FUNCTION_INFO_V1(hc_reserve);
PG_FUNCTION_INFO_V1(hc_reserve_items);

/* RS002, with the product's numbers as last read. */
void
hc_stock_insufficient(const char *product_id, int32 qty, int32 stock, int32 reserved)
{
	ereport(ERROR,
			(errcode(ERRCODE_HC_INSUFFICIENT_STOCK),
			 errmsg("insufficient stock for product \"%s\"", product_id),
			 errdetail("%d requested, %d available (stock %d, reserved %d).",
					   qty, stock - reserved, stock, reserved),
			 errhint("Offer a smaller quantity, or try again when reservations end.")));
}

/*
 * The whole of the common reserve, one line, in one statement: the
 * conditional update of one part with its ledger row, and only if it took
 * the units, the order, which is its own line.  No row when it took nothing:
 * the call then goes the whole way (stock_reserve).  It returns the part
 * taken from.  reserve_line takes from :part, waiting for it, as
 * take_stock; reserve_line_probe from any part that has the units and that
 * nobody holds, :part first, as probe_stock.
 */
#define RESERVE_LINE_WRITES \
	" l AS (" \
	HC_LEDGER_ROWS("'product'", ":product_id", PART_SEQ("u.part", "u.version"), "'reserve'", \
				   "'call'", ":reservation_id", ":buyer_id", ":qty", "0", "NULL") \
	"  FROM u)" \
	" INSERT INTO hc_stock_orders" \
	"   (scope_id, id, buyer_id, idempotency_key, fingerprint, status, expires_at, created_at," \
	"    qty, part)" \
	" SELECT :product_id, :reservation_id, :buyer_id, :key, :fingerprint, 'RESERVED'," \
	"        :expires_at, :now, :qty, u.part FROM u RETURNING part"
#define RESERVE_LINE_PARAMS \
	{"product_id", TEXTOID}, {"qty", INT4OID}, {"reservation_id", TEXTOID}, \
	{"buyer_id", TEXTOID}, {"key", TEXTOID}, {"fingerprint", BYTEAOID}, \
	{"expires_at", TIMESTAMPTZOID}, HC_LEDGER_PARAMS

static HcStatement reserve_line = {
	"WITH u AS ("
	"  UPDATE hc_stock_parts"
	"     SET reserved = reserved" PLUS ":qty, version = version" PLUS "1, updated_at = :now"
	"   WHERE product_id" EQ ":product_id" " AND part" EQ ":part"
	"     AND stock" MINUS "reserved" GE ":qty"
	"  RETURNING part, version),"
	RESERVE_LINE_WRITES,
	{RESERVE_LINE_PARAMS, {"part", INT2OID}}
};

static HcStatement reserve_line_probe = {
	"WITH s AS ("
	"  SELECT part FROM hc_stock_parts"
	"   WHERE product_id" EQ ":product_id" " AND stock" MINUS "reserved" GE ":qty"
	"   ORDER BY part" NE ":part, part" LT ":part, part"
	"   LIMIT 1 FOR NO KEY UPDATE SKIP LOCKED),"
	" u AS ("
	"  UPDATE hc_stock_parts t"
	"     SET reserved = t.reserved" PLUS ":qty, version = t.version" PLUS "1, updated_at = :now"
	"    FROM s WHERE t.product_id" EQ ":product_id" " AND t.part" EQ "s.part"
	"  RETURNING t.part, t.version),"
	RESERVE_LINE_WRITES,
	{RESERVE_LINE_PARAMS, {"part", INT2OID}}
};

/*
 * A reserve's first try: its home part, locked only if nobody holds it and
 * it has the units (stock_part_admits), so it keeps no lock it did not want.
 */
static HcFetch home_part = {"hc_stock_parts", "product_id", HC_FETCH_SKIP_SEEN, 3,
	{"stock", "reserved", "version"}, "part"};

/* A product's second part: whether it has more than one (parts are 0..n-1). */
static HcFetch second_part = {"hc_stock_parts", "product_id", HC_FETCH_READ, 1, {"stock"},
	"part"};

/* The arguments of one try of a reserve_line statement (stock_try_line). */
typedef struct StockLineTry
{
	HcCall	   *call;
	HcArgs	   *args;
	int16		part;			/* the part it took from */
} StockLineTry;

static bool
stock_try_line(void *arg)
{
	StockLineTry *t = (StockLineTry *) arg;

	if (hc_run(t->call, t->args, SPI_OK_INSERT_RETURNING) != 1)
		return false;
	t->part = (int16) hc_int32(0, "part");
	return true;
}

/* A part that has *arg units available (home_part). */
static bool
stock_part_admits(const Datum *values, const bool *nulls, void *arg)
{
	return (int64) DatumGetInt32(values[0]) - DatumGetInt32(values[1]) >= *(int32 *) arg;
}

/* The arguments every reserve_line statement takes, for the call's one line. */
static void
stock_bind_line(HcArgs *args, HcStatement *stmt, const StockReservation *r, const char *key,
				HcFingerprint *fp)
{
	hc_args(args, stmt);
	hc_bind_text(args, "product_id", r->lines[0].product_id);
	hc_bind(args, "qty", Int32GetDatum(r->lines[0].qty));
	hc_bind_text(args, "reservation_id", r->id);
	hc_bind_text(args, "buyer_id", r->buyer_id);
	hc_bind_text(args, "key", key);
	hc_bind(args, "fingerprint", PointerGetDatum(hc_fingerprint_digest(fp)));
	hc_bind(args, "expires_at", TimestampTzGetDatum(r->expires_at));
}

/*
 * The common reserve, one line, on one node: the key first, then for a
 * product of one part part 0 locked and checked, and the writes of
 * reserve_line there (direct.c, or the statement); of several (or one that
 * had several when this backend last reserved it), the tries of
 * stock_take_unordered, from the backend's home part (home_part.c; the
 * first time, its pid modulo the number of parts): that part if nobody
 * holds it and it has the units (home_part, a point lock of the version it
 * looked at, where the probe reads every part; then the writes of
 * reserve_line there),
 * else any part nobody holds (reserve_line_probe), then the home part,
 * waiting for it (reserve_line), these two each in a subtransaction rolled
 * back if it took nothing (so that it keeps no part whose re-check failed).
 * The part it took from is its home part next time.
 * True with *r made or replayed; false when the call must go the whole way:
 * the product is missing, or the parts tried have too little.  It then
 * wrote nothing of a reservation (the key's lookup may have forgotten an
 * expired key, as the whole way would) and holds no part, but for part 0
 * of a product of one part whose update waited for it and failed its
 * re-check (the product may have been spread meanwhile): part 0 comes first
 * in the order, so the whole way takes every part next, without the tries
 * made here (hc_stock_take's tried).
 */
static bool
stock_reserve_line(HcCall *call, StockReservation *r, const char *key, HcFingerprint *fp,
				   int64 ttl)
{
	const char *product_id = r->lines[0].product_id;
	HcKnownKey	known;
	HcArgs		args;
	StockLineTry t = {call, &args};
	StockLockedPart locked;
	Datum		part[3];
	bool		isnull[3];
	bool		hinted;
	int16		home;

	hc_stock_watch(call, product_id);
	if (hc_idempotency_find(call, key, fp, &known))
	{
		r->id = known.id;
		r->created_at = known.created_at;
		r->expires_at = known.created_at + ttl;
		r->replayed = true;
		return true;
	}
	r->id = hc_new_reservation_id(call->now);
	hinted = hc_home_part_get(product_id, &home);
	/* Part 0 is every product's: such a hint does not say the product still has several. */
	/* A spread of a product of one part under way: waited for, its parts read again. */
	if ((!hinted || home == 0) &&
		!hc_fetch_part(call, &second_part, product_id, 1, part, isnull) &&
		!hc_stock_watch_spreading(call, product_id))
	{
		if (hinted)
			hc_home_part_forget(product_id);
		/* Locked as the update would wait for it, then checked (stock/direct.c). */
		if (!hc_stock_lock_part(call, product_id, 0, &locked) ||
			(int64) locked.stock - locked.reserved < r->lines[0].qty)
			return false;
		if (hc_stock_write_reserve(call, r, key, fp, 0, &locked))
			return true;
		stock_bind_line(&args, &reserve_line, r, key, fp);
		hc_bind(&args, "part", Int16GetDatum(0));
		return stock_try_line(&t);
	}
	if (!hinted)
	{
		int32		parts = hc_stock_count_parts(call, product_id);

		if (parts < 2)
			return false;
		home = (int16) (MyProcPid % parts);
	}
	if (hc_fetch_part_if(call, &home_part, product_id, home, stock_part_admits,
						 &r->lines[0].qty, part, isnull, &locked.tid))
	{
		/* Held and checked: the update takes the units. */
		locked.stock = DatumGetInt32(part[0]);
		locked.reserved = DatumGetInt32(part[1]);
		locked.version = DatumGetInt32(part[2]);
		t.part = home;
		if (!hc_stock_write_reserve(call, r, key, fp, home, &locked))
		{
			stock_bind_line(&args, &reserve_line, r, key, fp);
			hc_bind(&args, "part", Int16GetDatum(home));
			if (!stock_try_line(&t))
				elog(ERROR, "part %d of product \"%s\" did not have the units it was locked with",
					 home, product_id);
		}
	}
	else
	{
		stock_bind_line(&args, &reserve_line_probe, r, key, fp);
		hc_bind(&args, "part", Int16GetDatum(home));
		if (!hc_try_in_subxact(call, stock_try_line, &t))
		{
			stock_bind_line(&args, &reserve_line, r, key, fp);
			hc_bind(&args, "part", Int16GetDatum(home));
			if (!hc_try_in_subxact(call, stock_try_line, &t))
				return false;
		}
	}
	hc_home_part_set(product_id, t.part);
	return true;
}

/*
 * Everything a new order must know, in one read: the reservation its key
 * already made, and for each line the product's numbers and, only where too
 * little is free, the units that expired lines still hold (as many as one
 * call may reclaim, of orders of one product and of lines of orders of
 * several: at most twice what a reclaim frees, which takes the oldest of
 * both).  :products sorted, :quantities beside them.
 */
static HcStatement read_order = {
	"WITH " HC_KNOWN_KEY
	" SELECT p.product_id, i.parts, i.stock, i.reserved,"
	"        CASE WHEN i.stock" MINUS "i.reserved" LT "p.qty THEN"
	"          (SELECT COALESCE(pg_catalog.sum(x.qty), 0)"
	"             FROM (SELECT o.qty FROM hc_stock_orders o"
	"                    WHERE o.scope_id" EQ "p.product_id" " AND o.qty IS NOT NULL"
	"                      AND o.status" EQ "'RESERVED'" " AND o.expires_at" LE ":now"
	"                    ORDER BY o.expires_at LIMIT " CppAsString2(STOCK_RECLAIM_MAX_LINES) ") x)"
	"          " PLUS
	"          (SELECT COALESCE(pg_catalog.sum(x.qty), 0)"
	"             FROM (SELECT l.qty FROM hc_stock_order_lines l"
	"                    WHERE l.product_id" EQ "p.product_id"
	"                      AND l.status" EQ "'RESERVED'" " AND l.expires_at" LE ":now"
	"                    ORDER BY l.expires_at LIMIT " CppAsString2(STOCK_RECLAIM_MAX_LINES) ") x)"
	"        END AS expired_units, "
	HC_KNOWN_KEY_COLUMNS
	"   FROM ROWS FROM (pg_catalog.unnest(:products), pg_catalog.unnest(:quantities))"
	"        WITH ORDINALITY AS p (product_id, qty, n)"
	"   CROSS JOIN LATERAL ("
	"     SELECT pg_catalog.count(*)::pg_catalog.int4 AS parts,"
	"            pg_catalog.sum(s.stock)::pg_catalog.int4 AS stock,"
	"            pg_catalog.sum(s.reserved)::pg_catalog.int4 AS reserved"
	"       FROM hc_stock_parts s WHERE s.product_id" EQ "p.product_id) i"
	"   LEFT JOIN known k ON true"
	"  ORDER BY p.n",
	{{"products", TEXTARRAYOID}, {"quantities", INT4ARRAYOID}, HC_KNOWN_KEY_PARAMS,
	 {"now", TIMESTAMPTZOID}}
};

/*
 * The order of several products and its lines; the first of :products is
 * its scope.
 */
static HcStatement insert_order = {
	"WITH r AS ("
	"  INSERT INTO hc_stock_orders"
	"    (scope_id, id, buyer_id, idempotency_key, fingerprint, status, expires_at, created_at,"
	"     products)"
	"  VALUES ((:products)[1], :reservation_id, :buyer_id, :key, :fingerprint, 'RESERVED',"
	"          :expires_at, :now, :products))"
	" INSERT INTO hc_stock_order_lines"
	"   (product_id, reservation_id, qty, status, expires_at, buyer_id, part, scope_id)"
	" SELECT p, :reservation_id, q, 'RESERVED', :expires_at, :buyer_id, t, (:products)[1]"
	"   FROM ROWS FROM (pg_catalog.unnest(:products), pg_catalog.unnest(:quantities),"
	"                   pg_catalog.unnest(:parts)) AS u (p, q, t)",
	{{"products", TEXTARRAYOID}, {"quantities", INT4ARRAYOID}, {"parts", INT2ARRAYOID},
	 {"reservation_id", TEXTOID},
	 {"buyer_id", TEXTOID}, {"key", TEXTOID}, {"fingerprint", BYTEAOID},
	 {"expires_at", TIMESTAMPTZOID}, {"now", TIMESTAMPTZOID}}
};

/* An order of one product, its own line, counted in the part given (:parts). */
static HcStatement insert_single = {
	"INSERT INTO hc_stock_orders"
	"  (scope_id, id, buyer_id, idempotency_key, fingerprint, status, expires_at, created_at,"
	"   qty, part)"
	" VALUES ((:products)[1], :reservation_id, :buyer_id, :key, :fingerprint, 'RESERVED',"
	"         :expires_at, :now, (:quantities)[1], (:parts)[1])",
	{{"products", TEXTARRAYOID}, {"quantities", INT4ARRAYOID}, {"parts", INT2ARRAYOID},
	 {"reservation_id", TEXTOID},
	 {"buyer_id", TEXTOID}, {"key", TEXTOID}, {"fingerprint", BYTEAOID},
	 {"expires_at", TIMESTAMPTZOID}, {"now", TIMESTAMPTZOID}}
};

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
	HcArgs		args;
	bool		tried = false;
	int			i;

	hc_call_begin_keyed(&call, fcinfo, function);
	hc_require_sql_at_least("0.4.0", call.function);
	if (n == 1)
		HC_ROUTE(&call, fcinfo, lines[0].product_id);
	hc_fingerprint_init(&fp, function);
	hc_fingerprint_add(&fp, buyer_id);
	hc_fingerprint_add_int64(&fp, ttl);
	for (i = 0; i < n; i++)
	{
		hc_fingerprint_add(&fp, lines[i].product_id);
		hc_fingerprint_add_int64(&fp, lines[i].qty);
	}

	r.buyer_id = buyer_id;
	r.status = "RESERVED";
	r.created_at = call.now;
	r.expires_at = call.now + ttl;
	r.lines = lines;
	r.nlines = n;
	r.single = n == 1;
	if (n > 1 && hc_distributed(&call))
	{
		hc_stock_orders()->reserve(&call, &r, key, &fp, ttl);
		hc_call_end(&call);
		return hc_stock_result(fcinfo, &r);
	}
	if (n == 1 && call.scope == NULL && !hc_distributed(&call))
	{
		if (stock_reserve_line(&call, &r, key, &fp, ttl))
		{
			hc_call_end(&call);
			return hc_stock_result(fcinfo, &r);
		}
		tried = true;
	}

	hc_args(&args, &read_order);
	hc_stock_bind_lines(&args, lines, n, false);
	hc_bind_text(&args, "key", key);
	if (hc_idempotency_run(&call, &args, n, key, &fp, &known))
	{
		/* The stored response: the reservation as this request made it. */
		r.id = known.id;
		r.created_at = known.created_at;
		r.expires_at = known.created_at + ttl;
		r.replayed = true;
		hc_call_end(&call);
		return hc_stock_result(fcinfo, &r);
	}

	/* Existence first, for every line; then stock, from this read alone. */
	for (i = 0; i < n; i++)
	{
		bool		isnull;

		(void) hc_datum(i, "stock", &isnull);
		if (isnull)
			hc_product_not_found(lines[i].product_id);
	}
	for (i = 0; i < n; i++)
	{
		int32		stock = hc_int32(i, "stock");
		int32		reserved = hc_int32(i, "reserved");
		bool		isnull;
		Datum		expired = hc_datum(i, "expired_units", &isnull);

		if (!isnull && (int64) stock - reserved + DatumGetInt64(expired) < lines[i].qty)
			hc_stock_insufficient(lines[i].product_id, lines[i].qty, stock, reserved);
		/* A product of several parts: the backend's own part first, to spread the callers. */
		lines[i].parts = hc_int32(i, "parts");
		lines[i].part = 0;
		if (lines[i].parts > 1 &&
			(!hc_home_part_get(lines[i].product_id, &lines[i].part) || lines[i].part >= lines[i].parts))
			lines[i].part = (int16) (MyProcPid % lines[i].parts);
	}

	r.id = hc_new_reservation_id(call.now);
	hc_args(&args, n == 1 ? &insert_single : &insert_order);
	hc_stock_bind_lines(&args, lines, n, true);
	hc_bind_text(&args, "reservation_id", r.id);
	hc_bind_text(&args, "buyer_id", buyer_id);
	hc_bind_text(&args, "key", key);
	hc_bind(&args, "fingerprint", PointerGetDatum(hc_fingerprint_digest(&fp)));
	hc_bind(&args, "expires_at", TimestampTzGetDatum(r.expires_at));
	if (hc_run(&call, &args, SPI_OK_INSERT) != (uint64) n)
		elog(ERROR, "could not insert the lines of reservation \"%s\"", r.id);

	for (i = 0; i < n; i++)
	{
		int16		part = lines[i].part;
		int32		stock;
		int32		reserved;

		if (!hc_stock_take(&call, lines[i].product_id, lines[i].parts, tried, &part, lines[i].qty,
						r.id, buyer_id, &stock, &reserved))
			hc_stock_insufficient(lines[i].product_id, lines[i].qty, stock, reserved);
		if (part != lines[i].part)
			hc_stock_count_line_in(&call, lines[i].product_id, r.id, part, r.single);
		if (lines[i].parts > 1)
			hc_home_part_set(lines[i].product_id, part);
		else
			hc_home_part_forget(lines[i].product_id);
	}
	hc_call_end(&call);
	return hc_stock_result(fcinfo, &r);
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
	StockLine  *lines = hc_stock_parse_items(fcinfo, 0, &n);
	char	   *buyer_id = hc_arg_id(fcinfo, 1, "buyer_id");
	char	   *key = hc_arg_key(fcinfo, 2, "idempotency_key");
	int64		ttl = hc_arg_ttl(fcinfo, 3, "ttl");

	PG_RETURN_DATUM(stock_reserve(fcinfo, "hc_reserve_items", lines, n, buyer_id, key, ttl));
}
