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
 *
 * The free seats are read lowest rank first, and only as many as settle
 * the choice: a block with a seat not read yet sums at least that seat's
 * rank plus n - 1 times the lowest free rank, so once a block read sums
 * less, no other can beat it.  A call reads the taken seats of ranks
 * below its own, as the plain ORDER BY rank LIMIT n query does, and the
 * free ones of a rank or two past them (all of a rank that ties the best
 * block), not the whole pool.  A place (pool, grp, pos) holds one seat.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "utils/builtins.h"

#include "common/errors.h"
#include "common/validate.h"
#include "core/fetch.h"
#include "core/scan.h"
#include "core/statement.h"
#include "core/subxact.h"
#include "core/placement.h"
#include "core/version.h"
#include "hold/group.h"

PG_FUNCTION_INFO_V1(hc_hold_best);

/* The seats of a grp from :lo to :hi in pos, through hc_assets_pool. */
static HcStatement grp_seats = {
	"SELECT pos, status" EQ "'AVAILABLE'"
	"           OR (status" EQ "'HELD' AND hold_expires_at" LE ":now) AS free"
	"  FROM hc_assets"
	" WHERE pool" EQ ":pool" " AND grp" EQ ":grp" " AND pos" GE ":lo" " AND pos" LE ":hi",
	{{"pool", TEXTOID}, {"grp", TEXTOID}, {"lo", INT4OID}, {"hi", INT4OID},
	 {"now", TIMESTAMPTZOID}}
};

static HcStatement pool_exists = {
	"SELECT 1 FROM hc_assets WHERE pool" EQ ":pool" " LIMIT 1",
	{{"pool", TEXTOID}}
};

/* The keys of the index the read of a pool goes through, in its order. */
static const char *const pool_rank[] = {"pool", "rank"};

/* The columns of a seat that the read of a pool looks at, as PoolRead.columns. */
static const char *const seat_columns[] = {"status", "hold_expires_at", "id", "rank", "grp", "pos"};

/* A NULL rank ranks after every rank, as the index orders it. */
#define NULL_RANK ((int64) PG_INT32_MAX + 1)

/* The most free seats one part of the read takes. */
#define READ_MOST 65536

/* A free seat of the pool as read. */
typedef struct PoolSeat
{
	char	   *id;
	int64		rank;			/* NULL_RANK for a NULL rank */
	char	   *grp;			/* NULL: in no group */
	int32		pos;
	ItemPointerData tid;		/* the version read */
	bool		refused;		/* found taken by another call in flight */
} PoolSeat;

/* The free seats read so far, in (grp, pos, id) order. */
typedef struct PoolRead
{
	const char *pool_id;
	HcScan		scan;			/* the pool's seats, lowest rank first */
	AttrNumber	columns[6];		/* seat_columns' */
	PoolSeat   *seats;
	int			nseats;
	int64		lowest;			/* the rank of the first seat read, the lowest */
	int64		bound;			/* a block with a seat not read sums at least this */
} PoolRead;

/* A block of n seats, seats[first .. first + n - 1], adjacent in one group. */
typedef struct SeatBlock
{
	int			first;
	int64		ranks;
	int			orphan;			/* leaves one free seat between two taken ones: 1, 0, -1 unknown */
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
	if (x->grp != y->grp && (c = strcmp(x->grp, y->grp)) != 0)
		return c;
	if (x->pos != y->pos)
		return x->pos < y->pos ? -1 : 1;
	return strcmp(x->id, y->id);
}

/* Is seats[j] the neighbour of seats[i] (j = i +- 1) in its group? */
static bool
seat_next_to(PoolRead *r, int i, int j)
{
	PoolSeat   *s = r->seats;

	return j >= 0 && j < r->nseats && s[i].grp != NULL && s[j].grp != NULL &&
		s[j].pos == (int64) s[i].pos + (j > i ? 1 : -1) &&
		(s[i].grp == s[j].grp || strcmp(s[i].grp, s[j].grp) == 0);
}

/* Is a text datum this text? */
static bool
text_is(Datum d, const char *s)
{
	text	   *t = DatumGetTextPP(d);

	return VARSIZE_ANY_EXHDR(t) == strlen(s) && memcmp(VARDATA_ANY(t), s, strlen(s)) == 0;
}

/*
 * Read the next count free seats, of ranks no lower than those read, into
 * r->seats in (grp, pos, id) order; false if they were the last.  The
 * rows come by rank, a row of seats often together: a seat of the same
 * grp as the one before shares its string, which seat_order compares
 * first.
 */
static bool
pool_read(HcCall *call, PoolRead *r, int n, int count)
{
	MemoryContext old = MemoryContextSwitchTo(call->outer);
	PoolSeat   *read = palloc(sizeof(PoolSeat) * count);
	PoolSeat   *all;
	char	   *grp = NULL;
	int			nrows = 0;
	int			i;
	int			j;
	int			k;

	while (nrows < count && hc_scan_next(&r->scan))
	{
		PoolSeat   *p = &read[nrows];
		bool		null[6];
		Datum		d[6];
		int			c;

		/* The state first: most seats below the free ones are taken. */
		for (c = 0; c < 2; c++)
			d[c] = slot_getattr(r->scan.slot, r->columns[c], &null[c]);
		if (!text_is(d[0], "AVAILABLE") &&
			!(text_is(d[0], "HELD") && !null[1] && DatumGetTimestampTz(d[1]) <= call->now))
			continue;
		for (c = 2; c < 6; c++)
			d[c] = slot_getattr(r->scan.slot, r->columns[c], &null[c]);
		p->id = TextDatumGetCString(d[2]);
		p->rank = null[3] ? NULL_RANK : DatumGetInt32(d[3]);
		p->grp = null[4] || null[5] ? NULL : TextDatumGetCString(d[4]);
		if (p->grp != NULL && grp != NULL && strcmp(p->grp, grp) == 0)
			p->grp = grp;
		grp = p->grp != NULL ? p->grp : grp;
		p->pos = null[5] ? 0 : DatumGetInt32(d[5]);
		p->tid = r->scan.slot->tts_tid;
		p->refused = false;
		nrows++;
	}
	if (r->nseats == 0 && nrows > 0)
		r->lowest = read[0].rank;
	r->bound = nrows < count ? PG_INT64_MAX : (n - 1) * r->lowest + read[nrows - 1].rank;

	/* Sorted, then merged with the seats read before. */
	qsort(read, nrows, sizeof(PoolSeat), seat_order);
	all = palloc(sizeof(PoolSeat) * Max(r->nseats + nrows, 1));
	for (i = j = k = 0; i < r->nseats || j < nrows; k++)
		all[k] = j == nrows || (i < r->nseats && seat_order(&r->seats[i], &read[j]) < 0) ?
			r->seats[i++] : read[j++];
	r->seats = all;
	r->nseats = k;
	MemoryContextSwitchTo(old);
	return nrows == count;
}

/* (ranks, first): the order in which blocks are tried, but for the orphan rule. */
static int
block_order(const void *a, const void *b)
{
	const SeatBlock *x = a;
	const SeatBlock *y = b;

	if (x->ranks != y->ranks)
		return x->ranks < y->ranks ? -1 : 1;
	return x->first - y->first;
}

/* The blocks of n free seats adjacent in a group, *nblocks of them, in block_order. */
static SeatBlock *
pool_blocks(PoolRead *r, int n, int *nblocks)
{
	SeatBlock  *blocks = palloc(sizeof(SeatBlock) * Max(r->nseats, 1));
	int			i;

	*nblocks = 0;
	for (i = 0; i + n <= r->nseats; i++)
	{
		SeatBlock  *b = &blocks[*nblocks];
		int			k;

		b->first = i;
		b->ranks = 0;
		b->orphan = -1;
		for (k = 0; k < n; k++)
		{
			if ((k > 0 && !seat_next_to(r, i + k - 1, i + k)) || r->seats[i].grp == NULL)
				break;
			b->ranks += r->seats[i + k].rank;
		}
		if (k == n)
			(*nblocks)++;
	}
	qsort(blocks, *nblocks, sizeof(SeatBlock), block_order);
	return blocks;
}

/*
 * Does taking the block leave a single free seat beside it, between it and
 * a taken one?  From the seats read where they say it (two free seats on
 * a side), else from the seats beside it as they are now.
 */
static bool
block_orphan(HcCall *call, PoolRead *r, SeatBlock *b, int n)
{
	int			last = b->first + n - 1;
	PoolSeat   *edge = &r->seats[b->first];
	int64		lo = (int64) edge->pos - 2;
	int64		hi = (int64) r->seats[last].pos + 2;
	int			state[4] = {0};	/* pos lo .. lo + 1, hi - 1 .. hi: 0 none, 1 free, 2 taken */
	HcArgs		args;
	uint64		nrows;
	uint64		i;

	if (b->orphan >= 0)
		return b->orphan;
	if (seat_next_to(r, b->first, b->first - 1) && seat_next_to(r, b->first - 1, b->first - 2) &&
		seat_next_to(r, last, last + 1) && seat_next_to(r, last + 1, last + 2))
		return (b->orphan = 0);

	hc_args(&args, &grp_seats);
	hc_bind_text(&args, "pool", r->pool_id);
	hc_bind_text(&args, "grp", edge->grp);
	hc_bind(&args, "lo", Int32GetDatum((int32) Max(lo, PG_INT32_MIN)));
	hc_bind(&args, "hi", Int32GetDatum((int32) Min(hi, PG_INT32_MAX)));
	nrows = hc_run(call, &args, SPI_OK_SELECT);
	for (i = 0; i < nrows; i++)
	{
		int64		pos = hc_int32(i, "pos");
		bool		isnull;
		bool		free = DatumGetBool(hc_datum(i, "free", &isnull)) && !isnull;
		int			at = pos < lo + 2 ? pos - lo : pos > hi - 2 ? 3 - (hi - pos) : -1;

		if (at >= 0)
			state[at] = free ? 1 : 2;
	}
	b->orphan = (state[1] == 1 && state[0] == 2) || (state[2] == 1 && state[3] == 2);
	return b->orphan;
}

/* Has the block a seat refused? */
static bool
block_refused(PoolRead *r, SeatBlock *b, int n)
{
	int			k;

	for (k = 0; k < n; k++)
		if (r->seats[b->first + k].refused)
			return true;
	return false;
}

/*
 * The block to try next, of blocks[*next ..] in block_order: of those with
 * no seat refused, the lowest sum, then one that leaves no orphan, then the
 * first; NULL if none sums less than the bound of the seats not read.  The
 * blocks before *next have a seat refused, and are not looked at again.
 */
static SeatBlock *
best_block(HcCall *call, PoolRead *r, SeatBlock *blocks, int nblocks, int *next, int n)
{
	SeatBlock  *first = NULL;
	int			b;

	while (*next < nblocks && block_refused(r, &blocks[*next], n))
		(*next)++;
	if (*next == nblocks || blocks[*next].ranks >= r->bound)
		return NULL;
	for (b = *next; b < nblocks && blocks[b].ranks == blocks[*next].ranks; b++)
	{
		if (block_refused(r, &blocks[b], n))
			continue;
		if (!block_orphan(call, r, &blocks[b], n))
			return &blocks[b];
		if (first == NULL)
			first = &blocks[b];
	}
	return first;
}

/*
 * A try at n seats, in a subtransaction of its own, that holds them as g
 * once it has them: the seats' updates are then the same transaction's as
 * their locks, or PostgreSQL would keep both in a multixact, which every
 * later read of the rows would have to look up.
 */
typedef struct SeatsTry
{
	HcCall	   *call;
	GroupHold  *g;
	PoolSeat   *seats;
	int		   *which;			/* the seats taken, n of them once taken */
	int			n;
	int		   *by_rank;		/* the lowest ranks: the seats to take from */
	int			nfree;
	int			taken;
} SeatsTry;

/*
 * Is another call in flight changing a seat of the block?  Then that seat
 * is refused without a try: most seats that a try would find taken are
 * those of the calls racing for the same best seats.
 */
static bool
block_changing(HcCall *call, PoolRead *r, SeatBlock *b, int n)
{
	int			k;

	for (k = 0; k < n; k++)
		if (hc_fetch_changing(call, "hc_assets", &r->seats[b->first + k].tid))
			return (r->seats[b->first + k].refused = true);
	return false;
}

/* Can a locked seat be taken (an expired hold freed)? */
static bool
seat_take(HcCall *call, const char *id)
{
	Seat		seat;
	const char *status = hc_seat_lock(call, id, &seat);

	return status != NULL && strcmp(status, "LOCKED") != 0 &&
		hc_hold_can_take(call, status, seat.until) && hc_seat_reclaim(call, &seat);
}

/* Hold the seats taken: true. */
static bool
seats_hold(SeatsTry *t)
{
	int			i;

	for (i = 0; i < t->n; i++)
		t->g->ids[i] = t->seats[t->which[i]].id;
	hc_group_write(t->call, t->g);
	return true;
}

/*
 * Lock every seat of the block and free it if an expired hold has it;
 * false (the subtransaction rolls back what it took) at the first that
 * another call has, marked refused.
 */
static bool
block_try(void *arg)
{
	SeatsTry   *t = arg;
	int			i;

	for (i = 0; i < t->n; i++)
	{
		PoolSeat   *p = &t->seats[t->which[i]];

		if (!seat_take(t->call, p->id))
		{
			p->refused = true;
			return false;
		}
	}
	return seats_hold(t);
}

/* Rank, then (grp, pos, id): the order of the seats of the lowest ranks. */
static int
rank_order(const void *a, const void *b, void *arg)
{
	PoolSeat   *seats = arg;
	int			x = *(const int *) a;
	int			y = *(const int *) b;

	if (seats[x].rank != seats[y].rank)
		return seats[x].rank < seats[y].rank ? -1 : 1;
	return x - y;
}

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
	SeatsTry   *t = arg;
	int			i;

	t->taken = 0;
	for (i = 0; i < t->nfree && t->taken < t->n; i++)
		if (seat_take(t->call, t->seats[t->by_rank[i]].id))
			t->which[t->taken++] = t->by_rank[i];
	return t->taken == t->n && seats_hold(t);
}

/*
 * Choose, lock and hold the seats of hc_hold_best as g: the best block of
 * n adjacent free seats that no call in flight has, each block tried in a
 * subtransaction of its own (a failed one gives back what it locked), more
 * free seats read while those read do not settle it; else the n free seats
 * of lowest rank that none has.  False if fewer than n are free (*left
 * says how many).
 */
static bool
pool_hold(HcCall *call, const char *pool_id, GroupHold *g, int *left)
{
	PoolRead	r = {pool_id};
	SeatsTry	t = {call, g, NULL, palloc(sizeof(int) * g->n), g->n};
	int			count = Max(16, 4 * g->n);
	bool		more;
	bool		held = false;
	int			i;

	hc_scan_open(call, &r.scan, "hc_assets", "hc_assets_pool_rank", pool_rank, 2, pool_id);
	for (i = 0; i < 6; i++)
		r.columns[i] = hc_scan_column(&r.scan, seat_columns[i]);
	do
	{
		int			nblocks;
		int			next = 0;
		SeatBlock  *blocks;
		SeatBlock  *b;

		more = pool_read(call, &r, g->n, count);
		blocks = pool_blocks(&r, g->n, &nblocks);
		t.seats = r.seats;
		while (!held && (b = best_block(call, &r, blocks, nblocks, &next, g->n)) != NULL)
		{
			if (block_changing(call, &r, b, g->n))
				continue;
			for (i = 0; i < g->n; i++)
				t.which[i] = b->first + i;
			held = hc_try_in_subxact(call, block_try, &t);
		}
		count = Min(count * 2, READ_MOST);
	} while (!held && more);
	hc_scan_close(&r.scan);
	if (held)
		return true;

	/* No block: the lowest ranks, of every free seat. */
	t.by_rank = palloc(sizeof(int) * Max(r.nseats, 1));
	for (i = 0; i < r.nseats; i++)
		if (!r.seats[i].refused)
			t.by_rank[t.nfree++] = i;
	qsort_arg(t.by_rank, t.nfree, sizeof(int), rank_order, r.seats);
	held = hc_try_in_subxact(call, lowest_try, &t);
	*left = t.taken;
	return held;
}

/* Does the pool have an asset? */
static bool
pool_found(HcCall *call, const char *pool_id)
{
	HcArgs		args;

	hc_args(&args, &pool_exists);
	hc_bind_text(&args, "pool", pool_id);
	return hc_run(call, &args, SPI_OK_SELECT) > 0;
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
	hc_group_seats_together(&call);
	HC_ROUTE(&call, fcinfo, pool_id);
	hc_group_request(&call, &g, buyer_id, key, ttl);
	hc_fingerprint_add(&g.fp, pool_id);
	hc_fingerprint_add_int64(&g.fp, n);

	if (!hc_group_replay(&call, &g))
	{
		int			left = 0;

		g.n = n;
		g.ids = palloc(sizeof(char *) * n);
		if (!pool_hold(&call, pool_id, &g, &left))
		{
			if (!pool_found(&call, pool_id))
				ereport(ERROR,
						(errcode(ERRCODE_HC_NOT_FOUND),
						 errmsg("pool \"%s\" does not exist", pool_id),
						 errdetail("No asset of hc_assets is in pool \"%s\".", pool_id),
						 errhint("Add the pool's assets with hc_asset_add(..., pool => ...) first.")));
			ereport(ERROR,
					(errcode(ERRCODE_HC_INSUFFICIENT_STOCK),
					 errmsg("pool \"%s\" has fewer than %d assets available", pool_id, n),
					 errdetail("%d left.", left),
					 errhint("Nothing was held. Ask for fewer, or offer another pool.")));
		}
	}
	hc_call_end(&call);
	hc_group_rows(fcinfo, &g);
	return (Datum) 0;
}
