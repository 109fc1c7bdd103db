/*
 * register.h
 *		What _PG_init (holdcommit.c) needs of counted stock while
 *		shared_preload_libraries is processed: the shared memory in which
 *		spread_watch.c watches the reserves of each product and seats the
 *		spreaders; and what a command that needs a database to itself
 *		has them do.  Only holdcommit.c and the files that define these
 *		include it.
 */
#ifndef HOLDCOMMIT_STOCK_REGISTER_H
#define HOLDCOMMIT_STOCK_REGISTER_H

#include "storage/lwlock.h"

#define HC_SPREADERS_LWLOCK_TRANCHE	"holdcommit spreaders"

extern Size hc_stock_watch_shmem_size(void);
extern void hc_stock_watch_shmem_init(LWLock *spreaders_lock);
extern void hc_stock_spreaders_stop(Oid dboid);

#endif							/* HOLDCOMMIT_STOCK_REGISTER_H */
