/*
 * register.h
 *		What _PG_init (holdcommit.c) needs of the autonomous calls while
 *		shared_preload_libraries is processed: the pool's shared memory, and
 *		what a command that needs a database to itself calls.  Only
 *		holdcommit.c and pool.c, which defines these, include it.
 */
#ifndef HOLDCOMMIT_AUTONOMOUS_REGISTER_H
#define HOLDCOMMIT_AUTONOMOUS_REGISTER_H

/* pool.c: the pool of workers, in shared memory. */
extern Size hc_pool_shmem_size(void);
extern void hc_pool_shmem_init(void);

/* pool.c: let the workers of a database go, as soon as they are idle. */
extern void hc_autonomous_retire(Oid dboid);

#endif							/* HOLDCOMMIT_AUTONOMOUS_REGISTER_H */
