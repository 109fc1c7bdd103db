/*
 * prune.c
 *		Bounded history for holds: released and expired holds that ended
 *		before the horizon (holdcommit.history_retention), with their ledger
 *		rows, leave the tables (admin/sweep.c runs it).
 *
 * Invariants:
 *   1. Only a hold that has ended as RELEASED or EXPIRED and whose key is
 *      forgotten is pruned: a committed hold is the one-sale index's guard
 *      and stays, and a key outlives its reservation, or a retry would make
 *      a second sale.  A group hold goes as a whole or not at all (its one
 *      key is on one seat).
 *   2. Its ledger rows go with it, in the same statement: they add up to
 *      nothing (a hold, then its release or expiry), so hc_check()'s sums
 *      are unchanged, and no check reads an asset's seq.
 *   3. It never waits on a live call: a reservation row another transaction
 *      has locked is skipped (its group with it), left for the next sweep.
 */
#include "postgres.h"

#include "catalog/pg_type.h"

#include "common/sweep.h"

/*
 * Up to :batch_size finished holds that ended before :horizon, from
 * :resume_from on (the ended_at the last batch reached), by the index of
 * finished holds: every seat of each one's reservation locked (SKIP LOCKED;
 * a reservation not locked whole, or with a seat not yet prunable, stays),
 * deleted, and its ledger rows with it: each asset's rows read once for
 * all the holds of the batch on it (a seat held and let go thousands of
 * times has that many rows).  No plan depends on estimates
 * (doc/architecture.md, "Plan policy"): the key is tested with num_nulls(),
 * which only that index serves; a reservation's seats are reached by id and
 * its ledger rows by their key (kind, entity_id), each in a subquery run
 * once per row (OFFSET 0: never joined another way); the whole reservations
 * are an uncorrelated IN kept out of the join tree (IS TRUE), which
 * PostgreSQL hashes once; rows are deleted by the ctids just locked.
 */
#define PRUNABLE(r) \
	"pg_catalog.num_nulls(" r ".idempotency_key)" EQ "1" \
	" AND " r ".status" EQ "ANY ('{RELEASED,EXPIRED}'::pg_catalog.text[])" \
	" AND " r ".ended_at" LT ":horizon"
static HcStatement prune_holds = {
	"WITH candidates AS ("
	"  SELECT r.id, r.ended_at FROM hc_reservations r"
	"   WHERE " PRUNABLE("r") " AND r.ended_at" GE ":resume_from"
	"   ORDER BY r.ended_at LIMIT :batch_size),"
	" locked AS ("
	"  SELECT s.tid, s.asset_id, s.id"
	"    FROM (SELECT DISTINCT id FROM candidates) c"
	"   CROSS JOIN LATERAL ("
	"     SELECT r.ctid AS tid, r.asset_id, r.id, r.idempotency_key, r.status, r.ended_at"
	"       FROM hc_reservations r WHERE r.id" EQ "c.id"
	"     OFFSET 0 FOR UPDATE SKIP LOCKED) s"
	"   WHERE " PRUNABLE("s") "),"
	" whole AS ("
	"  SELECT l.id FROM locked l GROUP BY l.id"
	"  HAVING pg_catalog.count(*)" EQ "(SELECT pg_catalog.count(*) FROM hc_reservations a"
	"                                  WHERE a.id" EQ "l.id)),"
	" doomed AS ("
	"  SELECT l.tid, l.asset_id, l.id FROM locked l"
	"   WHERE (l.id" EQ "ANY (SELECT id FROM whole)) IS TRUE),"
	" gone AS ("
	"  DELETE FROM hc_reservations r WHERE r.ctid" EQ "ANY (ARRAY(SELECT tid FROM doomed))"
	"  RETURNING r.id),"
	" ledger AS ("
	"  DELETE FROM hc_ledger g WHERE g.ctid" EQ "ANY (ARRAY("
	"    SELECT x.tid"
	"      FROM (SELECT asset_id, pg_catalog.array_agg(id) AS ids FROM doomed GROUP BY asset_id) d"
	"     CROSS JOIN LATERAL (SELECT g.ctid AS tid FROM hc_ledger g"
	"                          WHERE g.kind" EQ "'asset' AND g.entity_id" EQ "d.asset_id"
	"                            AND g.reservation_id" EQ "ANY (d.ids) OFFSET 0) x))"
	"  RETURNING 1)"
	" SELECT (SELECT pg_catalog.count(DISTINCT id) FROM gone) AS pruned,"
	"        (SELECT pg_catalog.count(*) FROM ledger) AS ledger_rows,"
	"        (SELECT pg_catalog.count(*) FROM candidates) AS walked,"
	"        (SELECT pg_catalog.max(ended_at) FROM candidates) AS last",
	{{"horizon", TIMESTAMPTZOID}, {"resume_from", TIMESTAMPTZOID}, {"batch_size", INT4OID}}
};

/*
 * One batch of finished holds ended before horizon; returns how many were
 * pruned.  The next batch starts at the newest end this one walked over.
 */
int64
hc_hold_prune(HcCall *call, int batch_size, TimestampTz horizon, HcSweepCounts *counts)
{
	int64		pruned = hc_prune_run(call, &prune_holds, horizon, &counts->pruned_holds_from,
									  batch_size);

	counts->pruned_holds += pruned;
	return pruned;
}
