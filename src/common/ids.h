/*
 * ids.h
 *		Reservation ids (ids.c).
 */
#ifndef HOLDCOMMIT_IDS_H
#define HOLDCOMMIT_IDS_H

#include "datatype/timestamp.h"

extern char *hc_new_reservation_id(TimestampTz now);
extern int64 hc_unix_ms(TimestampTz t);

#endif							/* HOLDCOMMIT_IDS_H */
