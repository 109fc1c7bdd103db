/*
 * seats.c
 *		The routing id of a pool's seats on Citus, read where a call on them
 *		is made (hc_asset_routes): the placement table's assets_scope entry
 *		(register.c), which hc_hold_many asks before it sends itself to the
 *		pool's node (README.md, "Group holds").
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"

#include "core/statement.h"
#include "scaleout/route.h"

/* The assets' routing ids (hc_asset_routes, on the shards of the ids). */
static HcStatement assets_routes = {
	"SELECT asset_id, scope_id FROM hc_asset_routes WHERE asset_id" EQ "ANY (:asset_ids)",
	{{"asset_ids", TEXTARRAYOID}}
};

/*
 * The one routing id of the n assets ids, read where the call runs, before
 * it is sent to that node: NULL with *unknown, an asset that has none; an
 * error for several, whose hold would span nodes.
 */
char *
hc_citus_assets_scope(HcCall *call, char **ids, int n, const char **unknown)
{
	HcArgs		args;
	char	   *scope = NULL;
	char	   *first = NULL;
	uint64		found;
	uint64		i;
	int			level;
	int			j;

	hc_args(&args, &assets_routes);
	hc_bind(&args, "asset_ids", hc_text_array(ids, n));
	/* The call's search path (a GUC nest level from 17 on) outside the read's. */
	hc_call_search_path(call);
	level = hc_route_read_begin();
	found = hc_run(call, &args, SPI_OK_SELECT);
	AtEOXact_GUC(true, level);
	for (i = 0; i < found; i++)
	{
		char	   *s = hc_text(call, (int) i, "scope_id");

		if (scope != NULL && strcmp(scope, s) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("assets \"%s\" and \"%s\" are not of one pool", first,
							hc_text(call, (int) i, "asset_id")),
					 errdetail("On Citus a group hold is of one pool's seats, which are on one node; these are of \"%s\" and \"%s\".",
							   scope, s),
					 errhint("Hold the seats of each pool with its own hc_hold_many(), in one transaction.")));
		scope = s;
		first = hc_text(call, (int) i, "asset_id");
	}
	for (j = 0; found < (uint64) n && j < n; j++)
	{
		for (i = 0; i < found; i++)
			if (strcmp(hc_text(call, (int) i, "asset_id"), ids[j]) == 0)
				break;
		if (i == found)
		{
			*unknown = ids[j];
			return NULL;
		}
	}
	return scope;
}
