/*
 * subxact.c
 *		One try in an internal subtransaction, kept if it did what it came
 *		for and rolled back if not.
 *
 * The rollback drops whatever the try took that it did not mean to keep,
 * such as the row lock of an UPDATE or FOR UPDATE whose re-check failed, so
 * that the caller holds nothing before it waits for something else.  An
 * error inside (lock_timeout, statement_timeout, a cancel while it waits)
 * rolls the subtransaction back before it goes on, as PL/pgSQL's exception
 * blocks do: left open, it would leave an autocommit caller inside a
 * transaction it never began.  The try reads what its statements returned
 * before it returns.  The call's search path is pushed before the
 * subtransaction begins, so that its end does not take the path along.
 */
#include "postgres.h"

#include "access/xact.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "core/subxact.h"

bool
hc_try_in_subxact(HcCall *call, HcTry try, void *arg)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner resowner = CurrentResourceOwner;
	volatile bool done = false;

	hc_call_search_path(call);
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		done = try(arg);
		if (done)
			ReleaseCurrentSubTransaction();
		else
			RollbackAndReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = resowner;
		ReThrowError(edata);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = resowner;
	return done;
}
