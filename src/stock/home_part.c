/*
 * home_part.c
 *		The part a backend tries first when it reserves a product whose
 *		stock is in several parts: the part its last reserve of that product
 *		took from.  Each backend keeps the part it got, so that callers
 *		drift onto parts of their own and a reserve mostly finds its first
 *		try free, one point read, instead of probing every part.
 *
 * Invariants:
 *   1. A hint and nothing more: the tries lock and re-check the part they
 *      take from, so a part that is held, empty or gone (the product merged
 *      or spread anew) only sends the call on to the probe.
 *   2. Kept in backend memory, a few products' worth: forgotten wholesale
 *      when full, and for a product found with one part.
 */
#include "postgres.h"

#include "utils/hsearch.h"

#include "common/validate.h"
#include "stock/stock.h"

#define HOME_PART_PRODUCTS	1024

typedef struct HomePart
{
	char		product_id[HC_MAX_ID_BYTES + 1];	/* the key */
	int16		part;
} HomePart;

static HTAB *home_parts = NULL;

/* The backend's part of the product, if it has one. */
bool
hc_home_part_get(const char *product_id, int16 *part)
{
	HomePart   *entry;

	if (home_parts == NULL)
		return false;
	entry = hash_search(home_parts, product_id, HASH_FIND, NULL);
	if (entry == NULL)
		return false;
	*part = entry->part;
	return true;
}

/* The product has one part now: no hint. */
void
hc_home_part_forget(const char *product_id)
{
	if (home_parts != NULL)
		(void) hash_search(home_parts, product_id, HASH_REMOVE, NULL);
}

/* The part a reserve of the product took its units from. */
void
hc_home_part_set(const char *product_id, int16 part)
{
	HomePart   *entry;

	if (home_parts != NULL && hash_get_num_entries(home_parts) >= HOME_PART_PRODUCTS &&
		hash_search(home_parts, product_id, HASH_FIND, NULL) == NULL)
	{
		hash_destroy(home_parts);
		home_parts = NULL;
	}
	if (home_parts == NULL)
	{
		HASHCTL		ctl = {0};

		ctl.keysize = HC_MAX_ID_BYTES + 1;
		ctl.entrysize = sizeof(HomePart);
		home_parts = hash_create("holdcommit home parts", 64, &ctl, HASH_ELEM | HASH_STRINGS);
	}
	entry = hash_search(home_parts, product_id, HASH_ENTER, NULL);
	entry->part = part;
}
