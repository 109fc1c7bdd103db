/*
 * stock.h
 *		What counted stock (stock.c) shares with the steps of an order of
 *		several products on Citus (order_steps.c).
 */
#ifndef HOLDCOMMIT_STOCK_H
#define HOLDCOMMIT_STOCK_H

#include "datatype/timestamp.h"
#include "fmgr.h"

#include "common/idempotency.h"
#include "core/call.h"
#include "core/statement.h"

typedef struct StockLine
{
	char	   *product_id;
	int32		qty;
	char	   *status;			/* of a stored line */
	int16		part;			/* the part it is counted in */
	int32		parts;			/* of a new line: its product's parts; of a stored
								 * one: how many are locked (stock_lock), or 0 */
} StockLine;

/* A stock reservation, as the functions return it (hc_stock_reservation). */
typedef struct StockReservation
{
	char	   *id;
	char	   *scope_id;
	char	   *buyer_id;
	char	   *status;
	TimestampTz expires_at;
	TimestampTz created_at;
	bool		replayed;
	StockLine  *lines;
	int			nlines;
	bool		spread;			/* on Citus, its lines on several nodes */
	bool		retake;			/* spread: its lines locked for a late finalize */
} StockReservation;

typedef struct StockParts
{
	int			n;
	int32	   *stock;			/* of part i */
	int32	   *reserved;
	int64		total_stock;
	int64		total_reserved;
} StockParts;

/* How many parts a product has. */
extern int32 stock_count_parts(HcCall *call, const char *product_id);

extern void product_not_found(const char *product_id);
extern void stock_parts_changed(const char *product_id);
extern void stock_insufficient(const char *product_id, int32 qty, int32 stock, int32 reserved);
extern void stock_lock_parts(HcCall *call, const char *product_id, StockParts *p);
extern int32 stock_lock_line_part(HcCall *call, const char *product_id,
								  const char *reservation_id, int16 part, bool all_parts);
extern bool stock_take(HcCall *call, const char *product_id, int32 parts, bool tried, int16 *part,
					   int32 qty, const char *reservation_id, const char *buyer_id, int32 *stock,
					   int32 *reserved);
extern bool stock_retake_line(HcCall *call, StockReservation *r, StockLine *line);
extern void stock_move_line(HcCall *call, StockReservation *r, StockLine *line, const char *status,
							int32 stock_delta, int32 reserved_delta, const char *event,
							const char *source, bool last);
extern void stock_end(HcCall *call, StockReservation *r, const char *status);

/* Orders of several products on Citus (order_steps.c). */
extern void order_reserve(HcCall *call, StockReservation *r, const char *key, HcFingerprint *fp,
						  int64 ttl);
extern int	order_spread(HcCall *call, const char *scope_id, const char *reservation_id,
						 StockReservation *r);
extern void order_lock(HcCall *call, const char *reservation_id, bool retake, StockReservation *r);
extern bool order_move(HcCall *call, StockReservation *r, StockLine *line, const char *status,
					   bool retake);
extern void order_end(HcCall *call, StockReservation *r, const char *status);

#endif							/* HOLDCOMMIT_STOCK_H */
