/*
 * sweep.h
 *		The sweep (sweep.c): what each domain sweeps, and what the background
 *		worker (sweeper.c) runs.
 */
#ifndef HOLDCOMMIT_SWEEP_H
#define HOLDCOMMIT_SWEEP_H

#include "call.h"

/* What a sweep did, by kind. */
typedef struct HcSweepCounts
{
	int64		expired_holds;			/* holds ended as EXPIRED, assets AVAILABLE */
	int64		expired_reservations;	/* stock reservations ended as EXPIRED */
	int64		released_units;			/* stock units that stopped counting */
	int64		purged_keys;			/* idempotency keys forgotten */
	/* where the next batch of expired holds starts, once resumed */
	bool		resumed;
	TimestampTz holds_from;
} HcSweepCounts;

/* Each domain sweeps its own (hold.c, stock.c, idempotency.c). */
extern int64 hc_hold_sweep(HcCall *call, int batch_size, HcSweepCounts *counts);
extern void hc_stock_sweep(HcCall *call, int batch_size, HcSweepCounts *counts);
extern int64 hc_idempotency_sweep(HcCall *call, int batch_size);

extern bool hc_sweep_batch(HcCall *call, int batch_size, HcSweepCounts *counts);
extern void hc_sweeper_record(HcCall *call, TimestampTz started, const HcSweepCounts *counts,
							  const ErrorData *error, int interval_s, bool has_sqlstate);

#endif							/* HOLDCOMMIT_SWEEP_H */
