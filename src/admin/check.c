/*
 * check.c
 *		hc_check(): one row per violated invariant, none when all hold.
 *
 * Each invariant is one query returning (invariant, subject, detail); :now
 * is the call's clock reading.
 *
 * Invariants:
 *   1. It runs on the same protected path as every other call (the
 *      extension owner's rights in a security-restricted operation, tables
 *      bound to the extension's schema by OID), so an application role may
 *      run it without being able to read the ledger, and nobody can point it
 *      at look-alikes.
 *   2. It reads, and locks nothing: on several nodes each of this node's
 *      scopes (core/placement.h) is read where it is, one after the other;
 *      the node that has none (Citus' coordinator) gathers every other
 *      node's check.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/tuplestore.h"

#include "core/placement.h"
#include "core/statement.h"
#include "core/version.h"

PG_FUNCTION_INFO_V1(hc_check);


/*
 * The orders and their lines as 0.3.0's tables had them (the views
 * hc_stock_reservations and hc_stock_reservation_lines): the checks read the
 * tables themselves, which on Citus are named by their shards.
 */
#define STOCK_ORDERS \
	"(SELECT scope_id, id, buyer_id, status, expires_at, created_at, ended_at," \
	"        COALESCE(products, ARRAY[scope_id]) AS products FROM hc_stock_orders)"
#define STOCK_LINES \
	"(SELECT scope_id AS product_id, id AS reservation_id, qty, status, expires_at, buyer_id, part," \
	"        scope_id FROM hc_stock_orders WHERE qty IS NOT NULL" \
	" UNION ALL" \
	" SELECT product_id, reservation_id, qty, status, expires_at, buyer_id, part, scope_id" \
	"   FROM hc_stock_order_lines)"

static HcStatement checks[] = {
	/*
	 * Each row has the shape of its status.  (No CHECK constraints say so:
	 * PostgreSQL 15 rebuilds every CHECK for each statement that writes a
	 * table, and only the extension's functions write these.)
	 */
	{"SELECT 'asset has the shape of its status', a.id,"
	 "       pg_catalog.format('status %s, hold_expires_at %s, current_reservation_id %s',"
	 "                         a.status, a.hold_expires_at, a.current_reservation_id)"
	 "  FROM hc_assets a"
	 " WHERE NOT COALESCE(CASE"
	 "        WHEN a.status" EQ "'HELD'"
	 "        THEN a.hold_expires_at IS NOT NULL AND a.current_reservation_id IS NOT NULL"
	 "        WHEN a.status" EQ "'AVAILABLE'"
	 "        THEN a.hold_expires_at IS NULL AND a.current_reservation_id IS NULL"
	 "        WHEN a.status" EQ "'SOLD' THEN a.hold_expires_at IS NULL"
	 "        ELSE false END, false)",
	{{"now", TIMESTAMPTZOID}}},
	{"SELECT 'reservation has the shape of its status', r.id,"
	 "       pg_catalog.format('status %s, ended_at %s', r.status, r.ended_at)"
	 "  FROM hc_reservations r"
	 " WHERE NOT COALESCE(r.status" EQ "ANY ('{HELD,COMMITTED,RELEASED,EXPIRED}'::pg_catalog.text[])"
	 "        AND (r.status" EQ "'HELD')" EQ "(r.ended_at IS NULL), false)",
	{{"now", TIMESTAMPTZOID}}},
	{"SELECT 'stock reservation has the shape of its status', r.id,"
	 "       pg_catalog.format('status %s, ended_at %s', r.status, r.ended_at)"
	 "  FROM " STOCK_ORDERS " r"
	 " WHERE NOT COALESCE(r.status" EQ "ANY ('{RESERVED,FINALIZED,RELEASED,EXPIRED}'::pg_catalog.text[])"
	 "        AND (r.status" EQ "'RESERVED')" EQ "(r.ended_at IS NULL), false)",
	{{"now", TIMESTAMPTZOID}}},
	{"SELECT 'line has a known status', l.reservation_id,"
	 "       pg_catalog.format('line of %s is %s', l.product_id, l.status)"
	 "  FROM " STOCK_LINES " l"
	 " WHERE l.status" NE "ALL ('{RESERVED,FINALIZED,RELEASED,EXPIRED}'::pg_catalog.text[])",
	{{"now", TIMESTAMPTZOID}}},
	{"SELECT 'lease has the shape of its owner', l.resource,"
	 "       pg_catalog.format('owner %s, token %s, acquired_at %s, heartbeat_at %s, stale_after %s,"
	 " session %s started %s', l.owner, l.token, l.acquired_at, l.heartbeat_at, l.stale_after,"
	 "                         l.session_pid, l.session_started)"
	 "  FROM hc_locks l"
	 " WHERE NOT COALESCE(l.token" GE "1"
	 "        AND (l.session_pid IS NULL)" EQ "(l.session_started IS NULL)"
	 "        AND CASE WHEN l.owner IS NULL"
	 "            THEN l.acquired_at IS NULL AND l.heartbeat_at IS NULL AND l.stale_after IS NULL"
	 "                 AND l.session_pid IS NULL"
	 "            ELSE l.heartbeat_at" GE "l.acquired_at"
	 "                 AND l.stale_after" GT "'0'::pg_catalog.interval END, false)",
	{{"now", TIMESTAMPTZOID}}},
	{"SELECT 'attempt has the shape of its status', a.resource,"
	 "       pg_catalog.format('status %s, attempts %s of %s, last marker %s at %s, external_ref %s,"
	 " completed_at %s', a.status, a.attempts, a.total_attempts, a.last_marker, a.last_attempt_at,"
	 "                         a.external_ref, a.completed_at)"
	 "  FROM hc_attempts a"
	 " WHERE NOT COALESCE(a.status" EQ "ANY ('{OPEN,MANUAL_REVIEW,COMPLETED}'::pg_catalog.text[])"
	 "        AND a.attempts" GE "0"
	 "        AND a.total_attempts" GE "a.attempts"
	 "        AND (a.total_attempts" EQ "0)" EQ "(a.last_marker IS NULL)"
	 "        AND (a.last_marker IS NULL)" EQ "(a.last_attempt_at IS NULL)"
	 "        AND (a.status" EQ "'COMPLETED')" EQ
	 "            (a.external_ref IS NOT NULL AND a.completed_at IS NOT NULL), false)",
	{{"now", TIMESTAMPTZOID}}},
	/*
	 * The invariants below relate the rows of two tables.  None joins them:
	 * the rows of both are put together (UNION ALL) and grouped, or
	 * windowed, by the key they share, so each table is read once and the
	 * work is one hash or one sort, whatever the planner estimates (a join
	 * planned on wrong estimates can be a nested loop over all the rows of
	 * both; doc/architecture.md, "Plan policy").  In each group, the row of
	 * the table the key is unique in is the one with its columns set.
	 */

	/* A HELD asset is held by exactly its one HELD reservation. */
	{"SELECT 'held asset has its one held reservation', u.asset_id,"
	 "       pg_catalog.format('current_reservation_id %s, %s held reservation(s)',"
	 "                         pg_catalog.max(u.current_reservation_id), pg_catalog.count(u.id))"
	 "  FROM (SELECT a.id AS asset_id, a.current_reservation_id, NULL::pg_catalog.text AS id,"
	 "               true AS asset"
	 "          FROM hc_assets a WHERE a.status" EQ "'HELD'"
	 "        UNION ALL"
	 "        SELECT r.asset_id, NULL, r.id, false"
	 "          FROM hc_reservations r WHERE r.status" EQ "'HELD') u"
	 " GROUP BY u.asset_id"
	 " HAVING pg_catalog.bool_or(u.asset)"
	 "    AND (pg_catalog.count(u.id)" NE "1"
	 "         OR pg_catalog.max(u.id) IS DISTINCT FROM pg_catalog.max(u.current_reservation_id))",
	{{"now", TIMESTAMPTZOID}}},
	/* A SOLD asset has exactly one COMMITTED reservation. */
	{"SELECT 'sold asset has one committed reservation', u.asset_id,"
	 "       pg_catalog.format('%s committed reservation(s)', pg_catalog.count(u.id))"
	 "  FROM (SELECT a.id AS asset_id, NULL::pg_catalog.text AS id, true AS asset"
	 "          FROM hc_assets a WHERE a.status" EQ "'SOLD'"
	 "        UNION ALL"
	 "        SELECT r.asset_id, r.id, false"
	 "          FROM hc_reservations r WHERE r.status" EQ "'COMMITTED') u"
	 " GROUP BY u.asset_id"
	 " HAVING pg_catalog.bool_or(u.asset) AND pg_catalog.count(u.id)" NE "1",
	{{"now", TIMESTAMPTZOID}}},
	/* A HELD or COMMITTED reservation is what its asset says it is. */
	{"SELECT 'reservation matches its asset', w.id,"
	 "       pg_catalog.format('reservation %s, asset %s is %s with %s',"
	 "                         w.status, w.asset_id, w.asset_status, w.current_reservation_id)"
	 "  FROM (SELECT u.id, u.status, u.expires_at, u.asset_id, u.asset,"
	 "               pg_catalog.bool_or(u.asset) OVER a AS asset_exists,"
	 "               pg_catalog.max(u.asset_status) OVER a AS asset_status,"
	 "               pg_catalog.max(u.current_reservation_id) OVER a AS current_reservation_id,"
	 "               pg_catalog.max(u.hold_expires_at) OVER a AS hold_expires_at"
	 "          FROM (SELECT a.id AS asset_id, NULL::pg_catalog.text AS id,"
	 "                       NULL::pg_catalog.text AS status,"
	 "                       NULL::pg_catalog.timestamptz AS expires_at, true AS asset,"
	 "                       a.status AS asset_status, a.current_reservation_id, a.hold_expires_at"
	 "                  FROM hc_assets a"
	 "                UNION ALL"
	 "                SELECT r.asset_id, r.id, r.status, r.expires_at, false, NULL, NULL, NULL"
	 "                  FROM hc_reservations r"
	 "                 WHERE r.status" EQ "ANY ('{HELD,COMMITTED}'::pg_catalog.text[])) u"
	 "        WINDOW a AS (PARTITION BY u.asset_id)) w"
	 " WHERE NOT w.asset AND w.asset_exists"
	 "   AND ((w.status" EQ "'HELD'"
	 "         AND (w.asset_status" NE "'HELD'"
	 "              OR w.current_reservation_id IS DISTINCT FROM w.id"
	 "              OR w.hold_expires_at IS DISTINCT FROM w.expires_at))"
	 "     OR (w.status" EQ "'COMMITTED'"
	 "         AND (w.asset_status" NE "'SOLD'"
	 "              OR w.current_reservation_id IS DISTINCT FROM w.id)))",
	{{"now", TIMESTAMPTZOID}}},
	/*
	 * A group hold's seats agree: as many as it says, one buyer, one
	 * creation, one end, one key at most, and one state (but a sweep may
	 * have ended some of its expired seats and not yet the others).
	 */
	{"SELECT 'group hold has its seats', r.id,"
	 "       pg_catalog.format('%s row(s) of %s seat(s), statuses %s',"
	 "                         pg_catalog.count(*), pg_catalog.max(r.seats),"
	 "                         pg_catalog.string_agg(DISTINCT r.status, ','))"
	 "  FROM hc_reservations r WHERE r.seats IS NOT NULL"
	 " GROUP BY r.id"
	 " HAVING pg_catalog.count(*)" NE "pg_catalog.max(r.seats)"
	 "    OR pg_catalog.min(r.seats)" NE "pg_catalog.max(r.seats)"
	 "    OR pg_catalog.count(DISTINCT r.buyer_id)" NE "1"
	 "    OR pg_catalog.count(DISTINCT r.created_at)" NE "1"
	 "    OR pg_catalog.count(DISTINCT r.expires_at)" NE "1"
	 "    OR pg_catalog.count(r.idempotency_key)" GT "1"
	 "    OR (pg_catalog.count(DISTINCT r.status)" GT "1"
	 "        AND NOT pg_catalog.bool_and(r.status" EQ "ANY ('{HELD,EXPIRED}'::pg_catalog.text[])))",
	{{"now", TIMESTAMPTZOID}}},
	/* Each hold was counted once: its ledger rows add up to its status. */
	{"SELECT 'ledger adds up to each hold', u.id,"
	 "       pg_catalog.format('reservation %s; ledger says held %s, sold %s',"
	 "                         pg_catalog.max(u.status), COALESCE(pg_catalog.sum(u.reserved), 0),"
	 "                         COALESCE(pg_catalog.sum(u.stock), 0))"
	 "  FROM (SELECT r.asset_id AS entity_id, r.id, r.status,"
	 "               NULL::pg_catalog.int4 AS reserved, NULL::pg_catalog.int4 AS stock"
	 "          FROM hc_reservations r"
	 "        UNION ALL"
	 "        SELECT l.entity_id, l.reservation_id, NULL, l.reserved_delta, l.stock_delta"
	 "          FROM hc_ledger l"
	 "         WHERE l.kind" EQ "'asset' AND l.reservation_id IS NOT NULL) u"
	 " GROUP BY u.entity_id, u.id"
	 " HAVING pg_catalog.count(u.status)" EQ "1"
	 "    AND (COALESCE(pg_catalog.sum(u.reserved), 0)" NE ""
	 "         CASE WHEN pg_catalog.max(u.status)" EQ "'HELD' THEN 1 ELSE 0 END"
	 "         OR COALESCE(pg_catalog.sum(u.stock), 0)" NE ""
	 "         CASE WHEN pg_catalog.max(u.status)" EQ "'COMMITTED' THEN -1 ELSE 0 END)",
	{{"now", TIMESTAMPTZOID}}},
	/* A part's reserved is the sum of the RESERVED lines counted in it. */
	{"SELECT 'reserved is the sum of reserved lines', u.product_id,"
	 "       pg_catalog.format('part %s: reserved %s, reserved lines %s', u.part,"
	 "                         pg_catalog.max(u.reserved), COALESCE(pg_catalog.sum(u.qty), 0))"
	 "  FROM (SELECT i.product_id, i.part, i.reserved, NULL::pg_catalog.int4 AS qty"
	 "          FROM hc_stock_parts i"
	 "        UNION ALL"
	 "        SELECT l.product_id, l.part, NULL, l.qty FROM " STOCK_LINES " l"
	 "         WHERE l.status" EQ "'RESERVED') u"
	 " GROUP BY u.product_id, u.part"
	 " HAVING pg_catalog.count(u.reserved)" EQ "1"
	 "    AND pg_catalog.max(u.reserved)" NE "COALESCE(pg_catalog.sum(u.qty), 0)",
	{{"now", TIMESTAMPTZOID}}},
	/* Each change was counted once: the ledger adds up to stock and reserved. */
	{"SELECT 'ledger adds up to the inventory', u.product_id,"
	 "       pg_catalog.format('stock %s, reserved %s; ledger says %s, %s',"
	 "                         pg_catalog.max(u.stock), pg_catalog.max(u.reserved),"
	 "                         COALESCE(pg_catalog.sum(u.stock_delta), 0),"
	 "                         COALESCE(pg_catalog.sum(u.reserved_delta), 0))"
	 "  FROM (SELECT i.product_id, i.stock, i.reserved, NULL::pg_catalog.int4 AS stock_delta,"
	 "               NULL::pg_catalog.int4 AS reserved_delta"
	 "          FROM (SELECT product_id, pg_catalog.sum(stock)::pg_catalog.int4 AS stock,"
	 "                       pg_catalog.sum(reserved)::pg_catalog.int4 AS reserved"
	 "                  FROM hc_stock_parts GROUP BY product_id) i"
	 "        UNION ALL"
	 "        SELECT l.entity_id, NULL, NULL, l.stock_delta, l.reserved_delta"
	 "          FROM hc_ledger l WHERE l.kind" EQ "'product') u"
	 " GROUP BY u.product_id"
	 " HAVING pg_catalog.count(u.stock)" EQ "1"
	 "    AND (pg_catalog.max(u.stock)" NE "COALESCE(pg_catalog.sum(u.stock_delta), 0)"
	 "         OR pg_catalog.max(u.reserved)" NE "COALESCE(pg_catalog.sum(u.reserved_delta), 0))",
	{{"now", TIMESTAMPTZOID}}},

	/*
	 * Each line was counted once: its own ledger rows add up to what its
	 * status says.  This catches a line released twice even when the
	 * product's totals agree with the ledger (both releases logged).
	 */
	{"SELECT 'ledger adds up to each line', u.reservation_id,"
	 "       pg_catalog.format('line of %s (qty %s) is %s; ledger says reserved %s, stock %s',"
	 "                         u.product_id, pg_catalog.max(u.qty), pg_catalog.max(u.status),"
	 "                         COALESCE(pg_catalog.sum(u.reserved), 0),"
	 "                         COALESCE(pg_catalog.sum(u.stock), 0))"
	 "  FROM (SELECT l.product_id, l.reservation_id, l.qty, l.status,"
	 "               NULL::pg_catalog.int4 AS reserved, NULL::pg_catalog.int4 AS stock"
	 "          FROM " STOCK_LINES " l"
	 "        UNION ALL"
	 "        SELECT g.entity_id, g.reservation_id, NULL, NULL, g.reserved_delta, g.stock_delta"
	 "          FROM hc_ledger g"
	 "         WHERE g.kind" EQ "'product' AND g.reservation_id IS NOT NULL) u"
	 " GROUP BY u.product_id, u.reservation_id"
	 " HAVING pg_catalog.count(u.status)" EQ "1"
	 "    AND (COALESCE(pg_catalog.sum(u.reserved), 0)" NE ""
	 "         CASE WHEN pg_catalog.max(u.status)" EQ "'RESERVED' THEN pg_catalog.max(u.qty) ELSE 0 END"
	 "         OR COALESCE(pg_catalog.sum(u.stock), 0)" NE ""
	 "         CASE WHEN pg_catalog.max(u.status)" EQ "'FINALIZED'"
	 "              THEN" MINUS "pg_catalog.max(u.qty) ELSE 0 END)",
	{{"now", TIMESTAMPTZOID}}},
	/* A reservation's lines agree with it: an ended one has no counted line. */
	{"SELECT 'reservation lines match their reservation', w.id,"
	 "       pg_catalog.format('reservation %s, line of %s is %s',"
	 "                         w.reservation_status, w.product_id, w.status)"
	 "  FROM (SELECT u.id, u.product_id, u.status, u.expires_at, u.reservation,"
	 "               pg_catalog.bool_or(u.reservation) OVER r AS reservation_exists,"
	 "               pg_catalog.max(u.reservation_status) OVER r AS reservation_status,"
	 "               pg_catalog.max(u.reservation_expires_at) OVER r AS reservation_expires_at"
	 "          FROM (SELECT o.id, NULL::pg_catalog.text AS product_id,"
	 "                       NULL::pg_catalog.text AS status,"
	 "                       NULL::pg_catalog.timestamptz AS expires_at, true AS reservation,"
	 "                       o.status AS reservation_status, o.expires_at AS reservation_expires_at"
	 "                  FROM " STOCK_ORDERS " o"
	 "                UNION ALL"
	 "                SELECT l.reservation_id, l.product_id, l.status, l.expires_at, false,"
	 "                       NULL, NULL"
	 "                  FROM " STOCK_LINES " l) u"
	 "        WINDOW r AS (PARTITION BY u.id)) w"
	 " WHERE NOT w.reservation AND w.reservation_exists"
	 "   AND ((w.reservation_status" EQ "ANY ('{FINALIZED,RELEASED}'::pg_catalog.text[])"
	 "         AND w.status" NE "w.reservation_status)"
	 "     OR (w.reservation_status" EQ "'EXPIRED'"
	 "         AND w.status" NE "ALL ('{EXPIRED,RESERVED}'::pg_catalog.text[]))"
	 "     OR (w.reservation_status" EQ "'RESERVED' AND w.status" NE "'RESERVED'"
	 "         AND w.reservation_expires_at" GT ":now)"
	 "     OR w.expires_at" NE "w.reservation_expires_at)",
	{{"now", TIMESTAMPTZOID}}},
	/* Every hold belongs to an asset (no foreign key says so). */
	{"SELECT 'reservation has its asset', w.id,"
	 "       pg_catalog.format('asset %s does not exist', w.asset_id)"
	 "  FROM (SELECT u.asset_id, u.id, pg_catalog.bool_or(u.id IS NULL) OVER a AS asset_exists"
	 "          FROM (SELECT a.id AS asset_id, NULL::pg_catalog.text AS id FROM hc_assets a"
	 "                UNION ALL"
	 "                SELECT r.asset_id, r.id FROM hc_reservations r) u"
	 "        WINDOW a AS (PARTITION BY u.asset_id)) w"
	 " WHERE w.id IS NOT NULL AND NOT w.asset_exists",
	{{"now", TIMESTAMPTZOID}}},
	/*
	 * Every line belongs to a product, and a line that counts to a part of
	 * it (no foreign key says so).  A line that no longer counts keeps the
	 * part it was counted in last, which hc_stock_spread may have merged
	 * away since.
	 */
	{"SELECT 'line has its product', w.reservation_id,"
	 "       CASE WHEN w.product_exists"
	 "            THEN pg_catalog.format('product %s has no part %s', w.product_id, w.part)"
	 "            ELSE pg_catalog.format('product %s does not exist', w.product_id) END"
	 "  FROM (SELECT u.product_id, u.part, u.reservation_id, u.counts,"
	 "               pg_catalog.bool_or(u.reservation_id IS NULL) OVER p AS part_exists,"
	 "               pg_catalog.bool_or(u.reservation_id IS NULL) OVER i AS product_exists"
	 "          FROM (SELECT i.product_id, i.part, NULL::pg_catalog.text AS reservation_id,"
	 "                       false AS counts"
	 "                  FROM hc_stock_parts i"
	 "                UNION ALL"
	 "                SELECT l.product_id, l.part, l.reservation_id, l.status" EQ "'RESERVED'"
	 "                  FROM " STOCK_LINES " l) u"
	 "        WINDOW p AS (PARTITION BY u.product_id, u.part), i AS (PARTITION BY u.product_id)) w"
	 " WHERE w.reservation_id IS NOT NULL AND (NOT w.product_exists OR (w.counts AND NOT w.part_exists))",
	{{"now", TIMESTAMPTZOID}}},
	/*
	 * An order of one product carries its line (qty > 0 and its part) and
	 * no products; an order of several names its products, the first its
	 * scope, and has neither.
	 */
	{"SELECT 'order has the shape of its kind', o.id,"
	 "       pg_catalog.format('qty %s, part %s, products %s', o.qty, o.part, o.products)"
	 "  FROM hc_stock_orders o"
	 " WHERE NOT COALESCE(CASE WHEN o.qty IS NULL"
	 "        THEN o.part IS NULL AND pg_catalog.cardinality(o.products)" GE "2"
	 "             AND o.products[1]" EQ "o.scope_id"
	 "        ELSE o.qty" GT "0 AND o.part IS NOT NULL AND o.products IS NULL END, false)",
	{{"now", TIMESTAMPTZOID}}},
	/* A product's parts are 0 to n - 1, and each is within its stock. */
	{"SELECT 'parts are numbered from 0', p.product_id,"
	 "       pg_catalog.format('%s parts, numbered %s to %s',"
	 "                         pg_catalog.count(*), pg_catalog.min(p.part), pg_catalog.max(p.part))"
	 "  FROM hc_stock_parts p"
	 " GROUP BY p.product_id"
	 " HAVING pg_catalog.min(p.part)" NE "0"
	 "     OR pg_catalog.max(p.part)" NE "(pg_catalog.count(*)" MINUS "1)",
	{{"now", TIMESTAMPTZOID}}},
	/* A product has at least the parts an operator set (hc_stock_spread): its floor. */
	{"SELECT 'parts not below the floor', f.product_id,"
	 "       pg_catalog.format('%s parts, the floor is %s',"
	 "                         (SELECT pg_catalog.count(*) FROM hc_stock_parts p"
	 "                           WHERE p.product_id" EQ "f.product_id), f.min_parts)"
	 "  FROM hc_stock_spreads f"
	 " WHERE (SELECT pg_catalog.count(*) FROM hc_stock_parts p"
	 "         WHERE p.product_id" EQ "f.product_id)" LT "f.min_parts"
	 "   AND EXISTS (SELECT FROM hc_stock_parts p WHERE p.product_id" EQ "f.product_id)",
	{{"now", TIMESTAMPTZOID}}},
	/* Each part's last ledger row has the part's version in its seq. */
	{"SELECT 'ledger seq follows each part', u.product_id,"
	 "       pg_catalog.format('part %s: version %s, last ledger seq of the part %s', u.part,"
	 "                         pg_catalog.max(u.version), pg_catalog.max(u.seq))"
	 "  FROM (SELECT p.product_id, p.part::pg_catalog.int8 AS part, p.version, NULL::pg_catalog.int8 AS seq"
	 "          FROM hc_stock_parts p"
	 "        UNION ALL"
	 "        SELECT l.entity_id, l.seq" DIVIDE "281474976710656, NULL,"
	 "               l.seq" MINUS "((l.seq" DIVIDE "281474976710656)" TIMES "281474976710656)"
	 "          FROM hc_ledger l WHERE l.kind" EQ "'product') u"
	 " GROUP BY u.product_id, u.part"
	 " HAVING pg_catalog.count(u.version)" EQ "1"
	 "    AND pg_catalog.max(u.seq)" GT "pg_catalog.max(u.version)",
	{{"now", TIMESTAMPTZOID}}},
	/* Every line belongs to a reservation (no foreign key says so). */
	{"SELECT 'line has its reservation', w.reservation_id,"
	 "       pg_catalog.format('line of %s has no reservation', w.product_id)"
	 "  FROM (SELECT u.reservation_id, u.product_id, u.scope_id,"
	 "               pg_catalog.bool_or(u.product_id IS NULL) OVER r AS reservation_exists"
	 "          FROM (SELECT o.id AS reservation_id, NULL::pg_catalog.text AS product_id,"
	 "                       NULL::pg_catalog.text AS scope_id"
	 "                  FROM " STOCK_ORDERS " o"
	 "                UNION ALL"
	 "                SELECT l.reservation_id, l.product_id, l.scope_id"
	 "                  FROM " STOCK_LINES " l) u"
	 "        WINDOW r AS (PARTITION BY u.reservation_id)) w"
	 " WHERE w.product_id IS NOT NULL AND NOT w.reservation_exists"
	 "   AND (:whole OR w.scope_id" EQ "w.product_id"
	 "        OR EXISTS (SELECT FROM hc_stock_parts s WHERE s.product_id" EQ "w.scope_id))",
	{{"now", TIMESTAMPTZOID}, {"whole", BOOLOID}}},
	/*
	 * A reservation names its lines' products, in lock order, the first its
	 * scope, which each line names too.  Of an order of several products on
	 * Citus, a group of shards holds the order's row, its first product's
	 * line and perhaps others: those must be among its products.
	 */
	{"SELECT 'reservation lists its lines', w.id,"
	 "       pg_catalog.format('scope %s, products %s; lines of %s, naming scope %s',"
	 "                         w.scope_id, w.products, COALESCE(w.lines::pg_catalog.text, 'none'),"
	 "                         COALESCE(w.line_scopes::pg_catalog.text, 'none'))"
	 "  FROM (SELECT u.id, pg_catalog.max(u.scope_id) AS scope_id,"
	 "               pg_catalog.max(u.products) AS products,"
	 "               pg_catalog.array_agg(u.product_id ORDER BY u.product_id COLLATE \"C\")"
	 "                 FILTER (WHERE u.product_id IS NOT NULL) AS lines,"
	 "               pg_catalog.array_agg(DISTINCT u.line_scope)"
	 "                 FILTER (WHERE u.product_id IS NOT NULL) AS line_scopes"
	 "          FROM (SELECT o.id, o.scope_id, o.products, NULL::pg_catalog.text AS product_id,"
	 "                       NULL::pg_catalog.text AS line_scope"
	 "                  FROM " STOCK_ORDERS " o"
	 "                UNION ALL"
	 "                SELECT l.reservation_id, NULL, NULL, l.product_id, l.scope_id"
	 "                  FROM " STOCK_LINES " l) u"
	 "         GROUP BY u.id HAVING pg_catalog.count(u.products)" EQ "1) w"
	 " WHERE w.products[1] IS DISTINCT FROM w.scope_id"
	 "    OR w.line_scopes IS DISTINCT FROM ARRAY[w.scope_id]"
	 "    OR CASE WHEN :whole THEN w.lines IS DISTINCT FROM w.products"
	 "            ELSE NOT (w.lines OPERATOR(pg_catalog.<@) w.products"
	 "                      AND w.scope_id" EQ "ANY (w.lines)) END",
	{{"now", TIMESTAMPTZOID}, {"whole", BOOLOID}}},
	/*
	 * A lease's token is the last one the ledger handed out for it: a token
	 * never goes back, whatever was released, taken over or restored.
	 */
	{"SELECT 'lease token is the last one handed out', u.resource,"
	 "       pg_catalog.format('token %s, last token in the ledger %s',"
	 "                         pg_catalog.max(u.token), pg_catalog.max(u.handed_out))"
	 "  FROM (SELECT l.resource, l.token, NULL::pg_catalog.int8 AS handed_out, true AS lease"
	 "          FROM hc_locks l"
	 "        UNION ALL"
	 "        SELECT g.entity_id, NULL,"
	 "               (g.detail::pg_catalog.jsonb" FIELD "'token')::pg_catalog.int8, false"
	 "          FROM hc_ledger g"
	 "         WHERE g.kind" EQ "'resource'"
	 "           AND g.event" EQ "ANY ('{acquire,takeover}'::pg_catalog.text[])) u"
	 " GROUP BY u.resource"
	 " HAVING pg_catalog.bool_or(u.lease)"
	 "    AND pg_catalog.max(u.handed_out) IS DISTINCT FROM pg_catalog.max(u.token)",
	{{"now", TIMESTAMPTZOID}}},
	/* Every acquire or takeover handed out a higher token than the one before. */
	{"SELECT 'lease tokens strictly increase', t.entity_id,"
	 "       pg_catalog.format('token %s after token %s (ledger seq %s)', t.token, t.previous, t.seq)"
	 "  FROM (SELECT entity_id, seq,"
	 "               (detail::pg_catalog.jsonb" FIELD "'token')::pg_catalog.int8 AS token,"
	 "               pg_catalog.lag((detail::pg_catalog.jsonb" FIELD "'token')"
	 "                              ::pg_catalog.int8)"
	 "                   OVER (PARTITION BY entity_id ORDER BY seq) AS previous"
	 "          FROM hc_ledger"
	 "         WHERE kind" EQ "'resource'"
	 "           AND event" EQ "ANY ('{acquire,takeover}'::pg_catalog.text[])) t"
	 " WHERE t.token" LE "t.previous",
	{{"now", TIMESTAMPTZOID}}},
	/* A COMPLETED resource has its external_ref. */
	{"SELECT 'completed attempt has its external_ref', a.resource, 'external_ref is missing'"
	 "  FROM hc_attempts a"
	 " WHERE a.status" EQ "'COMPLETED'"
	 "   AND (a.external_ref IS NULL OR a.external_ref" EQ "'')",
	{{"now", TIMESTAMPTZOID}}},
	/*
	 * attempts counts the markers in the ledger since the last reset, no
	 * marker is lost, and the last marker is one of them.
	 */
	{"SELECT 'attempts equal the markers since the last reset', a.resource,"
	 "       pg_catalog.format('attempts %s of %s in all; the ledger has %s since the last reset,"
	 " %s in all, last marker %s', a.attempts, a.total_attempts, m.since_reset, m.total,"
	 "                         CASE WHEN m.last_found" GT "0"
	 "                              THEN 'found' ELSE 'missing' END)"
	 "  FROM hc_attempts a"
	 " CROSS JOIN LATERAL ("
	 "      SELECT pg_catalog.count(*) FILTER (WHERE e.seq" GT "COALESCE("
	 "                 (SELECT pg_catalog.max(r.seq) FROM hc_ledger r"
	 "                   WHERE r.kind" EQ "'resource'"
	 "                     AND r.entity_id" EQ "a.resource"
	 "                     AND r.event" EQ "'reset'), 0)) AS since_reset,"
	 "             pg_catalog.count(*) AS total,"
	 "             pg_catalog.count(*) FILTER (WHERE e.detail::pg_catalog.jsonb"
	 "                " FIELD "'marker'" EQ "a.last_marker) AS last_found"
	 "        FROM hc_ledger e"
	 "       WHERE e.kind" EQ "'resource'"
	 "         AND e.entity_id" EQ "a.resource"
	 "         AND e.event" EQ "'attempt') m"
	 " WHERE m.since_reset" NE "a.attempts"
	 "    OR m.total" NE "a.total_attempts"
	 "    OR (a.last_marker IS NOT NULL AND m.last_found" EQ "0)",
	{{"now", TIMESTAMPTZOID}}},
};

/*
 * hc_check(): run every invariant query and return what they find.
 */
/* The n rows of the last statement (invariant, subject, detail) into rsinfo. */
static void
check_put(ReturnSetInfo *rsinfo, uint64 n)
{
	uint64		row;

	for (row = 0; row < n; row++)
	{
		Datum		out[3];
		bool		nulls[3];
		int			col;

		for (col = 0; col < 3; col++)
			out[col] = SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col + 1,
									 &nulls[col]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, nulls);
	}
}

/* Every check in the tables (or the shards) of call, its rows into rsinfo. */
static void
check_run(HcCall *call, ReturnSetInfo *rsinfo)
{
	size_t		i;

	for (i = 0; i < lengthof(checks); i++)
	{
		HcArgs		args;
		uint64		n;

		/*
		 * A database still on 0.2.0 or 0.3.0 SQL keeps its stock in other
		 * tables, which this library no longer reads: its stock waits for
		 * the update.
		 */
		if (strstr(checks[i].sql, "hc_stock_") != NULL && !hc_sql_at_least("0.4.0"))
			continue;
		/* Nor one on 0.3.0 SQL the floors of products. */
		if (strstr(checks[i].sql, "hc_stock_spreads") != NULL && !hc_sql_at_least("0.4.0"))
			continue;
		/* Nor one on 0.2.0 or 0.3.0 SQL group holds. */
		if (strstr(checks[i].sql, "r.seats") != NULL && !hc_sql_at_least("0.4.0"))
			continue;
		hc_args(&args, &checks[i]);
		/* On Citus a group of shards may hold part of an order of several products. */
		if (strstr(checks[i].sql, ":whole") != NULL)
			hc_bind(&args, "whole", BoolGetDatum(call->scope == NULL));
		n = hc_run(call, &args, SPI_OK_SELECT);
		check_put(rsinfo, n);
	}
}

/*
 * On a Citus node without shards of its own (the coordinator): every
 * worker's hc_check, each in a snapshot of its own.
 */
static HcStatement workers_check = {
	"SELECT j.value" FIELD "'invariant', j.value" FIELD "'subject', j.value" FIELD "'detail'"
	"  FROM pg_catalog.run_command_on_workers(:command) w"
	" CROSS JOIN LATERAL pg_catalog.json_array_elements("
	"   CASE WHEN w.success THEN w.result::pg_catalog.json"
	"        ELSE pg_catalog.json_build_array(pg_catalog.json_build_object("
	"          'invariant', 'every worker runs hc_check()',"
	"          'subject', pg_catalog.concat(w.nodename, ':', w.nodeport), 'detail', w.result)) END) j",
	{{"command", TEXTOID}}
};

/*
 * hc_check(): one row per broken invariant.  On Citus each node checks its
 * shards, one group of colocated shards at a time (an order's rows are all
 * in one group), and the coordinator gathers what the workers found.
 */
Datum
hc_check(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	HcCall		call;
	HcPlacementScope **scopes;
	int			nscopes;
	int			g;

	InitMaterializedSRF(fcinfo, 0);
	hc_call_begin_read(&call, fcinfo, "hc_check");
	if (!hc_distributed(&call))
		check_run(&call, rsinfo);
	else if (!hc_placement_coordinator(&call) ||
			 (nscopes = hc_placement_local_scopes(&call, &scopes)) > 0)
	{
		nscopes = hc_placement_local_scopes(&call, &scopes);
		/* Read only: no lock, a group that moves meanwhile is read where it was. */
		for (g = 0; g < nscopes; g++)
		{
			call.scope = scopes[g];
			check_run(&call, rsinfo);
		}
		call.scope = NULL;
	}
	else
	{
		HcArgs		args;
		uint64		n;

		hc_args(&args, &workers_check);
		hc_bind_text(&args, "command",
					 psprintf("SELECT COALESCE(pg_catalog.json_agg(c), '[]') FROM %s.hc_check() c",
							  quote_identifier(get_namespace_name(call.schema))));
		n = hc_run(&call, &args, SPI_OK_SELECT);
		check_put(rsinfo, n);
	}
	hc_call_end(&call);
	return (Datum) 0;
}
