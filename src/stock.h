/*
 * stock.h
 *		What counted stock (stock.c) offers the sweeper (sweep.c).
 */
#ifndef HOLDCOMMIT_STOCK_H
#define HOLDCOMMIT_STOCK_H

#include "call.h"

extern bool hc_stock_sweep_product(HcCall *call, const char *product_id, int64 *units,
								   int64 *ended);

#endif							/* HOLDCOMMIT_STOCK_H */
