/*
 * group.h
 *		What the group holds share: hc_hold_many (group.c) and
 *		hc_hold_best (best.c) lock seats, reclaim them and write the hold
 *		alike.
 */
#ifndef HOLDCOMMIT_GROUP_H
#define HOLDCOMMIT_GROUP_H

#include "common/idempotency.h"
#include "hold/hold.h"

/* The most seats one group hold takes (doc/reference.md). */
#define HC_GROUP_MAX_SEATS 100

/* A seat a hold has locked, and what it found. */
typedef struct Seat
{
	char	   *asset_id;
	char	   *status;
	TimestampTz until;
	char	   *holder;			/* the expired hold it takes over, or NULL */
	int32		version;
	ItemPointerData tid;
} Seat;

/* The request of a group hold, and what it made. */
typedef struct GroupHold
{
	const char *buyer_id;
	const char *key;
	int64		ttl;
	HcFingerprint fp;
	char	  **ids;			/* the seats, bytewise */
	int			n;
	HoldReservation r;			/* id, buyer and times of the hold */
} GroupHold;

extern void hc_group_seats_together(HcCall *call);
extern const char *hc_seat_lock(HcCall *call, const char *asset_id, Seat *seat);
extern bool hc_seat_reclaim(HcCall *call, Seat *seat);
extern void hc_group_request(HcCall *call, GroupHold *g, const char *buyer_id, const char *key,
							 int64 ttl);
extern bool hc_group_replay(HcCall *call, GroupHold *g);
extern void hc_group_write(HcCall *call, GroupHold *g);
extern void hc_group_rows(FunctionCallInfo fcinfo, GroupHold *g);

#endif							/* HOLDCOMMIT_GROUP_H */
