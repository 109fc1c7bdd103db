/*
 * result.c
 *		The rows the functions return, as their declared row types
 *		(hc_reservation, hc_stock_reservation, hc_attempt, hc_assets, ...).
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "utils/builtins.h"

#include "common/result.h"

/* The function's row from values in the order its type declares them. */
Datum
hc_result_tuple(FunctionCallInfo fcinfo, Datum *values, bool *nulls)
{
	TupleDesc	tupdesc;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);
	return HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls));
}

/* A text member of a result row: the string, or a null. */
Datum
hc_result_text(const char *s, bool *isnull)
{
	*isnull = s == NULL;
	return s ? CStringGetTextDatum(s) : (Datum) 0;
}

/*
 * The first row of the last statement as the function's declared row type
 * (hc_assets, hc_inventory, ...), matched column by column by name, so that
 * the result can be stored and read by any session, whatever columns the
 * table has dropped.  Call before hc_call_end.
 */
Datum
hc_result_row(HcCall *call, FunctionCallInfo fcinfo)
{
	MemoryContext old = MemoryContextSwitchTo(call->outer);
	TupleDesc	tupdesc;
	Datum	   *values;
	bool	   *nulls;
	int			i;
	HeapTuple	tuple;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	values = palloc(sizeof(Datum) * tupdesc->natts);
	nulls = palloc(sizeof(bool) * tupdesc->natts);
	for (i = 0; i < tupdesc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(tupdesc, i);
		int			col;

		values[i] = (Datum) 0;
		nulls[i] = true;
		if (attr->attisdropped)
			continue;
		col = SPI_fnumber(SPI_tuptable->tupdesc, NameStr(attr->attname));
		if (col <= 0)
			elog(ERROR, "column \"%s\" of the result is missing", NameStr(attr->attname));
		values[i] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, col, &nulls[i]);
	}
	tuple = heap_form_tuple(tupdesc, values, nulls);
	MemoryContextSwitchTo(old);
	return HeapTupleGetDatum(tuple);
}
