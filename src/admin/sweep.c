/*
 * sweep.c
 *		hc_sweep(batch_size): expired holds back on sale, expired stock
 *		reservations released once, idempotency keys past retention
 *		forgotten; and what the background worker records of its runs.
 *
 * Each domain sweeps its own: hold.c the holds, stock/ the stock lines and
 * orders, idempotency.c the keys; this file runs them in batches.
 *
 * Invariants:
 *   1. Every kind of work is set-based and bounded: one statement per batch
 *      for holds, for orders and for keys, one per product for stock lines
 *      (stock's bounded reclaim), each batch of a kind from where the last
 *      one stopped (HcSweepCounts), and every statement linear whatever the
 *      planner estimates (doc/architecture.md, "Plan policy").
 *   2. A sweep never waits on a live call: rows are taken with FOR NO KEY
 *      UPDATE SKIP LOCKED, and products with HC_FETCH_SKIP_NOWAIT (fetch.c:
 *      SKIP LOCKED can still wait when it follows an update chain, and a
 *      call holding a product may be waiting for an order this sweep
 *      holds); a row a call has locked is left for the next batch or run.
 *   3. Each transition checks the row's own status under its lock, so two
 *      sweeps at once (or a sweep and a call) release each reservation
 *      exactly once.
 *   4. hc_sweep() called by hand runs in the caller's transaction and
 *      commits nothing itself; the worker (sweeper.c) commits after every
 *      batch.
 *   5. On several nodes a node sweeps its own scopes (core/placement.h),
 *      one after the other, each locked for writes first; the node that has
 *      none (Citus' coordinator) has every other node sweep its own, each in
 *      a transaction of its own, and fails (08006) if one cannot.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"

#include "admin/sweep.h"
#include "common/settings.h"
#include "common/validate.h"
#include "core/placement.h"
#include "core/statement.h"
#include "core/version.h"

PG_FUNCTION_INFO_V1(hc_sweep);

/*
 * The advisory lock of a database's history pruning has this in field 4
 * (keys use 0x4843, session-bound leases 0x4844).
 */
#define HC_HISTORY_LOCK_SPACE	0x4845

/*
 * The worker's record of its last run in this database: one row, replaced
 * (a row left under another name by a renamed database goes).  :error null:
 * none; :next_run null: off.
 */
static HcStatement record_run = {
	"WITH gone AS ("
	"  DELETE FROM hc_sweeper_status"
	"   WHERE database" NE "pg_catalog.current_database())"
	" INSERT INTO hc_sweeper_status AS s"
	"   (database, pid, actor, last_start, last_end, expired_holds, expired_reservations,"
	"    purged_keys, runs, total_expired_holds, total_expired_reservations, total_purged_keys,"
	"    last_error, last_error_at, next_run)"
	" VALUES (pg_catalog.current_database(), :pid, :actor, :started, :now, :holds,"
	"         :reservations, :keys, 1, :holds, :reservations, :keys, :error,"
	"         CASE WHEN :error IS NOT NULL THEN :now END, :next_run)"
	" ON CONFLICT (database) DO UPDATE"
	"   SET pid = EXCLUDED.pid, actor = EXCLUDED.actor, last_start = EXCLUDED.last_start,"
	"       last_end = EXCLUDED.last_end, expired_holds = EXCLUDED.expired_holds,"
	"       expired_reservations = EXCLUDED.expired_reservations,"
	"       purged_keys = EXCLUDED.purged_keys, runs = s.runs" PLUS "1,"
	"       total_expired_holds = s.total_expired_holds" PLUS ":holds,"
	"       total_expired_reservations = s.total_expired_reservations" PLUS ":reservations,"
	"       total_purged_keys = s.total_purged_keys" PLUS ":keys,"
	"       last_error = COALESCE(EXCLUDED.last_error, s.last_error),"
	"       last_error_at = COALESCE(EXCLUDED.last_error_at, s.last_error_at),"
	"       next_run = EXCLUDED.next_run",
	{{"pid", INT4OID}, {"started", TIMESTAMPTZOID}, {"holds", INT8OID},
	 {"reservations", INT8OID}, {"keys", INT8OID}, {"error", TEXTOID},
	 {"next_run", TIMESTAMPTZOID}, {"actor", TEXTOID}, {"now", TIMESTAMPTZOID}}
};

/* The SQLSTATE of the error just recorded (a column 0.2.0 does not have). */
static HcStatement record_sqlstate = {
	"UPDATE hc_sweeper_status SET last_error_sqlstate = :sqlstate"
	" WHERE database" EQ "pg_catalog.current_database()",
	{{"sqlstate", TEXTOID}}
};

/*
 * Whether history is pruned here, and before when: what ended before both
 * retentions (a key outlives its reservation whatever the settings).  Not
 * with holdcommit.history_retention 0, nor on SQL before 0.4.0, nor yet on
 * Citus (doc/scale-out.md), nor while another sweep of the database is.
 */
static bool
history_horizon(HcCall *call, TimestampTz *horizon)
{
	int			retention = Max(hc_history_retention, hc_idempotency_retention);
	LOCKTAG		tag;

	if (hc_history_retention == 0 || !hc_sql_at_least("0.4.0") || hc_distributed(call))
		return false;
	/*
	 * One sweep of the database prunes at a time, until its transaction
	 * ends; another one skips history rather than wait.  Two at once would
	 * mark the products due in two orders over several batches, and could
	 * wait for each other in a cycle.
	 */
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, 0, 0, HC_HISTORY_LOCK_SPACE);
	if (LockAcquire(&tag, ExclusiveLock, false, true) == LOCKACQUIRE_NOT_AVAIL)
		return false;
	*horizon = call->now - (int64) retention * USECS_PER_SEC;
	return true;
}

/* One batch of every kind in the tables (or shards) of call. */
static bool
sweep_batch(HcCall *call, int batch_size, HcSweepCounts *counts)
{
	HcSweepCounts before = *counts;
	TimestampTz horizon;

	counts->expired_holds += hc_hold_sweep(call, batch_size, counts);
	hc_stock_sweep(call, batch_size, counts);
	counts->purged_keys += hc_idempotency_sweep(call, batch_size, counts);
	if (history_horizon(call, &horizon))
	{
		hc_hold_prune(call, batch_size, horizon, counts);
		hc_stock_prune(call, batch_size, horizon, counts);
	}
	if (counts->expired_holds != before.expired_holds ||
		counts->expired_reservations != before.expired_reservations ||
		counts->released_units != before.released_units ||
		counts->purged_keys != before.purged_keys ||
		counts->pruned_holds != before.pruned_holds ||
		counts->pruned_orders != before.pruned_orders)
		return true;
	/* Nothing more to prune: the carries of the products due. */
	if (history_horizon(call, &horizon) && hc_stock_carry(call, batch_size, counts) > 0)
		return true;
	/* The last batch: the gathers of spread products, in a worker's transactions. */
	hc_stock_gather_start(call);
	return false;
}

/*
 * hc_sweep on a Citus node without shards of its own (the coordinator):
 * each worker sweeps its shards, in a transaction of its own, and the
 * counts are summed.  false on any other node.
 */
static bool
sweep_on_workers(HcCall *call, int batch_size, HcSweepCounts *counts)
{
	HcPlacementScope **scopes;
	Oid			types[1] = {TEXTOID};
	Datum		values[1];
	uint64		i;
	int			rc;
	MemoryContext mine = CurrentMemoryContext;	/* SPI leaves its own current */

	if (!hc_distributed(call) || !hc_placement_coordinator(call) ||
		hc_placement_local_scopes(call, &scopes) > 0)
		return false;
	/* Run by the owner on each worker, whatever its search_path: all qualified. */
	values[0] = CStringGetTextDatum(psprintf(
		"SELECT pg_catalog.format('%%s %%s %%s', expired_holds, expired_reservations, purged_keys)"
		"  FROM %s.hc_sweep(%d)", quote_identifier(get_namespace_name(call->schema)), batch_size));
	hc_call_search_path(call);
	rc = SPI_execute_with_args("SELECT nodeport, success, result"
							   "  FROM pg_catalog.run_command_on_workers($1)",
							   1, types, values, NULL, false, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "run_command_on_workers failed: %s", SPI_result_code_string(rc));
	for (i = 0; i < SPI_processed; i++)
	{
		char	   *port = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
		char	   *success = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2);
		char	   *result = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 3);
		long long	holds,
					reservations,
					keys;

		if (success == NULL || strcmp(success, "t") != 0 || result == NULL ||
			sscanf(result, "%lld %lld %lld", &holds, &reservations, &keys) != 3)
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("hc_sweep failed on the worker of port %s", port ? port : "?"),
					 errdetail("%s", result ? result : "no answer")));
		counts->expired_holds += holds;
		counts->expired_reservations += reservations;
		counts->purged_keys += keys;
	}
	MemoryContextSwitchTo(mine);
	return true;
}

/*
 * One batch of each kind: up to batch_size expired holds, products with
 * expired lines, and keys past retention.  Returns whether it found
 * anything to do (then the caller runs another batch).  On Citus the
 * batches go through this node's shards one group after the other
 * (counts->shard_group), each group from its beginning.
 */
bool
hc_sweep_batch(HcCall *call, int batch_size, HcSweepCounts *counts)
{
	HcPlacementScope **scopes;
	int			nscopes;

	if (!hc_distributed(call))
		return sweep_batch(call, batch_size, counts);
	nscopes = hc_placement_local_scopes(call, &scopes);
	while (counts->shard_group < nscopes)
	{
		HcSweepCounts done = {0};
		bool		more;

		/* A group that has left this node meanwhile is its new node's to sweep. */
		more = false;
		if (hc_placement_lock_scope(call, scopes[counts->shard_group]))
		{
			call->scope = scopes[counts->shard_group];
			more = sweep_batch(call, batch_size, counts);
			call->scope = NULL;
		}
		if (more)
			return true;
		/* This group is swept: the next starts where its rows start. */
		done.expired_holds = counts->expired_holds;
		done.expired_reservations = counts->expired_reservations;
		done.released_units = counts->released_units;
		done.purged_keys = counts->purged_keys;
		done.shard_group = counts->shard_group + 1;
		*counts = done;
	}
	return false;
}

/*
 * Record a run of the worker in hc_sweeper_status: what its committed
 * batches did, the error that ended it (NULL if none), and when the next
 * run is due (interval_s 0: none).
 */
void
hc_sweeper_record(HcCall *call, TimestampTz started, const HcSweepCounts *counts,
				  const ErrorData *error, int interval_s, bool has_sqlstate)
{
	HcArgs		args;

	hc_args(&args, &record_run);
	hc_bind(&args, "pid", Int32GetDatum(MyProcPid));
	hc_bind(&args, "started", TimestampTzGetDatum(started));
	hc_bind(&args, "holds", Int64GetDatum(counts->expired_holds));
	hc_bind(&args, "reservations", Int64GetDatum(counts->expired_reservations));
	hc_bind(&args, "keys", Int64GetDatum(counts->purged_keys));
	hc_bind_text(&args, "error", error ? error->message : NULL);
	if (interval_s > 0)
		hc_bind(&args, "next_run",
				TimestampTzGetDatum(call->now + (int64) interval_s * USECS_PER_SEC));
	else
		hc_bind_null(&args, "next_run");
	hc_run(call, &args, SPI_OK_INSERT);
	if (error != NULL && has_sqlstate)
	{
		hc_args(&args, &record_sqlstate);
		hc_bind_text(&args, "sqlstate", unpack_sql_state(error->sqlerrcode));
		hc_run(call, &args, SPI_OK_UPDATE);
	}
}

/*
 * hc_sweep(batch_size): sweep in batches until a batch finds nothing left,
 * in the caller's transaction; one row of counts.  What a batch allocates,
 * even what the domains keep for the call (call->outer), goes with it, and
 * hc_run frees each statement's rows at the next, so memory stays flat
 * however large the backlog.
 */
Datum
hc_sweep(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	HcSweepCounts counts = {0};
	HcCall		call;
	MemoryContext outer;
	MemoryContext batch_context;
	int32		batch_size;
	Datum		out[3];
	bool		nulls[3] = {false};

	batch_size = hc_arg_int(fcinfo, 0, "batch_size");
	if (batch_size < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("batch_size must be positive"),
				 errdetail("batch_size is %d.", batch_size)));

	InitMaterializedSRF(fcinfo, 0);
	hc_call_begin(&call, fcinfo, "hc_sweep");
	if (sweep_on_workers(&call, batch_size, &counts))
	{
		hc_call_end(&call);
		goto done;
	}
	/* What outlives the batches (the ledger's actor) is made before them. */
	(void) hc_actor(&call);
	outer = call.outer;
	batch_context = AllocSetContextCreate(outer, "hc_sweep batch", ALLOCSET_DEFAULT_SIZES);
	call.outer = batch_context;
	for (;;)
	{
		MemoryContext old = MemoryContextSwitchTo(batch_context);
		bool		more = hc_sweep_batch(&call, batch_size, &counts);

		MemoryContextSwitchTo(old);
		MemoryContextReset(batch_context);
		if (!more)
			break;
		CHECK_FOR_INTERRUPTS();
	}
	call.outer = outer;
	hc_call_end(&call);

done:
	out[0] = Int64GetDatum(counts.expired_holds);
	out[1] = Int64GetDatum(counts.expired_reservations);
	out[2] = Int64GetDatum(counts.purged_keys);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, nulls);
	return (Datum) 0;
}
