/*
 * stock.h
 *		Counted stock's one internal header: what the files of stock/, one
 *		per phase, share with each other and with the steps of an order of
 *		several products on Citus (scaleout/order_steps.c).
 *
 *	parts.c		a product's parts: count, lock, take, retake, spread anew
 *	reserve.c	hc_reserve, hc_reserve_items
 *	items.c		the items' JSON, the row a function returns, arrays to bind
 *	lines.c		a stored reservation's lines: lock, move, end, expire
 *	finalize.c	hc_finalize, hc_unreserve
 *	admin.c		hc_stock_set, hc_stock_adjust, hc_stock_spread; a product's
 *				parts added, merged, set
 *	sweep.c		reclaim of expired lines: inline, and hc_stock_sweep
 *	direct.c	the writes of an order of one product without the executor
 *	home_part.c	the part a backend tries first
 *	spread_watch.c	the reserves of each product at once, in shared memory;
 *				starting the automatic spreads and gathers
 *	auto_spread.c	an automatic spread or gather, and its record
 *	orders.c	the operations on orders of several products (orders.h)
 *
 * The model every file keeps:
 *   1. A product's stock lives in parts, rows of hc_stock_parts (product_id,
 *      part), each with its own stock and reserved (CHECK stock >= reserved
 *      >= 0); hc_inventory is their sums.  Most products have one part.
 *   2. Each reservation has one line per product, counted in the reserved of
 *      the line's part exactly while its status is RESERVED, and a line
 *      changes only under its part's row lock.  An order of one product is
 *      one row of hc_stock_orders that is its own line (qty and part set,
 *      its product its scope_id, its status the line's); only an order of
 *      several products has rows in hc_stock_order_lines (StockReservation's
 *      single says which).  A line that no longer counts keeps the part it
 *      was counted in last, which hc_stock_spread may have merged away.
 *   3. Lock order: products in product_id order (bytewise, COLLATE "C");
 *      within a product, all of its parts in part order, or one part alone
 *      -- a line's part, or the part a reserve takes its units from --
 *      after which the transaction takes nothing else of that product
 *      (parts.c).  So two orders never deadlock.
 *   4. The one lock taken between parts (marking a reclaimed reservation
 *      EXPIRED) skips a reservation row that is locked, rather than waiting.
 *   5. So a reservation can still say RESERVED while a reclaimer has
 *      already expired some of its lines.  Every transition therefore looks
 *      at each line's own status under its product's lock: a line stops
 *      counting exactly once, and a reservation with an expired line is an
 *      expired reservation.
 *   6. A part's ledger rows have the seq part * 2^48 + the part's new
 *      version (PART_SEQ), so that the seqs of a product never repeat.
 */
#ifndef HOLDCOMMIT_STOCK_H
#define HOLDCOMMIT_STOCK_H

#include "datatype/timestamp.h"
#include "fmgr.h"
#include "storage/itemptr.h"

#include "common/idempotency.h"
#include "core/call.h"
#include "core/statement.h"

/* The most parts a product may have: part numbers fit the ledger's seq. */
#define STOCK_MAX_PARTS 256

/* The most expired lines one call reclaims; the sweeper clears the rest. */
#define STOCK_RECLAIM_MAX_LINES 1000

/* The seq of a part's ledger row: part * 2^48 + the part's new version. */
#define PART_SEQ(part, version) \
	"(" part "::pg_catalog.int8" TIMES "281474976710656" PLUS version ")"
#define PART_OF_SEQ(seq) ((int16) ((seq) >> 48))

typedef struct StockLine
{
	char	   *product_id;
	int32		qty;
	char	   *status;			/* of a stored line */
	int16		part;			/* the part it is counted in */
	int32		parts;			/* of a new line: its product's parts; of a stored
								 * one: how many are locked (hc_stock_lock), or 0 */
} StockLine;

/*
 * A part locked alone, as its lock read it: what a write of it without the
 * executor needs (direct.c).  An invalid tid: the lock ran as a statement,
 * or the part was written since; the statements write it.
 */
typedef struct StockLockedPart
{
	ItemPointerData tid;
	int32		stock;
	int32		reserved;
	int32		version;
} StockLockedPart;

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
	bool		single;			/* of one product: the order's row is its line */
	bool		spread;			/* on Citus, its lines on several nodes */
	bool		retake;			/* spread: its lines locked for a late finalize */
	/* single, locked by hc_stock_lock: its row's version and its line's part (direct.c) */
	ItemPointerData order_tid;
	StockLockedPart locked;
} StockReservation;

/* A product's parts, as read with all of them locked. */
typedef struct StockParts
{
	int			n;
	int32	   *stock;			/* of part i */
	int32	   *reserved;
	int64		total_stock;
	int64		total_reserved;
} StockParts;

/* What one reclaim did. */
typedef struct StockReclaimed
{
	int64		units;			/* units that stopped counting */
	int64		ended;			/* reservations that became EXPIRED */
	int32		lines;			/* lines expired */
	TimestampTz last;			/* the newest expires_at among them */
} StockReclaimed;

/* parts.c */
extern void hc_product_not_found(const char *product_id);
extern void hc_stock_parts_changed(const char *product_id);
extern int32 hc_stock_count_parts(HcCall *call, const char *product_id);
extern void hc_stock_lock_parts(HcCall *call, const char *product_id, StockParts *p);
extern bool hc_stock_lock_part(HcCall *call, const char *product_id, int16 part,
							   StockLockedPart *locked);
extern int32 hc_stock_lock_line_part(HcCall *call, const char *product_id,
									 const char *reservation_id, int16 part, bool all_parts,
									 StockLockedPart *locked);
extern void hc_stock_respread(HcCall *call, const char *product_id, StockParts *p, int first,
							  int64 extra);
extern bool hc_stock_take(HcCall *call, const char *product_id, int32 parts, bool tried,
						  int16 *part, int32 qty, const char *reservation_id,
						  const char *buyer_id, int32 *stock, int32 *reserved);
extern void hc_stock_count_line_in(HcCall *call, const char *product_id,
								   const char *reservation_id, int16 part, bool single);
extern bool hc_stock_retake_line(HcCall *call, StockReservation *r, StockLine *line);

/* admin.c */
extern void hc_stock_add_parts(HcCall *call, const char *product_id, int32 have, int32 parts);
extern void hc_stock_merge_parts(HcCall *call, const char *product_id, int32 from);
extern void hc_stock_set_parts(HcCall *call, const char *product_id, int32 have, int32 parts);

/* spread_watch.c */
extern void hc_stock_watch(HcCall *call, const char *product_id);
extern bool hc_stock_watch_spreading(HcCall *call, const char *product_id);
extern bool hc_stock_holds_part0(HcCall *call, const char *product_id);

/* reserve.c */
extern void hc_stock_insufficient(const char *product_id, int32 qty, int32 stock,
								  int32 reserved);

/* items.c */
extern Datum hc_stock_result(FunctionCallInfo fcinfo, const StockReservation *r);
extern StockLine *hc_stock_parse_items(FunctionCallInfo fcinfo, int argno, int *nlines);
extern Datum hc_stock_parts_array(const int16 *parts, int n);
extern void hc_stock_bind_lines(HcArgs *args, const StockLine *lines, int n, bool parts);

/* lines.c */
extern void hc_stock_not_found(const char *product_id, const char *reservation_id);
extern void hc_stock_expired(const StockReservation *r, const char *hint);
extern void hc_stock_lock(HcCall *call, const char *product_id, const char *reservation_id,
						  bool retake, StockReservation *r);
extern void hc_stock_move_line(HcCall *call, StockReservation *r, StockLine *line,
							   const char *status, int32 stock_delta, int32 reserved_delta,
							   const char *event, const char *source, bool last);
extern void hc_stock_end(HcCall *call, StockReservation *r, const char *status);
extern void hc_stock_expire(HcCall *call, StockReservation *r);

/* sweep.c */
extern int64 hc_stock_reclaim_as(HcCall *call, const char *product_id, Datum parts, int64 needed,
								 TimestampTz lines_from, const char *event, const char *source,
								 StockReclaimed *done);
extern int64 hc_stock_reclaim(HcCall *call, const char *product_id, int64 needed);

/* direct.c */
extern bool hc_stock_write_reserve(HcCall *call, const StockReservation *r, const char *key,
								   HcFingerprint *fp, int16 part, const StockLockedPart *locked);
extern bool hc_stock_write_move(HcCall *call, StockReservation *r, const StockLine *line,
								const char *status, int32 stock_delta, int32 reserved_delta,
								const char *event, const char *source);

/* home_part.c */
extern bool hc_home_part_get(const char *product_id, int16 *part);
extern void hc_home_part_set(const char *product_id, int16 part);
extern void hc_home_part_forget(const char *product_id);

#endif							/* HOLDCOMMIT_STOCK_H */
