/*
 * write.c
 *		Row inserts and updates that bypass the planner and the executor.
 *
 * Beside fetch.c's reads and row locks: where a call's statement is fixed
 * (one row inserted, or one row it has locked updated, in a table of the
 * extension), the write is made here as the logical replication apply
 * worker makes it (ExecSimpleRelationInsert, ExecSimpleRelationUpdate): an
 * EState with a range table of the tables written and a ResultRelInfo for
 * each, their indexes open (ExecOpenIndices), stored generated columns
 * computed, NOT NULL and CHECK constraints checked (ExecConstraints), the
 * heap written, every index given its entry (ExecInsertIndexTuples; none
 * for an update the heap made HOT, as the executor does), unique and
 * exclusion constraints checked there, AFTER ROW triggers queued and fired
 * when the writes are done, as at a statement's end (AfterTriggerBeginQuery
 * / AfterTriggerEndQuery).  The writes of a writer are one statement's
 * worth: hc_writer_begin, hc_write_insert / hc_write_update, hc_writer_end,
 * which bumps the command counter so the call sees what it wrote.  They run
 * as the statement would: as the extension's owner in the call's
 * security-restricted operation, with the call's search path and a fresh
 * snapshot (for what of a user's they run: triggers, constraints, index
 * expressions).
 *
 * What still applies, and what sends a write back to its statement
 * (hc_writer_begin returns false, and the caller runs the statement):
 *   - privileges: the statement's (INSERT; UPDATE and SELECT), checked as
 *     the executor checks them (ExecCheckPermissions, its hook too), as the
 *     extension's owner whose rights the call runs with;
 *   - AFTER ROW triggers (a user's audit trigger, a foreign key's checks,
 *     deferred constraint triggers) fire as they fire for the statement,
 *     UPDATE OF column triggers by the columns the write sets;
 *   - foreign keys: those of other tables that reference the extension's
 *     are AFTER ROW triggers on it (a write here never changes a key they
 *     reference); one added from the extension's table to another is too;
 *   - a BEFORE ROW trigger, which may change or cancel the row (what the
 *     statement returns and counts, and the call checks), a statement-level
 *     trigger, a trigger with transition tables, or a rule: the statement;
 *   - row-level security: the statement, wherever it applies to the
 *     extension's owner (FORCE ROW LEVEL SECURITY on a table whose owner is
 *     not a superuser); elsewhere it does not apply to the statement either;
 *   - a column the write does not set that has a default or identity, or a
 *     generated column that is not stored: the statement (it fills them);
 *   - Citus in the database: the statement, as for fetch.c's reads (the
 *     rows are in the shards; the table here may be a shell).
 * So each choice is the statement's behaviour, or the statement itself
 * (doc/architecture.md has the table; test/sql/hold_writes.sql tests it).
 *
 * Locks, in the order they are taken, after the row locks of fetch.c the
 * caller holds (the row an update replaces must be one, locked by
 * hc_fetch_tid: its newest version, which nobody else can change):
 *   1. each table written, RowExclusiveLock, as the statement's; the
 *      invalidations that arrive then are seen before the shape is trusted;
 *   2. each of its indexes, RowExclusiveLock (ExecOpenIndices);
 *   3. the row written: an update's is already locked; an insert's index
 *      entries wait for a conflicting insert in flight, as the statement's.
 * A writer may fetch (and lock) more rows while it is open, in the lock
 * order of the caller's domain.
 *
 * Review on a new major: ExecSimpleRelationInsert and
 * ExecSimpleRelationUpdate (execReplication.c) and the apply worker's EState
 * (create_edata_for_relation in worker.c) against hc_write_insert,
 * hc_write_update and hc_writer_begin; the signatures in compat.h
 * (ExecInitRangeTable, the permission check, ExecInsertIndexTuples,
 * simple_table_tuple_update); the trigger descriptor's flags that send a
 * write to its statement; that ExecInsertIndexTuples still compiles a
 * partial index's predicate only where IndexInfo's ii_PredicateState is
 * unset (predicates_install gives it the one kept); and the relcache
 * callback that forgets the OIDs and the predicates.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/pg_class.h"
#include "commands/extension.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "executor/nodeModifyTable.h"
#include "miscadmin.h"
#include "nodes/bitmapset.h"
#include "optimizer/optimizer.h"
#include "utils/fmgrprotos.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"

#include "compat.h"
#include "core/write.h"

/* Every HcWrite found so far, to forget on a relcache invalidation. */
#define HC_MAX_WRITES 16
static HcWrite *writes_found[HC_MAX_WRITES];
static int	nwrites_found = 0;
static bool write_callback = false;

/*
 * The partial indexes' predicates, compiled once per index rather than for
 * each writer as ExecInsertIndexTuples would (ExecPrepareQual: a tenth of a
 * hold's writes), each in a context of its own, until a relcache
 * invalidation of the index or its table.  An invalidation only marks an
 * entry stale (a writer in progress may be using it); a writer that starts
 * with none in progress frees the stale ones.  A transaction's end ends
 * every writer, the ones an error left too.
 */
#define HC_MAX_PREDICATES 32
typedef struct WritePredicate
{
	Oid			indexid;
	Oid			relid;			/* the index's table */
	bool		stale;
	MemoryContext context;
	ExprState  *state;
} WritePredicate;
static WritePredicate predicates[HC_MAX_PREDICATES];
static int	npredicates = 0;
static int	writers_open = 0;

static void
write_invalidate(Datum arg, Oid relid)
{
	int			i;

	for (i = 0; i < nwrites_found; i++)
		if (!OidIsValid(relid) || relid == writes_found[i]->relid)
			writes_found[i]->relid = InvalidOid;
	for (i = 0; i < npredicates; i++)
		if (!OidIsValid(relid) || relid == predicates[i].relid || relid == predicates[i].indexid)
			predicates[i].stale = true;
}

static void
write_xact_end(XactEvent event, void *arg)
{
	writers_open = 0;
}

/* Free the stale predicates, with no writer in progress to use them. */
static void
predicates_sweep(void)
{
	int			i = 0;

	if (writers_open > 0)
		return;
	while (i < npredicates)
	{
		if (predicates[i].stale)
		{
			MemoryContextDelete(predicates[i].context);
			predicates[i] = predicates[--npredicates];
		}
		else
			i++;
	}
}

/*
 * Give each partial index of the table open in rri its predicate, compiled
 * as ExecPrepareQual compiles it, from the cache (or into it, if there is
 * room; otherwise ExecInsertIndexTuples compiles it as usual).
 */
static void
predicates_install(ResultRelInfo *rri)
{
	Oid			relid = RelationGetRelid(rri->ri_RelationDesc);
	int			i;
	int			j;

	for (i = 0; i < rri->ri_NumIndices; i++)
	{
		IndexInfo  *info = rri->ri_IndexRelationInfo[i];
		Oid			indexid = RelationGetRelid(rri->ri_IndexRelationDescs[i]);
		MemoryContext old;

		if (info->ii_Predicate == NIL)
			continue;
		for (j = 0; j < npredicates; j++)
			if (predicates[j].indexid == indexid && !predicates[j].stale)
				break;
		if (j == npredicates)
		{
			if (npredicates == HC_MAX_PREDICATES)
				continue;
			predicates[j].context = AllocSetContextCreate(CacheMemoryContext,
														  "holdcommit index predicate",
														  ALLOCSET_SMALL_SIZES);
			old = MemoryContextSwitchTo(predicates[j].context);
			predicates[j].state =
				ExecInitQual((List *) expression_planner((Expr *) copyObject(info->ii_Predicate)),
							 NULL);
			MemoryContextSwitchTo(old);
			predicates[j].indexid = indexid;
			predicates[j].relid = relid;
			predicates[j].stale = false;
			npredicates++;
		}
		info->ii_PredicateState = predicates[j].state;
	}
}

static void
write_register(HcWrite *write)
{
	int			i;

	if (!write_callback)
	{
		CacheRegisterRelcacheCallback(write_invalidate, (Datum) 0);
		RegisterXactCallback(write_xact_end, NULL);
		write_callback = true;
	}
	for (i = 0; i < nwrites_found; i++)
		if (writes_found[i] == write)
			return;
	if (nwrites_found == HC_MAX_WRITES)
		elog(ERROR, "too many holdcommit writes");
	writes_found[nwrites_found++] = write;
}

/*
 * Find the write's columns in its table, a plain table of the extension,
 * and whether the table's shape lets it be written here: no Citus, and for
 * an insert, every column it does not set one that the statement would
 * leave NULL too (no default, no identity; a stored generated column is
 * computed here as there).
 */
static void
write_find(HcWrite *write, Relation rel)
{
	TupleDesc	desc = RelationGetDescr(rel);
	Oid			relid = RelationGetRelid(rel);
	int			i;

	if (rel->rd_rel->relkind != RELKIND_RELATION ||
		getExtensionOfObject(RelationRelationId, relid) != get_extension_oid("holdcommit", false))
		elog(ERROR, "%s is not the table of holdcommit", write->table);
	for (i = 0; i < write->ncolumns; i++)
	{
		write->attnums[i] = get_attnum(relid, write->columns[i]);
		if (write->attnums[i] == InvalidAttrNumber)
			elog(ERROR, "column %s of %s is missing", write->columns[i], write->table);
	}
	write->direct = !OidIsValid(get_extension_oid("citus", true)) && !rel->rd_rel->relispartition;
	for (i = 0; i < desc->natts && write->direct && write->kind == HC_WRITE_INSERT; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(desc, i);
		bool		set = false;
		int			j;

		for (j = 0; j < write->ncolumns; j++)
			set |= write->attnums[j] == attr->attnum;
		if (attr->attisdropped || set || attr->attgenerated == ATTRIBUTE_GENERATED_STORED)
			continue;
		if (attr->atthasdef || attr->attidentity != '\0' || attr->attgenerated != '\0')
			write->direct = false;
	}
}

/*
 * May this call write the table here?  Not where a trigger, a rule or a
 * policy would make the statement do more than write the row (the top of
 * this file).
 */
static bool
write_allowed(Relation rel, bool insert, bool update)
{
	TriggerDesc *t = rel->trigdesc;

	if (rel->rd_rules != NULL)
		return false;
	if (t != NULL && insert &&
		(t->trig_insert_before_row || t->trig_insert_before_statement ||
		 t->trig_insert_after_statement || t->trig_insert_new_table))
		return false;
	if (t != NULL && update &&
		(t->trig_update_before_row || t->trig_update_before_statement ||
		 t->trig_update_after_statement || t->trig_update_old_table ||
		 t->trig_update_new_table))
		return false;
	return !rel->rd_rel->relrowsecurity ||
		check_enable_rls(RelationGetRelid(rel), InvalidOid, false) != RLS_ENABLED;
}

/*
 * The writer's entry for the table of write, as hc_writer_begin opened it:
 * not by write->relid, which an invalidation arriving meanwhile (at a later
 * table's or index's lock) may have cleared.
 */
static HcWriterTable *
writer_table(HcWriter *writer, HcWrite *write)
{
	int			i;

	for (i = 0; i < writer->nwrites; i++)
		if (writer->writes[i] == write)
			return &writer->tables[writer->write_table[i]];
	elog(ERROR, "holdcommit writer was not begun with a write to %s", write->table);
	return NULL;				/* keep the compiler quiet */
}

/*
 * Start the writes (any number of each of writes, in any order) of what
 * would be one statement: open their tables, locked as the statement would
 * lock them; false, with nothing written, if the statement must make them
 * (the top of this file).  Otherwise check the statement's privileges, open
 * the indexes, start the AFTER triggers' queue, and push a snapshot taken
 * now, as the statement would have, for what the writes run (constraints,
 * triggers).
 */
bool
hc_writer_begin(HcCall *call, HcWriter *writer, HcWrite *const *writes, int nwrites)
{
	Oid			relids[HC_WRITER_MAX_TABLES];
	char		relkinds[HC_WRITER_MAX_TABLES];
	AclMode		perms[HC_WRITER_MAX_TABLES] = {0};
	Bitmapset  *inserted[HC_WRITER_MAX_TABLES] = {0};
	Bitmapset  *updated[HC_WRITER_MAX_TABLES] = {0};
	bool		direct = true;
	MemoryContext old;
	int			i;
	int			t;

	/* What a statement that writes refuses, so does this. */
	PreventCommandIfReadOnly("a holdcommit write");
	PreventCommandIfParallelMode("a holdcommit write");
	writer->call = call;
	writer->ntables = 0;
	writer->nwrites = 0;
	if (nwrites > HC_WRITER_MAX_WRITES)
		elog(ERROR, "too many writes in a holdcommit writer");
	/*
	 * A call with a scope runs on Citus' shards, and a table found on Citus
	 * stays so: no lock on a table the statement does not write.
	 */
	if (call->scope != NULL)
		return false;
	for (i = 0; i < nwrites; i++)
		if (OidIsValid(writes[i]->relid) && writes[i]->schema == call->schema &&
			!writes[i]->direct)
			return false;
	for (i = 0; i < nwrites; i++)
	{
		HcWrite    *write = writes[i];
		Oid			relid = write->relid;

		if (!OidIsValid(relid) || write->schema != call->schema)
		{
			write_register(write);
			relid = get_relname_relid(write->table, call->schema);
			if (!OidIsValid(relid))
				elog(ERROR, "relation %s of holdcommit is missing", write->table);
		}
		for (t = 0; t < writer->ntables; t++)
			if (RelationGetRelid(writer->tables[t].rel) == relid)
				break;
		if (t == writer->ntables)
		{
			if (t == HC_WRITER_MAX_TABLES)
				elog(ERROR, "too many tables in a holdcommit writer");
			memset(&writer->tables[t], 0, sizeof(HcWriterTable));
			/* Locked first: that is when invalidations arrive (fetch.c's fetch_open). */
			writer->tables[t].rel = table_open(relid, RowExclusiveLock);
			writer->ntables++;
		}
		while (write->relid != relid || write->schema != call->schema)
		{
			write->relid = relid;
			write->schema = call->schema;
			write_find(write, writer->tables[t].rel);
		}
		writer->writes[writer->nwrites] = write;
		writer->write_table[writer->nwrites++] = t;
		direct &= write->direct;
		perms[t] |= write->kind == HC_WRITE_INSERT ? ACL_INSERT : ACL_UPDATE | ACL_SELECT;
		for (int c = 0; c < write->ncolumns; c++)
		{
			Bitmapset **cols = write->kind == HC_WRITE_INSERT ? &inserted[t] : &updated[t];

			*cols = bms_add_member(*cols, write->attnums[c] - FirstLowInvalidHeapAttributeNumber);
		}
	}
	for (t = 0; t < writer->ntables && direct; t++)
	{
		relids[t] = RelationGetRelid(writer->tables[t].rel);
		relkinds[t] = writer->tables[t].rel->rd_rel->relkind;
		direct = write_allowed(writer->tables[t].rel, (perms[t] & ACL_INSERT) != 0,
							   (perms[t] & ACL_UPDATE) != 0);
	}
	if (!direct)
	{
		/* The statement takes the same locks: keep them. */
		for (t = 0; t < writer->ntables; t++)
			table_close(writer->tables[t].rel, NoLock);
		writer->ntables = 0;
		return false;
	}

	writer->estate = CreateExecutorState();
	old = MemoryContextSwitchTo(writer->estate->es_query_cxt);
	hc_exec_range_table(writer->estate, writer->ntables, relids, relkinds, perms, inserted,
						updated);
	for (t = 0; t < writer->ntables; t++)
	{
		HcWriterTable *table = &writer->tables[t];

		table->rri = makeNode(ResultRelInfo);
		InitResultRelInfo(table->rri, table->rel, t + 1, NULL, 0);
		/* Where AfterTriggerEndQuery finds the table's triggers (ExecGetTriggerResultRel). */
		writer->estate->es_opened_result_relations =
			lappend(writer->estate->es_opened_result_relations, table->rri);
		if (perms[t] & ACL_UPDATE)
			CheckCmdReplicaIdentity(table->rel, CMD_UPDATE);
		ExecOpenIndices(table->rri, false);
	}
	MemoryContextSwitchTo(old);
	/* The indexes are locked: the invalidations of their predicates have arrived. */
	predicates_sweep();
	for (t = 0; t < writer->ntables; t++)
		predicates_install(writer->tables[t].rri);
	writers_open++;

	/*
	 * What the statement runs in, for what the writes run of a user's
	 * (triggers, constraints, index expressions): the call's search path,
	 * and as SPI does for each statement, a snapshot that sees what this
	 * call has written so far.
	 */
	hc_call_search_path(call);
	CommandCounterIncrement();
	PushActiveSnapshot(GetTransactionSnapshot());
	writer->estate->es_snapshot = GetActiveSnapshot();
	writer->estate->es_output_cid = GetCurrentCommandId(true);
	AfterTriggerBeginQuery();
	return true;
}

/* The slot of the row written, and the row an update replaces, made once per table. */
static TupleTableSlot *
writer_slot(HcWriter *writer, HcWriterTable *table, TupleTableSlot **slot)
{
	if (*slot == NULL)
		*slot = table_slot_create(table->rel, &writer->estate->es_tupleTable);
	return *slot;
}

/* Set the write's columns of slot, which holds the rest of the row. */
static void
write_columns(HcWrite *write, TupleTableSlot *slot, const Datum *values, const bool *nulls)
{
	int			i;

	for (i = 0; i < write->ncolumns; i++)
	{
		slot->tts_values[write->attnums[i] - 1] = values[i];
		slot->tts_isnull[write->attnums[i] - 1] = nulls[i];
	}
	ExecStoreVirtualTuple(slot);
}

/* Computed columns and constraints, as ExecSimpleRelationInsert/Update check them. */
static void
write_check(HcWriter *writer, HcWriterTable *table, TupleTableSlot *slot, CmdType cmd)
{
	Relation	rel = table->rel;

	if (rel->rd_att->constr && rel->rd_att->constr->has_generated_stored)
		ExecComputeStoredGenerated(table->rri, writer->estate, slot, cmd);
	if (rel->rd_att->constr)
		ExecConstraints(table->rri, slot, writer->estate);
}

/*
 * INSERT INTO write->table (write->columns) VALUES (values): the other
 * columns NULL (write_find saw to it that the statement fills nothing
 * else).
 */
void
hc_write_insert(HcWriter *writer, HcWrite *write, const Datum *values, const bool *nulls)
{
	HcWriterTable *table = writer_table(writer, write);
	TupleTableSlot *slot = writer_slot(writer, table, &table->slot);
	EState	   *estate = writer->estate;
	List	   *recheck = NIL;
	int			natts = slot->tts_tupleDescriptor->natts;

	Assert(write->kind == HC_WRITE_INSERT);
	ExecClearTuple(slot);
	memset(slot->tts_isnull, true, natts * sizeof(bool));
	write_columns(write, slot, values, nulls);
	write_check(writer, table, slot, CMD_INSERT);
	simple_table_tuple_insert(table->rel, slot);
	if (table->rri->ri_NumIndices > 0)
		recheck = hc_insert_index_tuples(table->rri, slot, estate, false, false);
	ExecARInsertTriggers(estate, table->rri, slot, recheck, NULL);
	list_free(recheck);
	ResetPerTupleExprContext(estate);
}

/*
 * UPDATE write->table SET write->columns = values WHERE ctid = tid: a row
 * the call has locked (hc_fetch_tid), so its newest version, which the
 * update cannot miss.
 */
void
hc_write_update(HcWriter *writer, HcWrite *write, ItemPointer tid, const Datum *values,
				const bool *nulls)
{
	HcWriterTable *table = writer_table(writer, write);
	TupleTableSlot *slot = writer_slot(writer, table, &table->slot);
	TupleTableSlot *old = writer_slot(writer, table, &table->old);
	EState	   *estate = writer->estate;
	int			natts = slot->tts_tupleDescriptor->natts;
	List	   *recheck = NIL;
	HcIndexUpdate indexes;

	Assert(write->kind == HC_WRITE_UPDATE && ItemPointerIsValid(tid));
	if (!table_tuple_fetch_row_version(table->rel, tid, SnapshotAny, old))
		elog(ERROR, "locked row of %s is missing", write->table);
	slot_getallattrs(old);
	ExecClearTuple(slot);
	memcpy(slot->tts_values, old->tts_values, natts * sizeof(Datum));
	memcpy(slot->tts_isnull, old->tts_isnull, natts * sizeof(bool));
	write_columns(write, slot, values, nulls);
	/* The new row owes nothing to the old one's buffer, which goes now. */
	ExecMaterializeSlot(slot);
	ExecClearTuple(old);
	write_check(writer, table, slot, CMD_UPDATE);
	indexes = hc_simple_table_tuple_update(table->rel, tid, slot, estate->es_snapshot);
	if (table->rri->ri_NumIndices > 0 && indexes != HC_INDEXES_NONE)
		recheck = hc_insert_index_tuples(table->rri, slot, estate, true,
										 indexes == HC_INDEXES_SUMMARIZING);
	ExecARUpdateTriggers(estate, table->rri, NULL, NULL, tid, NULL, slot, recheck, NULL, false);
	list_free(recheck);
	ResetPerTupleExprContext(estate);
}

/*
 * End the writes: fire the AFTER triggers queued, as at a statement's end,
 * close what hc_writer_begin opened (the locks stay), and bump the command
 * counter so that the call sees what it wrote.
 */
void
hc_writer_end(HcWriter *writer)
{
	EState	   *estate = writer->estate;
	int			t;

	AfterTriggerEndQuery(estate);
	writers_open--;
	/* The indexes, and the tables the triggers' queue opened. */
	ExecCloseResultRelations(estate);
	for (t = 0; t < writer->ntables; t++)
		table_close(writer->tables[t].rel, NoLock);
	ExecResetTupleTable(estate->es_tupleTable, false);
	FreeExecutorState(estate);
	PopActiveSnapshot();
	CommandCounterIncrement();
}

/*
 * a + b for a value a write sets, as the statement it stands for adds them:
 * int4pl refuses an overflow with 22003.
 */
int32
hc_write_add(int32 a, int32 b)
{
	return DatumGetInt32(DirectFunctionCall2(int4pl, Int32GetDatum(a), Int32GetDatum(b)));
}
