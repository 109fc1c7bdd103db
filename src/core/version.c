/*
 * version.c
 *		The SQL versions this library serves, checked before any call
 *		touches a table.
 *
 * A library and the SQL installed in a database can differ: new files are
 * installed before ALTER EXTENSION UPDATE runs in each database, and a
 * library loaded through shared_preload_libraries stays until a restart.
 * Run against tables it does not know, a call could fail half-way or write
 * rows the old functions do not expect.  So every call first checks the
 * installed version: once per backend, and again after any change to
 * pg_proc (an update script always creates, replaces or drops a function;
 * PostgreSQL 15 has no cache of pg_extension to listen to).
 *
 * This library serves 0.2.0, 0.3.0 and 0.4.0: a database can be updated at
 * any time after the new files are installed.  Of 0.2.0 and 0.3.0 it serves
 * the holds, leases, attempts, sweeps and hc_check(), not the stock, whose
 * tables 0.4.0 changed (its calls are refused with 55000 through
 * hc_require_sql_at_least).  0.1.0 is refused until it is updated.
 *
 * Review on a new major: the catalog scan of pg_extension (its columns) and
 * the syscache callback.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/pg_extension.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "core/version.h"

bool		hc_preloaded = false;

static const char *const served_versions[] = {"0.2.0", "0.3.0", "0.4.0", NULL};

/* The installed version was served when last checked; which one it was. */
static bool served = false;
static char served_version[16];
static bool served_callback = false;

static void
version_forget(Datum arg, int cacheid, uint32 hashvalue)
{
	served = false;
}

/*
 * holdcommit in this database, as pg_extension has it: false if it is not
 * installed; else its owner, schema and extversion (NULL if null), each
 * where the pointer is not NULL.
 */
bool
hc_extension_row(Oid *owner, Oid *schema, char **version)
{
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	bool		found;

	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ,
				CStringGetDatum("holdcommit"));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tuple = systable_getnext(scan);
	found = HeapTupleIsValid(tuple);
	if (found)
	{
		Form_pg_extension ext = (Form_pg_extension) GETSTRUCT(tuple);
		bool		isnull;
		Datum		d = heap_getattr(tuple, Anum_pg_extension_extversion,
									 RelationGetDescr(rel), &isnull);

		if (owner != NULL)
			*owner = ext->extowner;
		if (schema != NULL)
			*schema = ext->extnamespace;
		if (version != NULL)
			*version = isnull ? NULL : TextDatumGetCString(d);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return found;
}

/*
 * The numbers of a version of the form N.N.N (0 where one is missing), read
 * by hand: hc_sql_at_least runs on every call, and sscanf costs thousands of
 * instructions.
 */
static void
version_numbers(const char *s, int v[3])
{
	int			i;

	for (i = 0; i < 3; i++)
	{
		v[i] = 0;
		for (; *s >= '0' && *s <= '9'; s++)
			if (v[i] < 100000)
				v[i] = v[i] * 10 + (*s - '0');
		if (*s == '.')
			s++;
	}
}

/* Is version a, of the form N.N.N, later than b? */
static bool
version_later(const char *a, const char *b)
{
	int			va[3];
	int			vb[3];
	int			i;

	version_numbers(a, va);
	version_numbers(b, vb);
	for (i = 0; i < 3; i++)
		if (va[i] != vb[i])
			return va[i] > vb[i];
	return false;
}

/*
 * Refuse, with 55000, a call into a database whose holdcommit SQL this
 * library does not serve.
 */
void
hc_require_served_sql(void)
{
	char	   *installed = NULL;
	int			i;

	if (served)
		return;
	if (!served_callback)
	{
		CacheRegisterSyscacheCallback(PROCOID, version_forget, (Datum) 0);
		served_callback = true;
	}
	if (!hc_extension_row(NULL, NULL, &installed) || installed == NULL)
		elog(ERROR, "extension holdcommit is not installed in this database");
	for (i = 0; served_versions[i] != NULL; i++)
		if (strcmp(installed, served_versions[i]) == 0)
		{
			strlcpy(served_version, installed, sizeof(served_version));
			served = true;
			return;
		}
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("holdcommit %s SQL is installed, the library is %s", installed,
					HC_LIBRARY_VERSION),
			 version_later(installed, HC_LIBRARY_VERSION) ?
			 (hc_preloaded ?
			  errhint("Restart the server: it still runs the library of holdcommit %s from shared_preload_libraries.",
					  HC_LIBRARY_VERSION) :
			  errhint("Reconnect to load the library of holdcommit %s, or install it.", installed)) :
			 errhint("Run ALTER EXTENSION holdcommit UPDATE in this database.")));
}

/*
 * Is the installed SQL, which this library serves, this version or later?
 * For what a served older version lacks: the grants of objects added since,
 * the stock in parts.
 */
bool
hc_sql_at_least(const char *version)
{
	hc_require_served_sql();
	return !version_later(version, served_version);
}

/*
 * Refuse, with 55000, a call whose tables came with a later SQL version
 * than the one installed, which this library serves for its other calls.
 */
void
hc_require_sql_at_least(const char *version, const char *function)
{
	if (!hc_sql_at_least(version))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s needs holdcommit %s SQL, and %s is installed", function, version,
						served_version),
				 errdetail("This library serves the other calls of holdcommit %s until the update.",
						   served_version),
				 errhint("Run ALTER EXTENSION holdcommit UPDATE in this database.")));
}
