/*
 * worker.h
 *		The background sweeper: a launcher and one worker per database
 *		(worker.c).
 */
#ifndef HOLDCOMMIT_WORKER_H
#define HOLDCOMMIT_WORKER_H

extern void hc_worker_init(void);

#endif							/* HOLDCOMMIT_WORKER_H */
