/*
 * sweep.h
 *		The sweep (sweep.c), shared with the background worker (worker.c).
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

extern bool hc_sweep_batch(HcCall *call, int batch_size, HcSweepCounts *counts);
extern void hc_sweeper_record(HcCall *call, TimestampTz started, const HcSweepCounts *counts,
							  const char *error, int interval_s);

#endif							/* HOLDCOMMIT_SWEEP_H */
