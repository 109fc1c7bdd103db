/*
 * idempotency.h
 *		Idempotency keys (idempotency.c).
 */
#ifndef HOLDCOMMIT_IDEMPOTENCY_H
#define HOLDCOMMIT_IDEMPOTENCY_H

#include "lib/stringinfo.h"

#include "call.h"

/* A request's fingerprint: its SHA-256 is taken only when a call needs it. */
typedef struct HcFingerprint
{
	StringInfoData buf;
	bytea	   *digest;			/* NULL until hc_fingerprint_digest() */
} HcFingerprint;

/*
 * The reservation a key already made, as a domain statement read it with
 * HC_KNOWN_KEY: the columns kind, id, scope_id, buyer_id, fingerprint,
 * created_at, in that order.
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
 * given as parameter param: one key space for holds and stock.
 */
#define HC_KNOWN_KEY(param) \
	"known AS (" \
	"  SELECT 'hold' AS kind, id, asset_id AS scope_id, buyer_id, fingerprint, created_at" \
	"    FROM hc_reservations WHERE idempotency_key OPERATOR(pg_catalog.=) " param \
	"  UNION ALL" \
	"  SELECT 'stock', id, scope_id, buyer_id, fingerprint, created_at" \
	"    FROM hc_stock_reservations WHERE idempotency_key OPERATOR(pg_catalog.=) " param \
	"  LIMIT 1)"
#define HC_KNOWN_KEY_COLUMNS "k.kind, k.id, k.scope_id, k.buyer_id, k.fingerprint, k.created_at"

extern void hc_fingerprint_init(HcFingerprint *fp, const char *function);
extern void hc_fingerprint_add(HcFingerprint *fp, const char *value);
extern bytea *hc_fingerprint_digest(HcFingerprint *fp);
extern bool hc_idempotency_run(HcCall *call, HcStatement *stmt, Datum *values, uint64 rows,
							   const char *key, HcFingerprint *fp, int first, HcKnownKey *known);
extern bool hc_idempotency_find(HcCall *call, const char *key, HcFingerprint *fp,
								HcKnownKey *known);

#endif							/* HOLDCOMMIT_IDEMPOTENCY_H */
