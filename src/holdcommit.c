/*
 * holdcommit.c
 *		Module entry point: the settings.  The SQL functions live in one file
 *		per domain (hold.c, stock.c, ...).
 */
#include "postgres.h"

#include <limits.h>

#include "fmgr.h"
#include "utils/guc.h"

#include "errors.h"
#include "holdcommit.h"

PG_MODULE_MAGIC;

int			hc_idempotency_retention = 24 * 3600;
int			hc_max_ttl = 24 * 3600;
int			hc_max_hold = 2 * 3600;
int			hc_max_items = 100;
bool		hc_log_refusals = false;

void		_PG_init(void);

/*
 * Define the settings.  They are policy, so only a superuser (or the
 * configuration file, ALTER DATABASE/ROLE) may change them.  Then keep
 * refusals out of the server log (errors.c).
 */
void
_PG_init(void)
{
	DefineCustomIntVariable("holdcommit.idempotency_retention",
							"How long an idempotency key is remembered.",
							"A retry with the same key within this window replays the stored result.",
							&hc_idempotency_retention,
							24 * 3600, 1, INT_MAX,
							PGC_SUSET, GUC_UNIT_S,
							NULL, NULL, NULL);
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

	MarkGUCPrefixReserved("holdcommit");
	hc_install_log_hook();
}
