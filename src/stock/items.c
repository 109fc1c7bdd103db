/*
 * items.c
 *		A reservation's lines as the functions take and give them: the
 *		items' JSON parsed and checked (22023), the hc_stock_reservation row
 *		a function returns, and the arrays the statements bind.
 *
 * Invariants:
 *   1. Parsed lines are sorted by product_id bytewise, the order their rows
 *      are locked in (stock.h's 3), with the lines of one product summed.
 *   2. A line's qty is a positive int4, summed ones too; a product_id is
 *      at most HC_MAX_ID_BYTES; at most holdcommit.max_items lines.
 *   3. The items of a result are built as jsonb directly, never printed and
 *      parsed (they are in every call's result).
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "compat.h"
#include "common/result.h"
#include "common/settings.h"
#include "common/validate.h"
#include "stock/stock.h"

/* A jsonb scalar for hc_jsonb_push. */
static JsonbValue *
jsonb_scalar(JsonbValue *v, enum jbvType type, const char *text, int32 number)
{
	v->type = type;
	if (type == jbvString)
	{
		v->val.string.val = (char *) text;
		v->val.string.len = strlen(text);
	}
	else
		v->val.numeric = int64_to_numeric(number);
	return v;
}

/*
 * The items as jsonb: [{"product_id": "...", "qty": n}, ...], built
 * directly rather than printed and parsed (it is in every call's result).
 */
static Datum
stock_items_jsonb(const StockLine *lines, int n)
{
	HcJsonbBuild b = {0};
	JsonbValue	v;
	int			i;

	hc_jsonb_push(&b, WJB_BEGIN_ARRAY, NULL);
	for (i = 0; i < n; i++)
	{
		hc_jsonb_push(&b, WJB_BEGIN_OBJECT, NULL);
		hc_jsonb_push(&b, WJB_KEY, jsonb_scalar(&v, jbvString, "product_id", 0));
		hc_jsonb_push(&b, WJB_VALUE, jsonb_scalar(&v, jbvString, lines[i].product_id, 0));
		hc_jsonb_push(&b, WJB_KEY, jsonb_scalar(&v, jbvString, "qty", 0));
		hc_jsonb_push(&b, WJB_VALUE, jsonb_scalar(&v, jbvNumeric, NULL, lines[i].qty));
		hc_jsonb_push(&b, WJB_END_OBJECT, NULL);
	}
	hc_jsonb_push(&b, WJB_END_ARRAY, NULL);
	return JsonbPGetDatum(JsonbValueToJsonb(b.result));
}

/* Build the hc_stock_reservation row a function returns. */
Datum
hc_stock_result(FunctionCallInfo fcinfo, const StockReservation *r)
{
	Datum		values[7];
	bool		nulls[7] = {false};

	values[0] = CStringGetTextDatum(r->id);
	values[1] = CStringGetTextDatum(r->buyer_id);
	values[2] = CStringGetTextDatum(r->status);
	values[3] = stock_items_jsonb(r->lines, r->nlines);
	values[4] = TimestampTzGetDatum(r->expires_at);
	values[5] = TimestampTzGetDatum(r->created_at);
	values[6] = BoolGetDatum(r->replayed);
	return hc_result_tuple(fcinfo, values, nulls);
}

/* Lines sort by product_id bytewise, the order rows are locked in. */
static int
stock_line_cmp(const void *a, const void *b)
{
	return strcmp(((const StockLine *) a)->product_id, ((const StockLine *) b)->product_id);
}

/* 22023 for malformed items, pointing at the line (index < 0: the whole). */
static void
bad_items(const char *message, int index)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid items: %s", message),
			 index >= 0 ? errdetail("The problem is in items[%d].", index) : 0,
			 errhint("Pass a JSON array of objects like {\"product_id\": \"SKU-1\", \"qty\": 2}.")));
}

/*
 * Validate items and return its lines sorted by product_id, with the lines
 * of the same product summed.
 */
StockLine *
hc_stock_parse_items(FunctionCallInfo fcinfo, int argno, int *nlines)
{
	Jsonb	   *items;
	int			n;
	int			i;
	int			out;
	StockLine  *lines;

	hc_arg_not_null(fcinfo, argno, "items");
	items = PG_GETARG_JSONB_P(argno);
	if (!JsonContainerIsArray(&items->root) || JB_ROOT_IS_SCALAR(items))
		bad_items("not a JSON array", -1);
	n = JsonContainerSize(&items->root);
	if (n == 0)
		bad_items("the array is empty", -1);
	if (n > hc_max_items)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid items: more than holdcommit.max_items lines"),
				 errdetail("%d lines were given; holdcommit.max_items is %d.", n, hc_max_items)));

	lines = palloc(sizeof(StockLine) * n);
	for (i = 0; i < n; i++)
	{
		JsonbValue *item = getIthJsonbValueFromContainer(&items->root, i);
		JsonbValue	product;
		JsonbValue	qty;
		Numeric		num;
		bool		overflow = false;

		if (item->type != jbvBinary || !JsonContainerIsObject(item->val.binary.data))
			bad_items("an item is not an object", i);
		if (getKeyJsonValueFromContainer(item->val.binary.data, "product_id", 10, &product) == NULL ||
			product.type != jbvString)
			bad_items("product_id must be a string", i);
		if (product.val.string.len == 0)
			bad_items("product_id must not be empty", i);
		if (product.val.string.len > HC_MAX_ID_BYTES)
			ereport(ERROR,
					(errcode(ERRCODE_STRING_DATA_RIGHT_TRUNCATION),
					 errmsg("items[%d].product_id is too long", i),
					 errdetail("It is %d bytes long; the limit is %d bytes.",
							   product.val.string.len, HC_MAX_ID_BYTES)));
		if (getKeyJsonValueFromContainer(item->val.binary.data, "qty", 3, &qty) == NULL ||
			qty.type != jbvNumeric)
			bad_items("qty must be a number", i);
		num = qty.val.numeric;
		if (numeric_is_nan(num) || numeric_is_inf(num) ||
			!DatumGetBool(DirectFunctionCall2(numeric_eq, NumericGetDatum(num),
											  DirectFunctionCall2(numeric_trunc, NumericGetDatum(num),
																  Int32GetDatum(0)))))
			bad_items("qty must be an integer", i);
		lines[i].qty = hc_numeric_int4(num, &overflow);
		if (overflow || lines[i].qty <= 0)
			bad_items("qty must be a positive integer", i);
		lines[i].product_id = pnstrdup(product.val.string.val, product.val.string.len);
		lines[i].status = NULL;
	}

	qsort(lines, n, sizeof(StockLine), stock_line_cmp);
	for (i = 1, out = 0; i < n; i++)
	{
		if (strcmp(lines[i].product_id, lines[out].product_id) == 0)
		{
			if ((int64) lines[out].qty + lines[i].qty > PG_INT32_MAX)
				bad_items("the quantities of one product add up to more than an integer holds", i);
			lines[out].qty += lines[i].qty;
		}
		else
			lines[++out] = lines[i];
	}
	*nlines = out + 1;
	return lines;
}

/* An int2[] of parts. */
Datum
hc_stock_parts_array(const int16 *parts, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1));
	int			i;

	for (i = 0; i < n; i++)
		d[i] = Int16GetDatum(parts[i]);
	return PointerGetDatum(construct_array(d, n, INT2OID, 2, true, TYPALIGN_SHORT));
}

/*
 * Bind an order's lines to a statement: :products (text[]), :quantities
 * (int4[]) and, with parts, :parts (int2[]), an element a line.
 */
void
hc_stock_bind_lines(HcArgs *args, const StockLine *lines, int n, bool parts)
{
	Datum	   *products = palloc(sizeof(Datum) * n);
	Datum	   *qtys = palloc(sizeof(Datum) * n);
	int16	   *line_parts = palloc(sizeof(int16) * n);
	int			i;

	for (i = 0; i < n; i++)
	{
		products[i] = HC_TEXT(lines[i].product_id);
		qtys[i] = Int32GetDatum(lines[i].qty);
		if (parts)
			line_parts[i] = lines[i].part;
	}
	hc_bind(args, "products",
			PointerGetDatum(construct_array(products, n, TEXTOID, -1, false, TYPALIGN_INT)));
	hc_bind(args, "quantities",
			PointerGetDatum(construct_array(qtys, n, INT4OID, 4, true, TYPALIGN_INT)));
	if (parts)
		hc_bind(args, "parts", hc_stock_parts_array(line_parts, n));
}
