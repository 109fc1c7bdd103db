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
