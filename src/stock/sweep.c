/*
 * sweep.c
 *		Reclaim of expired stock lines: inline, by a call that finds too
 *		little free (parts.c) or changes a product's stock (admin.c), and
 *		by the sweeper (hc_stock_sweep), which also ends the orders that
 *		reclaims left RESERVED.
 *
 * Invariants:
 *   1. A reclaim expires only lines counted in parts the caller has locked,
 *      each once (its own status is checked), with its ledger row.
 *   2. It never waits: a line or a reservation row that another transaction
 *      has locked is skipped, not waited for (stock.h's 4).
 *   3. A call reclaims at most STOCK_RECLAIM_MAX_LINES lines, just enough
 *      for the units it wants, so that no caller pays for a backlog the
 *      sweeper should clear.
 *   4. The sweeper never waits on a live call: it takes a part only if
 *      nobody has it (HC_FETCH_SKIP_NOWAIT), and leaves the lines of the
 *      others to the next run.
 *   5. Each batch starts where the last one stopped: products in lock
 *      order, within a product its lines by expiry.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/array.h"

#include "common/ledger.h"
#include "common/notify.h"
#include "common/sweep.h"
#include "core/fetch.h"
#include "core/version.h"
#include "stock/stock.h"

/*
 * Reclaim, in one statement, the oldest expired lines of a product counted
 * in the parts we have locked (:parts, or all of them if NULL), from
 * :lines_from on: just enough of them to free :wanted units, and never more
 * than STOCK_RECLAIM_MAX_LINES lines, so that no caller pays for a backlog
 * the sweeper should clear.  A line is an order of one product (its own
 * line, stock.h's 2) or a line of an order of several.  A line another
 * transaction has locked (an unreserve or a finalize of its order, which
 * waits for a part we hold) is skipped, not waited for: waiting would close
 * a cycle (load/stock saw a 40P01 once, its machine loaded).  Each line stops
 * counting once (its own status is checked), gets its ledger row (:event
 * from :source), and its reservation becomes EXPIRED: an order of one
 * product with its line, an order of several unless another transaction
 * has its row locked.  Returns the units freed, the lines expired, the
 * newest expires_at among them (a caller that goes on reclaiming starts
 * there) and the reservations ended, or no row.
 *
 * No join here depends on the planner's estimates (doc/architecture.md,
 * "Plan policy"):
 * - the oldest lines of each table come in its expiry index's own order
 *   (product, expires_at), so each walk stops after the lines it takes;
 *   the two sorted together and the tie-break by reservation_id sort those
 *   lines only;
 * - the lines of each table change in one scan of the same index, from
 *   :lines_from to the newest of doomed (doomed's lines and their ties,
 *   nothing else), each tested against doomed by an uncorrelated IN kept
 *   out of the join tree (IS TRUE): PostgreSQL hashes such a subquery
 *   whenever its rows fit in memory, and doomed's at most
 *   STOCK_RECLAIM_MAX_LINES always do;
 * - each order of several products is locked by a lateral lookup by id (its
 *   status tested IS NOT DISTINCT FROM, which no index serves, so that a
 *   partial expiry index of RESERVED orders cannot serve the lookup
 *   instead), then changed through its primary key;
 * - the ledger rows join expired to moved, which holds one row per part of
 *   the product at most, so that join is linear whichever way it runs.
 */
#define RECLAIM_OLDEST(table, product, id, line) \
	"  SELECT " id " AS reservation_id, qty, expires_at FROM " table \
	"   WHERE " product EQ ":product_id" line " AND status" EQ "'RESERVED'" \
	"     AND expires_at" LE ":now" " AND expires_at" GE ":lines_from" \
	"     AND (:parts IS NULL OR part" EQ "ANY (:parts))" \
	"   ORDER BY expires_at" \
	"   LIMIT " CppAsString2(STOCK_RECLAIM_MAX_LINES) \
	"     FOR NO KEY UPDATE SKIP LOCKED"
#define RECLAIM_EXPIRE(product, id, line, single) \
	"   WHERE l." product EQ ":product_id" line " AND l.status" EQ "'RESERVED'" \
	"     AND l.expires_at" GE ":lines_from" \
	"     AND l.expires_at" LE "(SELECT pg_catalog.max(expires_at) FROM doomed WHERE " single ")" \
	"     AND (l." id EQ "ANY (SELECT reservation_id FROM doomed WHERE " single ")) IS TRUE" \
	"  RETURNING l." id " AS reservation_id, l.qty, l.buyer_id, l.expires_at, l.part"
static HcStatement reclaim_lines = {
	"WITH oldest_orders AS ("
	RECLAIM_OLDEST("hc_stock_orders", "scope_id", "id", " AND qty IS NOT NULL") "),"
	" oldest_lines AS ("
	RECLAIM_OLDEST("hc_stock_order_lines", "product_id", "reservation_id", "") "),"
	" doomed AS ("
	"  SELECT reservation_id, expires_at, single FROM ("
	"    SELECT reservation_id, qty, expires_at, single,"
	"           pg_catalog.sum(qty) OVER w AS running, pg_catalog.row_number() OVER w AS n"
	"      FROM (SELECT *, true AS single FROM oldest_orders"
	"            UNION ALL SELECT *, false FROM oldest_lines) o"
	"    WINDOW w AS (ORDER BY expires_at, reservation_id)) s"
	"   WHERE running" MINUS "qty" LT ":wanted"
	"     AND n" LE CppAsString2(STOCK_RECLAIM_MAX_LINES) "),"
	" expired_orders AS ("
	"  UPDATE hc_stock_orders l SET status = 'EXPIRED', ended_at = :now"
	RECLAIM_EXPIRE("scope_id", "id", " AND l.qty IS NOT NULL", "single") "),"
	" expired_lines AS ("
	"  UPDATE hc_stock_order_lines l SET status = 'EXPIRED'"
	RECLAIM_EXPIRE("product_id", "reservation_id", "", "NOT single") "),"
	" expired AS ("
	"  SELECT * FROM expired_orders UNION ALL SELECT * FROM expired_lines),"
	" moved AS ("
	"  UPDATE hc_stock_parts i"
	"     SET reserved = i.reserved" MINUS "t.total, version = i.version" PLUS "t.n,"
	"         updated_at = :now"
	"    FROM (SELECT part, pg_catalog.sum(qty)::pg_catalog.int4 AS total,"
	"                 pg_catalog.count(*)::pg_catalog.int4 AS n FROM expired GROUP BY part) t"
	"   WHERE i.product_id" EQ ":product_id" " AND i.part" EQ "t.part"
	"  RETURNING i.part, i.version, t.total, t.n),"
	" logged AS ("
	HC_LEDGER_ROWS("'product'", ":product_id", PART_SEQ("m.part", "m.version" MINUS "m.n" PLUS "e.k"),
				   ":event", ":source", "e.reservation_id", "e.buyer_id", MINUS "e.qty",
				   "0", "NULL")
	"    FROM moved m,"
	"         (SELECT *, pg_catalog.row_number() OVER (PARTITION BY part) AS k FROM expired) e"
	"   WHERE e.part" EQ "m.part),"
	" ended AS ("
	"  UPDATE hc_stock_orders o SET status = 'EXPIRED', ended_at = :now"
	"    FROM expired_lines e"
	"   CROSS JOIN LATERAL ("
	"     SELECT r.id FROM hc_stock_orders r"
	"      WHERE r.id" EQ "e.reservation_id" " AND r.status IS NOT DISTINCT FROM 'RESERVED'"
	"        FOR NO KEY UPDATE SKIP LOCKED) r"
	"   WHERE o.id" EQ "r.id"
	"  RETURNING o.id)"
	" SELECT pg_catalog.sum(total)::pg_catalog.int4 AS units, pg_catalog.sum(n)::pg_catalog.int4 AS lines,"
	"        (SELECT pg_catalog.max(expires_at) FROM expired) AS last,"
	"        (SELECT pg_catalog.count(*) FROM ended)" PLUS "(SELECT pg_catalog.count(*) FROM expired_orders)"
	"          AS ended"
	"   FROM moved HAVING pg_catalog.count(*)" GT "0",
	{{"product_id", TEXTOID}, {"wanted", INT8OID}, {"lines_from", TIMESTAMPTZOID},
	 {"parts", INT2ARRAYOID}, {"event", TEXTOID}, {"source", TEXTOID}, HC_LEDGER_PARAMS}
};

/*
 * Reclaim expired lines of a product counted in the parts we have locked
 * (parts, an int2[]; (Datum) 0: all of them), from lines_from on
 * (DT_NOBEGIN: all), enough to free needed units if there are that many (at
 * most STOCK_RECLAIM_MAX_LINES lines), with ledger event and source as
 * given.  Returns the units freed, and what it did in *done.
 */
int64
hc_stock_reclaim_as(HcCall *call, const char *product_id, Datum parts, int64 needed,
				 TimestampTz lines_from, const char *event, const char *source,
				 StockReclaimed *done)
{
	HcArgs		args;

	hc_args(&args, &reclaim_lines);
	hc_bind_text(&args, "product_id", product_id);
	hc_bind(&args, "wanted", Int64GetDatum(needed));
	hc_bind(&args, "lines_from", TimestampTzGetDatum(lines_from));
	if (parts != (Datum) 0)
		hc_bind(&args, "parts", parts);
	else
		hc_bind_null(&args, "parts");
	hc_bind_text(&args, "event", event);
	hc_bind_text(&args, "source", source);
	memset(done, 0, sizeof(*done));
	if (hc_run(call, &args, SPI_OK_SELECT) == 0)
		return 0;
	done->units = hc_int32(0, "units");
	done->ended = hc_int64(0, "ended");
	done->lines = hc_int32(0, "lines");
	done->last = hc_timestamptz(0, "last");
	return done->units;
}

/* A call's inline reclaim, every part of the product locked: the units freed. */
int64
hc_stock_reclaim(HcCall *call, const char *product_id, int64 needed)
{
	StockReclaimed done;

	return hc_stock_reclaim_as(call, product_id, (Datum) 0, needed, DT_NOBEGIN, "reclaim", "reclaim",
							&done);
}

/*
 * The same for the sweeper, unless another transaction has the row, and
 * never waiting on an update chain (fetch.c): a call holding the part may be
 * waiting for an order that this sweep holds.
 */
static HcFetch sweep_part = {"hc_stock_parts", "product_id", HC_FETCH_SKIP_NOWAIT, 1, {"reserved"},
	"part"};

/*
 * The sweeper's work: products with expired lines that still count, in
 * lock order (bytewise), from :from on; the look at :from's own lines
 * starts at :lines_from, where the last batch stopped in them.  No index
 * keeps products in byte order, so the products not before :from that
 * have anything reserved (any with expired lines that still count do) are
 * sorted first, and only then probed in that order, one index probe of
 * the expiry entries of each table of lines (orders of one product, then
 * lines of orders of several, each a scalar subquery, whatever the
 * planner estimates), until the batch is full: each product is probed
 * once per sweep, not once per batch.  OFFSET 0 keeps the probe above the
 * sort, and the outer ORDER BY is the sort's own, so it adds none.
 */
#define EXPIRED_PROBE(table, product) \
	"(SELECT true FROM " table " l" \
	"  WHERE l." product EQ "i.product_id" " AND l.status" EQ "'RESERVED'" \
	"    AND l.expires_at" LE ":now" \
	"    AND l.expires_at" GE "CASE WHEN i.product_id" EQ ":from" " THEN :lines_from" \
	"                              ELSE '-infinity'::pg_catalog.timestamptz END"
static HcStatement expired_products = {
	"SELECT i.product_id, i.parts FROM ("
	"   SELECT product_id, product_id COLLATE \"C\" AS bytes,"
	"          pg_catalog.count(*)::pg_catalog.int4 AS parts FROM hc_stock_parts"
	"    WHERE product_id COLLATE \"C\"" GE ":from"
	"    GROUP BY product_id HAVING pg_catalog.sum(reserved)" GT "0"
	"    ORDER BY 2 OFFSET 0) i"
	" WHERE COALESCE(" EXPIRED_PROBE("hc_stock_orders", "scope_id") " AND l.qty IS NOT NULL LIMIT 1),"
	"                " EXPIRED_PROBE("hc_stock_order_lines", "product_id") " LIMIT 1))"
	" ORDER BY i.bytes LIMIT :batch_size",
	{{"from", TEXTOID}, {"lines_from", TIMESTAMPTZOID}, {"batch_size", INT4OID},
	 {"now", TIMESTAMPTZOID}}
};

/*
 * The sweeper's stock lines (hc_stock_sweep): the expired lines of up to
 * batch_size products, one product at a time in product order from where
 * the last batch stopped, each under its row lock and skipped if a live
 * call has the row (its lines are left to the next run); at most
 * STOCK_RECLAIM_MAX_LINES lines a product, each once, with source 'sweep'
 * in the ledger.  The next batch starts at the first product that may have
 * more (it had that many), in its lines where this batch stopped; else at
 * the last product of this one.  A batch that found fewer than batch_size
 * products, none of them with more, was the last.
 */
static void
stock_sweep_lines(HcCall *call, int batch_size, HcSweepCounts *counts)
{
	HcArgs		args;
	uint64		n;
	uint64		i;
	char	  **products;
	int32	   *nparts;
	int64		more = -1;		/* the first product that may have more lines */
	TimestampTz more_from = DT_NOBEGIN;

	hc_args(&args, &expired_products);
	hc_bind_text(&args, "from", counts->products_from);
	hc_bind(&args, "lines_from", TimestampTzGetDatum(hc_sweep_from(&counts->lines)));
	hc_bind(&args, "batch_size", Int32GetDatum(batch_size));
	n = hc_run(call, &args, SPI_OK_SELECT);
	products = palloc(sizeof(char *) * (n + 1));
	nparts = palloc(sizeof(int32) * (n + 1));
	for (i = 0; i < n; i++)
	{
		products[i] = hc_text(call, (int) i, "product_id");
		nparts[i] = hc_int32((int) i, "parts");
	}
	for (i = 0; i < n; i++)
	{
		int16	   *held = palloc(sizeof(int16) * nparts[i]);
		int			nheld = 0;
		int16		part;
		int64		reclaimed;
		StockReclaimed done;
		TimestampTz lines_from = DT_NOBEGIN;

		/* The parts nobody has: the lines of the others wait for the next run. */
		for (part = 0; part < nparts[i]; part++)
		{
			Datum		reserved;
			bool		isnull;

			if (hc_fetch_part(call, &sweep_part, products[i], part, &reserved, &isnull))
				held[nheld++] = part;
		}
		if (nheld == 0)
			continue;
		if (counts->lines.resumed && strcmp(products[i], counts->products_from) == 0)
			lines_from = counts->lines.at;
		/* Its ledger rows are the product's (on Citus, of its routing id). */
		call->routing_id = products[i];
		reclaimed = hc_stock_reclaim_as(call, products[i], hc_stock_parts_array(held, nheld),
										PG_INT64_MAX, lines_from, "expire", "sweep", &done);
		call->routing_id = NULL;
		if (reclaimed == 0)
			continue;
		if (done.lines >= STOCK_RECLAIM_MAX_LINES && more < 0)
		{
			more = (int64) i;
			more_from = done.last;
		}
		counts->released_units += done.units;
		counts->expired_reservations += done.ended;
		hc_notify("product", products[i], "AVAILABLE");
	}

	counts->lines.resumed = false;
	if (more >= 0)
	{
		strlcpy(counts->products_from, products[more], sizeof(counts->products_from));
		/* an id longer than the buffer starts at its prefix, without resuming its lines */
		counts->lines.resumed = strcmp(counts->products_from, products[more]) == 0;
		counts->lines.at = more_from;
	}
	else if (n < (uint64) batch_size)
		counts->lines_done = true;
	else
		strlcpy(counts->products_from, products[n - 1], sizeof(counts->products_from));
}

/*
 * Expired orders of several products still RESERVED although none of their
 * lines counts any more (a reclaimer expired the lines but skipped the
 * order's locked row; an order of one product is its own line and ends
 * with it): they end as EXPIRED, oldest first from :from on.  Whether an order still
 * has a counted line is a look at all its lines (a scalar subquery: one
 * probe of the lines' reservation index per order walked, never a join of
 * all orders with all lines).  The probe asks for nothing but the
 * reservation, so that no other index can serve it: a condition on the
 * line's status would let the planner walk the whole expiry index of
 * RESERVED lines for every order instead.  The UPDATE tests the order's
 * status IS NOT DISTINCT FROM for the same reason.  Returns each one's
 * expires_at (the next batch starts at the newest).
 */
static HcStatement end_orders = {
	"WITH doomed AS ("
	"  SELECT r.id, r.expires_at FROM hc_stock_orders r"
	"   WHERE r.status" EQ "'RESERVED'" " AND r.qty IS NULL AND r.expires_at" LE ":now"
	"     AND r.expires_at" GE ":from"
	"     AND (SELECT pg_catalog.bool_or(l.status" EQ "'RESERVED')"
	"            FROM hc_stock_order_lines l WHERE l.reservation_id" EQ "r.id) IS NOT TRUE"
	"   ORDER BY r.expires_at LIMIT :batch_size"
	"     FOR NO KEY UPDATE SKIP LOCKED)"
	" UPDATE hc_stock_orders r SET status = 'EXPIRED', ended_at = :now"
	"   FROM doomed d"
	"  WHERE r.id" EQ "d.id"
	"    AND r.status IS NOT DISTINCT FROM 'RESERVED'"
	" RETURNING d.expires_at",
	{{"from", TIMESTAMPTZOID}, {"batch_size", INT4OID}, {"now", TIMESTAMPTZOID}}
};

/*
 * The sweeper's orders left RESERVED (hc_stock_sweep): up to batch_size of
 * them, oldest first from where the last batch stopped.  A batch that ended
 * fewer than batch_size was the last.
 */
static void
stock_sweep_orders(HcCall *call, int batch_size, HcSweepCounts *counts)
{
	uint64		n;

	n = hc_sweep_run(call, &end_orders, "from", &counts->orders, batch_size,
					 SPI_OK_UPDATE_RETURNING);
	counts->expired_reservations += (int64) n;
	if (n < (uint64) batch_size)
		counts->orders_done = true;
}

/*
 * The sweeper's part for stock (sweep.c): a batch of expired stock lines,
 * and once none are left, a batch of the expired orders that were left
 * RESERVED (the lines' reclaims end most orders themselves).
 */
void
hc_stock_sweep(HcCall *call, int batch_size, HcSweepCounts *counts)
{
	/* A database still on 0.2.0 or 0.3.0 SQL keeps its expired stock until the update. */
	if (!hc_sql_at_least("0.4.0"))
	{
		counts->lines_done = counts->orders_done = true;
		return;
	}
	if (!counts->lines_done)
		stock_sweep_lines(call, batch_size, counts);
	if (counts->lines_done && !counts->orders_done)
		stock_sweep_orders(call, batch_size, counts);
}
