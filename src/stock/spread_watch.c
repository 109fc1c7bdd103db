/*
 * spread_watch.c
 *		How holdcommit sees the reserves of a product wait for each other,
 *		and starts the worker that spreads it (bgw/spreader/); which
 *		products are due to be gathered, and the worker that gathers them;
 *		hc_stock_waits(), which shows what it sees.
 *
 * With holdcommit in shared_preload_libraries, a table in shared memory
 * has a slot per product being reserved (WATCH_SLOTS, found by a hash of
 * the database and the product): how many transactions that reserved it
 * have not ended yet (reserving), the most at once in its current rush
 * (peak), the last time a reserve found another one there (last_overlap).
 * A reserve of one product (reserve.c) enters the slot before it takes
 * anything; its transaction leaves it when it ends (an XactCallback).  A
 * product of one part is locked by every reserve of it until that
 * transaction ends, so two transactions there at once are one waiting for
 * the other: reserving - 1 of them wait.
 *
 * A rush begins at an overlap that follows none for WATCH_WINDOW_US.  As
 * soon as holdcommit.stock_spread_callers reserves are there at once, the
 * reserve that sees it starts a worker to spread the product, unless it
 * has the parts they want already; one worker per product at a time
 * (spreading), one start a second at most.  The worker sizes the spread
 * once the rush is WATCH_WINDOW_US old (its start takes about that long
 * anyway), so that the callers of a rush have come: the most at once,
 * rounded up to a power of two (so that a rush whose size wobbles is not
 * spread again for a caller more), at most
 * holdcommit.stock_spread_max_parts.  Meanwhile the reserves of the
 * product that would queue on its part 0 wait for the spread instead
 * (hc_stock_watch_spreading).
 *
 * Without the preload there is no table: a reserve sees nothing of the
 * others, and nothing is spread by itself; hc_sweep() still gathers.
 *
 * The workers are shared by every database: a worker is started only with
 * a seat of the spreaders' (holdcommit.max_spreaders, over all databases),
 * claimed here by whoever starts it and left by the worker however it
 * ends.  A database has at most max_spreaders - 1 of them (all when it is
 * 1) and one gatherer, so a database with many hot products never keeps
 * another's from being spread.  Without the preload a database has at most
 * one gatherer (spreader.c) and nothing else.
 *
 * Invariants:
 *   1. A slot's fields change only under its spinlock, held for a few
 *      loads and stores: never across a call, an allocation or a wait.
 *   2. A transaction enters a product's slot at most once, and leaves every
 *      slot it entered when it ends (commit, abort, prepare), so reserving
 *      never drifts.
 *   3. A slot goes to another product only when nothing reserves its
 *      product, no spread of it runs, and it has been idle WATCH_IDLE_US.
 *   4. The watch is a hint: the worker decides under the product's locks.
 *   5. A seat is claimed before its worker is registered and left by that
 *      worker (before_shmem_exit, its pid cleared under the seats' LWLock,
 *      under which alone it is signalled), or by the claimer if none could
 *      be; a worker that never came frees its seat SEAT_UNTAKEN_US after the
 *      claim, and a worker that comes later than that finds its claim gone
 *      and exits.
 *
 * Review on a new major: the XactCallback's events, RegisterDynamicBackgroundWorker.
 */
#include "postgres.h"

#include <signal.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/condition_variable.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
#include "utils/wait_event.h"

#include "common/settings.h"
#include "common/sweep.h"
#include "core/placement.h"
#include "core/statement.h"
#include "core/version.h"
#include "stock/auto_spread.h"
#include "stock/register.h"
#include "stock/stock.h"

PG_FUNCTION_INFO_V1(hc_stock_waits);

StaticAssertDecl(sizeof(HcSpreadOrder) <= BGW_EXTRALEN, "a spread's order fits bgw_extra");

#define WATCH_SLOTS			1024
#define WATCH_WAYS			4	/* the slots a product may have, from its hash on */
/* A rush: overlaps less than this apart; sized once this old. */
#define WATCH_WINDOW_US		(100 * 1000)
#define WATCH_RETRY_US		USECS_PER_SEC
#define WATCH_IDLE_US		USECS_PER_SEC
/* A spread that has not ended this long after its start never will. */
#define WATCH_SPREAD_GONE_US	(10 * USECS_PER_SEC)
/* The products one transaction enters: more are not watched. */
#define WATCH_ENTERED_MAX	8

typedef struct WatchSlot
{
	slock_t		mutex;
	ConditionVariable spread_over;	/* broadcast when a spread of it ends */
	Oid			dboid;			/* InvalidOid: free */
	char		product_id[HC_MAX_ID_BYTES + 1];
	int32		reserving;		/* transactions that reserved it and have not ended */
	int32		peak;			/* the most at once since rush_start */
	int32		parts;			/* as last known; 0: not known */
	bool		spreading;		/* a worker was started to spread it */
	TimestampTz rush_start;		/* the first overlap of the current rush */
	TimestampTz last_overlap;
	TimestampTz last_used;
	TimestampTz spread_started;
} WatchSlot;

static WatchSlot *watch = NULL;

/* The slots this transaction entered. */
static int	entered[WATCH_ENTERED_MAX];
static int	nentered = 0;
static bool callback_registered = false;

/* The slot the current reserve entered, first of its transaction there; -1: none. */
static int	entered_now = -1;

/* A seat whose worker has not come this long after its claim never will. */
#define SEAT_UNTAKEN_US		(10 * USECS_PER_SEC)

typedef struct SpreaderSeat
{
	Oid			dboid;			/* InvalidOid: free */
	int16		kind;			/* HcSpreadKind */
	int			pid;			/* its worker, once it came; 0 before */
	TimestampTz claimed_at;		/* names the claim */
} SpreaderSeat;

/* The seats, under an LWLock: a pid is signalled under it (hc_stock_spreaders_stop). */
typedef struct Spreaders
{
	LWLock	   *lock;
	SpreaderSeat seats[HC_MAX_SPREADERS];
} Spreaders;

static Spreaders *spreaders = NULL;

/* How often a reserve that waits for a spread looks anyway (its broadcast may come first). */
#define WATCH_POLL_MS		100

Size
hc_stock_watch_shmem_size(void)
{
	return add_size(mul_size(WATCH_SLOTS, sizeof(WatchSlot)), sizeof(Spreaders));
}

/* Create the table, or find it (shmem_startup_hook, under AddinShmemInitLock). */
void
hc_stock_watch_shmem_init(LWLock *spreaders_lock)
{
	bool		found;
	int			i;

	spreaders = ShmemInitStruct("holdcommit spreaders", sizeof(Spreaders), &found);
	if (!found)
	{
		memset(spreaders, 0, sizeof(Spreaders));
		spreaders->lock = spreaders_lock;
	}
	watch = ShmemInitStruct("holdcommit stock waits", mul_size(WATCH_SLOTS, sizeof(WatchSlot)),
							&found);
	if (found)
		return;
	memset(watch, 0, mul_size(WATCH_SLOTS, sizeof(WatchSlot)));
	for (i = 0; i < WATCH_SLOTS; i++)
	{
		SpinLockInit(&watch[i].mutex);
		ConditionVariableInit(&watch[i].spread_over);
	}
}

/* The first of a product's slots. */
static int
watch_first(Oid dboid, const char *product_id)
{
	uint32		h = hash_bytes((const unsigned char *) product_id, (int) strlen(product_id));

	return (int) (hash_combine(h, dboid) % (WATCH_SLOTS / WATCH_WAYS)) * WATCH_WAYS;
}

static bool
watch_is(WatchSlot *slot, Oid dboid, const char *product_id)
{
	return slot->dboid == dboid && strcmp(slot->product_id, product_id) == 0;
}

/* The product's slot, locked, or -1 (claim: take a free or idle one for it). */
static int
watch_find(Oid dboid, const char *product_id, bool claim, TimestampTz now)
{
	int			first = watch_first(dboid, product_id);
	int			i;

	for (i = first; i < first + WATCH_WAYS; i++)
	{
		SpinLockAcquire(&watch[i].mutex);
		if (watch_is(&watch[i], dboid, product_id))
			return i;
		SpinLockRelease(&watch[i].mutex);
	}
	if (!claim)
		return -1;
	for (i = first; i < first + WATCH_WAYS; i++)
	{
		WatchSlot  *slot = &watch[i];

		SpinLockAcquire(&slot->mutex);
		if (watch_is(slot, dboid, product_id) || !OidIsValid(slot->dboid) ||
			(slot->reserving == 0 && !slot->spreading && now - slot->last_used > WATCH_IDLE_US))
		{
			if (!watch_is(slot, dboid, product_id))
			{
				slot->dboid = dboid;
				strlcpy(slot->product_id, product_id, sizeof(slot->product_id));
				slot->reserving = slot->peak = slot->parts = 0;
				slot->spreading = false;
				slot->rush_start = slot->last_overlap = slot->spread_started = 0;
			}
			return i;
		}
		SpinLockRelease(&slot->mutex);
	}
	return -1;
}

/* The transaction ended: it reserves nothing any more. */
static void
watch_xact_callback(XactEvent event, void *arg)
{
	int			i;

	if (event != XACT_EVENT_COMMIT && event != XACT_EVENT_ABORT && event != XACT_EVENT_PREPARE)
		return;
	for (i = 0; i < nentered; i++)
	{
		SpinLockAcquire(&watch[entered[i]].mutex);
		watch[entered[i]].reserving--;
		SpinLockRelease(&watch[entered[i]].mutex);
	}
	nentered = 0;
}

/*
 * Claim a seat for order's worker: false if every seat is taken, or the
 * database has its share of them, or (a gather) its gatherer already.
 */
static bool
seat_claim(HcSpreadOrder *order)
{
	TimestampTz now = GetCurrentTimestamp();
	int			free = -1;
	int			all = 0;
	int			mine = 0;
	bool		gathering = false;

	LWLockAcquire(spreaders->lock, LW_EXCLUSIVE);
	for (int i = 0; i < HC_MAX_SPREADERS; i++)
	{
		SpreaderSeat *seat = &spreaders->seats[i];

		if (seat->pid == 0 && now - seat->claimed_at > SEAT_UNTAKEN_US)
			seat->dboid = InvalidOid;
		if (!OidIsValid(seat->dboid))
		{
			free = free < 0 ? i : free;
			continue;
		}
		all++;
		if (seat->dboid == order->dboid)
		{
			mine++;
			gathering |= seat->kind == HC_SPREAD_GATHER;
		}
	}
	if (free >= 0 && all < hc_max_spreaders && mine < Max(hc_max_spreaders - 1, 1) &&
		!(order->kind == HC_SPREAD_GATHER && gathering))
	{
		spreaders->seats[free].dboid = order->dboid;
		spreaders->seats[free].kind = order->kind;
		spreaders->seats[free].pid = 0;
		spreaders->seats[free].claimed_at = now;
		order->seat = (int16) free;
		order->seat_claimed = now;
	}
	else
		free = -1;
	LWLockRelease(spreaders->lock);
	return free >= 0;
}

/* The worker of order takes the seat claimed for it: false if the claim is gone. */
bool
hc_stock_spreader_seat_take(const HcSpreadOrder *order)
{
	SpreaderSeat *seat;
	bool		mine;

	if (order->seat < 0 || spreaders == NULL)
		return true;
	seat = &spreaders->seats[order->seat];
	LWLockAcquire(spreaders->lock, LW_EXCLUSIVE);
	mine = seat->dboid == order->dboid && seat->claimed_at == order->seat_claimed;
	if (mine)
		seat->pid = MyProcPid;
	LWLockRelease(spreaders->lock);
	return mine;
}

/* The seat of order is free again (its worker ends, or none could start). */
void
hc_stock_spreader_seat_leave(const HcSpreadOrder *order)
{
	SpreaderSeat *seat;

	if (order->seat < 0 || spreaders == NULL)
		return;
	seat = &spreaders->seats[order->seat];
	LWLockAcquire(spreaders->lock, LW_EXCLUSIVE);
	if (seat->dboid == order->dboid && seat->claimed_at == order->seat_claimed)
	{
		seat->dboid = InvalidOid;
		seat->pid = 0;
	}
	LWLockRelease(spreaders->lock);
}

/*
 * A command needs the database to itself (DROP DATABASE, ...; the sweeper's
 * ProcessUtility hook calls this): its spreaders end now, so that it does
 * not wait for them.  A spread or gather under way rolls back (nothing of
 * it was committed) and is tried again later.  Signalled under the lock
 * that each clears its pid under before it exits: never a stale pid.
 */
void
hc_stock_spreaders_stop(Oid dboid)
{
	if (spreaders == NULL)
		return;
	LWLockAcquire(spreaders->lock, LW_EXCLUSIVE);
	for (int i = 0; i < HC_MAX_SPREADERS; i++)
		if (spreaders->seats[i].dboid == dboid && spreaders->seats[i].pid != 0)
			(void) kill(spreaders->seats[i].pid, SIGTERM);
	LWLockRelease(spreaders->lock);
}

/*
 * Start a spreader worker for order, with a seat if the spreaders are in
 * shared memory: false if no seat or no background worker slot is free.
 */
static bool
watch_start(HcSpreadOrder *order)
{
	BackgroundWorker worker = {0};

	order->seat = -1;
	if (spreaders != NULL && !seat_claim(order))
		return false;

	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "holdcommit");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "hc_spreader_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "holdcommit spreader");
	snprintf(worker.bgw_type, BGW_MAXLEN, "holdcommit spreader");
	memcpy(worker.bgw_extra, order, sizeof(HcSpreadOrder));
	if (RegisterDynamicBackgroundWorker(&worker, NULL))
		return true;
	hc_stock_spreader_seat_leave(order);
	return false;
}

/* The parts for so many reserves at once: a power of two, within max_parts. */
static int32
watch_target(int32 peak, int32 max_parts)
{
	int32		parts = 2;

	while (parts < peak && parts < STOCK_MAX_PARTS)
		parts *= 2;
	return Min(parts, max_parts);
}

/*
 * The decision, the slot locked: spread the product if
 * holdcommit.stock_spread_callers reserves or more are there at once and it
 * has fewer parts than they want, unless a spread of it runs or started
 * less than a second ago.  True (and *order filled but for what
 * watch_launch adds) if a spread is to start.
 */
static bool
watch_decide(WatchSlot *slot, TimestampTz now, HcSpreadOrder *order)
{
	if (slot->reserving < hc_stock_spread_callers ||
		watch_target(slot->peak, hc_stock_spread_max_parts) <= Max(slot->parts, 1) ||
		(slot->spreading && now - slot->spread_started <= WATCH_SPREAD_GONE_US) ||
		now - slot->spread_started < WATCH_RETRY_US)
		return false;
	slot->spreading = true;
	slot->spread_started = now;
	memset(order, 0, sizeof(HcSpreadOrder));
	order->kind = HC_SPREAD_PRODUCT;
	order->target = (int16) watch_target(slot->peak, hc_stock_spread_max_parts);
	order->waiters = slot->peak;
	order->max_parts = (int16) hc_stock_spread_max_parts;
	order->sized_at = slot->rush_start + WATCH_WINDOW_US;
	strlcpy(order->product_id, slot->product_id, sizeof(order->product_id));
	return true;
}

/* Start the spread watch_decide ordered, the slot no longer locked. */
static void
watch_launch(HcSpreadOrder *order)
{
	order->dboid = MyDatabaseId;
	order->stall_ms = hc_stock_spread_stall;
	order->gather_after_s = hc_stock_gather_after;
	if (!watch_start(order))
		hc_stock_watch_spread_done(order->dboid, order->product_id, 0);
}

/*
 * A reserve of product_id begins (reserve.c): enter its slot, and if the
 * window says its reserves wait for each other, start its spread.
 */
void
hc_stock_watch(HcCall *call, const char *product_id)
{
	HcSpreadOrder order;
	WatchSlot  *slot;
	TimestampTz now = call->now;
	bool		start = false;
	int			i;

	entered_now = -1;
	if (watch == NULL || !hc_stock_auto_spread_on || nentered >= WATCH_ENTERED_MAX ||
		IsInParallelMode())
		return;
	/* Before the slot counts this transaction: it must leave it however it ends. */
	if (!callback_registered)
	{
		RegisterXactCallback(watch_xact_callback, NULL);
		callback_registered = true;
	}
	i = watch_find(MyDatabaseId, product_id, true, now);
	if (i < 0)
		return;
	slot = &watch[i];
	for (int e = 0; e < nentered; e++)
		if (entered[e] == i)
		{
			SpinLockRelease(&slot->mutex);
			return;
		}
	/*
	 * Idle a while: the parts it knew may be gone (a gather, the product made
	 * anew).  The next spread's worker finds out, at the cost of its start.
	 */
	if (slot->reserving == 0 && now - slot->last_used > WATCH_IDLE_US)
		slot->parts = 0;
	if (slot->reserving++ > 0)
	{
		if (now - slot->last_overlap > WATCH_WINDOW_US)
		{
			slot->rush_start = now;
			slot->peak = slot->reserving;
		}
		else
			slot->peak = Max(slot->peak, slot->reserving);
		slot->last_overlap = now;
		start = watch_decide(slot, now, &order);
	}
	slot->last_used = now;
	entered[nentered++] = i;
	entered_now = i;
	SpinLockRelease(&slot->mutex);
	if (start)
		watch_launch(&order);
}

/*
 * Before a reserve of a product of one part queues for its part 0: while a
 * spread of it is under way, wait for the spread instead (on its slot's
 * condition variable, which the spreader broadcasts as soon as it has
 * committed; until as long after the spread's start as it may take), and
 * say so: the caller then reads the product's parts again.  Queued on part
 * 0, the reserve would make the spread's own wait for part 0 longer (it
 * waits behind the queue), and take its units from part 0 after the
 * spread, one commit after the other, as every reserve queued there does.
 * Only a reserve whose transaction has not reserved the product yet (the
 * first to enter its slot), and holds nothing of its part 0 (a finalize,
 * an unreserve, hc_stock_set earlier in the transaction): the spread waits
 * for part 0.
 */
bool
hc_stock_watch_spreading(HcCall *call, const char *product_id)
{
	int64		longest = WATCH_WINDOW_US +
		(int64) (HC_SPREAD_WAIT_MS + hc_stock_spread_stall) * 1000;
	WatchSlot  *slot;
	bool		waited = false;

	if (entered_now < 0)
		return false;
	slot = &watch[entered_now];
	ConditionVariablePrepareToSleep(&slot->spread_over);
	for (;;)
	{
		bool		spreading;
		TimestampTz started;

		SpinLockAcquire(&slot->mutex);
		spreading = slot->spreading;
		started = slot->spread_started;
		SpinLockRelease(&slot->mutex);
		/* A spread that outlasts its bounds (a worker that never came) is not waited for. */
		if (!spreading || GetCurrentTimestamp() - started > longest ||
			(!waited && hc_stock_holds_part0(call, product_id)))
			break;
		waited = true;
		(void) ConditionVariableTimedSleep(&slot->spread_over, WATCH_POLL_MS, PG_WAIT_EXTENSION);
	}
	ConditionVariableCancelSleep();
	return waited;
}

/*
 * The parts a spread of the product gives it (the spreader asks once the
 * rush is old enough): for the most reserves at once in its rush, a power
 * of two, at most max_parts.  *waiters: those the decision saw, raised to
 * the rush's most.
 */
int32
hc_stock_watch_size(const char *product_id, int32 *waiters, int32 max_parts)
{
	int			i;

	if (watch != NULL && (i = watch_find(MyDatabaseId, product_id, false, 0)) >= 0)
	{
		*waiters = Max(*waiters, watch[i].peak);
		SpinLockRelease(&watch[i].mutex);
	}
	return watch_target(*waiters, max_parts);
}

/* The product has parts now (a hint for the next decision; 0: not known). */
void
hc_stock_watch_parts(const char *product_id, int32 parts)
{
	int			i;

	if (watch == NULL || (i = watch_find(MyDatabaseId, product_id, false, 0)) < 0)
		return;
	watch[i].parts = parts;
	SpinLockRelease(&watch[i].mutex);
}

/* A spread of the product ended with parts (0: none known): another may start. */
void
hc_stock_watch_spread_done(Oid dboid, const char *product_id, int32 parts)
{
	int			i;

	if (watch == NULL || (i = watch_find(dboid, product_id, false, 0)) < 0)
		return;
	watch[i].spreading = false;
	if (parts > 0)
		watch[i].parts = parts;
	SpinLockRelease(&watch[i].mutex);
	ConditionVariableBroadcast(&watch[i].spread_over);
}

/*
 * The products an automatic spread left with more parts than their floor,
 * changed last gather_after_s ago or more, and (as far as this server has
 * seen) without an overlap of their reserves for as long: each is gathered
 * back to its floor.  A product nobody reserved since the server started
 * has no slot.  At most 100 at a time, the next sweep does the rest.
 */
static HcStatement spread_products = {
	"SELECT s.product_id FROM hc_stock_spreads s"
	" WHERE s.changed_at" LE ":before"
	"   AND (SELECT pg_catalog.count(*) FROM hc_stock_parts p"
	"         WHERE p.product_id" EQ "s.product_id)" GT "s.min_parts"
	" ORDER BY s.product_id COLLATE \"C\" LIMIT 100",
	{{"before", TIMESTAMPTZOID}}
};

List *
hc_stock_gather_due(HcCall *call, int gather_after_s)
{
	TimestampTz before = call->now - (int64) gather_after_s * USECS_PER_SEC;
	List	   *due = NIL;
	HcArgs		args;
	uint64		n;
	uint64		r;

	hc_args(&args, &spread_products);
	hc_bind(&args, "before", TimestampTzGetDatum(before));
	n = hc_run(call, &args, SPI_OK_SELECT);
	for (r = 0; r < n; r++)
	{
		char	   *product_id = hc_text(call, (int) r, "product_id");
		int			i;
		bool		quiet = true;

		if (watch != NULL && (i = watch_find(MyDatabaseId, product_id, false, 0)) >= 0)
		{
			quiet = watch[i].reserving <= 1 && !watch[i].spreading &&
				watch[i].last_overlap <= before;
			SpinLockRelease(&watch[i].mutex);
		}
		if (quiet)
		{
			MemoryContext old = MemoryContextSwitchTo(call->outer);

			due = lappend(due, pstrdup(product_id));
			MemoryContextSwitchTo(old);
		}
	}
	return due;
}

/*
 * The end of a sweep (admin/sweep.c): if a product is due to be gathered,
 * start a worker that gathers every one that is, each in a transaction of
 * its own; never here, in the sweep's transaction, which could keep its
 * parts locked for as long as the caller's transaction lasts.
 */
void
hc_stock_gather_start(HcCall *call)
{
	HcSpreadOrder order = {0};

	if (!hc_stock_auto_spread_on || hc_distributed(call) || !hc_sql_at_least("0.4.0") ||
		hc_stock_gather_due(call, hc_stock_gather_after) == NIL)
		return;
	order.dboid = MyDatabaseId;
	order.kind = HC_SPREAD_GATHER;
	order.stall_ms = hc_stock_spread_stall;
	order.gather_after_s = hc_stock_gather_after;
	if (!watch_start(&order))
		ereport(DEBUG1,
				(errmsg("holdcommit could not start a worker to gather spread products: no seat of holdcommit.max_spreaders or background worker slot is free, or the database's gatherer runs")));
}

/*
 * hc_stock_waits(): the slots of this database, as they are now.
 */
Datum
hc_stock_waits(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			i;

	InitMaterializedSRF(fcinfo, 0);
	for (i = 0; watch != NULL && i < WATCH_SLOTS; i++)
	{
		WatchSlot	copy;
		Datum		values[6];
		bool		nulls[6] = {false};

		SpinLockAcquire(&watch[i].mutex);
		copy = watch[i];
		SpinLockRelease(&watch[i].mutex);
		if (copy.dboid != MyDatabaseId)
			continue;
		values[0] = CStringGetTextDatum(copy.product_id);
		values[1] = Int32GetDatum(copy.reserving);
		values[2] = Int32GetDatum(copy.peak);
		values[3] = TimestampTzGetDatum(copy.last_overlap);
		nulls[3] = copy.last_overlap == 0;
		values[4] = BoolGetDatum(copy.spreading);
		values[5] = Int32GetDatum(copy.parts);
		nulls[5] = copy.parts == 0;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
