/*
 * subxact.h
 *		One try in an internal subtransaction (subxact.c).
 */
#ifndef HOLDCOMMIT_SUBXACT_H
#define HOLDCOMMIT_SUBXACT_H

#include "core/call.h"

/* A try: true if it did what it came for, false to roll it back. */
typedef bool (*HcTry) (void *arg);

extern bool hc_try_in_subxact(HcCall *call, HcTry try, void *arg);

#endif							/* HOLDCOMMIT_SUBXACT_H */
