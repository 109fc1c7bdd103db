/*
 * sweep.h
 *		What a sweep did (HcSweepCounts), and the sweep of each domain: a
 *		batch of the sweep (admin/sweep.c) calls each in turn.
 */
#ifndef HOLDCOMMIT_COMMON_SWEEP_H
#define HOLDCOMMIT_COMMON_SWEEP_H

#include "common/validate.h"
#include "core/call.h"

/* What a sweep did, by kind. */
typedef struct HcSweepCounts
{
	int64		expired_holds;			/* holds ended as EXPIRED, assets AVAILABLE */
	int64		expired_reservations;	/* stock reservations ended as EXPIRED */
	int64		released_units;			/* stock units that stopped counting */
	int64		purged_keys;			/* idempotency keys forgotten */

	/*
	 * Where each kind's next batch starts, once a batch has taken some: the
	 * rows a sweep has changed leave index entries behind that every later
	 * scan of its transaction still walks over (invisible to it, but not
	 * removable before it ends), so a batch that started from the beginning
	 * again would walk over all that the sweep has done so far.
	 */
	bool		resumed;		/* expired holds: from holds_from (expires_at) */
	TimestampTz holds_from;
	bool		hold_keys_resumed;	/* keys of holds: from hold_keys_from (created_at) */
	TimestampTz hold_keys_from;
	bool		stock_keys_resumed; /* keys of stock: from stock_keys_from (created_at) */
	TimestampTz stock_keys_from;
	/* products with expired lines: from products_from on, in byte order */
	char		products_from[HC_MAX_ID_BYTES + 1];
	bool		lines_resumed;	/* products_from's lines: from lines_from (expires_at) */
	TimestampTz lines_from;
	bool		lines_done;		/* no product is left with expired lines */
	bool		orders_resumed; /* orders left RESERVED: from orders_from (expires_at) */
	TimestampTz orders_from;
	bool		orders_done;	/* no order is left RESERVED with no counted line */
	/* on Citus: the group of this node's shards being swept (route.c) */
	int			shard_group;
} HcSweepCounts;

/* Each domain sweeps its own (hold/, stock/, common/idempotency.c). */
extern int64 hc_hold_sweep(HcCall *call, int batch_size, HcSweepCounts *counts);
extern void hc_stock_sweep(HcCall *call, int batch_size, HcSweepCounts *counts);
extern int64 hc_idempotency_sweep(HcCall *call, int batch_size, HcSweepCounts *counts);

#endif							/* HOLDCOMMIT_COMMON_SWEEP_H */
