/*
 * validate.h
 *		Argument checks (validate.c).
 */
#ifndef HOLDCOMMIT_VALIDATE_H
#define HOLDCOMMIT_VALIDATE_H

#include "fmgr.h"

/* Ids of assets, products, buyers, reservations, resources, owners; keys. */
#define HC_MAX_ID_BYTES		64
#define HC_MAX_KEY_BYTES	255
#define HC_MAX_NOTE_BYTES	1000

extern void hc_arg_not_null(FunctionCallInfo fcinfo, int argno, const char *name);
extern char *hc_arg_id(FunctionCallInfo fcinfo, int argno, const char *name);
extern char *hc_arg_key(FunctionCallInfo fcinfo, int argno, const char *name);
extern int64 hc_arg_ttl(FunctionCallInfo fcinfo, int argno, const char *name);
extern bool hc_arg_bool(FunctionCallInfo fcinfo, int argno, const char *name);
extern int32 hc_arg_int(FunctionCallInfo fcinfo, int argno, const char *name);
extern char *hc_arg_text(FunctionCallInfo fcinfo, int argno, const char *name);
extern char *hc_arg_note(FunctionCallInfo fcinfo, int argno, const char *name);
extern int64 hc_arg_cooldown(FunctionCallInfo fcinfo, int argno, const char *name);
extern int64 hc_arg_token(FunctionCallInfo fcinfo, int argno, const char *name);

#endif							/* HOLDCOMMIT_VALIDATE_H */
