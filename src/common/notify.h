/*
 * notify.h
 *		Live updates for listing pages (notify.c).
 */
#ifndef HOLDCOMMIT_NOTIFY_H
#define HOLDCOMMIT_NOTIFY_H

/* The channel holdcommit notifies on. */
#define HC_NOTIFY_CHANNEL "holdcommit"

extern void hc_notify(const char *kind, const char *id, const char *status);

#endif							/* HOLDCOMMIT_NOTIFY_H */
