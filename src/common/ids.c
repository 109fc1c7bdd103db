/*
 * ids.c
 *		Reservation ids: "res_" and a ULID (48 bits of Unix milliseconds,
 *		80 random bits, Crockford base32), so ids sort by creation time;
 *		and the Unix milliseconds that ids and attempt markers carry.
 */
#include "postgres.h"

#include "datatype/timestamp.h"
#include "utils/timestamp.h"

#include "common/ids.h"

static const char crockford[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/* Milliseconds since the Unix epoch. */
int64
hc_unix_ms(TimestampTz t)
{
	return t / 1000 + (int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000;
}

/* A new reservation id for a call made at now. */
char *
hc_new_reservation_id(TimestampTz now)
{
	uint8		bytes[16];
	uint64		unix_ms;
	char	   *id = palloc(4 + 26 + 1);
	int			i;

	unix_ms = (uint64) hc_unix_ms(now);
	for (i = 0; i < 6; i++)
		bytes[i] = (uint8) (unix_ms >> (8 * (5 - i)));
	if (!pg_strong_random(bytes + 6, 10))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate a random reservation id")));

	/* 128 bits as 26 base32 digits: the first digit carries the top 3 bits. */
	memcpy(id, "res_", 4);
	for (i = 0; i < 26; i++)
	{
		int			bit = 128 - 5 * (26 - i);	/* first bit of digit i, may be < 0 */
		int			value = 0;
		int			b;

		for (b = bit; b < bit + 5; b++)
		{
			value <<= 1;
			if (b >= 0 && (bytes[b / 8] >> (7 - b % 8)) & 1)
				value |= 1;
		}
		id[4 + i] = crockford[value];
	}
	id[30] = '\0';
	return id;
}
