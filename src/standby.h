/*
 * standby.h
 *		What a call does on a standby (standby.c).
 */
#ifndef HOLDCOMMIT_STANDBY_H
#define HOLDCOMMIT_STANDBY_H

/* On a standby, refuse a call that would write (25006). */
extern void hc_refuse_on_standby(const char *function);

/* On a standby, refuse a call whose idempotency key made nothing there yet (25006). */
extern void hc_refuse_new_key_on_standby(const char *function);

#endif							/* HOLDCOMMIT_STANDBY_H */
