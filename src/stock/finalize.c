/*
 * finalize.c
 *		hc_finalize and hc_unreserve: the calls that end a stock
 *		reservation, given its id alone or with its first product, and where
 *		they run on Citus (stock_route); RS004, their refusal.
 *
 * Invariants:
 *   1. Each decides from the reservation as read under its locks
 *      (hc_stock_lock): a repeat is a replay, never a second move.
 *   2. A reservation still RESERVED or EXPIRED with a line FINALIZED or
 *      RELEASED was changed without its reservation: XX001, and nothing is
 *      changed.
 *   3. A finalize takes each line's qty off stock and reserved, once; after
 *      expiry RS003, unless late_ok and every line that no longer counts
 *      finds its units again.
 *   4. An unreserve takes each line's qty off reserved, once; an expired
 *      reservation is expired (its lines that count stop counting) and
 *      returned as a replay.
 *   5. On Citus an order of several products stays with this call, which
 *      runs its steps where they are (orders.h); any other is sent to the
 *      node of its first product.
 */
#include "postgres.h"

#include "common/errors.h"
#include "common/validate.h"
#include "core/placement.h"
#include "core/version.h"
#include "stock/orders.h"
#include "stock/stock.h"

PG_FUNCTION_INFO_V1(hc_finalize);
PG_FUNCTION_INFO_V1(hc_unreserve);
PG_FUNCTION_INFO_V1(hc_finalize_product);
PG_FUNCTION_INFO_V1(hc_unreserve_product);

/* RS004 for a stock reservation. */
static void
stock_not_active(const StockReservation *r, const char *hint)
{
	hc_reservation_not_active(r->id, "", r->status, hint);
}

/*
 * Has the reservation expired, by the call's one clock reading or because a
 * reclaimer has already expired one of its lines?
 */
static bool
stock_is_expired(HcCall *call, const StockReservation *r)
{
	int			i;

	if (strcmp(r->status, "EXPIRED") == 0 || r->expires_at <= call->now)
		return true;
	for (i = 0; i < r->nlines; i++)
		if (strcmp(r->lines[i].status, "RESERVED") != 0)
			return true;
	return false;
}

/*
 * A reservation that is still RESERVED or EXPIRED has no line that was
 * finalized or released: such a line was changed without its reservation
 * (by hand, or a step of an order on Citus called by hand), and moving it
 * again would count it twice.
 */
static void
stock_require_open_lines(const StockReservation *r)
{
	int			i;

	if (strcmp(r->status, "RESERVED") != 0 && strcmp(r->status, "EXPIRED") != 0)
		return;
	for (i = 0; i < r->nlines; i++)
		if (strcmp(r->lines[i].status, "FINALIZED") == 0 ||
			strcmp(r->lines[i].status, "RELEASED") == 0)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("line of product \"%s\" in reservation \"%s\" is %s, the reservation %s",
							r->lines[i].product_id, r->id, r->lines[i].status, r->status),
					 errhint("Nothing was changed. Run hc_check(): the line was changed without its reservation.")));
}

/*
 * Route a call on a stock reservation, given its first product or not
 * (NULL).  On Citus an order of several products stays with this call,
 * which runs its steps where they are (r->spread); any other is sent to the
 * node of its first product, as hc_route_reservation sends a hold's call.
 */
static bool
stock_route(HcCall *call, FunctionCallInfo fcinfo, const char *product_id,
			const char *reservation_id, StockReservation *r, Datum *result)
{
	const char *scope_id = product_id;
	bool		isnull;

	if (!hc_distributed(call))
		return false;
	if (scope_id == NULL)
		scope_id = hc_route_lookup(call, "hc_stock_orders", "scope_id", reservation_id);
	if (scope_id == NULL)
		hc_stock_not_found(NULL, reservation_id);
	switch (hc_stock_orders()->spread(call, scope_id, reservation_id, r))
	{
		case 0:
			/* Its row is on its first product's node, whose id this is not. */
			hc_stock_not_found(product_id, reservation_id);
			break;
		case 1:
			break;
		default:
			return false;
	}
	if (product_id == NULL)
	{
		*result = hc_route_prefixed(call, fcinfo, scope_id);
		return true;
	}
	return hc_route(call, fcinfo, product_id, result, &isnull);
}

/*
 * The start of hc_finalize and hc_unreserve, after their arguments: true if
 * the call was sent on (stock_route), its result in *result; false with the
 * reservation locked here (hc_stock_lock, retake as given) and its lines
 * open.
 */
static bool
stock_begin(HcCall *call, FunctionCallInfo fcinfo, const char *function, const char *product_id,
			const char *reservation_id, bool retake, StockReservation *r, Datum *result)
{
	hc_call_begin(call, fcinfo, function);
	hc_require_sql_at_least("0.4.0", call->function);
	if (stock_route(call, fcinfo, product_id, reservation_id, r, result))
	{
		hc_call_end(call);
		return true;
	}
	hc_stock_lock(call, product_id, reservation_id, retake, r);
	stock_require_open_lines(r);
	return false;
}

/*
 * hc_finalize(reservation_id, late_ok): the order is paid; stock and
 * reserved go down by each line's qty, once.  After expiry RS003, unless
 * late_ok and every line's stock is still there.
 */
static Datum
stock_finalize(FunctionCallInfo fcinfo, int first)
{
	char	   *product_id = first > 0 ? hc_arg_id(fcinfo, 0, "product_id") : NULL;
	char	   *reservation_id = hc_arg_id(fcinfo, first, "reservation_id");
	bool		late_ok = hc_arg_bool(fcinfo, first + 1, "late_ok");
	HcCall		call;
	StockReservation r = {0};
	int			i;
	Datum		routed;

	if (stock_begin(&call, fcinfo, "hc_finalize", product_id, reservation_id, late_ok, &r, &routed))
		return routed;

	if (strcmp(r.status, "FINALIZED") == 0)
		r.replayed = true;
	else if (strcmp(r.status, "RELEASED") == 0)
		stock_not_active(&r, "The buyer cancelled this order: refund the payment.");
	else
	{
		if (stock_is_expired(&call, &r) && !late_ok)
			hc_stock_expired(&r, "Refund the payment, or finalize with late_ok => true if the stock may still be there.");

		/* A line that no longer counts must find its stock again. */
		for (i = 0; i < r.nlines; i++)
		{
			StockLine  *line = &r.lines[i];

			if (strcmp(line->status, "RESERVED") != 0 && !hc_stock_retake_line(&call, &r, line))
				hc_stock_expired(&r, psprintf("The stock of product \"%s\" is gone: refund the payment.",
										   line->product_id));
		}
		for (i = 0; i < r.nlines; i++)
			hc_stock_move_line(&call, &r, &r.lines[i], "FINALIZED", -r.lines[i].qty, -r.lines[i].qty,
							"finalize", "call", i == r.nlines - 1);
	}
	hc_call_end(&call);
	return hc_stock_result(fcinfo, &r);
}

/* hc_finalize(reservation_id, late_ok), hc_finalize(product_id, reservation_id, late_ok) */
HC_RESERVATION_FUNCTIONS(hc_finalize, hc_finalize_product, stock_finalize)

/*
 * hc_unreserve(reservation_id): the buyer cancels; reserved goes down once.
 * A repeat, or an expired reservation, is returned unchanged as a replay.
 */
static Datum
stock_unreserve(FunctionCallInfo fcinfo, int first)
{
	char	   *product_id = first > 0 ? hc_arg_id(fcinfo, 0, "product_id") : NULL;
	char	   *reservation_id = hc_arg_id(fcinfo, first, "reservation_id");
	HcCall		call;
	StockReservation r = {0};
	int			i;
	Datum		routed;

	if (stock_begin(&call, fcinfo, "hc_unreserve", product_id, reservation_id, false, &r, &routed))
		return routed;

	if (strcmp(r.status, "FINALIZED") == 0)
		stock_not_active(&r, "A finalized order cannot be cancelled; refund through your payment flow.");
	else if (strcmp(r.status, "RELEASED") == 0)
		r.replayed = true;
	else if (stock_is_expired(&call, &r))
	{
		hc_stock_expire(&call, &r);
		r.replayed = true;
	}
	else
	{
		for (i = 0; i < r.nlines; i++)
			hc_stock_move_line(&call, &r, &r.lines[i], "RELEASED", 0, -r.lines[i].qty,
							"release", "call", i == r.nlines - 1);
	}
	hc_call_end(&call);
	return hc_stock_result(fcinfo, &r);
}

/* hc_unreserve(reservation_id), hc_unreserve(product_id, reservation_id) */
HC_RESERVATION_FUNCTIONS(hc_unreserve, hc_unreserve_product, stock_unreserve)
