/*
 * holdcommit.c
 *		Module entry point: _PG_init defines the settings (common/settings.c),
 *		installs the hooks and registers the background workers.  The SQL
 *		functions live in their domain's folder (hold/, stock/, lease/, admin/).
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"

#include "bgw/autonomous/autonomous.h"
#include "bgw/sweeper/sweeper.h"
#include "common/errors.h"
#include "common/settings.h"
#include "scaleout/register.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/*
 * Keep refusals out of the server log (errors.c).  Then, only while
 * shared_preload_libraries is processed, set up the background sweeper
 * (sweeper_state.c) and the pool of workers for autonomous calls (pool.c).
 */
void
_PG_init(void)
{
	hc_settings_define();
	hc_install_log_hook();
	hc_scaleout_register();

	if (!process_shared_preload_libraries_in_progress)
		return;
	hc_sweeper_init();
	hc_autonomous_init();
}
