/*
 * settings.c
 *		The settings of holdcommit (the holdcommit.* GUCs), defined by _PG_init.
 */
#include "postgres.h"

#include <limits.h>

#include "miscadmin.h"
#include "postmaster/postmaster.h"
#include "utils/guc.h"
#include "utils/varlena.h"

#include "compat.h"
#include "common/settings.h"
#include "core/version.h"

int			hc_idempotency_retention = 24 * 3600;
int			hc_history_retention = 30 * 24 * 3600;
int			hc_max_ttl = 24 * 3600;
int			hc_max_hold = 2 * 3600;
int			hc_max_items = 100;
bool		hc_log_refusals = false;
int			hc_sweep_interval = 30;
int			hc_sweep_batch_size = 1000;
char	   *hc_sweep_databases = NULL;
int			hc_max_sweepers = 2;
int			hc_sweep_time_slice = 10000;
int			hc_max_databases = 256;
bool		hc_notify_enabled = false;
int			hc_max_workers = 4;
int			hc_worker_idle_timeout = 60;
int			hc_worker_wait_timeout = 10000;
bool		hc_stock_auto_spread_on = true;
int			hc_stock_spread_callers = 8;
int			hc_stock_spread_max_parts = 64;
int			hc_stock_gather_after = 300;
int			hc_stock_spread_stall = 200;
int			hc_max_spreaders = 2;

/* holdcommit.databases must be a list of names, as search_path is. */
static bool
hc_check_databases(char **newval, void **extra, GucSource source)
{
	char	   *raw = pstrdup(*newval);
	List	   *names;
	bool		valid = SplitIdentifierString(raw, ',', &names);

	list_free(names);
	pfree(raw);
	if (!valid)
		GUC_check_errdetail("List syntax is invalid.");
	return valid;
}

/*
 * holdcommit.history_retention is 0 (keep everything) or at least
 * idempotency_retention: a reservation must not leave before its key, or a
 * retry would make a second sale.  A SET below it is refused.  From the
 * configuration file, ALTER DATABASE or ALTER ROLE, where the two may come
 * in either order, it is taken: the sweep never prunes before either
 * retention has passed, nor anything whose key is still remembered
 * (admin/sweep.c), so the order cannot make it unsafe.
 */
static bool
hc_check_history_retention(int *newval, void **extra, GucSource source)
{
	if (source == PGC_S_SESSION && *newval != 0 && *newval < hc_idempotency_retention)
	{
		GUC_check_errdetail("holdcommit.history_retention (%d s) is below holdcommit.idempotency_retention (%d s).",
							*newval, hc_idempotency_retention);
		GUC_check_errhint("Set it to 0 (keep all history) or at least holdcommit.idempotency_retention.");
		return false;
	}
	return true;
}

/*
 * Define the settings.  They are policy, so only a superuser (or the
 * configuration file, ALTER DATABASE/ROLE) may change them; the sweeper's
 * are read from the configuration file (SIGHUP).
 */
void
hc_settings_define(void)
{
	DefineCustomIntVariable("holdcommit.idempotency_retention",
							"How long an idempotency key is remembered.",
							"A retry with the same key within this window replays the stored result.",
							&hc_idempotency_retention,
							24 * 3600, 1, INT_MAX,
							PGC_SUSET, GUC_UNIT_S,
							NULL, NULL, NULL);
	/* After idempotency_retention, which its check reads. */
	DefineCustomIntVariable("holdcommit.history_retention",
							"How long finished holds and stock reservations, with their ledger rows, are kept; 0 keeps them forever.",
							"The sweep prunes them once ended this long ago and their key is forgotten; at least holdcommit.idempotency_retention.",
							&hc_history_retention,
							30 * 24 * 3600, 0, INT_MAX,
							PGC_SUSET, GUC_UNIT_S,
							hc_check_history_retention, NULL, NULL);
	DefineCustomIntVariable("holdcommit.max_ttl",
							"The longest ttl a hold or reservation may ask for.",
							NULL,
							&hc_max_ttl,
							24 * 3600, 1, INT_MAX,
							PGC_SUSET, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("holdcommit.max_hold",
							"How long after its creation a hold may be extended to at most.",
							NULL,
							&hc_max_hold,
							2 * 3600, 1, INT_MAX,
							PGC_SUSET, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("holdcommit.max_items",
							"The most lines one multi-item order may have.",
							NULL,
							&hc_max_items,
							100, 1, 10000,
							PGC_SUSET, 0,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("holdcommit.log_refusals",
							 "Log refusals (RS001 asset unavailable, RS002 insufficient stock) in the server log.",
							 "They are answers to the caller, not faults; off, they go to the client only.",
							 &hc_log_refusals,
							 false,
							 PGC_SUSET, 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("holdcommit.notify",
							 "Send a NOTIFY on channel holdcommit when an asset or a product's units become available or sold.",
							 "The payload is JSON with the kind (asset or product), the id and the status.",
							 &hc_notify_enabled,
							 false,
							 PGC_SUSET, 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("holdcommit.sweep_interval",
							"How often the background sweeper runs in each database with holdcommit; 0 turns it off.",
							"Takes effect on reload; needs holdcommit in shared_preload_libraries.",
							&hc_sweep_interval,
							30, 0, INT_MAX / 1000,
							PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("holdcommit.sweep_batch",
							"The most rows of each kind one batch of the background sweeper takes.",
							"Each batch is one transaction.",
							&hc_sweep_batch_size,
							1000, 1, 1000000,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);
	DefineCustomStringVariable("holdcommit.databases",
							   "The databases the background sweeper works in (comma-separated); empty: every database where holdcommit is installed.",
							   NULL,
							   &hc_sweep_databases,
							   "",
							   PGC_SIGHUP, GUC_LIST_INPUT,
							   hc_check_databases, NULL, NULL);

	DefineCustomIntVariable("holdcommit.max_sweepers",
							"The most background sweepers that run at once, over all databases.",
							"Each takes a slot of max_worker_processes while its run lasts.",
							&hc_max_sweepers,
							2, 1, MAX_BACKENDS,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("holdcommit.sweep_time_slice",
							"The longest a background sweeper's run in one database lasts before it lets the next database have its turn.",
							"Its statements time out when the slice is over.",
							&hc_sweep_time_slice,
							10000, 100, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("holdcommit.max_workers",
							"The most background workers that run lease and attempt calls at once, over all databases.",
							"Each such call commits in a worker's transaction of its own; 0: every call starts a worker of its own. Needs holdcommit in shared_preload_libraries.",
							&hc_max_workers,
							4, 0, MAX_BACKENDS,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("holdcommit.worker_idle_timeout",
							"How long a worker for lease and attempt calls waits for its next call before it exits.",
							NULL,
							&hc_worker_idle_timeout,
							60, 1, INT_MAX / 1000,
							PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("holdcommit.worker_wait_timeout",
							"How long a lease or attempt call waits for a free pooled worker before it fails with 53000.",
							"0: it waits as long as statement_timeout lets it.",
							&hc_worker_wait_timeout,
							10000, 0, INT_MAX,
							PGC_USERSET, GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("holdcommit.stock_auto_spread",
							 "Spread a product's stock over parts when its reserves wait for each other, and gather them back once the rush is over.",
							 "Needs holdcommit in shared_preload_libraries to see the waiting; the gathers run from hc_sweep() either way.",
							 &hc_stock_auto_spread_on,
							 true,
							 PGC_SUSET, 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("holdcommit.stock_spread_callers",
							"How many transactions reserving one product at once make holdcommit spread it.",
							"It is spread into as many parts as there were at once, rounded up to a power of two.",
							&hc_stock_spread_callers,
							8, 2, 256,
							PGC_SUSET, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("holdcommit.stock_spread_max_parts",
							"The most parts an automatic spread gives a product.",
							"An operator's hc_stock_spread may give more (256 at most).",
							&hc_stock_spread_max_parts,
							64, 2, 256,
							PGC_SUSET, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("holdcommit.stock_gather_after",
							"How long after its last wait a product spread automatically is gathered back to its floor.",
							"The sweep (hc_sweep() or the background sweeper) starts the gathers.",
							&hc_stock_gather_after,
							300, 1, INT_MAX / 1000,
							PGC_SUSET, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("holdcommit.stock_spread_stall",
							"The longest an automatic spread or gather holds a product's part 0 before it commits; past it, it rolls back.",
							"Reserves of the product wait at most this long for it, plus its commit.",
							&hc_stock_spread_stall,
							200, 1, 60000,
							PGC_SUSET, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("holdcommit.max_spreaders",
							"The most workers that spread or gather products at once, over all databases.",
							"A database has at most one less (all of them when it is 1), and one gatherer.",
							&hc_max_spreaders,
							2, 1, HC_MAX_SPREADERS,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);

	/* It sizes shared memory: it exists only where the library is preloaded. */
	if (process_shared_preload_libraries_in_progress)
		DefineCustomIntVariable("holdcommit.max_databases",
								"The most databases the background sweeper keeps track of.",
								"Its table lives in shared memory: a restart is needed to change it.",
								&hc_max_databases,
								256, 1, 100000,
								PGC_POSTMASTER, 0,
								NULL, NULL, NULL);

	MarkGUCPrefixReserved("holdcommit");
	hc_preloaded = process_shared_preload_libraries_in_progress;
}
