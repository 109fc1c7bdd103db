/*
 * direct.c
 *		The writes of an order of one product without the executor
 *		(core/write.h): its reserve (reserve.c's reserve_line), and the move
 *		of its line that finalizes, releases or expires it (lines.c's
 *		move_single): the rows those statements write, the same values,
 *		where the tables allow it (core/write.c says when they do not; then
 *		the callers run their statements).  Orders of several products, and
 *		every other write of stock, keep their statements.
 *
 * Invariants (reserve.c's and lines.c's, kept here):
 *   1. The part is locked first, alone, by a fetch that read its stock,
 *      reserved and version and gave the TID of the version locked
 *      (StockLockedPart); the order's row, for a move, by hc_stock_lock,
 *      which read it and its TID under that lock.  Neither has been written
 *      since (a retake forgets both TIDs), so each TID is the newest
 *      version, and what the statements' WHERE would test was tested on it
 *      by the caller: the units available for a reserve, the line's status
 *      for a move.
 *   2. The part's new numbers are its locked ones plus the deltas, and its
 *      CHECK (stock >= reserved >= 0) is checked as the statement's.
 *   3. The ledger row's seq is the part's new version (PART_SEQ), as the
 *      statements' RETURNING gives it; the rows are written in the order
 *      the statements write them.
 */
#include "postgres.h"

#include "utils/builtins.h"

#include "common/ledger.h"
#include "core/write.h"
#include "stock/stock.h"

/* A part's units taken for a reserve. */
static HcWrite part_take = {"hc_stock_parts", HC_WRITE_UPDATE, 3,
{"reserved", "version", "updated_at"}};

/* A part's units given up or sold by a line's move. */
static HcWrite part_move = {"hc_stock_parts", HC_WRITE_UPDATE, 4,
{"stock", "reserved", "version", "updated_at"}};

static HcWrite order_new = {"hc_stock_orders", HC_WRITE_INSERT, 10,
{"scope_id", "id", "buyer_id", "idempotency_key", "fingerprint", "status", "expires_at",
 "created_at", "qty", "part"}};

/* An order of one product ended: FINALIZED, RELEASED or EXPIRED. */
static HcWrite order_end = {"hc_stock_orders", HC_WRITE_UPDATE, 2, {"status", "ended_at"}};

/* The part's ledger row, at its new version. */
static void
log_part(HcWriter *w, const char *product_id, int16 part, int32 version, const char *event,
		 const char *source, const char *reservation_id, const char *buyer_id,
		 int32 reserved_delta, int32 stock_delta)
{
	HcLedgerEntry e = {"product", product_id, ((int64) part << 48) + version, event, source,
	reservation_id, buyer_id, reserved_delta, stock_delta, NULL};

	hc_ledger_write(w, &e);
}

/*
 * reserve_line on part, locked and holding the units: the part's reserved
 * up by the line's qty, the order r inserted (its own line, counted in
 * part), the ledger row.  False, with nothing written, if the statement
 * must write them.
 */
bool
hc_stock_write_reserve(HcCall *call, const StockReservation *r, const char *key,
					   HcFingerprint *fp, int16 part, const StockLockedPart *locked)
{
	HcWrite    *writes[] = {&part_take, &order_new, &hc_ledger_row};
	const StockLine *line = &r->lines[0];
	HcWriter	w;
	int32		version;
	Datum		values[10];
	bool		nulls[10] = {false};

	Assert(r->nlines == 1 && (int64) locked->stock - locked->reserved >= line->qty);
	if (!ItemPointerIsValid(&locked->tid) || !hc_writer_begin(call, &w, writes, 3))
		return false;
	version = hc_write_add(locked->version, 1);
	values[0] = Int32GetDatum(hc_write_add(locked->reserved, line->qty));
	values[1] = Int32GetDatum(version);
	values[2] = TimestampTzGetDatum(call->now);
	hc_write_update(&w, &part_take, (ItemPointer) &locked->tid, values, nulls);

	values[0] = CStringGetTextDatum(line->product_id);
	values[1] = CStringGetTextDatum(r->id);
	values[2] = CStringGetTextDatum(r->buyer_id);
	values[3] = CStringGetTextDatum(key);
	values[4] = PointerGetDatum(hc_fingerprint_digest(fp));
	values[5] = CStringGetTextDatum("RESERVED");
	values[6] = TimestampTzGetDatum(r->expires_at);
	values[7] = TimestampTzGetDatum(call->now);
	values[8] = Int32GetDatum(line->qty);
	values[9] = Int16GetDatum(part);
	hc_write_insert(&w, &order_new, values, nulls);
	log_part(&w, line->product_id, part, version, "reserve", "call", r->id, r->buyer_id,
			 line->qty, 0);
	hc_writer_end(&w);
	return true;
}

/*
 * move_single: the order r of one product, locked by hc_stock_lock with its
 * line's part, moves from line->status to status, its part's stock and
 * reserved by the deltas, with the ledger row (event from source).  False,
 * with nothing written, if the statement must write them.
 */
bool
hc_stock_write_move(HcCall *call, StockReservation *r, const StockLine *line, const char *status,
					int32 stock_delta, int32 reserved_delta, const char *event,
					const char *source)
{
	HcWrite    *writes[] = {&order_end, &part_move, &hc_ledger_row};
	StockLockedPart *locked = &r->locked;
	HcWriter	w;
	int32		version;
	Datum		values[4];
	bool		nulls[4] = {false};

	Assert(r->single && r->nlines == 1);
	if (!ItemPointerIsValid(&r->order_tid) || !ItemPointerIsValid(&locked->tid) ||
		!hc_writer_begin(call, &w, writes, 3))
		return false;
	values[0] = CStringGetTextDatum(status);
	values[1] = TimestampTzGetDatum(call->now);
	hc_write_update(&w, &order_end, &r->order_tid, values, nulls);

	version = hc_write_add(locked->version, 1);
	values[0] = Int32GetDatum(hc_write_add(locked->stock, stock_delta));
	values[1] = Int32GetDatum(hc_write_add(locked->reserved, reserved_delta));
	values[2] = Int32GetDatum(version);
	values[3] = TimestampTzGetDatum(call->now);
	hc_write_update(&w, &part_move, &locked->tid, values, nulls);
	log_part(&w, line->product_id, line->part, version, event, source, r->id, r->buyer_id,
			 reserved_delta, stock_delta);
	hc_writer_end(&w);
	/* Both rows have new versions now. */
	ItemPointerSetInvalid(&r->order_tid);
	ItemPointerSetInvalid(&locked->tid);
	return true;
}
