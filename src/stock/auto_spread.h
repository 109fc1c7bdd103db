/*
 * auto_spread.h
 *		A hot product spreads itself: what the spreader worker
 *		(bgw/spreader/) needs of stock/ to run an automatic spread or gather
 *		(auto_spread.c) and to tell the watch of the reserves
 *		(spread_watch.c) how it went.
 */
#ifndef HOLDCOMMIT_AUTO_SPREAD_H
#define HOLDCOMMIT_AUTO_SPREAD_H

#include "datatype/timestamp.h"
#include "nodes/pg_list.h"

#include "common/validate.h"
#include "core/call.h"

/* What a spreader worker is started for, in its bgw_extra. */
typedef enum HcSpreadKind
{
	HC_SPREAD_PRODUCT,			/* spread one product into target parts */
	HC_SPREAD_GATHER			/* gather every product of the database that is due */
} HcSpreadKind;

typedef struct HcSpreadOrder
{
	Oid			dboid;
	int16		kind;			/* HcSpreadKind */
	int16		target;			/* parts, for HC_SPREAD_PRODUCT */
	int32		waiters;		/* the reserves at once that decided it */
	int32		stall_ms;		/* holdcommit.stock_spread_stall of whoever started it */
	int32		gather_after_s; /* holdcommit.stock_gather_after, likewise */
	int16		max_parts;		/* holdcommit.stock_spread_max_parts, likewise */
	int16		seat;			/* its seat among the spreaders; -1: none (no preload) */
	TimestampTz sized_at;		/* a spread is sized no earlier (the rush's callers came) */
	TimestampTz seat_claimed;	/* when its seat was claimed, which names the claim */
	char		product_id[HC_MAX_ID_BYTES + 1];
} HcSpreadOrder;

/*
 * How long a spread waits for part 0 before it gives up (57014): in the queue
 * of a rush's reserves, each holding it until its commit's flush, so that 64
 * of them on a busy disk do not make it give up.  A gather step, which comes
 * when the product is quiet, waits less, so that a gatherer never keeps DROP
 * DATABASE waiting past its 5 s.
 */
#define HC_SPREAD_WAIT_MS	3000
#define HC_GATHER_WAIT_MS	1000

/* What one automatic run did. */
typedef struct HcSpreadDone
{
	bool		found;			/* the product exists */
	int32		parts_from;		/* before the run, or the first step of a gather */
	int32		parts_to;
	bool		more;			/* a gather by part that has more steps to go */
	TimestampTz locked_at;		/* when it took part 0; 0: it did not */
} HcSpreadDone;

/* auto_spread.c */
extern bool hc_stock_auto_spread_run(HcCall *call, const char *product_id, int32 target,
									 int32 waiters, bool by_part, bool grow_only,
									 void (*locked) (void), HcSpreadDone *done);
extern void hc_stock_spread_record_stall(HcCall *call, const char *product_id, double stall_ms);
extern void hc_stock_spread_record_failure(HcCall *call, const char *product_id, const char *why,
										   double stall_ms);

/* spread_watch.c */
extern List *hc_stock_gather_due(HcCall *call, int gather_after_s);
extern void hc_stock_watch_spread_done(Oid dboid, const char *product_id, int32 parts);
extern bool hc_stock_spreader_seat_take(const HcSpreadOrder *order);
extern void hc_stock_spreader_seat_leave(const HcSpreadOrder *order);
extern void hc_stock_watch_parts(const char *product_id, int32 parts);
extern int32 hc_stock_watch_size(const char *product_id, int32 *waiters, int32 max_parts);

#endif							/* HOLDCOMMIT_AUTO_SPREAD_H */
