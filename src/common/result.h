/*
 * result.h
 *		The rows the functions return (result.c).
 */
#ifndef HOLDCOMMIT_RESULT_H
#define HOLDCOMMIT_RESULT_H

#include "core/call.h"

extern Datum hc_result_tuple(FunctionCallInfo fcinfo, Datum *values, bool *nulls);
extern Datum hc_result_row(HcCall *call, FunctionCallInfo fcinfo);
extern Datum hc_result_text(const char *s, bool *isnull);

#endif							/* HOLDCOMMIT_RESULT_H */
