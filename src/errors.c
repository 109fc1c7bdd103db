/*
 * errors.c
 *		Refusals stay out of the server log.
 *
 * RS001 (asset taken) and RS002 (sold out) are answers, not faults: a flash
 * sale produces them by the thousand per second, and logging each with its
 * detail, hint and statement would fill the log by gigabytes.  Unless
 * holdcommit.log_refusals is on, they go to the client only.
 */
#include "postgres.h"

#include "utils/elog.h"

#include "errors.h"
#include "holdcommit.h"

static emit_log_hook_type previous_emit_log_hook = NULL;

static void
hc_emit_log(ErrorData *edata)
{
	if (!hc_log_refusals &&
		(edata->sqlerrcode == ERRCODE_HC_ASSET_UNAVAILABLE ||
		 edata->sqlerrcode == ERRCODE_HC_INSUFFICIENT_STOCK))
		edata->output_to_server = false;
	if (previous_emit_log_hook)
		previous_emit_log_hook(edata);
}

/* Install the hook, once per backend. */
void
hc_install_log_hook(void)
{
	previous_emit_log_hook = emit_log_hook;
	emit_log_hook = hc_emit_log;
}
