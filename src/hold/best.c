/*
 * best.c
 *		hc_hold_best: the n best available seats of a pool, as one group
 *		hold (group.c writes it).
 *
 * The choice, deterministic for the seats as read: of the blocks of n
 * free seats consecutive in pos within one grp, the one whose ranks sum
 * lowest, and among equal sums one that does not leave a single free seat
 * between two taken ones in its grp, then the first in (grp, pos) order;
 * if no grp has such a block, the n free seats of lowest rank.  A seat
 * another call has locked right now is skipped, never waited for: each
 * block is tried in a subtransaction of its own, which gives back what it
 * locked if a seat of it is taken.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "utils/builtins.h"

#include "common/errors.h"
#include "common/validate.h"
#include "core/statement.h"
#include "core/subxact.h"
#include "core/version.h"
#include "hold/group.h"

PG_FUNCTION_INFO_V1(hc_hold_best);

/*
 * The assets of a pool.  Put in (grp, pos) order here, bytewise: a sort by
 * the database's collation costs more than the scan, and a plan that reads
 * the index in order instead depends on the statistics.
 */
static HcStatement pool_seats = {
	"SELECT id, rank, grp, pos, status, hold_expires_at FROM hc_assets"
	" WHERE pool" EQ ":pool",
	{{"pool", TEXTOID}}
};

/* A seat of the pool as read. */
typedef struct PoolSeat
{
	char	   *id;
	int64		rank;			/* a NULL rank ranks last */
	char	   *grp;			/* NULL: in no group */
	int32		pos;
	bool		free;			/* available, or held by a hold that has ended */
	bool		refused;		/* found taken by another call in flight */
} PoolSeat;

/* A block of n seats, pool[first .. first + n - 1], adjacent in one group. */
typedef struct SeatBlock
{
	int			first;
	int64		ranks;
	bool		orphan;			/* leaves one free seat between two taken ones */
} SeatBlock;

/* (grp, pos, id), bytewise, the seats in no group last. */
static int
seat_order(const void *a, const void *b)
{
	const PoolSeat *x = a;
	const PoolSeat *y = b;
	int			c;

	if ((x->grp == NULL) != (y->grp == NULL))
		return x->grp == NULL ? 1 : -1;
	if (x->grp != NULL && (c = strcmp(x->grp, y->grp)) != 0)
		return c;
	if (x->pos != y->pos)
		return x->pos < y->pos ? -1 : 1;
	return strcmp(x->id, y->id);
}

static int
block_order(const void *a, const void *b)
{
	const SeatBlock *x = a;
	const SeatBlock *y = b;

	if (x->ranks != y->ranks)
		return x->ranks < y->ranks ? -1 : 1;
	if (x->orphan != y->orphan)
		return x->orphan ? 1 : -1;
	return x->first - y->first;
}

/* Is pool[j] the neighbour of pool[i] (j = i +- 1) in its group? */
static bool
seat_next_to(PoolSeat *pool, int npool, int i, int j)
{
	return j >= 0 && j < npool && pool[i].grp != NULL && pool[j].grp != NULL &&
		strcmp(pool[i].grp, pool[j].grp) == 0 &&
		pool[j].pos == pool[i].pos + (j > i ? 1 : -1);
}

/* Would taking pool[first .. last] leave the free seat beyond edge (by step) alone? */
static bool
leaves_orphan(PoolSeat *pool, int npool, int edge, int step)
{
	int			one = edge + step;

	return seat_next_to(pool, npool, edge, one) && pool[one].free &&
		seat_next_to(pool, npool, one, one + step) && !pool[one + step].free;
}

/* The blocks of n free seats adjacent in a group, *nblocks of them. */
static SeatBlock *
pool_blocks(PoolSeat *pool, int npool, int n, int *nblocks)
{
	SeatBlock	   *blocks = palloc(sizeof(SeatBlock) * Max(npool, 1));
	int			i;

	*nblocks = 0;
	for (i = 0; i + n <= npool; i++)
	{
		SeatBlock	   *b = &blocks[*nblocks];
		int			k;

		b->first = i;
		b->ranks = 0;
		for (k = 0; k < n; k++)
		{
			if (!pool[i + k].free || (k > 0 && !seat_next_to(pool, npool, i + k - 1, i + k)) ||
				(n == 1 && pool[i].grp == NULL))
				break;
			b->ranks += pool[i + k].rank;
		}
		if (k < n)
			continue;
		b->orphan = leaves_orphan(pool, npool, i, -1) || leaves_orphan(pool, npool, i + n - 1, 1);
		(*nblocks)++;
	}
	return blocks;
}

/*
 * The best block not tried yet (blocks[*tried ..]), moved to blocks[*tried],
 * and *tried one more; false if none is left.  A try seldom fails, so a
 * search per try costs less than sorting every block.
 */
static bool
next_block(SeatBlock *blocks, int nblocks, int *tried)
{
	int			best = *tried;
	int			b;
	SeatBlock		swap;

	if (*tried >= nblocks)
		return false;
	for (b = *tried + 1; b < nblocks; b++)
		if (block_order(&blocks[b], &blocks[best]) < 0)
			best = b;
	swap = blocks[*tried];
	blocks[*tried] = blocks[best];
	blocks[best] = swap;
	(*tried)++;
	return true;
}

/* One try at seats pool[which[0 .. n-1]], in a subtransaction of its own. */
typedef struct SeatsTry
{
	HcCall	   *call;
	PoolSeat   *pool;
	int		   *which;
	int			n;
} SeatsTry;

/*
 * Lock every seat of the try and free it if an expired hold has it; false
 * (the subtransaction rolls back what it took) at the first that another
 * call has, marked refused.
 */
static bool
seats_try(void *arg)
{
	SeatsTry   *t = arg;
	int			i;

	for (i = 0; i < t->n; i++)
	{
		PoolSeat   *p = &t->pool[t->which[i]];
		Seat		seat;
		const char *status = hc_seat_lock(t->call, p->id, &seat);

		if (status == NULL || strcmp(status, "LOCKED") == 0 ||
			!hc_hold_can_take(t->call, status, seat.until) || !hc_seat_reclaim(t->call, &seat))
		{
			p->refused = true;
			return false;
		}
	}
	return true;
}

static int
rank_order(const void *a, const void *b, void *arg)
{
	PoolSeat   *pool = arg;
	int			x = *(const int *) a;
	int			y = *(const int *) b;

	if (pool[x].rank != pool[y].rank)
		return pool[x].rank < pool[y].rank ? -1 : 1;
	return x - y;
}

/* The lowest ranks, the fallback's seats in the order it tries them. */
typedef struct LowestTry
{
	HcCall	   *call;
	PoolSeat   *pool;
	int		   *by_rank;
	int			nfree;
	int		   *which;
	int			n;
	int			taken;
} LowestTry;

/*
 * Lock the seats of by_rank in turn until n are taken, skipping any that
 * another call has or that is no longer free; true if n were.  One
 * subtransaction for them all: a subtransaction per seat would keep up to
 * n committed subtransactions, past the 64 a backend caches, which slows
 * every other backend's snapshots.  A seat found taken after its lock
 * (changed between the read and the lock) keeps its lock until the call's
 * transaction ends, as a row a FOR UPDATE re-check rejects does.
 */
static bool
lowest_try(void *arg)
{
	LowestTry  *t = arg;
	int			i;

	t->taken = 0;
	for (i = 0; i < t->nfree && t->taken < t->n; i++)
	{
		Seat		seat;
		const char *status = hc_seat_lock(t->call, t->pool[t->by_rank[i]].id, &seat);

		if (status != NULL && strcmp(status, "LOCKED") != 0 &&
			hc_hold_can_take(t->call, status, seat.until) && hc_seat_reclaim(t->call, &seat))
			t->which[t->taken++] = t->by_rank[i];
	}
	return t->taken == t->n;
}

/*
 * Choose and lock the seats of hc_hold_best: the best block of n adjacent
 * free seats that no call in flight has, each block tried in a
 * subtransaction of its own (a failed one gives back what it locked); else
 * the n free seats of lowest rank that none has.  Their indexes in *which;
 * false if fewer than n are free (*left says how many).
 */
static bool
pool_choose(HcCall *call, PoolSeat *pool, int npool, int n, int *which, int *left)
{
	SeatsTry	t = {call, pool, which, n};
	int			nblocks;
	SeatBlock	   *blocks = pool_blocks(pool, npool, n, &nblocks);
	int		   *by_rank = palloc(sizeof(int) * Max(npool, 1));
	LowestTry	lowest = {call, pool, NULL, 0, which, n, 0};
	int			nfree = 0;
	int			tried = 0;
	int			i;

	while (next_block(blocks, nblocks, &tried))
	{
		for (i = 0; i < n; i++)
		{
			which[i] = blocks[tried - 1].first + i;
			if (pool[which[i]].refused)
				break;
		}
		if (i == n && hc_try_in_subxact(call, seats_try, &t))
			return true;
	}

	/* No block: the lowest ranks. */
	for (i = 0; i < npool; i++)
		if (pool[i].free && !pool[i].refused)
			by_rank[nfree++] = i;
	qsort_arg(by_rank, nfree, sizeof(int), rank_order, pool);
	lowest.by_rank = by_rank;
	lowest.nfree = nfree;
	if (hc_try_in_subxact(call, lowest_try, &lowest))
		return true;
	*left = lowest.taken;
	return false;
}

/* Is a text datum this text? */
static bool
text_is(Datum d, const char *s)
{
	text	   *t = DatumGetTextPP(d);

	return VARSIZE_ANY_EXHDR(t) == strlen(s) && memcmp(VARDATA_ANY(t), s, strlen(s)) == 0;
}

/*
 * The npool seats pool_seats read, in (grp, pos, id) order (sorted only if
 * the table did not give them in it), in the call's memory.  Its columns by
 * number: a lookup by name for each of tens of thousands of values would
 * cost more than the scan.
 */
static PoolSeat *
pool_read(HcCall *call, int npool)
{
	MemoryContext old = MemoryContextSwitchTo(call->outer);
	PoolSeat   *pool = palloc0(sizeof(PoolSeat) * npool);
	TupleDesc	desc = SPI_tuptable->tupdesc;
	bool		sorted = true;
	int			i;

	for (i = 0; i < npool; i++)
	{
		HeapTuple	row = SPI_tuptable->vals[i];
		bool		null[6];
		Datum		d[6];
		int			c;

		for (c = 0; c < 6; c++)
			d[c] = SPI_getbinval(row, desc, c + 1, &null[c]);
		pool[i].id = TextDatumGetCString(d[0]);
		pool[i].rank = null[1] ? PG_INT32_MAX : DatumGetInt32(d[1]);
		pool[i].grp = null[2] || null[3] ? NULL : TextDatumGetCString(d[2]);
		pool[i].pos = null[3] ? 0 : DatumGetInt32(d[3]);
		pool[i].free = text_is(d[4], "AVAILABLE") ||
			(text_is(d[4], "HELD") && !null[5] && DatumGetTimestampTz(d[5]) <= call->now);
		sorted = sorted && (i == 0 || seat_order(&pool[i - 1], &pool[i]) < 0);
	}
	if (!sorted)
		qsort(pool, npool, sizeof(PoolSeat), seat_order);
	MemoryContextSwitchTo(old);
	return pool;
}

/*
 * hc_hold_best(pool, n, buyer_id, idempotency_key, ttl): hold the n best
 * available assets of the pool as one group hold; RS002 if fewer are free.
 */
Datum
hc_hold_best(PG_FUNCTION_ARGS)
{
	char	   *pool_id = hc_arg_id(fcinfo, 0, "pool");
	int32		n = hc_arg_int(fcinfo, 1, "n");
	char	   *buyer_id = hc_arg_id(fcinfo, 2, "buyer_id");
	char	   *key = hc_arg_key(fcinfo, 3, "idempotency_key");
	int64		ttl = hc_arg_ttl(fcinfo, 4, "ttl");
	HcCall		call;
	GroupHold	g = {0};

	if (n < 1 || n > HC_GROUP_MAX_SEATS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("n must be between 1 and %d", HC_GROUP_MAX_SEATS),
				 errdetail("n is %d.", n)));
	InitMaterializedSRF(fcinfo, 0);
	hc_call_begin_keyed(&call, fcinfo, "hc_hold_best");
	hc_require_sql_at_least("0.4.0", call.function);
	hc_group_not_distributed(&call);
	hc_group_request(&call, &g, buyer_id, key, ttl);
	hc_fingerprint_add(&g.fp, pool_id);
	hc_fingerprint_add_int64(&g.fp, n);

	if (!hc_group_replay(&call, &g))
	{
		HcArgs		args;
		int			npool;
		PoolSeat   *pool;
		int		   *which = palloc(sizeof(int) * n);
		int			left = 0;
		int			i;

		hc_args(&args, &pool_seats);
		hc_bind_text(&args, "pool", pool_id);
		npool = (int) hc_run(&call, &args, SPI_OK_SELECT);
		if (npool == 0)
			ereport(ERROR,
					(errcode(ERRCODE_HC_NOT_FOUND),
					 errmsg("pool \"%s\" does not exist", pool_id),
					 errdetail("No asset of hc_assets is in pool \"%s\".", pool_id),
					 errhint("Add the pool's assets with hc_asset_add(..., pool => ...) first.")));
		pool = pool_read(&call, npool);
		if (!pool_choose(&call, pool, npool, n, which, &left))
			ereport(ERROR,
					(errcode(ERRCODE_HC_INSUFFICIENT_STOCK),
					 errmsg("pool \"%s\" has fewer than %d assets available", pool_id, n),
					 errdetail("%d left.", left),
					 errhint("Nothing was held. Ask for fewer, or offer another pool.")));
		g.n = n;
		g.ids = palloc(sizeof(char *) * n);
		for (i = 0; i < n; i++)
			g.ids[i] = pool[which[i]].id;
		hc_group_write(&call, &g);
	}
	hc_call_end(&call);
	hc_group_rows(fcinfo, &g);
	return (Datum) 0;
}
