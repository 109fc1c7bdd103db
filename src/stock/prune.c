/*
 * prune.c
 *		Bounded history for stock: finished orders that ended before the
 *		horizon (holdcommit.history_retention) leave the tables with their
 *		lines, and their products' ledger rows are carried forward into one
 *		row per part (admin/sweep.c runs it).
 *
 * Invariants:
 *   1. Only an order that has ended (FINALIZED, RELEASED or EXPIRED), whose
 *      every line has ended too and whose key is forgotten is pruned, with
 *      its lines, in one statement: a key outlives its reservation, or a
 *      retry would make a second sale.
 *   2. A product's ledger rows of orders that no longer exist are replaced
 *      by a carry row of their part (event 'carry', no reservation; more
 *      than one only past 2^30 units: carry_part), with their summed deltas,
 *      at the highest seq among them.  So hc_check()'s
 *      sums per product still add up, each part's last seq is unchanged (a
 *      part spread again goes on from it, stock/admin.c), and no line is
 *      left with part of its rows (its line and order went first).  The
 *      rows a product's stock was set, adjusted or spread with stay.
 *   3. Neither step waits on a live call: orders and lines another
 *      transaction has locked are skipped, and live calls only ever append
 *      to the ledger.  One sweep of a database prunes and carries at a time
 *      (admin/sweep.c): no two wait for each other.
 *   4. The products due are kept in hc_stock_carries, marked by the
 *      statement that prunes their orders: a carry cut short (a batch's
 *      budget, a time slice, an error) is never lost.  Each part's walk
 *      starts where the last one stopped, so none walks again over rows an
 *      earlier one passed, and a batch walks a bounded number of rows.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/array.h"

#include "common/ledger.h"
#include "common/sweep.h"
#include "stock/stock.h"

/*
 * Up to :batch_size finished orders that ended before :horizon, from
 * :resume_from on, by the index of finished orders (the key tested with
 * num_nulls(), which only that index serves, as for holds): each locked
 * (SKIP LOCKED) with its lines, deleted if every line it has was locked and
 * has ended; their products are marked due for a carry (hc_stock_carries).  Lines are reached by their reservation index in a subquery run
 * once per order, rows deleted by the ctids just locked: no plan depends
 * on estimates.  Returns the counts.
 */
#define PRUNABLE(o) \
	"pg_catalog.num_nulls(" o ".idempotency_key)" EQ "1 AND " o ".status" NE "'RESERVED'" \
	" AND " o ".ended_at" LT ":horizon"
static HcStatement prune_orders = {
	"WITH candidates AS ("
	"  SELECT o.ctid AS tid, o.id, o.scope_id, o.products, o.qty, o.ended_at"
	"    FROM hc_stock_orders o"
	"   WHERE " PRUNABLE("o") " AND o.ended_at" GE ":resume_from"
	"   ORDER BY o.ended_at LIMIT :batch_size"
	"     FOR UPDATE SKIP LOCKED),"
	" lines AS ("
	"  SELECT l.tid, l.reservation_id, l.status"
	"    FROM candidates c"
	"   CROSS JOIN LATERAL ("
	"     SELECT l.ctid AS tid, l.reservation_id, l.status FROM hc_stock_order_lines l"
	"      WHERE l.reservation_id" EQ "c.id OFFSET 0 FOR UPDATE SKIP LOCKED) l"
	"   WHERE c.qty IS NULL),"
	" ended_lines AS ("
	"  SELECT reservation_id, pg_catalog.count(*) AS n FROM lines"
	"   WHERE status" NE "'RESERVED' GROUP BY reservation_id),"
	" whole AS ("
	"  SELECT c.tid, c.id, COALESCE(c.products, ARRAY[c.scope_id]) AS products"
	"    FROM candidates c LEFT JOIN ended_lines e ON e.reservation_id" EQ "c.id"
	"   WHERE c.qty IS NOT NULL OR e.n" EQ "pg_catalog.cardinality(c.products)),"
	" gone_orders AS ("
	"  DELETE FROM hc_stock_orders o WHERE o.ctid" EQ "ANY (ARRAY(SELECT tid FROM whole))"
	"  RETURNING o.id),"
	" marked AS ("
	"  INSERT INTO hc_stock_carries AS c (product_id)"
	"  SELECT DISTINCT pg_catalog.unnest(products) AS product_id FROM whole ORDER BY 1"
	"  ON CONFLICT (product_id) DO UPDATE SET due = true WHERE NOT c.due),"
	" gone_lines AS ("
	"  DELETE FROM hc_stock_order_lines l WHERE l.ctid" EQ "ANY (ARRAY("
	"    SELECT tid FROM lines WHERE (reservation_id" EQ "ANY (SELECT id FROM whole)) IS TRUE))"
	"  RETURNING 1)"
	" SELECT (SELECT pg_catalog.count(*) FROM gone_orders) AS pruned,"
	"        (SELECT pg_catalog.count(*) FROM gone_lines) AS lines,"
	"        (SELECT pg_catalog.count(*) FROM candidates) AS walked,"
	"        (SELECT pg_catalog.max(ended_at) FROM candidates) AS last",
	{{"horizon", TIMESTAMPTZOID}, {"resume_from", TIMESTAMPTZOID}, {"batch_size", INT4OID}}
};

/*
 * The parts a product's ledger has rows of (a part merged away keeps its
 * rows): one probe of the ledger's key per part.
 */
static HcStatement ledger_parts = {
	"WITH RECURSIVE p AS ("
	"  SELECT (SELECT g.seq FROM hc_ledger g"
	"           WHERE g.kind" EQ "'product' AND g.entity_id" EQ ":product_id"
	"           ORDER BY g.seq LIMIT 1) AS seq"
	"  UNION ALL"
	"  SELECT (SELECT g.seq FROM hc_ledger g"
	"           WHERE g.kind" EQ "'product' AND g.entity_id" EQ ":product_id"
	"             AND g.seq" GE "(((p.seq" DIVIDE "281474976710656)" PLUS "1)" TIMES "281474976710656)"
	"           ORDER BY g.seq LIMIT 1)"
	"    FROM p WHERE p.seq IS NOT NULL)"
	" SELECT (seq" DIVIDE "281474976710656)::pg_catalog.int4 AS part FROM p WHERE seq IS NOT NULL",
	{{"product_id", TEXTOID}}
};

/*
 * Carry a part's rows forward: its first :walk_size rows from :from on
 * that belong to an order or are a carry not yet full, in seq order; those
 * of orders that no longer exist, with the carries among them, replaced by
 * carry rows if there is any such order row.  A row's units are its
 * |stock_delta| + |reserved_delta|.  A carry holds the sums of a run of
 * rows whose running units stay within one band of 2^30, a row of 2^30
 * units or more stands alone, and a carry of 2^30 units or more is full,
 * never merged again: so no sum leaves int4, however much a part sells
 * over the years (a merge of parts leaves a part's reserve rows without
 * their release, so reserved is bounded by the same units, not by stock).  Its detail counts the
 * rows it stands for and the time they span.  Returns the rows walked, the
 * last seq walked, the first of an order that still exists, the first
 * carry written, and the order rows carried.
 */
#define CARRY_FULL "1073741824"
#define CARRY_UNITS(g) \
	"(pg_catalog.abs(" g ".stock_delta::pg_catalog.int8)" \
	PLUS "pg_catalog.abs(" g ".reserved_delta::pg_catalog.int8))"
static HcStatement carry_part = {
	"WITH walk AS ("
	"  SELECT w.tid, w.seq, w.reservation_id,"
	"         w.reservation_id IS NULL"
	"         OR (SELECT pg_catalog.count(*) FROM hc_stock_orders o"
	"              WHERE o.id" EQ "w.reservation_id)" EQ "0 AS orphan"
	"    FROM (SELECT g.ctid AS tid, g.seq, g.reservation_id"
	"            FROM hc_ledger g"
	"           WHERE g.kind" EQ "'product' AND g.entity_id" EQ ":product_id"
	"             AND g.seq" GE ":from" " AND g.seq" LT ":part_end"
	"             AND (g.reservation_id IS NOT NULL"
	"                  OR (g.event" EQ "'carry' AND " CARRY_UNITS("g") LT CARRY_FULL "))"
	"           ORDER BY g.seq LIMIT :walk_size) w),"
	" gone AS ("
	"  DELETE FROM hc_ledger g WHERE g.ctid" EQ "ANY (ARRAY("
	"    SELECT tid FROM walk"
	"     WHERE orphan AND EXISTS (SELECT FROM walk WHERE orphan AND reservation_id IS NOT NULL)))"
	"  RETURNING g.seq, g.event, g.reserved_delta, g.stock_delta, g.at, g.detail),"
	" banded AS ("
	"  SELECT *, (pg_catalog.sum(" CARRY_UNITS("gone") ") OVER (ORDER BY seq))::pg_catalog.int8"
	"            " DIVIDE CARRY_FULL " AS band,"
	"         CASE WHEN " CARRY_UNITS("gone") GE CARRY_FULL " THEN seq END AS alone"
	"    FROM gone),"
	" carried AS ("
	"  INSERT INTO hc_ledger (kind, entity_id, seq, event, source, reservation_id, buyer_id,"
	"                         reserved_delta, stock_delta, detail, at, function, actor)"
	"  SELECT 'product', :product_id, pg_catalog.max(seq), 'carry', 'sweep', NULL, NULL,"
	"         pg_catalog.sum(reserved_delta)::pg_catalog.int4, pg_catalog.sum(stock_delta)::pg_catalog.int4,"
	"         pg_catalog.json_build_object("
	"           'rows', pg_catalog.sum(CASE WHEN event" EQ "'carry'"
	"                                       THEN (detail::pg_catalog.jsonb" FIELD "'rows')::pg_catalog.int8"
	"                                       ELSE 1 END),"
	"           'from', pg_catalog.min(CASE WHEN event" EQ "'carry'"
	"                                       THEN (detail::pg_catalog.jsonb" FIELD "'from')::pg_catalog.timestamptz"
	"                                       ELSE at END),"
	"           'to', pg_catalog.max(CASE WHEN event" EQ "'carry'"
	"                                     THEN (detail::pg_catalog.jsonb" FIELD "'to')::pg_catalog.timestamptz"
	"                                     ELSE at END))::pg_catalog.text,"
	"         :now, :function, :actor"
	"    FROM banded GROUP BY band, alone"
	"  RETURNING seq)"
	" SELECT (SELECT pg_catalog.count(*) FROM walk) AS walked,"
	"        (SELECT pg_catalog.max(seq) FROM walk) AS last,"
	"        (SELECT pg_catalog.min(seq) FROM walk WHERE NOT orphan) AS blocker,"
	"        (SELECT pg_catalog.min(seq) FROM carried) AS first_carry,"
	"        (SELECT pg_catalog.count(*) FROM gone WHERE event" NE "'carry') AS carried",
	{{"product_id", TEXTOID}, {"from", INT8OID}, {"part_end", INT8OID}, {"walk_size", INT4OID},
	 HC_LEDGER_PARAMS}
};

/*
 * Up to :limit products due for a carry after :after (in byte order: a
 * sweep goes on where its last batch stopped, never over the products it
 * has carried), each locked, with where each part's walk starts and the
 * part a carry cut short goes on from.
 */
static HcStatement due_products = {
	"SELECT product_id, parts_from, next_part FROM hc_stock_carries"
	" WHERE due AND product_id" GT ":after" " COLLATE \"C\""
	" ORDER BY product_id COLLATE \"C\" LIMIT :limit FOR UPDATE SKIP LOCKED",
	{{"limit", INT4OID}, {"after", TEXTOID}}
};

/* Where a product's walks start next time, and whether it is still due. */
static HcStatement carry_done = {
	"UPDATE hc_stock_carries SET due = :due, parts_from = :parts_from, next_part = :next_part,"
	"       carried_at = :now"
	" WHERE product_id" EQ ":product_id",
	{{"product_id", TEXTOID}, {"due", BOOLOID}, {"parts_from", INT8ARRAYOID},
	 {"next_part", INT2OID}, {"now", TIMESTAMPTZOID}}
};

/* The rows one walk reads: a batch, and never so few that carries alone fill it. */
#define CARRY_WALK(batch_size) Max((batch_size), 100)

/*
 * Carry a product's parts from *next_part on, each from where its last walk
 * stopped (a row of an order that still exists, or the carry it left, which
 * the next walk merges), while *budget has room for a walk (every row
 * walked counts).  A part is done when a walk meets a row of an order that
 * exists, or its end: the prune of that order marks the product due again.
 * Returns whether every part is done; otherwise *next_part is the part to
 * go on from, and each part's start is in parts_from.
 */
static bool
carry_product(HcCall *call, const char *product_id, int walk, int64 *budget,
			  int64 *parts_from, int16 *next_part, HcSweepCounts *counts)
{
	HcArgs		args;
	uint64		nparts;
	int32	   *parts;
	uint64		i;

	hc_args(&args, &ledger_parts);
	hc_bind_text(&args, "product_id", product_id);
	nparts = hc_run(call, &args, SPI_OK_SELECT);
	parts = palloc(sizeof(int32) * Max(nparts, 1));
	for (i = 0; i < nparts; i++)
		parts[i] = hc_int32((int) i, "part");

	for (i = 0; i < nparts; i++)
	{
		int32		part = parts[i];
		int64		from = Max(parts_from[part], (int64) part << 48);

		if (part < *next_part)
			continue;
		for (;;)
		{
			int64		walked;
			bool		no_blocker;
			bool		no_carry;
			int64		next;

			if (*budget < walk)
			{
				*next_part = (int16) part;
				return false;	/* another batch goes on from here */
			}
			hc_args(&args, &carry_part);
			hc_bind_text(&args, "product_id", product_id);
			hc_bind(&args, "from", Int64GetDatum(from));
			hc_bind(&args, "part_end", Int64GetDatum(((int64) part + 1) << 48));
			hc_bind(&args, "walk_size", Int32GetDatum(walk));
			hc_run(call, &args, SPI_OK_SELECT);
			walked = hc_int64(0, "walked");
			*budget -= walked;
			counts->carried_rows += hc_int64(0, "carried");
			(void) hc_datum(0, "blocker", &no_blocker);
			(void) hc_datum(0, "first_carry", &no_carry);
			/* Next: the first row of an order that exists, or the first carry written. */
			next = walked > 0 ? hc_int64(0, "last") + 1 : from;
			if (!no_carry)
				next = Min(next, hc_int64(0, "first_carry"));
			if (!no_blocker)
				next = Min(next, hc_int64(0, "blocker"));
			if (hc_int64(0, "carried") > 0)
				parts_from[part] = next;
			if (walked < walk || !no_blocker)
				break;
			/* A full walk without an order that exists: on past it (carries alone: past them). */
			from = hc_int64(0, "carried") > 0 ? next : hc_int64(0, "last") + 1;
			parts_from[part] = from;
			CHECK_FOR_INTERRUPTS();
		}
	}
	*next_part = 0;
	return true;
}

/*
 * One batch of finished orders ended before horizon; returns how many were
 * pruned.  Their products are marked due: carried by the next batch that
 * has nothing more to prune, of this sweep or a later one.
 */
int64
hc_stock_prune(HcCall *call, int batch_size, TimestampTz horizon, HcSweepCounts *counts)
{
	int64		pruned = hc_prune_run(call, &prune_orders, horizon, &counts->pruned_orders_from,
									  batch_size);

	counts->pruned_orders += pruned;
	return pruned;
}

/*
 * The carries of one batch: products due, after the last one this sweep
 * finished, walking at most CARRY_BATCHES_OF_ROWS walks' worth of their
 * rows; a product the budget cut short stays due, with the part and the
 * starts to go on from.  Returns how many products it took.
 */
#define CARRY_BATCHES_OF_ROWS 10
int64
hc_stock_carry(HcCall *call, int batch_size, HcSweepCounts *counts)
{
	HcArgs		args;
	uint64		n;
	uint64		i;
	char	  **products;
	int64	  **starts;
	int16	   *next_parts;
	int			walk = CARRY_WALK(batch_size);
	int64		budget = (int64) walk * CARRY_BATCHES_OF_ROWS;

	hc_args(&args, &due_products);
	hc_bind(&args, "limit", Int32GetDatum(batch_size));
	hc_bind_text(&args, "after", counts->carried_to);
	n = hc_run(call, &args, SPI_OK_SELECT);
	products = palloc(sizeof(char *) * Max(n, 1));
	starts = palloc(sizeof(int64 *) * Max(n, 1));
	next_parts = palloc(sizeof(int16) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		bool		isnull;
		Datum		d = hc_datum((int) i, "parts_from", &isnull);

		products[i] = hc_text(call, (int) i, "product_id");
		starts[i] = palloc0(sizeof(int64) * STOCK_MAX_PARTS);
		if (!isnull)
		{
			Datum	   *elems;
			int			nelems;
			int			k;

			deconstruct_array(DatumGetArrayTypeP(d), INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
							  &elems, NULL, &nelems);
			for (k = 0; k < Min(nelems, STOCK_MAX_PARTS); k++)
				starts[i][k] = DatumGetInt64(elems[k]);
		}
		next_parts[i] = DatumGetInt16(hc_datum((int) i, "next_part", &isnull));
	}
	for (i = 0; i < n; i++)
	{
		bool		done = false;
		Datum	   *elems = palloc(sizeof(Datum) * STOCK_MAX_PARTS);
		int			k;

		if (budget >= walk)
			done = carry_product(call, products[i], walk, &budget, starts[i], &next_parts[i], counts);
		for (k = 0; k < STOCK_MAX_PARTS; k++)
			elems[k] = Int64GetDatum(starts[i][k]);
		hc_args(&args, &carry_done);
		hc_bind_text(&args, "product_id", products[i]);
		hc_bind(&args, "due", BoolGetDatum(!done));
		hc_bind(&args, "parts_from", PointerGetDatum(construct_array(elems, STOCK_MAX_PARTS, INT8OID, 8,
																	  FLOAT8PASSBYVAL, TYPALIGN_DOUBLE)));
		hc_bind(&args, "next_part", Int16GetDatum(next_parts[i]));
		hc_run(call, &args, SPI_OK_UPDATE);
		if (!done)
			break;				/* the budget is spent: the rest wait for the next batch */
		strlcpy(counts->carried_to, products[i], sizeof(counts->carried_to));
	}
	return (int64) n;
}
