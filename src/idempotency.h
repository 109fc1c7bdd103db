/*
 * idempotency.h
 *		Idempotency keys (idempotency.c).
 */
#ifndef HOLDCOMMIT_IDEMPOTENCY_H
#define HOLDCOMMIT_IDEMPOTENCY_H

#include "lib/stringinfo.h"

#include "call.h"

/* Idempotency keys (idempotency.c). */
typedef struct HcFingerprint
{
	StringInfoData buf;
} HcFingerprint;

typedef struct HcStoredResponse
{
	char	   *reservation_id;
	char	   *status;
	TimestampTz expires_at;
	TimestampTz created_at;
} HcStoredResponse;

extern void hc_fingerprint_init(HcFingerprint *fp, const char *function);
extern void hc_fingerprint_add(HcFingerprint *fp, const char *value);
extern bool hc_idempotency_claim(HcCall *call, const char *key, const char *scope_id,
								 HcFingerprint *fp, const HcStoredResponse *fresh,
								 HcStoredResponse *stored);

#endif							/* HOLDCOMMIT_IDEMPOTENCY_H */
