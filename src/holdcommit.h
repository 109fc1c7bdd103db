/*
 * holdcommit.h
 *		What the domain files of holdcommit share: settings, the call
 *		context, prepared statements, validation, ids, idempotency, ledger.
 */
#ifndef HOLDCOMMIT_H
#define HOLDCOMMIT_H

#include "fmgr.h"
#include "executor/spi.h"
#include "utils/timestamp.h"

/* Settings (holdcommit.c); durations are in seconds. */
extern int	hc_idempotency_retention;
extern int	hc_max_ttl;
extern int	hc_max_hold;
extern int	hc_max_items;

/*
 * One SQL call of an hc_* function (call.c).  It reads the clock once, runs
 * SPI as the extension's owner with a pinned search_path, and remembers who
 * called for the ledger.
 */
typedef struct HcCall
{
	const char *function;		/* SQL name, for the ledger */
	TimestampTz now;			/* the one clock reading of this call */
	const char *actor;			/* the caller's current_user */
	MemoryContext outer;		/* where results outlive SPI_finish */
	Oid			save_userid;
	int			save_sec_context;
	int			guc_level;
} HcCall;

extern void hc_call_begin(HcCall *call, FunctionCallInfo fcinfo, const char *function);
extern void hc_call_end(HcCall *call);

/*
 * A statement prepared once per backend and kept.  "@extschema@" in the text
 * is replaced by the extension's schema before preparing.
 */
#define HC_MAX_ARGS 12
typedef struct HcStatement
{
	const char *sql;
	int			nargs;
	Oid			argtypes[HC_MAX_ARGS];
	SPIPlanPtr	plan;
	Oid			schema;			/* the schema the plan was made for */
} HcStatement;

extern uint64 hc_run(HcStatement *stmt, Datum *values, const char *nulls, int expected);
extern char *hc_text(HcCall *call, int row, int col);
extern TimestampTz hc_timestamptz(int row, int col);
extern int32 hc_int32(int row, int col);
extern Datum hc_datum(int row, int col, bool *isnull);

#define HC_TEXT(s)	((s) ? PointerGetDatum(cstring_to_text(s)) : (Datum) 0)

/* Argument validation (validate.c): every check names the argument. */
extern char *hc_arg_id(FunctionCallInfo fcinfo, int argno, const char *name);
extern char *hc_arg_key(FunctionCallInfo fcinfo, int argno, const char *name);
extern int64 hc_arg_ttl(FunctionCallInfo fcinfo, int argno, const char *name);
extern bool hc_arg_bool(FunctionCallInfo fcinfo, int argno, const char *name);
extern int32 hc_arg_int(FunctionCallInfo fcinfo, int argno, const char *name);
extern char *hc_arg_text(FunctionCallInfo fcinfo, int argno, const char *name);

/* Ids (ids.c). */
extern char *hc_new_reservation_id(TimestampTz now);

/* Idempotency keys (idempotency.c). */
typedef struct HcFingerprint
{
	StringInfoData buf;
} HcFingerprint;

typedef struct HcStoredResponse
{
	char	   *reservation_id;
	char	   *status;
	TimestampTz expires_at;
	TimestampTz created_at;
} HcStoredResponse;

extern void hc_fingerprint_init(HcFingerprint *fp, const char *function);
extern void hc_fingerprint_add(HcFingerprint *fp, const char *value);
extern bool hc_idempotency_claim(HcCall *call, const char *key, const char *scope_id,
								 HcFingerprint *fp, const HcStoredResponse *fresh,
								 HcStoredResponse *stored);

/* The ledger (ledger.c): one row per state change. */
typedef struct HcLedgerEntry
{
	const char *kind;			/* asset, product or resource */
	const char *entity_id;
	const char *event;			/* hold, reclaim, commit, ... */
	const char *source;			/* call, reclaim, sweep or adjustment */
	const char *reservation_id;
	const char *buyer_id;
	int32		reserved_delta;
	int32		stock_delta;
	const char *detail;
} HcLedgerEntry;

extern void hc_ledger_append(HcCall *call, const HcLedgerEntry *entry);

#endif							/* HOLDCOMMIT_H */
