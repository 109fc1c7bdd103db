/*
 * orders.h
 *		Orders of several products on Citus: the operations stock/ runs on
 *		such an order, step by step on the nodes of its rows, which the
 *		scale-out layer fills in at _PG_init (scaleout/order_steps.c,
 *		hc_order_steps_register).  stock/ never includes scaleout/: the
 *		dependency runs one way.
 *
 * On a single node nothing is registered and nothing asks: a call asks
 * only once hc_distributed() said it runs on Citus, or for a reservation
 * that spread marked as spread.
 */
#ifndef HOLDCOMMIT_STOCK_ORDERS_H
#define HOLDCOMMIT_STOCK_ORDERS_H

#include "stock/stock.h"

typedef struct HcStockOrders
{
	/*
	 * hc_reserve_items: the key and the order's row on its first product's
	 * node, then each line on its product's; the single node's refusals.
	 */
	void		(*reserve) (HcCall *call, StockReservation *r, const char *key,
							HcFingerprint *fp, int64 ttl);

	/*
	 * How many products the reservation's row on scope_id's node names (0:
	 * there is none).  For several, r has its scope and its products, and
	 * r->spread is set: the call runs its steps where they are.
	 */
	int			(*spread) (HcCall *call, const char *scope_id, const char *reservation_id,
						   StockReservation *r);

	/* hc_stock_lock for a spread order. */
	void		(*lock) (HcCall *call, const char *reservation_id, bool retake,
						 StockReservation *r);

	/*
	 * A line's end on its product's node: false if a late finalize found its
	 * units gone.  retake is how lock locked it.
	 */
	bool		(*move) (HcCall *call, StockReservation *r, StockLine *line, const char *status,
						 bool retake);

	/* The order's row ends with status. */
	void		(*end) (HcCall *call, StockReservation *r, const char *status);
} HcStockOrders;

extern void hc_stock_orders_register(const HcStockOrders *orders);
extern const HcStockOrders *hc_stock_orders(void);

#endif							/* HOLDCOMMIT_STOCK_ORDERS_H */
