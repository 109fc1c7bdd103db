/*
 * sweep.h
 *		What a sweep did (HcSweepCounts), and the sweep of each domain: a
 *		batch of the sweep (admin/sweep.c) calls each in turn.
 */
#ifndef HOLDCOMMIT_COMMON_SWEEP_H
#define HOLDCOMMIT_COMMON_SWEEP_H

#include "common/validate.h"
#include "core/call.h"
#include "core/statement.h"

/* Where a kind's next batch starts, once a batch has taken some (below). */
typedef struct HcSweepFrom
{
	bool		resumed;
	TimestampTz at;
} HcSweepFrom;

/* What a sweep did, by kind. */
typedef struct HcSweepCounts
{
	int64		expired_holds;			/* holds ended as EXPIRED, assets AVAILABLE */
	int64		expired_reservations;	/* stock reservations ended as EXPIRED */
	int64		released_units;			/* stock units that stopped counting */
	int64		purged_keys;			/* idempotency keys forgotten */
	int64		pruned_holds;			/* finished holds pruned (history) */
	int64		pruned_orders;			/* finished stock orders pruned */
	int64		carried_rows;			/* product ledger rows carried forward */

	/*
	 * Where each kind's next batch starts, once a batch has taken some: the
	 * rows a sweep has changed leave index entries behind that every later
	 * scan of its transaction still walks over (invisible to it, but not
	 * removable before it ends), so a batch that started from the beginning
	 * again would walk over all that the sweep has done so far.
	 */
	HcSweepFrom holds;			/* expired holds (expires_at) */
	HcSweepFrom hold_keys;		/* keys of holds (created_at) */
	HcSweepFrom stock_keys;		/* keys of stock (created_at) */
	/* products with expired lines: from products_from on, in byte order */
	char		products_from[HC_MAX_ID_BYTES + 1];
	HcSweepFrom lines;			/* products_from's lines (expires_at) */
	bool		lines_done;		/* no product is left with expired lines */
	HcSweepFrom orders;			/* orders left RESERVED (expires_at) */
	bool		orders_done;	/* no order is left RESERVED with no counted line */
	HcSweepFrom pruned_holds_from;	/* finished holds (ended_at) */
	HcSweepFrom pruned_orders_from; /* finished orders (ended_at) */
	/* products due for a carry: after carried_to, in byte order (stock/prune.c) */
	char		carried_to[HC_MAX_ID_BYTES + 1];
	/* on Citus: the group of this node's shards being swept (route.c) */
	int			shard_group;
} HcSweepCounts;

/* The start of a kind's next batch: its beginning until a batch took some. */
static inline TimestampTz
hc_sweep_from(const HcSweepFrom *from)
{
	return from->resumed ? from->at : DT_NOBEGIN;
}

/* A batch took a row of the kind at `at`: the next starts there, or later. */
static inline void
hc_sweep_reached(HcSweepFrom *from, TimestampTz at)
{
	if (!from->resumed || at > from->at)
		from->at = at;
	from->resumed = true;
}

/*
 * A batch of a kind: stmt run with :batch_size and the start from_param
 * (from), which moves on to the newest expires_at of the rows it returns.
 * Returns how many.
 */
static inline uint64
hc_sweep_run(HcCall *call, HcStatement *stmt, const char *from_param, HcSweepFrom *from,
			 int batch_size, int expected)
{
	HcArgs		args;
	uint64		n;
	uint64		i;

	hc_args(&args, stmt);
	hc_bind(&args, from_param, TimestampTzGetDatum(hc_sweep_from(from)));
	hc_bind(&args, "batch_size", Int32GetDatum(batch_size));
	n = hc_run(call, &args, expected);
	for (i = 0; i < n; i++)
		hc_sweep_reached(from, hc_timestamptz((int) i, "expires_at"));
	return n;
}

/*
 * A batch of history (hold/prune.c, stock/prune.c): stmt run with :horizon,
 * :batch_size and the start :resume_from (from), which moves on to the
 * newest ended_at it walked over ("last", when it "walked" any).  Returns
 * how many it "pruned".
 */
static inline int64
hc_prune_run(HcCall *call, HcStatement *stmt, TimestampTz horizon, HcSweepFrom *from,
			 int batch_size)
{
	HcArgs		args;

	hc_args(&args, stmt);
	hc_bind(&args, "horizon", TimestampTzGetDatum(horizon));
	hc_bind(&args, "resume_from", TimestampTzGetDatum(hc_sweep_from(from)));
	hc_bind(&args, "batch_size", Int32GetDatum(batch_size));
	hc_run(call, &args, SPI_OK_SELECT);
	if (hc_int64(0, "walked") > 0)
		hc_sweep_reached(from, hc_timestamptz(0, "last"));
	return hc_int64(0, "pruned");
}

/* Each domain sweeps its own (hold/, stock/, common/idempotency.c). */
extern int64 hc_hold_sweep(HcCall *call, int batch_size, HcSweepCounts *counts);
extern void hc_stock_sweep(HcCall *call, int batch_size, HcSweepCounts *counts);
extern int64 hc_idempotency_sweep(HcCall *call, int batch_size, HcSweepCounts *counts);

/* History past holdcommit.history_retention (hold/prune.c, stock/prune.c). */
extern int64 hc_hold_prune(HcCall *call, int batch_size, TimestampTz horizon,
						   HcSweepCounts *counts);
extern int64 hc_stock_prune(HcCall *call, int batch_size, TimestampTz horizon,
							HcSweepCounts *counts);
extern int64 hc_stock_carry(HcCall *call, int batch_size, HcSweepCounts *counts);

/* At a sweep's end: start the gather of the products spread automatically that are due (stock/). */
extern void hc_stock_gather_start(HcCall *call);

#endif							/* HOLDCOMMIT_COMMON_SWEEP_H */
