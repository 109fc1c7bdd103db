/*
 * check.c
 *		hc_check(): one row per violated invariant, none when all hold.
 *
 * It runs on the same protected path as every other call (the extension
 * owner's rights in a security-restricted operation, tables bound to the
 * extension's schema by OID), so an application role may run it without
 * being able to read the ledger, and nobody can point it at look-alikes.
 * Each invariant is one query returning (invariant, subject, detail); :now is
 * the call's clock reading.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"

#include "statement.h"

PG_FUNCTION_INFO_V1(hc_check);


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
	 "  FROM hc_stock_reservations r"
	 " WHERE NOT COALESCE(r.status" EQ "ANY ('{RESERVED,FINALIZED,RELEASED,EXPIRED}'::pg_catalog.text[])"
	 "        AND (r.status" EQ "'RESERVED')" EQ "(r.ended_at IS NULL), false)",
	{{"now", TIMESTAMPTZOID}}},
	{"SELECT 'line has a known status', l.reservation_id,"
	 "       pg_catalog.format('line of %s is %s', l.product_id, l.status)"
	 "  FROM hc_stock_reservation_lines l"
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
	/* A HELD asset is held by exactly its one HELD reservation. */
	{"SELECT 'held asset has its one held reservation', a.id,"
	 "       pg_catalog.format('current_reservation_id %s, %s held reservation(s)',"
	 "                         a.current_reservation_id, pg_catalog.count(r.id))"
	 "  FROM hc_assets a"
	 "  LEFT JOIN hc_reservations r"
	 "         ON r.asset_id" EQ "a.id AND r.status" EQ "'HELD'"
	 " WHERE a.status" EQ "'HELD'"
	 " GROUP BY a.id, a.current_reservation_id"
	 " HAVING pg_catalog.count(r.id)" NE "1"
	 "    OR pg_catalog.bool_or(r.id IS DISTINCT FROM a.current_reservation_id)",
	{{"now", TIMESTAMPTZOID}}},
	/* A SOLD asset has exactly one COMMITTED reservation. */
	{"SELECT 'sold asset has one committed reservation', a.id,"
	 "       pg_catalog.format('%s committed reservation(s)', pg_catalog.count(r.id))"
	 "  FROM hc_assets a"
	 "  LEFT JOIN hc_reservations r"
	 "         ON r.asset_id" EQ "a.id AND r.status" EQ "'COMMITTED'"
	 " WHERE a.status" EQ "'SOLD'"
	 " GROUP BY a.id"
	 " HAVING pg_catalog.count(r.id)" NE "1",
	{{"now", TIMESTAMPTZOID}}},
	/* A HELD or COMMITTED reservation is what its asset says it is. */
	{"SELECT 'reservation matches its asset', r.id,"
	 "       pg_catalog.format('reservation %s, asset %s is %s with %s',"
	 "                         r.status, a.id, a.status, a.current_reservation_id)"
	 "  FROM hc_reservations r"
	 "  JOIN hc_assets a ON a.id" EQ "r.asset_id"
	 " WHERE (r.status" EQ "'HELD'"
	 "        AND (a.status" NE "'HELD'"
	 "             OR a.current_reservation_id IS DISTINCT FROM r.id"
	 "             OR a.hold_expires_at IS DISTINCT FROM r.expires_at))"
	 "    OR (r.status" EQ "'COMMITTED'"
	 "        AND (a.status" NE "'SOLD'"
	 "             OR a.current_reservation_id IS DISTINCT FROM r.id))",
	{{"now", TIMESTAMPTZOID}}},
	/* Each hold was counted once: its ledger rows add up to its status. */
	{"SELECT 'ledger adds up to each hold', r.id,"
	 "       pg_catalog.format('reservation %s; ledger says held %s, sold %s',"
	 "                         r.status, COALESCE(g.reserved, 0), COALESCE(g.stock, 0))"
	 "  FROM hc_reservations r"
	 "  LEFT JOIN (SELECT entity_id, reservation_id,"
	 "                    pg_catalog.sum(reserved_delta) AS reserved,"
	 "                    pg_catalog.sum(stock_delta) AS stock"
	 "               FROM hc_ledger"
	 "              WHERE kind" EQ "'asset' AND reservation_id IS NOT NULL"
	 "              GROUP BY entity_id, reservation_id) g"
	 "         ON g.entity_id" EQ "r.asset_id"
	 "        AND g.reservation_id" EQ "r.id"
	 " WHERE COALESCE(g.reserved, 0)" NE ""
	 "       CASE WHEN r.status" EQ "'HELD' THEN 1 ELSE 0 END"
	 "    OR COALESCE(g.stock, 0)" NE ""
	 "       CASE WHEN r.status" EQ "'COMMITTED' THEN -1 ELSE 0 END",
	{{"now", TIMESTAMPTZOID}}},
	/* reserved is the sum of the RESERVED lines of the product. */
	{"SELECT 'reserved is the sum of reserved lines', i.product_id,"
	 "       pg_catalog.format('reserved %s, reserved lines %s', i.reserved, COALESCE(l.total, 0))"
	 "  FROM hc_inventory i"
	 "  LEFT JOIN (SELECT product_id, pg_catalog.sum(qty) AS total"
	 "               FROM hc_stock_reservation_lines"
	 "              WHERE status" EQ "'RESERVED' GROUP BY product_id) l"
	 "         ON l.product_id" EQ "i.product_id"
	 " WHERE i.reserved" NE "COALESCE(l.total, 0)",
	{{"now", TIMESTAMPTZOID}}},
	/* Each change was counted once: the ledger adds up to stock and reserved. */
	{"SELECT 'ledger adds up to the inventory', i.product_id,"
	 "       pg_catalog.format('stock %s, reserved %s; ledger says %s, %s', i.stock, i.reserved,"
	 "                         COALESCE(g.stock, 0), COALESCE(g.reserved, 0))"
	 "  FROM hc_inventory i"
	 "  LEFT JOIN (SELECT entity_id, pg_catalog.sum(stock_delta) AS stock,"
	 "                    pg_catalog.sum(reserved_delta) AS reserved"
	 "               FROM hc_ledger WHERE kind" EQ "'product'"
	 "              GROUP BY entity_id) g"
	 "         ON g.entity_id" EQ "i.product_id"
	 " WHERE i.stock" NE "COALESCE(g.stock, 0)"
	 "    OR i.reserved" NE "COALESCE(g.reserved, 0)",
	{{"now", TIMESTAMPTZOID}}},

	/*
	 * Each line was counted once: its own ledger rows add up to what its
	 * status says.  This catches a line released twice even when the
	 * product's totals agree with the ledger (both releases logged).
	 */
	{"SELECT 'ledger adds up to each line', l.reservation_id,"
	 "       pg_catalog.format('line of %s (qty %s) is %s; ledger says reserved %s, stock %s',"
	 "                         l.product_id, l.qty, l.status,"
	 "                         COALESCE(g.reserved, 0), COALESCE(g.stock, 0))"
	 "  FROM hc_stock_reservation_lines l"
	 "  LEFT JOIN (SELECT entity_id, reservation_id,"
	 "                    pg_catalog.sum(reserved_delta) AS reserved,"
	 "                    pg_catalog.sum(stock_delta) AS stock"
	 "               FROM hc_ledger"
	 "              WHERE kind" EQ "'product' AND reservation_id IS NOT NULL"
	 "              GROUP BY entity_id, reservation_id) g"
	 "         ON g.entity_id" EQ "l.product_id"
	 "        AND g.reservation_id" EQ "l.reservation_id"
	 " WHERE COALESCE(g.reserved, 0)" NE ""
	 "       CASE WHEN l.status" EQ "'RESERVED' THEN l.qty ELSE 0 END"
	 "    OR COALESCE(g.stock, 0)" NE ""
	 "       CASE WHEN l.status" EQ "'FINALIZED'"
	 "            THEN" MINUS "l.qty ELSE 0 END",
	{{"now", TIMESTAMPTZOID}}},
	/* A reservation's lines agree with it: an ended one has no counted line. */
	{"SELECT 'reservation lines match their reservation', r.id,"
	 "       pg_catalog.format('reservation %s, line of %s is %s', r.status, l.product_id, l.status)"
	 "  FROM hc_stock_reservations r"
	 "  JOIN hc_stock_reservation_lines l ON l.reservation_id" EQ "r.id"
	 " WHERE (r.status" EQ "ANY ('{FINALIZED,RELEASED}'::pg_catalog.text[])"
	 "        AND l.status" NE "r.status)"
	 "    OR (r.status" EQ "'EXPIRED'"
	 "        AND l.status" NE "ALL ('{EXPIRED,RESERVED}'::pg_catalog.text[]))"
	 "    OR (r.status" EQ "'RESERVED' AND l.status" NE "'RESERVED'"
	 "        AND r.expires_at" GT ":now)"
	 "    OR l.expires_at" NE "r.expires_at",
	{{"now", TIMESTAMPTZOID}}},
	/* Every hold belongs to an asset (no foreign key says so). */
	{"SELECT 'reservation has its asset', r.id,"
	 "       pg_catalog.format('asset %s does not exist', r.asset_id)"
	 "  FROM hc_reservations r"
	 " WHERE NOT EXISTS (SELECT FROM hc_assets a WHERE a.id" EQ "r.asset_id)",
	{{"now", TIMESTAMPTZOID}}},
	/* Every line belongs to a product (no foreign key says so). */
	{"SELECT 'line has its product', l.reservation_id,"
	 "       pg_catalog.format('product %s does not exist', l.product_id)"
	 "  FROM hc_stock_reservation_lines l"
	 " WHERE NOT EXISTS (SELECT FROM hc_inventory i"
	 "                    WHERE i.product_id" EQ "l.product_id)",
	{{"now", TIMESTAMPTZOID}}},
	/* Every line belongs to a reservation (no foreign key says so). */
	{"SELECT 'line has its reservation', l.reservation_id,"
	 "       pg_catalog.format('line of %s has no reservation', l.product_id)"
	 "  FROM hc_stock_reservation_lines l"
	 " WHERE NOT EXISTS (SELECT FROM hc_stock_reservations r"
	 "                    WHERE r.id" EQ "l.reservation_id)",
	{{"now", TIMESTAMPTZOID}}},
	/*
	 * A lease's token is the last one the ledger handed out for it: a token
	 * never goes back, whatever was released, taken over or restored.
	 */
	{"SELECT 'lease token is the last one handed out', l.resource,"
	 "       pg_catalog.format('token %s, last token in the ledger %s', l.token, g.token)"
	 "  FROM hc_locks l"
	 "  LEFT JOIN (SELECT entity_id,"
	 "                    pg_catalog.max((detail::pg_catalog.jsonb" FIELD "'token')"
	 "                                   ::pg_catalog.int8) AS token"
	 "               FROM hc_ledger"
	 "              WHERE kind" EQ "'resource'"
	 "                AND event" EQ "ANY ('{acquire,takeover}'::pg_catalog.text[])"
	 "              GROUP BY entity_id) g"
	 "         ON g.entity_id" EQ "l.resource"
	 " WHERE g.token IS DISTINCT FROM l.token",
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
Datum
hc_check(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	HcCall		call;
	size_t		i;

	InitMaterializedSRF(fcinfo, 0);
	hc_call_begin_read(&call, fcinfo, "hc_check");
	for (i = 0; i < lengthof(checks); i++)
	{
		HcArgs		args;
		uint64		n;
		uint64		row;

		hc_args(&args, &checks[i]);
		n = hc_run(&call, &args, SPI_OK_SELECT);
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
	hc_call_end(&call);
	return (Datum) 0;
}
