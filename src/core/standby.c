/*
 * standby.c
 *		What a call does on a standby: reads and replays are answered, a
 *		call that would write is refused first, with 25006 and a hint that
 *		sends the caller to the primary.
 *
 * A standby replays what its primary writes and writes nothing itself.
 * Without these checks a write there would fail wherever its first write
 * statement happens to be, with PostgreSQL's "cannot execute INSERT in a
 * read-only transaction" and the extension's internal statement as the
 * context; and a refusal that reads the state first (an asset held, a
 * reservation not found) would be answered from a copy that may lag behind
 * the primary, where the same call might succeed.  So a call that would
 * write is refused before it reads anything, whatever the state, and the
 * caller learns the one thing that is true on every standby: send it to the
 * primary.  Its arguments are checked first, as everywhere.
 *
 * A replay of an idempotency key is a read: the key's lookup
 * (idempotency.c) answers the stored result on a standby as on the
 * primary, and refuses only a key that has made nothing there (a new
 * request, or one the standby has not replayed yet: either way the primary
 * decides).  Lease and attempt calls, which run in a worker of their own,
 * are refused before they reach one (autonomous.c).  The background
 * sweeper does not run during recovery (launcher.c).
 *
 * A read-only transaction on the primary (BEGIN READ ONLY,
 * default_transaction_read_only) cannot write either: the same checks
 * refuse it the same way, with a hint of its own.
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"

#include "core/standby.h"

#define STANDBY_DETAIL "This server is a standby: it replays what its primary writes and writes nothing itself."
#define STANDBY_HINT "Send the call to the primary (a connection string with target_session_attrs=read-write finds it)."

#define READ_ONLY_HINT "Run it in a read-write transaction (not BEGIN READ ONLY, nor with default_transaction_read_only on)."

/*
 * On a standby, or in a read-only transaction on the primary, refuse a call
 * that would write (25006), before it reads anything: otherwise it would
 * fail at its first write statement with that statement as the context, or
 * answer a refusal from a state it could not act on.
 */
void
hc_refuse_read_only(const char *function)
{
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("%s cannot run on a standby", function),
				 errdetail(STANDBY_DETAIL),
				 errhint(STANDBY_HINT)));
	if (XactReadOnly)
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("%s cannot run in a read-only transaction", function),
				 errhint(READ_ONLY_HINT)));
}

/* The same for a call whose idempotency key has made nothing yet: its replay is a read. */
void
hc_refuse_new_key_read_only(const char *function)
{
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("%s cannot run on a standby", function),
				 errdetail("A standby answers the replay of an idempotency key it has; this key has made nothing here (or only past holdcommit.idempotency_retention), so the call is a new request, which writes."),
				 errhint(STANDBY_HINT)));
	if (XactReadOnly)
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("%s cannot run in a read-only transaction", function),
				 errdetail("A read-only transaction answers the replay of an idempotency key; this key has made nothing yet, so the call is a new request, which writes."),
				 errhint(READ_ONLY_HINT)));
}
