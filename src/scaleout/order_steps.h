/*
 * order_steps.h
 *		The steps of orders of several products on Citus (order_steps.c),
 *		registered with stock/ (stock/orders.h) by register.c.
 */
#ifndef HOLDCOMMIT_ORDER_STEPS_H
#define HOLDCOMMIT_ORDER_STEPS_H

extern void hc_order_steps_register(void);

#endif							/* HOLDCOMMIT_ORDER_STEPS_H */
