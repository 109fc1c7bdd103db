/*
 * validate.h
 *		Argument checks (validate.c).
 */
#ifndef HOLDCOMMIT_VALIDATE_H
#define HOLDCOMMIT_VALIDATE_H

#include "fmgr.h"

extern char *hc_arg_id(FunctionCallInfo fcinfo, int argno, const char *name);
extern char *hc_arg_key(FunctionCallInfo fcinfo, int argno, const char *name);
extern int64 hc_arg_ttl(FunctionCallInfo fcinfo, int argno, const char *name);
extern bool hc_arg_bool(FunctionCallInfo fcinfo, int argno, const char *name);
extern int32 hc_arg_int(FunctionCallInfo fcinfo, int argno, const char *name);
extern char *hc_arg_text(FunctionCallInfo fcinfo, int argno, const char *name);

#endif							/* HOLDCOMMIT_VALIDATE_H */
