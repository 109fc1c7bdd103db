/*
 * hold.h
 *		Unique assets' one internal header: what hold.c (the functions, the
 *		statements) and direct.c (the same writes without the executor)
 *		share.
 */
#ifndef HOLDCOMMIT_HOLD_H
#define HOLDCOMMIT_HOLD_H

#include "storage/itemptr.h"
#include "utils/timestamp.h"

#include "core/call.h"
#include "core/fetch.h"

/* A reservation of an asset, as the functions return it (hc_reservation). */
typedef struct HoldReservation
{
	char	   *id;
	char	   *asset_id;
	char	   *buyer_id;
	char	   *status;
	TimestampTz expires_at;
	TimestampTz created_at;
	bool		replayed;
	int32		seats;			/* a group hold's seats (group.c); 0: hc_hold's */
	char	   *scope_id;		/* on Citus, its routing id (0.4.0); else NULL */
	/* the asset, as locked: its version there, an invalid TID if a statement locked it */
	char	   *asset_status;
	char	   *asset_reservation_id;
	int32		asset_version;
	ItemPointerData asset_tid;
} HoldReservation;

/* Is this reservation what currently holds its asset? */
static inline bool
hold_is_current(const HoldReservation *r)
{
	return strcmp(r->asset_status, "HELD") == 0 &&
		r->asset_reservation_id != NULL &&
		strcmp(r->asset_reservation_id, r->id) == 0;
}

/* hold.c: the asset's reads and locks, and each change of one seat. */
extern HcFetch hc_hold_peek_asset;
extern HcFetch hc_hold_take_asset;
extern HcFetch hc_hold_lock_asset;
extern bool hc_hold_can_take(HcCall *call, const char *status, TimestampTz until);
extern void hc_hold_sell(HcCall *call, HoldReservation *r);
extern bool hc_hold_taken_since(HcCall *call, const HoldReservation *r);
extern void hc_hold_free(HcCall *call, HoldReservation *r, const char *status, const char *event,
						 const char *source);
extern void hc_hold_move_end(HcCall *call, HoldReservation *r, TimestampTz until);
extern void hc_hold_values(const HoldReservation *r, Datum *values, bool *nulls);

/*
 * group.c: the end of an expired group hold that a hold of one of its seats
 * takes over (1; 0 if the hold is not a group's, -1 if a call in flight has
 * one of its seats), and the calls on a group's id.
 */
extern int	hc_group_expire(HcCall *call, const char *reservation_id);
extern Datum hc_group_commit(HcCall *call, FunctionCallInfo fcinfo, const char *asset_id,
							 const char *id, bool late_ok);
extern Datum hc_group_release(HcCall *call, FunctionCallInfo fcinfo, const char *asset_id,
							  const char *id);
extern Datum hc_group_extend(HcCall *call, FunctionCallInfo fcinfo, const char *asset_id,
							 const char *id, int64 ttl);

/*
 * The writes of each change without the executor (direct.c): false, with
 * nothing written, where the statement of hold.c must make them.
 */
extern bool hc_hold_write_take(HcCall *call, const HoldReservation *r, const char *key,
							   Datum fingerprint, const char *expired_id);
extern bool hc_hold_write_sell(HcCall *call, HoldReservation *r, int32 reserved_delta);
extern bool hc_hold_write_free(HcCall *call, HoldReservation *r, const char *status,
							   const char *event, const char *source);
extern bool hc_hold_write_extend(HcCall *call, HoldReservation *r, TimestampTz until,
								 const char *detail);

#endif							/* HOLDCOMMIT_HOLD_H */
