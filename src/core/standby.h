/*
 * standby.h
 *		What a call does on a standby (standby.c).
 */
#ifndef HOLDCOMMIT_STANDBY_H
#define HOLDCOMMIT_STANDBY_H

/* On a standby or in a read-only transaction, refuse a call that would write (25006). */
extern void hc_refuse_read_only(const char *function);

/* The same for a call whose idempotency key made nothing yet (25006). */
extern void hc_refuse_new_key_read_only(const char *function);

#endif							/* HOLDCOMMIT_STANDBY_H */
