/*
 * stock.c
 *		Counted stock: hc_stock_set, hc_stock_adjust, hc_reserve,
 *		hc_reserve_items, hc_finalize, hc_unreserve, and the sweep of
 *		expired stock reservations.
 *
 * A product's stock lives in parts, rows of hc_stock_parts (product_id,
 * part), each with its own stock and reserved (CHECK stock >= reserved >=
 * 0); hc_inventory is their sums.  Most products have one part.  Each
 * reservation has one line per product, counted in the reserved of the
 * line's part exactly while its status is RESERVED, and a line changes only
 * under its part's row lock.
 *
 * Lock order: products in product_id order (bytewise, COLLATE "C"); within
 * a product, all of its parts in part order, or one part alone -- a line's
 * part, or the part a reserve takes its units from -- after which the
 * transaction takes nothing else of that product.  A reserve of a product
 * with several parts first tries its home part, locked only if nobody
 * holds it and it has the units (a lock of the version it looked at, so
 * there is nothing to give back), then, each in a subtransaction rolled
 * back if it took nothing (so that it holds no part), any part that has the
 * units and that nobody holds (SKIP LOCKED, never waiting), then its home
 * part, waiting for it (it holds nothing else of the product); if none
 * gives them, it takes all the parts in order: only
 * then, with every part locked, does it spread the product's units anew or
 * refuse.  So two orders never deadlock.  (A probe that took a part may also
 * keep the lock of a part whose re-check failed before it; it takes nothing
 * else of the product either.)  The one lock taken between parts (marking a
 * reclaimed reservation EXPIRED) skips a reservation row that is locked,
 * rather than waiting.
 *
 * So a reservation can still say RESERVED while a reclaimer has already
 * expired some of its lines.  Every transition therefore looks at each
 * line's own status under its product's lock: a line stops counting exactly
 * once, and a reservation with an expired line is an expired reservation.
 *
 * A reserve of one line on one node (the common call) looks its key up,
 * then in one statement takes the units from one part and writes its ledger
 * row, the reservation and its line (stock_reserve_line): the part's lock
 * is held a few index insertions longer, and the call runs one statement
 * instead of three.  If that takes nothing, the call goes the whole way, as
 * a reserve of several lines does: it reads first, without locking, and
 * refuses (RS002) or replays from that read alone; it then writes the
 * reservation and its lines, and only last takes each product's lock, for
 * the conditional update of reserved and its ledger row (but for part 0 of
 * a product of one part, which the statement may have kept: see
 * stock_reserve_line).
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"

#include "common/sweep.h"
#include "common/errors.h"
#include "common/idempotency.h"
#include "common/ids.h"
#include "common/ledger.h"
#include "common/notify.h"
#include "common/result.h"
#include "common/settings.h"
#include "common/validate.h"
#include "core/fetch.h"
#include "core/subxact.h"
#include "core/version.h"
#include "scaleout/route.h"
#include "stock/home_part.h"
#include "stock/stock.h"

PG_FUNCTION_INFO_V1(hc_stock_set);
PG_FUNCTION_INFO_V1(hc_stock_adjust);
PG_FUNCTION_INFO_V1(hc_reserve);
PG_FUNCTION_INFO_V1(hc_reserve_items);
PG_FUNCTION_INFO_V1(hc_finalize);
PG_FUNCTION_INFO_V1(hc_unreserve);
PG_FUNCTION_INFO_V1(hc_finalize_product);
PG_FUNCTION_INFO_V1(hc_unreserve_product);
PG_FUNCTION_INFO_V1(hc_stock_spread);

/* The most expired lines one call reclaims; the sweeper clears the rest. */
#define STOCK_RECLAIM_MAX_LINES 1000

static void stock_count_line_in(HcCall *call, const char *product_id,
								const char *reservation_id, int16 part);
static void stock_expired(const StockReservation *r, const char *hint);

/* The seq of a part's ledger row: part * 2^48 + the part's new version. */
#define PART_SEQ(part, version) \
	"(" part "::pg_catalog.int8" TIMES "281474976710656" PLUS version ")"
#define PART_OF_SEQ(seq) ((int16) ((seq) >> 48))

/* One part of a product, locked FOR NO KEY UPDATE. */
static HcFetch lock_part = {"hc_stock_parts", "product_id", HC_FETCH_WAIT, 2, {"stock", "reserved"},
	"part"};

/*
 * The same for the sweeper, unless another transaction has the row, and
 * never waiting on an update chain (fetch.c): a call holding the part may be
 * waiting for an order that this sweep holds.
 */
static HcFetch sweep_part = {"hc_stock_parts", "product_id", HC_FETCH_SKIP_NOWAIT, 1, {"reserved"},
	"part"};

/* Every part of a product, locked in part order, with its numbers. */
static HcStatement lock_parts = {
	"SELECT part::pg_catalog.int4 AS part, stock, reserved FROM hc_stock_parts"
	" WHERE product_id" EQ ":product_id"
	" ORDER BY part FOR NO KEY UPDATE",
	{{"product_id", TEXTOID}}
};

/* How many parts a product has. */
static HcStatement count_parts = {
	"SELECT pg_catalog.count(*)::pg_catalog.int4 AS parts FROM hc_stock_parts"
	" WHERE product_id" EQ ":product_id",
	{{"product_id", TEXTOID}}
};

int32
stock_count_parts(HcCall *call, const char *product_id)
{
	HcArgs		args;

	hc_args(&args, &count_parts);
	hc_bind_text(&args, "product_id", product_id);
	(void) hc_run(call, &args, SPI_OK_SELECT);
	return hc_int32(0, "parts");
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

/*
 * Everything a new order must know, in one read: the reservation its key
 * already made, and for each line the product's numbers and, only where too
 * little is free, the units that expired lines still hold (as many as one
 * call may reclaim).  :products sorted, :quantities beside them.
 */
static HcStatement read_order = {
	"WITH " HC_KNOWN_KEY
	" SELECT p.product_id, i.parts, i.stock, i.reserved,"
	"        CASE WHEN i.stock" MINUS "i.reserved" LT "p.qty THEN"
	"          (SELECT COALESCE(pg_catalog.sum(x.qty), 0)"
	"             FROM (SELECT l.qty FROM hc_stock_reservation_lines l"
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

/* The reservation and its lines; the first of :products is its scope. */
static HcStatement insert_order = {
	"WITH r AS ("
	"  INSERT INTO hc_stock_reservations"
	"    (scope_id, id, buyer_id, idempotency_key, fingerprint, status, expires_at, created_at,"
	"     products)"
	"  VALUES ((:products)[1], :reservation_id, :buyer_id, :key, :fingerprint, 'RESERVED',"
	"          :expires_at, :now, :products))"
	" INSERT INTO hc_stock_reservation_lines"
	"   (product_id, reservation_id, qty, status, expires_at, buyer_id, part, scope_id)"
	" SELECT p, :reservation_id, q, 'RESERVED', :expires_at, :buyer_id, t, (:products)[1]"
	"   FROM ROWS FROM (pg_catalog.unnest(:products), pg_catalog.unnest(:quantities),"
	"                   pg_catalog.unnest(:parts)) AS u (p, q, t)",
	{{"products", TEXTARRAYOID}, {"quantities", INT4ARRAYOID}, {"parts", INT2ARRAYOID},
	 {"reservation_id", TEXTOID},
	 {"buyer_id", TEXTOID}, {"key", TEXTOID}, {"fingerprint", BYTEAOID},
	 {"expires_at", TIMESTAMPTZOID}, {"now", TIMESTAMPTZOID}}
};

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
 * The whole of the common reserve, one line, in one statement: the
 * conditional update of one part with its ledger row, and only if it took
 * the units, the reservation and its line.  No row when it took nothing:
 * the call then goes the whole way (stock_reserve).  It returns the part
 * taken from.  reserve_line takes from :part, waiting for it, as
 * take_stock; reserve_line_probe from any part that has the units and that
 * nobody holds, :part first, as probe_stock.
 */
#define RESERVE_LINE_WRITES \
	" l AS (" \
	HC_LEDGER_ROWS("'product'", ":product_id", PART_SEQ("u.part", "u.version"), "'reserve'", \
				   "'call'", ":reservation_id", ":buyer_id", ":qty", "0", "NULL") \
	"  FROM u)," \
	" r AS (" \
	"  INSERT INTO hc_stock_reservations" \
	"    (scope_id, id, buyer_id, idempotency_key, fingerprint, status, expires_at, created_at," \
	"     products)" \
	"  SELECT :product_id, :reservation_id, :buyer_id, :key, :fingerprint, 'RESERVED'," \
	"         :expires_at, :now, ARRAY[:product_id] FROM u)" \
	" INSERT INTO hc_stock_reservation_lines" \
	"   (product_id, reservation_id, qty, status, expires_at, buyer_id, part, scope_id)" \
	" SELECT :product_id, :reservation_id, :qty, 'RESERVED', :expires_at, :buyer_id, u.part," \
	"        :product_id FROM u RETURNING part"
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
static HcFetch home_part = {"hc_stock_parts", "product_id", HC_FETCH_SKIP_SEEN, 2,
	{"stock", "reserved"}, "part"};

/* A product's second part: whether it has more than one (parts are 0..n-1). */
static HcFetch second_part = {"hc_stock_parts", "product_id", HC_FETCH_READ, 1, {"stock"},
	"part"};

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

/* A line counted in another part than the one it was written with. */
static HcStatement move_line_part = {
	"UPDATE hc_stock_reservation_lines SET part = :part"
	" WHERE product_id" EQ ":product_id" " AND reservation_id" EQ ":reservation_id",
	{{"product_id", TEXTOID}, {"reservation_id", TEXTOID}, {"part", INT2OID}}
};

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
 * Reclaim, in one statement, the oldest expired lines of a product counted
 * in the parts we have locked (:parts, or all of them if NULL), from
 * :lines_from on: just enough of them to free :wanted
 * units, and never more than STOCK_RECLAIM_MAX_LINES lines, so that no
 * caller pays for a backlog the sweeper should clear.  A line another
 * transaction has locked (an unreserve or a finalize of its order, which
 * waits for a part we hold) is skipped, not waited for: waiting would close
 * a cycle (load/stock saw a 40P01 once, its machine loaded).  Each line stops
 * counting once (its own status is checked), gets its ledger row (:event
 * from :source), and its reservation becomes EXPIRED unless another
 * transaction has that row locked.  Returns the units freed, the lines
 * expired, the newest expires_at among them (a caller that goes on
 * reclaiming starts there) and the reservations ended, or no row.
 *
 * No join here depends on the planner's estimates (doc/architecture.md,
 * "Plan policy"):
 * - the oldest lines come in the expiry index's own order (product_id,
 *   expires_at), so the walk stops after the lines it takes; the tie-break
 *   by reservation_id sorts those lines only;
 * - the lines change in one scan of the same index, from :lines_from to the
 *   newest of doomed (doomed's lines and their ties, nothing else), each
 *   tested against doomed by an uncorrelated IN kept out of the join tree
 *   (IS TRUE): PostgreSQL hashes such a subquery whenever its rows fit in
 *   memory, and doomed's at most STOCK_RECLAIM_MAX_LINES always do;
 * - each reservation is locked by a lateral lookup by id (its status tested
 *   IS NOT DISTINCT FROM, which no index serves, so that the partial expiry
 *   index of RESERVED orders cannot serve the lookup instead), then changed
 *   through its primary key;
 * - the ledger rows join expired to moved, which holds one row per part of
 *   the product at most, so that join is linear whichever way it runs.
 */
static HcStatement reclaim_lines = {
	"WITH oldest AS ("
	"  SELECT reservation_id, qty, expires_at FROM hc_stock_reservation_lines"
	"   WHERE product_id" EQ ":product_id" " AND status" EQ "'RESERVED'"
	"     AND expires_at" LE ":now" " AND expires_at" GE ":lines_from"
	"     AND (:parts IS NULL OR part" EQ "ANY (:parts))"
	"   ORDER BY expires_at"
	"   LIMIT " CppAsString2(STOCK_RECLAIM_MAX_LINES)
	"     FOR NO KEY UPDATE SKIP LOCKED),"
	" doomed AS ("
	"  SELECT reservation_id, expires_at FROM ("
	"    SELECT reservation_id, qty, expires_at,"
	"           pg_catalog.sum(qty) OVER (ORDER BY expires_at, reservation_id) AS running"
	"      FROM oldest) s"
	"   WHERE running" MINUS "qty" LT ":wanted),"
	" expired AS ("
	"  UPDATE hc_stock_reservation_lines l SET status = 'EXPIRED'"
	"   WHERE l.product_id" EQ ":product_id" " AND l.status" EQ "'RESERVED'"
	"     AND l.expires_at" GE ":lines_from"
	"     AND l.expires_at" LE "(SELECT pg_catalog.max(expires_at) FROM doomed)"
	"     AND (l.reservation_id" EQ "ANY (SELECT reservation_id FROM doomed)) IS TRUE"
	"  RETURNING l.reservation_id, l.qty, l.buyer_id, l.expires_at, l.part),"
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
	"  UPDATE hc_stock_reservations o SET status = 'EXPIRED', ended_at = :now"
	"    FROM expired e"
	"   CROSS JOIN LATERAL ("
	"     SELECT r.scope_id, r.id FROM hc_stock_reservations r"
	"      WHERE r.id" EQ "e.reservation_id" " AND r.status IS NOT DISTINCT FROM 'RESERVED'"
	"        FOR NO KEY UPDATE SKIP LOCKED) r"
	"   WHERE o.scope_id" EQ "r.scope_id" " AND o.id" EQ "r.id"
	"  RETURNING o.id)"
	" SELECT pg_catalog.sum(total)::pg_catalog.int4 AS units, pg_catalog.sum(n)::pg_catalog.int4 AS lines,"
	"        (SELECT pg_catalog.max(expires_at) FROM expired) AS last,"
	"        (SELECT pg_catalog.count(*) FROM ended) AS ended"
	"   FROM moved HAVING pg_catalog.count(*)" GT "0",
	{{"product_id", TEXTOID}, {"wanted", INT8OID}, {"lines_from", TIMESTAMPTZOID},
	 {"parts", INT2ARRAYOID}, {"event", TEXTOID}, {"source", TEXTOID}, HC_LEDGER_PARAMS}
};

/*
 * The products of a reservation and their lines' parts, in the order they
 * are locked in; and, for a late finalize, whether a line of a product in
 * several parts must find its units again (it was expired: a line still
 * RESERVED, expired or not, still counts, and one reclaimed between this
 * look and its lock takes the fallback of stock_retake).  Only then are all
 * of the product's parts locked, so that a replayed or refused finalize
 * waits for no part but its line's.
 */
static HcStatement order_products = {
	"SELECT l.product_id, l.part::pg_catalog.int4 AS part,"
	"       l.status" EQ "'EXPIRED'"
	"       AND EXISTS (SELECT FROM hc_stock_parts s"
	"                    WHERE s.product_id" EQ "l.product_id" " AND s.part" GT "0) AS may_retake"
	"  FROM hc_stock_reservation_lines l"
	" WHERE l.reservation_id" EQ ":reservation_id"
	" ORDER BY l.product_id COLLATE \"C\"",
	{{"reservation_id", TEXTOID}}
};

/* Lock a reservation and read it with its lines (its products are locked). */
static HcStatement lock_order = {
	"SELECT r.scope_id, r.buyer_id, r.status, r.expires_at, r.created_at,"
	"       l.product_id, l.part::pg_catalog.int4 AS part, l.qty, l.status AS line_status"
	"  FROM hc_stock_reservations r"
	"  JOIN hc_stock_reservation_lines l ON l.reservation_id" EQ "r.id"
	" WHERE r.id" EQ ":reservation_id"
	" ORDER BY l.product_id COLLATE \"C\""
	" FOR NO KEY UPDATE OF r",
	{{"reservation_id", TEXTOID}}
};

/*
 * Move one line from :line_status, as read under the lock, to :status,
 * change its product's stock by :stock_delta and reserved by
 * :reserved_delta, and write the ledger row (:event from :source).
 */
#define MOVE_LINE_CTES \
	"WITH l AS (" \
	"  UPDATE hc_stock_reservation_lines SET status = :status" \
	"   WHERE product_id" EQ ":product_id" " AND reservation_id" EQ ":reservation_id" \
	"     AND status" EQ ":line_status" " RETURNING buyer_id)," \
	" i AS (" \
	"  UPDATE hc_stock_parts" \
	"     SET stock = stock" PLUS ":stock_delta, reserved = reserved" PLUS ":reserved_delta," \
	"         version = version" PLUS "1, updated_at = :now" \
	"   WHERE product_id" EQ ":product_id" " AND part" EQ ":part" " AND EXISTS (SELECT FROM l)" \
	"  RETURNING part, version)"
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
	"  UPDATE hc_stock_reservations SET status = :status, ended_at = :now"
	"   WHERE scope_id" EQ ":scope_id" " AND id" EQ ":reservation_id"
	"     AND status" EQ ":reservation_status" " AND EXISTS (SELECT FROM l)"
	"  RETURNING id)"
	MOVE_LINE_LEDGER " FROM l, i, o RETURNING seq",
	{MOVE_LINE_PARAMS, {"reservation_status", TEXTOID}, {"scope_id", TEXTOID}}
};

/* End a reservation that is still :reservation_status as read under the lock. */
static HcStatement end_order = {
	"UPDATE hc_stock_reservations SET status = :status, ended_at = :now"
	" WHERE scope_id" EQ ":scope_id" " AND id" EQ ":reservation_id"
	"   AND status" EQ ":reservation_status",
	{{"scope_id", TEXTOID}, {"reservation_id", TEXTOID}, {"status", TEXTOID},
	 {"reservation_status", TEXTOID}, {"now", TIMESTAMPTZOID}}
};

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

/* Parts from :from on, emptied by the caller, go; their lines count in part 0. */
static HcStatement drop_parts = {
	"WITH d AS ("
	"  DELETE FROM hc_stock_parts WHERE product_id" EQ ":product_id" " AND part" GE ":from"
	"  RETURNING part)"
	" UPDATE hc_stock_reservation_lines SET part = 0"
	"  WHERE product_id" EQ ":product_id" " AND part" GE ":from",
	{{"product_id", TEXTOID}, {"from", INT4OID}}
};

/*
 * The sweeper's work: products with expired lines that still count, in
 * lock order (bytewise), from :from on; the look at :from's own lines
 * starts at :lines_from, where the last batch stopped in them.  No index
 * keeps products in byte order, so the products not before :from that
 * have anything reserved (any with expired lines that still count do) are
 * sorted first, and only then probed in that order, one index probe of
 * their expiry entries each (a scalar subquery, whatever the planner
 * estimates), until the batch is full: each product is probed once per
 * sweep, not once per batch.  OFFSET 0 keeps the probe above the sort, and
 * the outer ORDER BY is the sort's own, so it adds none.
 */
static HcStatement expired_products = {
	"SELECT i.product_id, i.parts FROM ("
	"   SELECT product_id, product_id COLLATE \"C\" AS bytes,"
	"          pg_catalog.count(*)::pg_catalog.int4 AS parts FROM hc_stock_parts"
	"    WHERE product_id COLLATE \"C\"" GE ":from"
	"    GROUP BY product_id HAVING pg_catalog.sum(reserved)" GT "0"
	"    ORDER BY 2 OFFSET 0) i"
	" WHERE (SELECT true FROM hc_stock_reservation_lines l"
	"         WHERE l.product_id" EQ "i.product_id" " AND l.status" EQ "'RESERVED'"
	"           AND l.expires_at" LE ":now"
	"           AND l.expires_at" GE "CASE WHEN i.product_id" EQ ":from" " THEN :lines_from"
	"                                     ELSE '-infinity'::pg_catalog.timestamptz END"
	"         LIMIT 1)"
	" ORDER BY i.bytes LIMIT :batch_size",
	{{"from", TEXTOID}, {"lines_from", TIMESTAMPTZOID}, {"batch_size", INT4OID},
	 {"now", TIMESTAMPTZOID}}
};

/*
 * Expired orders still RESERVED although none of their lines counts any
 * more (a reclaimer expired the lines but skipped the order's locked row):
 * they end as EXPIRED, oldest first from :from on.  Whether an order still
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
	"  SELECT r.scope_id, r.id, r.expires_at FROM hc_stock_reservations r"
	"   WHERE r.status" EQ "'RESERVED'" " AND r.expires_at" LE ":now"
	"     AND r.expires_at" GE ":from"
	"     AND (SELECT pg_catalog.bool_or(l.status" EQ "'RESERVED')"
	"            FROM hc_stock_reservation_lines l WHERE l.reservation_id" EQ "r.id) IS NOT TRUE"
	"   ORDER BY r.expires_at LIMIT :batch_size"
	"     FOR NO KEY UPDATE SKIP LOCKED)"
	" UPDATE hc_stock_reservations r SET status = 'EXPIRED', ended_at = :now"
	"   FROM doomed d"
	"  WHERE r.scope_id" EQ "d.scope_id" " AND r.id" EQ "d.id"
	"    AND r.status IS NOT DISTINCT FROM 'RESERVED'"
	" RETURNING d.expires_at",
	{{"from", TIMESTAMPTZOID}, {"batch_size", INT4OID}, {"now", TIMESTAMPTZOID}}
};

/* RS006 for a product. */
void
product_not_found(const char *product_id)
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
stock_parts_changed(const char *product_id)
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("the parts of product \"%s\" changed during the call", product_id),
			 errhint("Try again: hc_stock_spread() or another call moved its units or lines meanwhile.")));
}

/* RS002, with the product's numbers as last read. */
void
stock_insufficient(const char *product_id, int32 qty, int32 stock, int32 reserved)
{
	ereport(ERROR,
			(errcode(ERRCODE_HC_INSUFFICIENT_STOCK),
			 errmsg("insufficient stock for product \"%s\"", product_id),
			 errdetail("%d requested, %d available (stock %d, reserved %d).",
					   qty, stock - reserved, stock, reserved),
			 errhint("Offer a smaller quantity, or try again when reservations end.")));
}

/* What one reclaim did. */
typedef struct StockReclaimed
{
	int64		units;			/* units that stopped counting */
	int64		ended;			/* reservations that became EXPIRED */
	int32		lines;			/* lines expired */
	TimestampTz last;			/* the newest expires_at among them */
} StockReclaimed;

/*
 * Reclaim expired lines of a product counted in the parts we have locked
 * (parts, an int2[]; (Datum) 0: all of them), from lines_from on
 * (DT_NOBEGIN: all), enough to free needed units if there are that many (at
 * most STOCK_RECLAIM_MAX_LINES lines), with ledger event and source as
 * given.  Returns the units freed, and what it did in *done.
 */
static int64
stock_reclaim_as(HcCall *call, const char *product_id, Datum parts, int64 needed,
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
static int64
stock_reclaim(HcCall *call, const char *product_id, int64 needed)
{
	StockReclaimed done;

	return stock_reclaim_as(call, product_id, (Datum) 0, needed, DT_NOBEGIN, "reclaim", "reclaim",
							&done);
}

/* An int2[] of parts. */
static Datum
stock_parts_array(const int16 *parts, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1));
	int			i;

	for (i = 0; i < n; i++)
		d[i] = Int16GetDatum(parts[i]);
	return PointerGetDatum(construct_array(d, n, INT2OID, 2, true, TYPALIGN_SHORT));
}

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
	hc_bind(&args, "lines_from",
			TimestampTzGetDatum(counts->lines_resumed ? counts->lines_from : DT_NOBEGIN));
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
		if (counts->lines_resumed && strcmp(products[i], counts->products_from) == 0)
			lines_from = counts->lines_from;
		if (stock_reclaim_as(call, products[i], stock_parts_array(held, nheld), PG_INT64_MAX,
							 lines_from, "expire", "sweep", &done) == 0)
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

	counts->lines_resumed = false;
	if (more >= 0)
	{
		strlcpy(counts->products_from, products[more], sizeof(counts->products_from));
		/* an id longer than the buffer starts at its prefix, without resuming its lines */
		counts->lines_resumed = strcmp(counts->products_from, products[more]) == 0;
		counts->lines_from = more_from;
	}
	else if (n < (uint64) batch_size)
		counts->lines_done = true;
	else
		strlcpy(counts->products_from, products[n - 1], sizeof(counts->products_from));
}

/*
 * The sweeper's orders left RESERVED (hc_stock_sweep): up to batch_size of
 * them, oldest first from where the last batch stopped.  A batch that ended
 * fewer than batch_size was the last.
 */
static void
stock_sweep_orders(HcCall *call, int batch_size, HcSweepCounts *counts)
{
	HcArgs		args;
	uint64		n;
	uint64		i;

	hc_args(&args, &end_orders);
	hc_bind(&args, "from",
			TimestampTzGetDatum(counts->orders_resumed ? counts->orders_from : DT_NOBEGIN));
	hc_bind(&args, "batch_size", Int32GetDatum(batch_size));
	n = hc_run(call, &args, SPI_OK_UPDATE_RETURNING);
	for (i = 0; i < n; i++)
	{
		TimestampTz expires_at = hc_timestamptz((int) i, "expires_at");

		if (!counts->orders_resumed || expires_at > counts->orders_from)
			counts->orders_from = expires_at;
		counts->orders_resumed = true;
	}
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
	/* A database still on 0.2.0 SQL keeps its expired stock until the update. */
	if (!hc_sql_at_least("0.3.0"))
	{
		counts->lines_done = counts->orders_done = true;
		return;
	}
	if (!counts->lines_done)
		stock_sweep_lines(call, batch_size, counts);
	if (counts->lines_done && !counts->orders_done)
		stock_sweep_orders(call, batch_size, counts);
}

/* A product's parts, as read with all of them locked. */

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
stock_lock_parts(HcCall *call, const char *product_id, StockParts *p)
{
	HcArgs		args;
	Datum		numbers[2];
	bool		nulls[2];
	uint64		n;
	uint64		i;

	if (!hc_fetch_part(call, &lock_part, product_id, 0, numbers, nulls))
		product_not_found(product_id);
	hc_args(&args, &lock_parts);
	hc_bind_text(&args, "product_id", product_id);
	n = hc_run(call, &args, SPI_OK_SELECT);
	if (n == 0)
		product_not_found(product_id);
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
 * Spread a product's available units anew over its parts, all of them
 * locked: as evenly as they go, with extra more on part `first` (that part
 * takes extra units next).  Only the stock of each part moves; reserved
 * stays with the lines counted there.
 */
static void
stock_respread(HcCall *call, const char *product_id, StockParts *p, int first, int64 extra)
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

	return hc_try_in_subxact(stock_try, &t);
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
stock_take(HcCall *call, const char *product_id, int32 parts, bool tried, int16 *part,
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

	stock_lock_parts(call, product_id, &p);
	missing = qty - (p.total_stock - p.total_reserved);
	if (missing > 0 && stock_reclaim(call, product_id, missing) > 0)
		stock_lock_parts(call, product_id, &p);
	*stock = (int32) p.total_stock;
	*reserved = (int32) p.total_reserved;
	if (p.total_stock - p.total_reserved < qty)
		return false;
	if (*part >= p.n)
		*part = 0;
	if (p.stock[*part] - p.reserved[*part] < qty)
		stock_respread(call, product_id, &p, *part, qty);
	if (!stock_take_part(call, &take_stock, product_id, part, qty, reservation_id, buyer_id))
		elog(ERROR, "part %d of product \"%s\" did not have the units it was given", *part, product_id);
	return true;
}

/*
 * A late finalize's line that no longer counts, locked as stock_lock left
 * it: its units taken again, into line->part.  With every part of its
 * product locked (or a product of one part), the whole way, as a reserve
 * takes them: reclaim, spread anew, or false if the product has too little.
 * With only its own part locked (it expired between stock_lock's look and
 * its lock), from that part or any other that nobody holds, but not by
 * waiting for another part, which would be taking a second part out of
 * order: if that fails, 40001, and the retry locks every part.
 */
static bool
stock_retake(HcCall *call, StockLine *line, const char *reservation_id, const char *buyer_id,
			 int32 *stock, int32 *reserved)
{
	if (line->parts > 0)
		return stock_take(call, line->product_id, line->parts, false, &line->part, line->qty,
						  reservation_id, buyer_id, stock, reserved);
	if (stock_count_parts(call, line->product_id) <= 1)
		return stock_take(call, line->product_id, 1, false, &line->part, line->qty, reservation_id,
						  buyer_id, stock, reserved);
	if (!stock_take_unordered(call, line->product_id, &line->part, line->qty, reservation_id,
							  buyer_id))
		stock_parts_changed(line->product_id);
	return true;
}

/*
 * stock_retake for a line of r, which then counts in the part that gave the
 * units; on Citus on its product's node.
 */
bool
stock_retake_line(HcCall *call, StockReservation *r, StockLine *line)
{
	int16		part = line->part;
	int32		stock;
	int32		reserved;

	if (r->spread)
		return true;			/* order_move takes the units again with the line's end */
	if (!stock_retake(call, line, r->id, r->buyer_id, &stock, &reserved))
		return false;
	if (line->part != part)
		stock_count_line_in(call, line->product_id, r->id, line->part);
	return true;
}

/* A jsonb scalar for pushJsonbValue. */
static JsonbValue *
jsonb_scalar(JsonbValue *v, enum jbvType type, const char *text, int32 number)
{
	v->type = type;
	if (type == jbvString)
	{
		v->val.string.val = (char *) text;
		v->val.string.len = strlen(text);
	}
	else
		v->val.numeric = int64_to_numeric(number);
	return v;
}

/*
 * The items as jsonb: [{"product_id": "...", "qty": n}, ...], built
 * directly rather than printed and parsed (it is in every call's result).
 */
static Datum
stock_items_jsonb(const StockLine *lines, int n)
{
	JsonbParseState *state = NULL;
	JsonbValue	v;
	JsonbValue *items;
	int			i;

	(void) pushJsonbValue(&state, WJB_BEGIN_ARRAY, NULL);
	for (i = 0; i < n; i++)
	{
		(void) pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
		(void) pushJsonbValue(&state, WJB_KEY, jsonb_scalar(&v, jbvString, "product_id", 0));
		(void) pushJsonbValue(&state, WJB_VALUE, jsonb_scalar(&v, jbvString, lines[i].product_id, 0));
		(void) pushJsonbValue(&state, WJB_KEY, jsonb_scalar(&v, jbvString, "qty", 0));
		(void) pushJsonbValue(&state, WJB_VALUE, jsonb_scalar(&v, jbvNumeric, NULL, lines[i].qty));
		(void) pushJsonbValue(&state, WJB_END_OBJECT, NULL);
	}
	items = pushJsonbValue(&state, WJB_END_ARRAY, NULL);
	return JsonbPGetDatum(JsonbValueToJsonb(items));
}

/* Build the hc_stock_reservation row a function returns. */
static Datum
stock_result(FunctionCallInfo fcinfo, const StockReservation *r)
{
	Datum		values[7];
	bool		nulls[7] = {false};

	values[0] = CStringGetTextDatum(r->id);
	values[1] = CStringGetTextDatum(r->buyer_id);
	values[2] = CStringGetTextDatum(r->status);
	values[3] = stock_items_jsonb(r->lines, r->nlines);
	values[4] = TimestampTzGetDatum(r->expires_at);
	values[5] = TimestampTzGetDatum(r->created_at);
	values[6] = BoolGetDatum(r->replayed);
	return hc_result_tuple(fcinfo, values, nulls);
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

	hc_arg_not_null(fcinfo, argno, "items");
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
		if (product.val.string.len > HC_MAX_ID_BYTES)
			ereport(ERROR,
					(errcode(ERRCODE_STRING_DATA_RIGHT_TRUNCATION),
					 errmsg("items[%d].product_id is too long", i),
					 errdetail("It is %d bytes long; the limit is %d bytes.",
							   product.val.string.len, HC_MAX_ID_BYTES)));
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

/* A text[], int4[] or int2[] of the lines' products, quantities or parts. */
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
stock_line_parts(const StockLine *lines, int n)
{
	int16	   *parts = palloc(sizeof(int16) * n);
	int			i;

	for (i = 0; i < n; i++)
		parts[i] = lines[i].part;
	return stock_parts_array(parts, n);
}

/* The line is counted in another part than the one it was written with. */
static void
stock_count_line_in(HcCall *call, const char *product_id, const char *reservation_id, int16 part)
{
	HcArgs		args;

	hc_args(&args, &move_line_part);
	hc_bind_text(&args, "product_id", product_id);
	hc_bind_text(&args, "reservation_id", reservation_id);
	hc_bind(&args, "part", Int16GetDatum(part));
	if (hc_run(call, &args, SPI_OK_UPDATE) != 1)
		elog(ERROR, "line of product \"%s\" in reservation \"%s\" vanished", product_id, reservation_id);
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
 * product of one part reserve_line on part 0; of several (or one that had
 * several when this backend last reserved it), the tries of
 * stock_take_unordered, from the backend's home part (home_part.c; the
 * first time, its pid modulo the number of parts): that part if nobody
 * holds it and it has the units (home_part, a point lock of the version it
 * looked at, where the probe reads every part; then reserve_line there),
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
 * made here (stock_take's tried).
 */
static bool
stock_reserve_line(HcCall *call, StockReservation *r, const char *key, HcFingerprint *fp,
				   int64 ttl)
{
	const char *product_id = r->lines[0].product_id;
	HcKnownKey	known;
	HcArgs		args;
	StockLineTry t = {call, &args};
	Datum		part[2];
	bool		isnull[2];
	bool		hinted;
	int16		home;

	if (hc_idempotency_find(call, key, fp, &known))
	{
		r->id = known.id;
		r->created_at = known.created_at;
		r->expires_at = known.created_at + ttl;
		r->replayed = true;
		return true;
	}
	r->id = hc_new_reservation_id(call->now);
	hinted = home_part_get(product_id, &home);
	/* Part 0 is every product's: such a hint does not say the product still has several. */
	if ((!hinted || home == 0) &&
		!hc_fetch_part(call, &second_part, product_id, 1, part, isnull))
	{
		if (hinted)
			home_part_forget(product_id);
		stock_bind_line(&args, &reserve_line, r, key, fp);
		hc_bind(&args, "part", Int16GetDatum(0));
		return stock_try_line(&t);
	}
	if (!hinted)
	{
		int32		parts = stock_count_parts(call, product_id);

		if (parts < 2)
			return false;
		home = (int16) (MyProcPid % parts);
	}
	if (hc_fetch_part_if(call, &home_part, product_id, home, stock_part_admits,
						 &r->lines[0].qty, part, isnull))
	{
		/* Held and checked: the update takes the units. */
		stock_bind_line(&args, &reserve_line, r, key, fp);
		hc_bind(&args, "part", Int16GetDatum(home));
		if (!stock_try_line(&t))
			elog(ERROR, "part %d of product \"%s\" did not have the units it was locked with",
				 home, product_id);
	}
	else
	{
		stock_bind_line(&args, &reserve_line_probe, r, key, fp);
		hc_bind(&args, "part", Int16GetDatum(home));
		if (!hc_try_in_subxact(stock_try_line, &t))
		{
			stock_bind_line(&args, &reserve_line, r, key, fp);
			hc_bind(&args, "part", Int16GetDatum(home));
			if (!hc_try_in_subxact(stock_try_line, &t))
				return false;
		}
	}
	home_part_set(product_id, t.part);
	return true;
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
	HcArgs		args;
	bool		tried = false;
	int			i;

	hc_call_begin_keyed(&call, fcinfo, function);
	hc_require_sql_at_least("0.3.0", call.function);
	if (n == 1)
		HC_ROUTE(&call, fcinfo, lines[0].product_id);
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
	if (n > 1 && hc_distributed(&call))
	{
		order_reserve(&call, &r, key, &fp, ttl);
		hc_call_end(&call);
		return stock_result(fcinfo, &r);
	}
	if (n == 1 && call.scope == NULL && !hc_distributed(&call))
	{
		if (stock_reserve_line(&call, &r, key, &fp, ttl))
		{
			hc_call_end(&call);
			return stock_result(fcinfo, &r);
		}
		tried = true;
	}

	hc_args(&args, &read_order);
	hc_bind(&args, "products", stock_products(lines, n));
	hc_bind(&args, "quantities", stock_quantities(lines, n));
	hc_bind_text(&args, "key", key);
	if (hc_idempotency_run(&call, &args, n, key, &fp, &known))
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

		(void) hc_datum(i, "stock", &isnull);
		if (isnull)
			product_not_found(lines[i].product_id);
	}
	for (i = 0; i < n; i++)
	{
		int32		stock = hc_int32(i, "stock");
		int32		reserved = hc_int32(i, "reserved");
		bool		isnull;
		Datum		expired = hc_datum(i, "expired_units", &isnull);

		if (!isnull && (int64) stock - reserved + DatumGetInt64(expired) < lines[i].qty)
			stock_insufficient(lines[i].product_id, lines[i].qty, stock, reserved);
		/* A product of several parts: the backend's own part first, to spread the callers. */
		lines[i].parts = hc_int32(i, "parts");
		lines[i].part = 0;
		if (lines[i].parts > 1 &&
			(!home_part_get(lines[i].product_id, &lines[i].part) || lines[i].part >= lines[i].parts))
			lines[i].part = (int16) (MyProcPid % lines[i].parts);
	}

	r.id = hc_new_reservation_id(call.now);
	hc_args(&args, &insert_order);
	hc_bind(&args, "products", stock_products(lines, n));
	hc_bind(&args, "quantities", stock_quantities(lines, n));
	hc_bind(&args, "parts", stock_line_parts(lines, n));
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

		if (!stock_take(&call, lines[i].product_id, lines[i].parts, tried, &part, lines[i].qty,
						r.id, buyer_id, &stock, &reserved))
			stock_insufficient(lines[i].product_id, lines[i].qty, stock, reserved);
		if (part != lines[i].part)
			stock_count_line_in(&call, lines[i].product_id, r.id, part);
		if (lines[i].parts > 1)
			home_part_set(lines[i].product_id, part);
		else
			home_part_forget(lines[i].product_id);
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

/* RS006 for a stock reservation that is not there (or not of product_id, if given). */
static void
stock_not_found(const char *product_id, const char *reservation_id)
{
	if (product_id == NULL)
		hc_reservation_not_found(reservation_id, "stock reservation",
								 "Use the reservation_id that hc_reserve() or hc_reserve_items() returned.");
	hc_reservation_not_found(reservation_id,
							 psprintf("stock reservation whose first product is \"%s\"", product_id),
							 "Use the first product of the order and the reservation_id that hc_reserve() or hc_reserve_items() returned.");
}

/*
 * Lock what a line of reservation_id counts in: its part, or every part of
 * its product (all_parts).  Returns how many parts are locked (0: the
 * line's alone); 40001 if the part is gone (stock_parts_changed).
 */
int32
stock_lock_line_part(HcCall *call, const char *product_id, const char *reservation_id,
					 int16 part, bool all_parts)
{
	Datum		numbers[2];
	bool		nulls[2];

	if (all_parts)
	{
		StockParts	p;

		stock_lock_parts(call, product_id, &p);
		return p.n;
	}
	if (!hc_fetch_part(call, &lock_part, product_id, part, numbers, nulls))
	{
		if (stock_count_parts(call, product_id) == 0)
			elog(ERROR, "product \"%s\" of reservation \"%s\" vanished", product_id, reservation_id);
		stock_parts_changed(product_id);
	}
	return 0;
}

/*
 * Lock a reservation for finalize or unreserve: its products one at a time
 * in order, then the reservation row, and read it with its lines under
 * those locks.  Of each product, the line's part; for a late finalize
 * (retake), every part of a product in several parts whose line may have
 * to find its units again, so that it can reclaim and spread them as a
 * reserve does (the line's .parts says how many are locked, else 0).
 */
static void
stock_lock(HcCall *call, const char *product_id, const char *reservation_id, bool retake,
		   StockReservation *r)
{
	HcArgs		args;
	char	  **products;
	int16	   *parts;
	int32	   *locked;
	uint64		n;
	uint64		i;

	if (r->spread)
	{
		order_lock(call, reservation_id, retake, r);
		return;
	}
	hc_args(&args, &order_products);
	hc_bind_text(&args, "reservation_id", reservation_id);
	n = hc_run(call, &args, SPI_OK_SELECT);
	if (n == 0)
		stock_not_found(NULL, reservation_id);
	products = palloc(sizeof(char *) * n);
	parts = palloc(sizeof(int16) * n);
	locked = palloc0(sizeof(int32) * n);
	for (i = 0; i < n; i++)
	{
		bool		isnull;
		Datum		may_retake = hc_datum((int) i, "may_retake", &isnull);

		products[i] = hc_text(call, (int) i, "product_id");
		parts[i] = (int16) hc_int32((int) i, "part");
		if (retake && !isnull && DatumGetBool(may_retake))
			locked[i] = -1;
	}
	for (i = 0; i < n; i++)
		locked[i] = stock_lock_line_part(call, products[i], reservation_id, parts[i], locked[i] != 0);

	hc_args(&args, &lock_order);
	hc_bind_text(&args, "reservation_id", reservation_id);
	n = hc_run(call, &args, SPI_OK_SELECT);
	if (n == 0)
		elog(ERROR, "reservation \"%s\" has lines but no row", reservation_id);
	r->id = pstrdup(reservation_id);
	r->scope_id = hc_text(call, 0, "scope_id");
	if (product_id != NULL && strcmp(r->scope_id, product_id) != 0)
		stock_not_found(product_id, reservation_id);
	r->buyer_id = hc_text(call, 0, "buyer_id");
	r->status = hc_text(call, 0, "status");
	r->expires_at = hc_timestamptz(0, "expires_at");
	r->created_at = hc_timestamptz(0, "created_at");
	r->replayed = false;
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
		if (locked[i] == 0 && r->lines[i].part != parts[i])
			stock_parts_changed(products[i]);
	}
}

/*
 * Move one line of the reservation from the status it had under the lock to
 * its new one, with its product's stock and reserved and the ledger; with
 * last, the reservation ends with the same status in the same statement.
 */
void
stock_move_line(HcCall *call, StockReservation *r, StockLine *line, const char *status,
				int32 stock_delta, int32 reserved_delta, const char *event, const char *source,
				bool last)
{
	HcArgs		args;

	if (r->spread)
	{
		if (!order_move(call, r, line, status, r->retake))
			stock_expired(r, psprintf("The stock of product \"%s\" is gone: refund the payment.",
									  line->product_id));
		line->status = pstrdup(status);
		if (last)
			stock_end(call, r, status);
		return;
	}
	hc_args(&args, last ? &move_last_line : &move_line);
	hc_bind_text(&args, "product_id", line->product_id);
	hc_bind(&args, "part", Int16GetDatum(line->part));
	hc_bind_text(&args, "reservation_id", r->id);
	hc_bind_text(&args, "status", status);
	hc_bind_text(&args, "line_status", line->status);
	hc_bind(&args, "stock_delta", Int32GetDatum(stock_delta));
	hc_bind(&args, "reserved_delta", Int32GetDatum(reserved_delta));
	hc_bind_text(&args, "event", event);
	hc_bind_text(&args, "source", source);
	if (last)
	{
		hc_bind_text(&args, "reservation_status", r->status);
		hc_bind_text(&args, "scope_id", r->scope_id);
	}
	if (hc_run(call, &args, SPI_OK_INSERT_RETURNING) != 1)
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
void
stock_end(HcCall *call, StockReservation *r, const char *status)
{
	HcArgs		args;

	if (r->spread)
	{
		order_end(call, r, status);
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

/*
 * A reservation that is still RESERVED or EXPIRED has no line that was
 * finalized or released: such a line was changed without its reservation
 * (by hand, or a step of an order on Citus called by hand), and moving it
 * again would count it twice.
 */
static void
stock_require_open_lines(const StockReservation *r)
{
	int			i;

	if (strcmp(r->status, "RESERVED") != 0 && strcmp(r->status, "EXPIRED") != 0)
		return;
	for (i = 0; i < r->nlines; i++)
		if (strcmp(r->lines[i].status, "FINALIZED") == 0 ||
			strcmp(r->lines[i].status, "RELEASED") == 0)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("line of product \"%s\" in reservation \"%s\" is %s, the reservation %s",
							r->lines[i].product_id, r->id, r->lines[i].status, r->status),
					 errhint("Nothing was changed. Run hc_check(): the line was changed without its reservation.")));
}

/* RS004 and RS003 for a stock reservation. */
static void
stock_not_active(const StockReservation *r, const char *hint)
{
	hc_reservation_not_active(r->id, "", r->status, hint);
}

static void
stock_expired(const StockReservation *r, const char *hint)
{
	hc_reservation_expired(r->id, "", r->expires_at, hint);
}

/*
 * Route a call on a stock reservation, given its first product or not
 * (NULL).  On Citus an order of several products stays with this call,
 * which runs its steps where they are (r->spread); any other is sent to the
 * node of its first product, as HC_ROUTE_RESERVATION sends a hold's call.
 */
static bool
stock_route(HcCall *call, FunctionCallInfo fcinfo, const char *product_id,
			const char *reservation_id, StockReservation *r, Datum *result)
{
	const char *scope_id = product_id;
	bool		isnull;

	if (!hc_distributed(call))
		return false;
	if (scope_id == NULL)
		scope_id = hc_route_lookup(call, "hc_stock_reservations", "scope_id", reservation_id);
	if (scope_id == NULL)
		stock_not_found(NULL, reservation_id);
	switch (order_spread(call, scope_id, reservation_id, r))
	{
		case 0:
			/* Its row is on its first product's node, whose id this is not. */
			stock_not_found(product_id, reservation_id);
			break;
		case 1:
			break;
		default:
			return false;
	}
	if (product_id == NULL)
	{
		*result = hc_route_prefixed(call, fcinfo, scope_id);
		return true;
	}
	return hc_route(call, fcinfo, product_id, result, &isnull);
}

#define STOCK_ROUTE(call, fcinfo, product_id, reservation_id, r) \
	do { \
		Datum		stock_routed_; \
		\
		if (stock_route((call), (fcinfo), (product_id), (reservation_id), (r), &stock_routed_)) \
		{ \
			hc_call_end(call); \
			return stock_routed_; \
		} \
	} while (0)

/*
 * hc_finalize(reservation_id, late_ok): the order is paid; stock and
 * reserved go down by each line's qty, once.  After expiry RS003, unless
 * late_ok and every line's stock is still there.
 */
static Datum
stock_finalize(FunctionCallInfo fcinfo, int first)
{
	char	   *product_id = first > 0 ? hc_arg_id(fcinfo, 0, "product_id") : NULL;
	char	   *reservation_id = hc_arg_id(fcinfo, first, "reservation_id");
	bool		late_ok = hc_arg_bool(fcinfo, first + 1, "late_ok");
	HcCall		call;
	StockReservation r = {0};
	int			i;

	hc_call_begin(&call, fcinfo, "hc_finalize");
	hc_require_sql_at_least("0.3.0", call.function);
	STOCK_ROUTE(&call, fcinfo, product_id, reservation_id, &r);
	stock_lock(&call, product_id, reservation_id, late_ok, &r);
	stock_require_open_lines(&r);

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

			if (strcmp(line->status, "RESERVED") != 0 && !stock_retake_line(&call, &r, line))
				stock_expired(&r, psprintf("The stock of product \"%s\" is gone: refund the payment.",
										   line->product_id));
		}
		for (i = 0; i < r.nlines; i++)
			stock_move_line(&call, &r, &r.lines[i], "FINALIZED", -r.lines[i].qty, -r.lines[i].qty,
							"finalize", "call", i == r.nlines - 1);
	}
	hc_call_end(&call);
	return stock_result(fcinfo, &r);
}

/* hc_finalize(reservation_id, late_ok), hc_finalize(product_id, reservation_id, late_ok) */
Datum
hc_finalize(PG_FUNCTION_ARGS)
{
	PG_RETURN_DATUM(stock_finalize(fcinfo, 0));
}

Datum
hc_finalize_product(PG_FUNCTION_ARGS)
{
	PG_RETURN_DATUM(stock_finalize(fcinfo, 1));
}

/*
 * hc_unreserve(reservation_id): the buyer cancels; reserved goes down once.
 * A repeat, or an expired reservation, is returned unchanged as a replay.
 */
static Datum
stock_unreserve(FunctionCallInfo fcinfo, int first)
{
	char	   *product_id = first > 0 ? hc_arg_id(fcinfo, 0, "product_id") : NULL;
	char	   *reservation_id = hc_arg_id(fcinfo, first, "reservation_id");
	HcCall		call;
	StockReservation r = {0};
	int			i;

	hc_call_begin(&call, fcinfo, "hc_unreserve");
	hc_require_sql_at_least("0.3.0", call.function);
	STOCK_ROUTE(&call, fcinfo, product_id, reservation_id, &r);
	stock_lock(&call, product_id, reservation_id, false, &r);
	stock_require_open_lines(&r);

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
	return stock_result(fcinfo, &r);
}

/* hc_unreserve(reservation_id), hc_unreserve(product_id, reservation_id) */
Datum
hc_unreserve(PG_FUNCTION_ARGS)
{
	PG_RETURN_DATUM(stock_unreserve(fcinfo, 0));
}

Datum
hc_unreserve_product(PG_FUNCTION_ARGS)
{
	PG_RETURN_DATUM(stock_unreserve(fcinfo, 1));
}

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

	stock_lock_parts(call, product_id, p);

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

		if (stock_reclaim_as(call, product_id, (Datum) 0, PG_INT64_MAX, from, "reclaim",
							 "reclaim", &done) == 0)
			break;
		reclaimed = true;
		from = done.last;
	}
	if (reclaimed)
		stock_lock_parts(call, product_id, p);
}

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
		 * test/sanitize.sh's canary build only: an 8-byte integer read at an
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
	hc_require_sql_at_least("0.3.0", call.function);
	HC_ROUTE(&call, fcinfo, product_id);
	hc_args(&args, &create_product);
	hc_bind_text(&args, "product_id", product_id);
	hc_bind(&args, "stock", Int32GetDatum(new_stock));
	if (hc_run(&call, &args, SPI_OK_SELECT) == 1)
		row = hc_result_row(&call, fcinfo);
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
	hc_require_sql_at_least("0.3.0", call.function);
	HC_ROUTE(&call, fcinfo, product_id);
	stock_lock_product(&call, product_id, &p);
	row = stock_change(&call, fcinfo, product_id, p.total_stock + delta, &p, "stock_adjust", reason);
	hc_call_end(&call);
	PG_RETURN_DATUM(row);
}

/* The most parts a product may have: part numbers fit the ledger's seq. */
#define STOCK_MAX_PARTS 256

/*
 * hc_stock_spread(product_id, parts): keep a product's stock in that many
 * parts, its available units spread over them, so that reserves of a hot
 * product commit side by side.  Parts that go hand their lines and their
 * units to part 0.
 */
Datum
hc_stock_spread(PG_FUNCTION_ARGS)
{
	char	   *product_id = hc_arg_id(fcinfo, 0, "product_id");
	int32		parts = hc_arg_int(fcinfo, 1, "parts");
	HcCall		call;
	StockParts	p;
	HcArgs		args;
	Datum		row;
	int			i;

	if (parts < 1 || parts > STOCK_MAX_PARTS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("parts must be between 1 and %d", STOCK_MAX_PARTS),
				 errdetail("parts is %d.", parts)));
	hc_call_begin(&call, fcinfo, "hc_stock_spread");
	HC_ROUTE(&call, fcinfo, product_id);
	stock_lock_product(&call, product_id, &p);
	if (parts > p.n)
	{
		hc_args(&args, &add_parts);
		hc_bind_text(&args, "product_id", product_id);
		hc_bind(&args, "from", Int32GetDatum(p.n));
		hc_bind(&args, "to", Int32GetDatum(parts - 1));
		(void) hc_run(&call, &args, SPI_OK_INSERT);
	}
	else if (parts < p.n)
	{
		/* Part 0 takes the reserved units and the lines of the parts that go. */
		hc_args(&args, &merge_parts);
		hc_bind_text(&args, "product_id", product_id);
		hc_bind(&args, "from", Int32GetDatum(parts));
		(void) hc_run(&call, &args, SPI_OK_UPDATE);
		hc_args(&args, &drop_parts);
		hc_bind_text(&args, "product_id", product_id);
		hc_bind(&args, "from", Int32GetDatum(parts));
		(void) hc_run(&call, &args, SPI_OK_UPDATE);
	}
	stock_lock_parts(&call, product_id, &p);
	for (i = 0; i < p.n && p.stock[i] - p.reserved[i] == (p.total_stock - p.total_reserved) / p.n; i++)
		;
	if (i < p.n)
		stock_respread(&call, product_id, &p, 0, 0);
	row = stock_product_row(&call, fcinfo, product_id);
	hc_call_end(&call);
	PG_RETURN_DATUM(row);
}
