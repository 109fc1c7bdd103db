/*
 * register.h
 *		What _PG_init (holdcommit.c) needs of counted stock while
 *		shared_preload_libraries is processed: the shared memory in which
 *		spread_watch.c watches the reserves of each product.  Only
 *		holdcommit.c and the files that define these include it.
 */
#ifndef HOLDCOMMIT_STOCK_REGISTER_H
#define HOLDCOMMIT_STOCK_REGISTER_H

extern Size hc_stock_watch_shmem_size(void);
extern void hc_stock_watch_shmem_init(void);

#endif							/* HOLDCOMMIT_STOCK_REGISTER_H */
