/*
 * orders.c
 *		Where stock/ keeps the operations on orders of several products
 *		that the scale-out layer registers at _PG_init (orders.h).
 */
#include "postgres.h"

#include "stock/orders.h"

static const HcStockOrders *stock_orders = NULL;

void
hc_stock_orders_register(const HcStockOrders *orders)
{
	stock_orders = orders;
}

/* The operations, which only a call on Citus asks for: registered by then. */
const HcStockOrders *
hc_stock_orders(void)
{
	if (stock_orders == NULL)
		elog(ERROR, "no operations are registered for orders of several products");
	return stock_orders;
}
