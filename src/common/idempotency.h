/*
 * idempotency.h
 *		Idempotency keys (idempotency.c).
 */
#ifndef HOLDCOMMIT_IDEMPOTENCY_H
#define HOLDCOMMIT_IDEMPOTENCY_H

#include "lib/stringinfo.h"

#include "core/statement.h"

/*
 * A request's fingerprint: its text, and its SHA-256, are made only when a
 * call needs them (a refusal never does); until then the first values wait
 * in parts, which must live as long as the fingerprint.
 */
#define HC_FINGERPRINT_PARTS 8
typedef struct HcFingerprint
{
	const char *parts[HC_FINGERPRINT_PARTS];
	int			nparts;
	StringInfoData buf;			/* data NULL until the parts are written */
	bytea	   *digest;			/* NULL until hc_fingerprint_digest() */
} HcFingerprint;

/*
 * The reservation a key already made, as a domain statement read it with
 * HC_KNOWN_KEY and HC_KNOWN_KEY_COLUMNS.
 */
typedef struct HcKnownKey
{
	const char *kind;			/* hold or stock; NULL: the key is new */
	char	   *id;
	char	   *scope_id;
	char	   *buyer_id;
	bytea	   *fingerprint;
	TimestampTz created_at;
} HcKnownKey;

/*
 * A CTE "known" with the reservation, of either kind, that holds the key
 * :key (one key space for holds and stock; on Citus one per routing id,
 * :key_scope, which hc_run binds), and the columns that read it from
 * "known k".  The orders are hc_stock_orders from 0.4.0 SQL on, and
 * HC_KNOWN_KEY_IN names the table of an older one (hc_stock_reservations),
 * whose holds the library still serves, and a hold's routing id (from 0.4.0
 * on its scope_id, which a database distributed by 0.3.0 leaves NULL).  A
 * hold's scope_id there is its asset's (a group's first seat's).
 */
#define HC_KNOWN_KEY_IN(orders, hold_scope) \
	"known AS (" \
	"  SELECT 'hold' AS kind, id, asset_id AS scope_id, buyer_id, fingerprint, created_at" \
	"    FROM hc_reservations WHERE idempotency_key" EQ ":key" \
	"     AND (:key_scope IS NULL OR " hold_scope EQ ":key_scope)" \
	"  UNION ALL" \
	"  SELECT 'stock', id, scope_id, buyer_id, fingerprint, created_at" \
	"    FROM " orders " WHERE idempotency_key" EQ ":key" \
	"     AND (:key_scope IS NULL OR scope_id" EQ ":key_scope)" \
	"  LIMIT 1)"
#define HC_KNOWN_KEY HC_KNOWN_KEY_IN("hc_stock_orders", "COALESCE(scope_id, asset_id)")
#define HC_KNOWN_KEY_PARAMS	{"key", TEXTOID}, {"key_scope", TEXTOID}
#define HC_KNOWN_KEY_COLUMNS \
	"k.kind AS known_kind, k.id AS known_id, k.scope_id AS known_scope_id," \
	" k.buyer_id AS known_buyer_id, k.fingerprint AS known_fingerprint," \
	" k.created_at AS known_created_at"

extern void hc_fingerprint_init(HcFingerprint *fp, const char *function);
extern void hc_fingerprint_add(HcFingerprint *fp, const char *value);
extern void hc_fingerprint_add_int64(HcFingerprint *fp, int64 value);
extern bytea *hc_fingerprint_digest(HcFingerprint *fp);
extern bool hc_idempotency_run(HcCall *call, HcArgs *args, uint64 rows, const char *key,
							   HcFingerprint *fp, HcKnownKey *known);
extern bool hc_idempotency_find(HcCall *call, const char *key, HcFingerprint *fp,
								HcKnownKey *known);

#endif							/* HOLDCOMMIT_IDEMPOTENCY_H */
