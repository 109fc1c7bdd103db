/*
 * settings.h
 *		The settings of holdcommit (settings.c); durations are in seconds.
 */
#ifndef HOLDCOMMIT_SETTINGS_H
#define HOLDCOMMIT_SETTINGS_H

extern int	hc_idempotency_retention;
extern int	hc_history_retention;
extern int	hc_max_ttl;
extern int	hc_max_hold;
extern int	hc_max_items;
extern bool hc_log_refusals;
extern int	hc_sweep_interval;
extern int	hc_sweep_batch_size;
extern char *hc_sweep_databases;
extern int	hc_max_sweepers;
extern int	hc_sweep_time_slice;	/* milliseconds */
extern int	hc_max_databases;
extern bool hc_notify_enabled;
extern int	hc_max_workers;
extern int	hc_worker_idle_timeout;
extern int	hc_worker_wait_timeout;	/* milliseconds */
extern bool hc_stock_auto_spread_on;
extern int	hc_stock_spread_callers;
extern int	hc_stock_spread_max_parts;
extern int	hc_stock_gather_after;
extern int	hc_stock_spread_stall;	/* milliseconds */
extern int	hc_max_spreaders;

/* The spreaders' seats in shared memory: holdcommit.max_spreaders's most. */
#define HC_MAX_SPREADERS	8

extern void hc_settings_define(void);

#endif							/* HOLDCOMMIT_SETTINGS_H */
