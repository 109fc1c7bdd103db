/*
 * statement.h
 *		Prepared statements with named parameters (statement.c).
 */
#ifndef HOLDCOMMIT_STATEMENT_H
#define HOLDCOMMIT_STATEMENT_H

#include "executor/spi.h"

#include "core/call.h"

/*
 * A statement prepared once per backend and kept.  Its text names the
 * extension's tables without a schema (they are resolved in the extension's
 * schema by OID, see call.c), writes functions and operators
 * pg_catalog-qualified (the macros below), and names its parameters:
 * ":asset_id" in the text, {"asset_id", TEXTOID} in params, and
 * hc_bind(&args, "asset_id", ...) where the value is bound.  ":now",
 * ":function" and ":actor" are the call's own (its clock reading, its SQL
 * name, who the ledger names), ":key_scope" the routing id whose keys a
 * call sees in its scope (placement.h; NULL on a single node: every key): hc_run binds them
 * unless the caller did.
 */
#define HC_MAX_PARAMS 16

typedef struct HcParam
{
	const char *name;
	Oid			type;
} HcParam;

typedef struct HcStatement
{
	const char *sql;
	HcParam		params[HC_MAX_PARAMS];	/* up to the first without a name */
	/* made when first run */
	int			nparams;
	SPIPlanPtr	plan;
	Oid			schema;			/* the schema the plan was made for */
} HcStatement;

/* The values of one run of a statement. */
typedef struct HcArgs
{
	HcStatement *stmt;
	Datum		values[HC_MAX_PARAMS];
	char		nulls[HC_MAX_PARAMS];
	bool		bound[HC_MAX_PARAMS];
} HcArgs;

extern void hc_args(HcArgs *args, HcStatement *stmt);
extern void hc_bind(HcArgs *args, const char *name, Datum value);
extern void hc_bind_text(HcArgs *args, const char *name, const char *value);
extern void hc_bind_null(HcArgs *args, const char *name);
extern uint64 hc_run(HcCall *call, HcArgs *args, int expected);

/* The last statement's rows, column by name. */
extern Datum hc_datum(int row, const char *column, bool *isnull);
extern char *hc_text(HcCall *call, int row, const char *column);
extern TimestampTz hc_timestamptz(int row, const char *column);
extern int32 hc_int32(int row, const char *column);
extern int64 hc_int64(int row, const char *column);

/* SQL text read a character at a time: inside quotes? (statement.c) */
extern bool hc_sql_quoted(char *quote, char c);

/* A statement argument from a C string; a NULL here is a bug, not a null. */
extern Datum hc_text_datum(const char *s);
extern Datum hc_text_array(char *const *values, int n);
#define HC_TEXT(s)	hc_text_datum(s)

/* Operators as the statements write them: pg_catalog's, whatever the path. */
#define EQ		" OPERATOR(pg_catalog.=) "
#define NE		" OPERATOR(pg_catalog.<>) "
#define LT		" OPERATOR(pg_catalog.<) "
#define LE		" OPERATOR(pg_catalog.<=) "
#define GT		" OPERATOR(pg_catalog.>) "
#define GE		" OPERATOR(pg_catalog.>=) "
#define PLUS	" OPERATOR(pg_catalog.+) "
#define MINUS	" OPERATOR(pg_catalog.-) "
#define TIMES	" OPERATOR(pg_catalog.*) "
#define DIVIDE	" OPERATOR(pg_catalog./) "
#define FIELD	" OPERATOR(pg_catalog.->>) "	/* a jsonb member as text */

#endif							/* HOLDCOMMIT_STATEMENT_H */
