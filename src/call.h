/*
 * call.h
 *		The life of one SQL call and its prepared statements (call.c).
 */
#ifndef HOLDCOMMIT_CALL_H
#define HOLDCOMMIT_CALL_H

#include "fmgr.h"
#include "executor/spi.h"
#include "utils/timestamp.h"

/*
 * One SQL call of an hc_* function (call.c).  It reads the clock once, runs
 * SPI as the extension's owner in a security-restricted operation, resolves
 * table names in the extension's schema by OID, and remembers who called for
 * the ledger.
 */
typedef struct HcCall
{
	const char *function;		/* SQL name, for the ledger */
	TimestampTz now;			/* the one clock reading of this call */
	const char *actor;			/* who the ledger names: see hc_actor() */
	MemoryContext outer;		/* where results outlive SPI_finish */
	Oid			save_userid;
	int			save_sec_context;
} HcCall;

extern void hc_call_begin(HcCall *call, FunctionCallInfo fcinfo, const char *function);
extern void hc_call_begin_read(HcCall *call, FunctionCallInfo fcinfo, const char *function);
extern void hc_call_begin_as(HcCall *call, Oid owner, Oid schema, const char *function,
							 const char *actor);
extern void hc_call_end(HcCall *call);
extern const char *hc_actor(HcCall *call);

/*
 * A statement prepared once per backend and kept.  Its text names the
 * extension's tables without a schema: they are resolved in the extension's
 * schema by OID (never by a schema name, which its owner could change), and
 * functions and operators are written pg_catalog-qualified.
 */
#define HC_MAX_ARGS 16
typedef struct HcStatement
{
	const char *sql;
	int			nargs;
	Oid			argtypes[HC_MAX_ARGS];
	SPIPlanPtr	plan;
	Oid			schema;			/* the schema the plan was made for */
} HcStatement;

extern uint64 hc_run(HcStatement *stmt, Datum *values, const char *nulls, int expected);

/*
 * A row looked up (and maybe locked) by one text key through a unique btree
 * index on that column alone, without the planner or the executor: the
 * point reads of the hot paths, such as the first look of a hold, which ends
 * every refusal.  The relation, index and column numbers are found in the
 * extension's schema by OID and kept until a relcache invalidation.  Where
 * the index is gone (a distributed deployment may drop the single-node
 * ones), the same read runs as a statement.
 */
#define HC_FETCH_MAX_COLUMNS 8
typedef struct HcFetch
{
	const char *table;
	const char *key;			/* the column a unique index has as its only key */
	int			ncolumns;
	const char *columns[HC_FETCH_MAX_COLUMNS];
	/* found on first use */
	Oid			schema;
	Oid			relid;
	Oid			indexid;		/* InvalidOid: no such index, use the statement */
	AttrNumber	keyattnum;
	AttrNumber	attnums[HC_FETCH_MAX_COLUMNS];
	HcStatement statement;		/* the read as SQL, made when first needed */
	int			lock;			/* its lock: HC_FETCH_READ or a LockWaitPolicy */
} HcFetch;

/* A fetch that only reads; the others lock with a LockWaitPolicy. */
#define HC_FETCH_READ (-1)

extern bool hc_fetch(HcCall *call, HcFetch *fetch, const char *key, Datum *values, bool *nulls);
extern bool hc_fetch_lock(HcCall *call, HcFetch *fetch, const char *key, Datum *values,
						  bool *nulls);
extern bool hc_fetch_lock_free(HcCall *call, HcFetch *fetch, const char *key, Datum *values,
							   bool *nulls);
extern char *hc_text(HcCall *call, int row, int col);
extern TimestampTz hc_timestamptz(int row, int col);
extern int32 hc_int32(int row, int col);
extern Datum hc_datum(int row, int col, bool *isnull);
extern Datum hc_result_row(HcCall *call, FunctionCallInfo fcinfo);
extern Datum hc_text_datum(const char *s);

/* A statement argument from a C string that must not be NULL. */
#define HC_TEXT(s)	hc_text_datum(s)

#endif							/* HOLDCOMMIT_CALL_H */
