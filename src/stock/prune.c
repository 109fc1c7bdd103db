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
 *      by one carry row of their part (event 'carry', no reservation), with
 *      their summed deltas, at the highest seq among them.  So hc_check()'s
 *      sums per product still add up, each part's last seq is unchanged (a
 *      part spread again goes on from it, stock/admin.c), and no line is
 *      left with part of its rows (its line and order went first).  The
 *      rows a product's stock was set, adjusted or spread with stay.
 *   3. Neither step waits on a live call: orders and lines another
 *      transaction has locked are skipped; live calls only ever append to
 *      the ledger; two carries of one product at once meet at a lock the
 *      second does not wait for (it skips the product, left for the next
 *      sweep).
 *   4. A sweep carries each product once, at its end, however many of its
 *      batches pruned the product's orders (counts->carry_pending): so it
 *      never walks again over the rows it has carried, and runs a few
 *      statements per product, not per batch.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/hsearch.h"

#include "common/ledger.h"
#include "common/sweep.h"
#include "stock/stock.h"

/* Carries of a product's rows meet at an advisory lock with this in field 4. */
#define HC_CARRY_LOCK_SPACE	0x4844

/*
 * Up to :batch_size finished orders that ended before :horizon, from
 * :resume_from on, by the index of finished orders (the key tested with
 * num_nulls(), which only that index serves, as for holds): each locked
 * (SKIP LOCKED) with its lines, deleted if every line it has was locked and
 * has ended.  Lines are reached by their reservation index in a subquery
 * run once per order, rows deleted by the ctids just locked: no plan
 * depends on estimates.  One row per product of the orders pruned (or one
 * row with no product), each with the counts.
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
	" gone_lines AS ("
	"  DELETE FROM hc_stock_order_lines l WHERE l.ctid" EQ "ANY (ARRAY("
	"    SELECT tid FROM lines WHERE (reservation_id" EQ "ANY (SELECT id FROM whole)) IS TRUE))"
	"  RETURNING 1)"
	" SELECT p.product_id, s.pruned, s.walked, s.last"
	"   FROM (SELECT (SELECT pg_catalog.count(*) FROM gone_orders) AS pruned,"
	"                (SELECT pg_catalog.count(*) FROM gone_lines) AS lines,"
	"                (SELECT pg_catalog.count(*) FROM candidates) AS walked,"
	"                (SELECT pg_catalog.max(ended_at) FROM candidates) AS last) s"
	"   LEFT JOIN (SELECT DISTINCT pg_catalog.unnest(products) AS product_id FROM whole) p ON true",
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
 * Carry a part's rows forward: its first :batch_size rows from :from on
 * that belong to an order or are a carry, in seq order; those of orders
 * that no longer exist, with the carries among them, replaced by one carry
 * row if there is any such order row.  Its detail counts the rows it
 * stands for and the time they span.  Returns the rows walked, the last
 * seq walked, the first of an order that still exists (where the next
 * carry of this part starts) and the order rows carried.
 */
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
	"             AND (g.reservation_id IS NOT NULL OR g.event" EQ "'carry')"
	"           ORDER BY g.seq LIMIT :batch_size) w),"
	" gone AS ("
	"  DELETE FROM hc_ledger g WHERE g.ctid" EQ "ANY (ARRAY("
	"    SELECT tid FROM walk"
	"     WHERE orphan AND EXISTS (SELECT FROM walk WHERE orphan AND reservation_id IS NOT NULL)))"
	"  RETURNING g.seq, g.event, g.reserved_delta, g.stock_delta, g.at, g.detail),"
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
	"    FROM gone HAVING pg_catalog.count(*)" GT "0"
	"  RETURNING 1)"
	" SELECT (SELECT pg_catalog.count(*) FROM walk) AS walked,"
	"        (SELECT pg_catalog.max(seq) FROM walk) AS last,"
	"        (SELECT pg_catalog.min(seq) FROM walk WHERE NOT orphan) AS blocker,"
	"        (SELECT pg_catalog.count(*) FROM gone WHERE event" NE "'carry') AS carried,"
	"        (SELECT pg_catalog.count(*) FROM carried) AS written",
	{{"product_id", TEXTOID}, {"from", INT8OID}, {"part_end", INT8OID}, {"batch_size", INT4OID},
	 HC_LEDGER_PARAMS}
};

/* A product whose orders this sweep has pruned: its rows are carried at the sweep's end. */
typedef struct CarryPending
{
	char		product_id[HC_MAX_ID_BYTES + 1];	/* zero-padded: the key is hashed whole */
} CarryPending;

static void
carry_later(HcSweepCounts *counts, const char *product_id)
{
	CarryPending key;

	if (counts->carry_pending == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(CarryPending);
		ctl.entrysize = sizeof(CarryPending);
		ctl.hcxt = counts->keep ? counts->keep : CurrentMemoryContext;
		counts->carry_pending = hash_create("holdcommit carries", 64, &ctl,
											HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	memset(&key, 0, sizeof(key));
	strlcpy(key.product_id, product_id, sizeof(key.product_id));
	(void) hash_search(counts->carry_pending, &key, HASH_ENTER, NULL);
}

/* This transaction carries the product's rows, unless another one is. */
static bool
carry_lock(const char *product_id)
{
	LOCKTAG		tag;
	uint64		hash = hash_bytes_extended((const unsigned char *) product_id,
										   strlen(product_id), 0);

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) (hash >> 32), (uint32) hash,
						 HC_CARRY_LOCK_SPACE);
	return LockAcquire(&tag, ExclusiveLock, false, true) != LOCKACQUIRE_NOT_AVAIL;
}

/*
 * Carry forward the rows of each part of a product, from the part's first
 * row until one of an order that still exists (what follows it waits for
 * the next sweep that prunes an order of this product); returns the order
 * rows carried.
 */
static int64
carry_product(HcCall *call, const char *product_id, int batch_size)
{
	HcArgs		args;
	uint64		nparts;
	int32	   *parts;
	uint64		i;
	int64		carried = 0;

	if (!carry_lock(product_id))
		return 0;
	hc_args(&args, &ledger_parts);
	hc_bind_text(&args, "product_id", product_id);
	nparts = hc_run(call, &args, SPI_OK_SELECT);
	parts = palloc(sizeof(int32) * Max(nparts, 1));
	for (i = 0; i < nparts; i++)
		parts[i] = hc_int32((int) i, "part");

	for (i = 0; i < nparts; i++)
	{
		int64		from = (int64) parts[i] << 48;

		for (;;)
		{
			bool		clear;

			hc_args(&args, &carry_part);
			hc_bind_text(&args, "product_id", product_id);
			hc_bind(&args, "from", Int64GetDatum(from));
			hc_bind(&args, "part_end", Int64GetDatum(((int64) parts[i] + 1) << 48));
			hc_bind(&args, "batch_size", Int32GetDatum(batch_size));
			hc_run(call, &args, SPI_OK_SELECT);
			carried += hc_int64(0, "carried");
			hc_datum(0, "blocker", &clear);
			if (!clear || hc_int64(0, "walked") < batch_size)
				break;
			from = hc_int64(0, "last") + 1;
			CHECK_FOR_INTERRUPTS();
		}
	}
	return carried;
}

/*
 * One batch of finished orders ended before horizon; returns how many were
 * pruned.  Their products are carried at the sweep's end (hc_stock_carry):
 * once per sweep, not once per batch, however many batches pruned their
 * orders.
 */
int64
hc_stock_prune(HcCall *call, int batch_size, TimestampTz horizon, HcSweepCounts *counts)
{
	HcArgs		args;
	uint64		n;
	uint64		i;
	int64		pruned;

	hc_args(&args, &prune_orders);
	hc_bind(&args, "horizon", TimestampTzGetDatum(horizon));
	hc_bind(&args, "resume_from", TimestampTzGetDatum(hc_sweep_from(&counts->pruned_orders_from)));
	hc_bind(&args, "batch_size", Int32GetDatum(batch_size));
	n = hc_run(call, &args, SPI_OK_SELECT);
	pruned = hc_int64(0, "pruned");
	if (hc_int64(0, "walked") > 0)
		hc_sweep_reached(&counts->pruned_orders_from, hc_timestamptz(0, "last"));
	counts->pruned_orders += pruned;
	for (i = 0; pruned > 0 && i < n; i++)
		carry_later(counts, hc_text(call, (int) i, "product_id"));
	return pruned;
}

/*
 * Up to batch_size of the products whose orders this sweep pruned, carried;
 * returns how many.  A product another sweep is carrying is left to it.
 */
int64
hc_stock_carry(HcCall *call, int batch_size, HcSweepCounts *counts)
{
	HASH_SEQ_STATUS scan;
	CarryPending *entry = NULL;
	CarryPending *batch;
	int			n = 0;
	int			i;

	if (counts->carry_pending == NULL)
		return 0;
	/* Taken out of the set first: a carry runs statements, which may fail. */
	batch = palloc(sizeof(CarryPending) * batch_size);
	hash_seq_init(&scan, counts->carry_pending);
	while (n < batch_size && (entry = hash_seq_search(&scan)) != NULL)
		batch[n++] = *entry;
	if (entry != NULL)
		hash_seq_term(&scan);
	for (i = 0; i < n; i++)
		(void) hash_search(counts->carry_pending, &batch[i], HASH_REMOVE, NULL);
	for (i = 0; i < n; i++)
		counts->carried_rows += carry_product(call, batch[i].product_id, batch_size);
	return n;
}
