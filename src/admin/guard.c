/*
 * guard.c
 *		The event triggers that keep the hc_* names for the extension:
 *		hc_guard_names (0.3.0) and hc_guard_ddl (0.2.0).
 *
 * 0.3.0 lives in a schema that only a superuser or the extension's owner
 * owns, so nobody else can reach its objects.  One lever is left, in the
 * schemas on a caller's search_path that others own (public, which the
 * database owner owns): a function call resolves by argument types across
 * the whole path, so a look-alike hc_* overload there could win over the
 * extension's function.  hc_guard_names refuses hc_* functions outside the
 * extension, in any schema.
 *
 * hc_guard_ddl stays for the 0.2.0 databases, installed in public, that the
 * library still serves until they are updated; what follows is its case.
 *
 * In PostgreSQL 15 the schema holdcommit is usually installed in, public,
 * belongs to the database owner, who may create anything there.  An
 * overload such as hc_grant_app(text) or hc_commit(varchar) would win over
 * the extension's own function for a caller passing an untyped literal or a
 * varchar, and would run with the caller's rights (a superuser's, for the
 * grant functions).  So no function, relation or type named hc_* may be
 * created in, renamed into or moved into the extension's schema unless it is
 * a member of the extension (made by CREATE or ALTER EXTENSION).
 *
 * The schema's owner may also drop what is in it, the extension's indexes
 * among them (a table is safe: it belongs to the extension).  Dropping
 * hc_reservations_one_committed would remove the last guard against a
 * second sale, so on sql_drop the same function refuses a drop of an hc_*
 * object of that schema by anyone but a superuser.
 *
 * Review on a new major: the event trigger's data (EventTriggerData, the
 * columns of pg_event_trigger_ddl_commands() and
 * pg_event_trigger_dropped_objects()) and which commands fire it.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/event_trigger.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

PG_FUNCTION_INFO_V1(hc_guard_ddl);
PG_FUNCTION_INFO_V1(hc_guard_names);

/* The name and schema of a function, relation or type; false for others. */
static bool
guard_object_name(Oid classid, Oid objid, char **name, Oid *schema)
{
	int			cacheid;
	HeapTuple	tuple;

	if (classid == ProcedureRelationId)
		cacheid = PROCOID;
	else if (classid == RelationRelationId)
		cacheid = RELOID;
	else if (classid == TypeRelationId)
		cacheid = TYPEOID;
	else
		return false;
	tuple = SearchSysCache1(cacheid, ObjectIdGetDatum(objid));
	if (!HeapTupleIsValid(tuple))
		return false;
	if (classid == ProcedureRelationId)
	{
		*name = pstrdup(NameStr(((Form_pg_proc) GETSTRUCT(tuple))->proname));
		*schema = ((Form_pg_proc) GETSTRUCT(tuple))->pronamespace;
	}
	else if (classid == RelationRelationId)
	{
		Form_pg_class rel = (Form_pg_class) GETSTRUCT(tuple);

		*name = pstrdup(NameStr(rel->relname));
		*schema = rel->relnamespace;
		/* Indexes and a composite type's relation belong to something else. */
		if (rel->relkind == RELKIND_INDEX || rel->relkind == RELKIND_PARTITIONED_INDEX ||
			rel->relkind == RELKIND_COMPOSITE_TYPE)
			*name = "";
	}
	else
	{
		Form_pg_type type = (Form_pg_type) GETSTRUCT(tuple);

		*name = pstrdup(NameStr(type->typname));
		*schema = type->typnamespace;
		/* A table's row type comes and goes with the table. */
		if (OidIsValid(type->typrelid) && get_rel_relkind(type->typrelid) != RELKIND_COMPOSITE_TYPE)
			*name = "";
	}
	ReleaseSysCache(tuple);
	return true;
}

/* On sql_drop: refuse a drop of an hc_* object of the extension's schema. */
static void
guard_drops(Oid ext_schema)
{
	uint64		i;

	if (superuser())
		return;
	if (SPI_execute("SELECT object_type, schema_name, object_name"
					"  FROM pg_catalog.pg_event_trigger_dropped_objects()",
					true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the dropped objects");
	for (i = 0; i < SPI_processed; i++)
	{
		char	   *type = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
		char	   *schema = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2);
		char	   *name = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 3);

		if (schema == NULL || name == NULL || strncmp(name, "hc_", 3) != 0 ||
			get_namespace_oid(schema, true) != ext_schema)
			continue;
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("only a superuser may drop %s \"%s\" of extension holdcommit", type, name),
				 errdetail("Its indexes and constraints keep holdcommit's guarantees."),
				 errhint("Ask a superuser; a distributed deployment may drop the single-node indexes.")));
	}
}

/*
 * Refuse an hc_* object that a DDL command made, renamed or moved and that is
 * not the extension's: in the schema ext_schema (InvalidOid: in any schema),
 * and of any kind or, with functions_only, functions, procedures and
 * aggregates only.
 */
static void
guard_commands(Oid extension, Oid ext_schema, bool functions_only)
{
	uint64		i;

	if (SPI_execute("SELECT classid, objid FROM pg_catalog.pg_event_trigger_ddl_commands()",
					true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the DDL commands");
	for (i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		Oid			classid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
		Oid			objid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));
		char	   *name;
		Oid			schema;

		if ((functions_only && classid != ProcedureRelationId) ||
			!guard_object_name(classid, objid, &name, &schema) ||
			(OidIsValid(ext_schema) && schema != ext_schema) || strncmp(name, "hc_", 3) != 0 ||
			getExtensionOfObject(classid, objid) == extension)
			continue;
		/* pg_temp is never searched for functions a call names without its schema. */
		if (functions_only && isAnyTempNamespace(schema))
			continue;
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("names beginning with \"hc_\" in schema \"%s\" are reserved for extension holdcommit",
						get_namespace_name(schema)),
				 errdetail("\"%s\" is not part of the extension; an object of that name there could stand in for one of holdcommit's functions.",
						   name),
				 errhint("Choose another name.")));
	}
}

/* The extension, unless it is being created or updated right now. */
static Oid
guard_extension(FunctionCallInfo fcinfo, const char *function)
{
	Oid			extension;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		elog(ERROR, "%s must be called as an event trigger", function);
	extension = get_extension_oid("holdcommit", true);
	if (!OidIsValid(extension) || (creating_extension && CurrentExtensionObject == extension))
		return InvalidOid;
	return extension;
}

/*
 * hc_guard_ddl() (0.2.0): at the end of each DDL command, refuse an hc_*
 * object in the extension's schema that is not the extension's; on
 * sql_drop, refuse a drop of one by anyone but a superuser.
 */
Datum
hc_guard_ddl(PG_FUNCTION_ARGS)
{
	Oid			extension = guard_extension(fcinfo, "hc_guard_ddl");
	Oid			ext_schema = get_func_namespace(fcinfo->flinfo->fn_oid);

	if (!OidIsValid(extension))
		PG_RETURN_VOID();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (strcmp(((EventTriggerData *) fcinfo->context)->event, "sql_drop") == 0)
		guard_drops(ext_schema);
	else
		guard_commands(extension, ext_schema, false);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * hc_guard_names() (0.3.0): at the end of a command that makes, renames or
 * moves a function, refuse one named hc_* in any schema but the extension's
 * and the sessions' own pg_temp (never searched for functions).  Function calls resolve by argument types across the whole
 * search_path, so an overload such as public.hc_grant_app(text) would win
 * over holdcommit.hc_grant_app(regrole) for an untyped literal, even with
 * holdcommit first on the path, and run with the caller's rights.
 */
Datum
hc_guard_names(PG_FUNCTION_ARGS)
{
	Oid			extension = guard_extension(fcinfo, "hc_guard_names");

	if (!OidIsValid(extension))
		PG_RETURN_VOID();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	guard_commands(extension, InvalidOid, true);
	SPI_finish();
	PG_RETURN_VOID();
}
