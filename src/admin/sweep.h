/*
 * sweep.h
 *		The sweep (sweep.c): what hc_sweep() and the background sweeper
 *		(bgw/sweeper/) run.
 */
#ifndef HOLDCOMMIT_ADMIN_SWEEP_H
#define HOLDCOMMIT_ADMIN_SWEEP_H

#include "common/sweep.h"

extern bool hc_sweep_batch(HcCall *call, int batch_size, HcSweepCounts *counts);
extern void hc_sweeper_record(HcCall *call, TimestampTz started, const HcSweepCounts *counts,
							  const ErrorData *error, int interval_s, bool has_sqlstate);

#endif							/* HOLDCOMMIT_ADMIN_SWEEP_H */
