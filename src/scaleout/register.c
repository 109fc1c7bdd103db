/*
 * register.c
 *		What the scale-out layer (Citus) fills in for the core and the
 *		domains, at _PG_init: they reach it only through these tables.
 */
#include "postgres.h"

#include "scaleout/order_steps.h"
#include "scaleout/register.h"

void
hc_scaleout_register(void)
{
	hc_order_steps_register();
}
