/*
 * null_routing.h
 *		The planner hook that refuses a bare call with a null routing
 *		argument before Citus plans it (null_routing.c).
 */
#ifndef HOLDCOMMIT_NULL_ROUTING_H
#define HOLDCOMMIT_NULL_ROUTING_H

extern void hc_null_routing_register(void);

#endif							/* HOLDCOMMIT_NULL_ROUTING_H */
