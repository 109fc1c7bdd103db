/*
 * fetch.h
 *		Point reads and row locks without the executor (fetch.c).
 */
#ifndef HOLDCOMMIT_FETCH_H
#define HOLDCOMMIT_FETCH_H

#include "storage/itemptr.h"

#include "core/statement.h"

/* How a fetch locks the row it finds. */
typedef enum HcFetchLock
{
	HC_FETCH_READ,				/* no lock: a plain read */
	HC_FETCH_WAIT,				/* FOR NO KEY UPDATE: wait for a holder */
	HC_FETCH_SKIP,				/* FOR NO KEY UPDATE SKIP LOCKED: skip a held row */
	HC_FETCH_SKIP_NOWAIT,		/* the same, and never wait on an update chain */
	HC_FETCH_SKIP_SEEN,			/* lock the version read if the caller admits it,
								 * unless anyone holds or has changed it: never
								 * a lock on a row the caller did not want */
	HC_FETCH_MINE				/* no lock: found only if this transaction locked
								 * or wrote the version read */
} HcFetchLock;

/* The caller's look at a row's columns before it is locked (HC_FETCH_SKIP_SEEN). */
typedef bool (*HcAdmit) (const Datum *values, const bool *nulls, void *arg);

/*
 * A row looked up (and maybe locked) by one text key, or a text and a
 * smallint key (part: a part of a product), through a unique btree index on
 * those columns alone: the point reads of the hot paths, such as the first
 * look of a hold, which ends every refusal.  The relation, index and
 * column numbers are found in the extension's schema by OID and kept until
 * a relcache invalidation.  Where the index is gone (a distributed
 * deployment may drop the single-node ones), the same read runs as a
 * statement.  values[i] and nulls[i] receive columns[i].
 */
#define HC_FETCH_MAX_COLUMNS 8
typedef struct HcFetch
{
	const char *table;
	const char *key;			/* the column a unique index has as its (first) key */
	HcFetchLock lock;
	int			ncolumns;
	const char *columns[HC_FETCH_MAX_COLUMNS];
	const char *part;			/* NULL, or the smallint second key of the index */
	bool		maybe_empty;	/* often never written: look at the index's
								 * metapage first, and scan only if it has
								 * ever had an entry */
	const char *then;			/* NULL, or a text column the unique index
								 * may have as its second key: rows may then
								 * share the key (a group hold's seats), and
								 * the fetch finds the first of them in the
								 * index's order */
	/* found on first use */
	Oid			schema;
	Oid			relid;
	Oid			indexid;		/* InvalidOid: no such index, use the statement */
	AttrNumber	keyattnum;
	AttrNumber	partattnum;
	AttrNumber	attnums[HC_FETCH_MAX_COLUMNS];
	HcStatement statement;		/* the read as SQL, made when first needed */
} HcFetch;

extern bool hc_fetch(HcCall *call, HcFetch *fetch, const char *key, Datum *values, bool *nulls);
extern bool hc_fetch_part(HcCall *call, HcFetch *fetch, const char *key, int16 part,
						  Datum *values, bool *nulls);
extern bool hc_fetch_tid(HcCall *call, HcFetch *fetch, const char *key, Datum *values,
						 bool *nulls, ItemPointer tid);
extern bool hc_fetch_part_tid(HcCall *call, HcFetch *fetch, const char *key, int16 part,
							  Datum *values, bool *nulls, ItemPointer tid);
extern bool hc_fetch_part_if(HcCall *call, HcFetch *fetch, const char *key, int16 part,
							 HcAdmit admit, void *arg, Datum *values, bool *nulls,
							 ItemPointer tid);
extern bool hc_fetch_changing(HcCall *call, const char *table, ItemPointer tid);

#endif							/* HOLDCOMMIT_FETCH_H */
