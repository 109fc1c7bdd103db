/*
 * write.h
 *		Row inserts and updates without the executor (write.c).
 */
#ifndef HOLDCOMMIT_WRITE_H
#define HOLDCOMMIT_WRITE_H

#include "nodes/execnodes.h"
#include "storage/itemptr.h"

#include "core/call.h"

/* What a write does to its one row. */
typedef enum HcWriteKind
{
	HC_WRITE_INSERT,			/* a new row: the columns given, NULL for the rest */
	HC_WRITE_UPDATE				/* a row the call has locked: the columns given, the rest kept */
} HcWriteKind;

/*
 * One row write of a fixed statement: "INSERT INTO table (columns) VALUES
 * (...)" or "UPDATE table SET columns = ... WHERE ctid = (a row the call
 * has locked)".  values[i] and nulls[i] are for columns[i].  The table's
 * columns and whether it can be written here (its shape: see write.c) are
 * found in the extension's schema by OID and kept until a relcache
 * invalidation.
 */
#define HC_WRITE_MAX_COLUMNS 16
typedef struct HcWrite
{
	const char *table;
	HcWriteKind kind;
	int			ncolumns;
	const char *columns[HC_WRITE_MAX_COLUMNS];
	/* found on first use */
	Oid			schema;
	Oid			relid;
	AttrNumber	attnums[HC_WRITE_MAX_COLUMNS];
	bool		direct;			/* false: the table needs the statement */
} HcWrite;

/*
 * The writes of what would be one statement, in progress: the tables open,
 * their indexes open, the AFTER triggers' queue of a query.
 */
#define HC_WRITER_MAX_TABLES 4
typedef struct HcWriterTable
{
	Relation	rel;
	ResultRelInfo *rri;
	TupleTableSlot *slot;		/* the row written */
	TupleTableSlot *old;		/* the row an update replaces */
} HcWriterTable;

#define HC_WRITER_MAX_WRITES 8
typedef struct HcWriter
{
	HcCall	   *call;
	EState	   *estate;
	int			ntables;
	HcWriterTable tables[HC_WRITER_MAX_TABLES];
	/* the writes begun with, each with its table (an invalidation may clear its relid) */
	int			nwrites;
	HcWrite    *writes[HC_WRITER_MAX_WRITES];
	int			write_table[HC_WRITER_MAX_WRITES];
} HcWriter;

extern bool hc_writer_begin(HcCall *call, HcWriter *writer, HcWrite *const *writes, int nwrites);
extern void hc_write_insert(HcWriter *writer, HcWrite *write, const Datum *values,
							const bool *nulls);
extern void hc_write_update(HcWriter *writer, HcWrite *write, ItemPointer tid,
							const Datum *values, const bool *nulls);
extern void hc_writer_end(HcWriter *writer);
extern int32 hc_write_add(int32 a, int32 b);

#endif							/* HOLDCOMMIT_WRITE_H */
