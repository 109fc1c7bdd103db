/*
 * driver.c
 *		A small libpq load driver for holdcommit's benchmark.
 *
 * N client threads, each on its own connection, run one scenario for T
 * seconds (or N calls in all).  A scenario is a file of steps; one call runs
 * every step in order, each a statement prepared once per connection
 * (PQprepare) and executed with parameters generated for that call
 * (PQexecPrepared).  The driver records every call's latency and its
 * outcome by SQLSTATE (00000 = success) and prints one line of key=value
 * pairs per run.  An error ends the call, never the client: that is what
 * pgbench cannot do, and why refusals (RS001, RS002) can be measured here.
 *
 * Scenario file: one step per line, "CHECK SQL"; blank lines and lines
 * starting with # are skipped.  CHECK is one of
 *		-			no check
 *		rows:CODE	the statement must return or affect a row, else the call
 *					ends with outcome CODE (a refusal decided by the client)
 *		true:CODE	the first column of the first row must be true, else CODE
 *		retry		the statement must return or affect a row, else the call
 *					starts again from its first step (optimistic locking);
 *					after -r restarts it ends with outcome 40001
 * A call that ends early inside a transaction block is rolled back.
 *
 * Parameters are written :'PATTERN' in the SQL and become $1, $2, ...;
 * PATTERN is literal text with these substitutions:
 *		{c}			the client number (0-based)
 *		{i}			the client's call counter (0-based)
 *		{i%N}		the call counter modulo N
 *		{pN}		column N of pool row {i} (see -P)
 *		{sS.N}		column N of the first row of step S of this call
 *
 * Usage: driver [options] SCENARIO-FILE
 *		-d CONNINFO		libpq connection string (default: from the environment)
 *		-c CLIENTS		client threads, one connection each (default 1)
 *		-T SECONDS		run for this long (default 5)
 *		-n CALLS		run this many calls in all instead
 *		-l LABEL		the label printed first on the result line
 *		-P SQL			pool query, run by each client before the timed part
 *						with $1 = its client number; call i uses row i, and
 *						a client stops when its rows run out
 *		-C				cycle through the pool instead of stopping
 *		-x CODE			a client stops after its first call whose outcome is
 *						CODE: with RS002 the run lasts until the stock is
 *						sold out (-T or -n still cap it)
 *		-r RETRIES		restarts allowed for "retry" steps (default 100)
 *		-m EVERY		sample client 0's backend memory every EVERY calls
 *		-R RATE			calls per second of all clients together, each client on
 *						a schedule of its own (RATE / CLIENTS a second, the
 *						clients' starts spread over one interval); a call that
 *						falls behind its schedule starts at once.  Latencies are
 *						the calls' own time, not counted from the schedule
 *		-S SQL			a statement run once, on a connection of its own, as the
 *						clients start; the clients stop when it returns (-T
 *						and -n no longer stop them)
 *		-s SQL			run on that connection before the start (untimed), e.g.
 *						SET statement_timeout
 *
 * Result line: label, clients, seconds, calls, calls_per_s, p50_ms, p99_ms,
 * max_ms, outcomes (SQLSTATE:count,...), retries, and with -m: mem_* (bytes
 * of pg_backend_memory_contexts) and rss_anon_* (kB of the backend's
 * private memory, when /proc of the backend is readable), each _start
 * (before the first call), _warm (after the first EVERY calls), _end, _max;
 * with -S: stmt_s (its time), stmt_outcome (its SQLSTATE), stmt_result (its
 * first row, columns joined by |, or "none").
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "libpq-fe.h"

#define MAX_STEPS		16
#define MAX_PARAMS		16
#define MAX_OUTCOMES	32
#define SQLSTATE_LEN	5

typedef enum CheckKind
{
	CHECK_NONE,
	CHECK_ROWS,
	CHECK_TRUE,
	CHECK_RETRY
} CheckKind;

/* One statement of a call. */
typedef struct Step
{
	char	   *sql;			/* with $n in place of the patterns */
	char	   *patterns[MAX_PARAMS];
	int			nparams;
	CheckKind	check;
	char		code[SQLSTATE_LEN + 1]; /* outcome when the check fails */
} Step;

/* How often one outcome was seen. */
typedef struct Outcome
{
	char		sqlstate[8];	/* a SQLSTATE, or "other" */
	long		count;
} Outcome;

/* Backend memory samples: the first, after warm-up, the last, the largest. */
typedef struct MemorySamples
{
	long long	start;
	long long	warm;
	long long	end;
	long long	max;
} MemorySamples;

/* One client thread and what it measured. */
typedef struct Client
{
	int			number;
	pthread_t	thread;
	PGconn	   *conn;
	long		quota;			/* calls to run, or -1 for timed runs */
	char	 ***pool;			/* rows of columns */
	int			pool_rows;
	int			pool_cols;
	double	   *latencies_ms;
	long		ncalls;
	long		capacity;
	long		retries;
	Outcome		outcomes[MAX_OUTCOMES];
	int			noutcomes;
	MemorySamples mem;
	MemorySamples rss;
	bool		failed;			/* could not connect, prepare or load the pool */
} Client;

/* The run's settings, shared read-only by the clients. */
static Step steps[MAX_STEPS];
static int	nsteps;
static const char *conninfo = "";
static const char *pool_sql;
static bool pool_cycle;
static const char *stop_code;	/* -x */
static int	max_retries = 100;
static long memory_every;
static double run_seconds = 5.0;
static double rate;				/* calls per second of all clients; 0: flat out */
static int	nclients = 1;
static const char *stmt_sql;	/* -S */
static const char *stmt_setup_sql;	/* -s */
static atomic_bool stmt_done;	/* the -S statement has returned */
/*
 * Every thread waits at ready_line once set up (connected, prepared, pool
 * loaded), then at start_line; in between the main thread alone sets
 * start_time, so that a slow set-up is never part of the timed run.
 */
static pthread_barrier_t ready_line;
static pthread_barrier_t start_line;
static double start_time;

/* What the -S statement did. */
static double stmt_seconds;
static char stmt_outcome[SQLSTATE_LEN + 1] = "none";
static char stmt_result[512] = "none";
static bool stmt_failed;		/* could not connect or run its set-up */

static void
die(const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	fprintf(stderr, "driver: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(2);
}

static void *
xmalloc(size_t size)
{
	void	   *p = malloc(size);

	if (p == NULL)
		die("out of memory");
	return p;
}

static char *
xstrdup(const char *s)
{
	char	   *p = strdup(s);

	if (p == NULL)
		die("out of memory");
	return p;
}

/* Seconds on the monotonic clock. */
static double
now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * Parse one scenario line: the check, then the SQL, whose :'PATTERN'
 * parameters become $1, $2, ... in order.
 */
static void
parse_step(Step *step, char *line, int lineno)
{
	char	   *sql;
	char	   *out;
	char	   *p;
	size_t		cap;

	while (*line == ' ' || *line == '\t')
		line++;
	sql = line + strcspn(line, " \t");
	if (*sql == '\0')
		die("line %d: a step is \"CHECK SQL\"", lineno);
	*sql++ = '\0';
	if (strcmp(line, "-") == 0)
		step->check = CHECK_NONE;
	else if (strcmp(line, "retry") == 0)
		step->check = CHECK_RETRY;
	else if ((strncmp(line, "rows:", 5) == 0 || strncmp(line, "true:", 5) == 0) &&
			 strlen(line + 5) == SQLSTATE_LEN)
	{
		step->check = line[0] == 'r' ? CHECK_ROWS : CHECK_TRUE;
		memcpy(step->code, line + 5, SQLSTATE_LEN + 1);
	}
	else
		die("line %d: unknown check \"%s\" (-, rows:CODE, true:CODE, retry)", lineno, line);

	cap = strlen(sql) + 1;
	out = step->sql = xmalloc(cap);
	for (p = sql; *p;)
	{
		if (p[0] == ':' && p[1] == '\'')
		{
			char	   *end = strchr(p + 2, '\'');

			if (end == NULL)
				die("line %d: unterminated :'pattern'", lineno);
			if (step->nparams == MAX_PARAMS)
				die("line %d: more than %d parameters", lineno, MAX_PARAMS);
			step->patterns[step->nparams] = xmalloc(end - p - 1);
			memcpy(step->patterns[step->nparams], p + 2, end - p - 2);
			step->patterns[step->nparams][end - p - 2] = '\0';
			step->nparams++;
			/* "$16" is never longer than the shortest pattern ":''" + 1 */
			out += sprintf(out, "$%d", step->nparams);
			p = end + 1;
		}
		else
			*out++ = *p++;
	}
	*out = '\0';
}

static void
read_scenario(const char *path)
{
	FILE	   *f = fopen(path, "r");
	char		line[8192];
	int			lineno = 0;

	if (f == NULL)
		die("cannot open %s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f) != NULL)
	{
		size_t		len = strlen(line);

		lineno++;
		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = '\0';
		if (len == 0 || line[strspn(line, " \t")] == '#' || line[strspn(line, " \t")] == '\0')
			continue;
		if (nsteps == MAX_STEPS)
			die("%s: more than %d steps", path, MAX_STEPS);
		parse_step(&steps[nsteps++], line, lineno);
	}
	fclose(f);
	if (nsteps == 0)
		die("%s has no steps", path);
}

/* The results of the steps run so far in the current call. */
typedef struct CallState
{
	PGresult   *results[MAX_STEPS];
} CallState;

/*
 * Expand a parameter pattern for this call into buf.  Returns false if it
 * names a pool row or step result that is not there.
 */
static bool
expand(const Client *c, long i, const CallState *cs, const char *pattern,
	   char *buf, size_t size)
{
	size_t		len = 0;
	const char *p = pattern;

	while (*p && len + 1 < size)
	{
		const char *value = NULL;
		char		num[32];
		const char *close;

		if (*p != '{' || (close = strchr(p, '}')) == NULL)
		{
			buf[len++] = *p++;
			continue;
		}
		if (p[1] == 'c' && close == p + 2)
		{
			snprintf(num, sizeof(num), "%d", c->number);
			value = num;
		}
		else if (p[1] == 'i' && close == p + 2)
		{
			snprintf(num, sizeof(num), "%ld", i);
			value = num;
		}
		else if (p[1] == 'i' && p[2] == '%')
		{
			long		modulus = atol(p + 3);

			if (modulus <= 0)
				die("pattern \"%s\": {i%%N} needs N > 0", pattern);
			snprintf(num, sizeof(num), "%ld", i % modulus);
			value = num;
		}
		else if (p[1] == 'p')
		{
			int			col = atoi(p + 2) - 1;
			long		row = pool_cycle && c->pool_rows > 0 ? i % c->pool_rows : i;

			if (row >= c->pool_rows || col < 0 || col >= c->pool_cols)
				return false;
			value = c->pool[row][col];
		}
		else if (p[1] == 's')
		{
			int			s = atoi(p + 2) - 1;
			const char *dot = strchr(p, '.');
			int			col = dot && dot < close ? atoi(dot + 1) - 1 : -1;

			if (s < 0 || s >= nsteps || cs->results[s] == NULL || col < 0 ||
				PQntuples(cs->results[s]) < 1 || col >= PQnfields(cs->results[s]))
				return false;
			value = PQgetvalue(cs->results[s], 0, col);
		}
		else
			die("unknown substitution in pattern \"%s\"", pattern);
		while (*value && len + 1 < size)
			buf[len++] = *value++;
		p = close + 1;
	}
	if (*p)
		die("pattern \"%s\" expands to more than %zu bytes", pattern, size - 1);
	buf[len] = '\0';
	return true;
}

/* Count an outcome; past MAX_OUTCOMES - 1 distinct ones, as "other". */
static void
add_outcome(Outcome *outcomes, int *n, const char *sqlstate, long count)
{
	int			k;

	for (k = 0; k < *n; k++)
		if (strcmp(outcomes[k].sqlstate, sqlstate) == 0)
			break;
	if (k == *n && *n == MAX_OUTCOMES - 1)
	{
		add_outcome(outcomes, n, "other", count);
		return;
	}
	if (k == *n)
	{
		snprintf(outcomes[k].sqlstate, sizeof(outcomes[k].sqlstate), "%s", sqlstate);
		outcomes[k].count = 0;
		(*n)++;
	}
	outcomes[k].count += count;
}

static void
clear_call(CallState *cs)
{
	int			s;

	for (s = 0; s < nsteps; s++)
	{
		PQclear(cs->results[s]);
		cs->results[s] = NULL;
	}
}

/* Did the statement return or affect at least one row? */
static bool
has_rows(PGresult *res)
{
	if (PQresultStatus(res) == PGRES_TUPLES_OK)
		return PQntuples(res) > 0;
	return atol(PQcmdTuples(res)) > 0;
}

/* Leave a transaction block that a call ended in the middle of. */
static void
end_transaction(PGconn *conn)
{
	PGTransactionStatusType ts = PQtransactionStatus(conn);

	if (ts == PQTRANS_INTRANS || ts == PQTRANS_INERROR)
		PQclear(PQexec(conn, "ROLLBACK"));
}

/* Prepare every step on a fresh connection. */
static bool
prepare_steps(Client *c)
{
	int			s;

	for (s = 0; s < nsteps; s++)
	{
		char		name[16];
		PGresult   *res;
		bool		ok;

		snprintf(name, sizeof(name), "step%d", s + 1);
		res = PQprepare(c->conn, name, steps[s].sql, steps[s].nparams, NULL);
		ok = PQresultStatus(res) == PGRES_COMMAND_OK;
		if (!ok)
			fprintf(stderr, "driver: client %d: prepare step %d: %s", c->number, s + 1,
					PQerrorMessage(c->conn));
		PQclear(res);
		if (!ok)
			return false;
	}
	return true;
}

/*
 * A lost connection is an outcome too (08006); reconnect and prepare again
 * so that the client goes on.
 */
static void
reconnect(Client *c)
{
	PQreset(c->conn);
	if (PQstatus(c->conn) == CONNECTION_OK)
		prepare_steps(c);
}

/*
 * One call: run the steps in order.  Returns the outcome's SQLSTATE in
 * sqlstate ("00000" on success).
 */
static void
run_call(Client *c, long i, char *sqlstate)
{
	CallState	cs = {{0}};
	int			restarts = 0;
	int			s = 0;

	strcpy(sqlstate, "00000");
	while (s < nsteps)
	{
		const Step *step = &steps[s];
		char		bufs[MAX_PARAMS][512];
		const char *values[MAX_PARAMS];
		char		name[16];
		PGresult   *res;
		ExecStatusType status;
		int			k;

		for (k = 0; k < step->nparams; k++)
		{
			if (!expand(c, i, &cs, step->patterns[k], bufs[k], sizeof(bufs[k])))
			{
				/* a missing pool row or step result: the scenario is wrong */
				strcpy(sqlstate, "XXPAT");
				goto done;
			}
			values[k] = bufs[k];
		}
		snprintf(name, sizeof(name), "step%d", s + 1);
		res = PQexecPrepared(c->conn, name, step->nparams, values, NULL, NULL, 0);
		status = PQresultStatus(res);
		if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK)
		{
			const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);

			snprintf(sqlstate, SQLSTATE_LEN + 1, "%s", state ? state : "08006");
			PQclear(res);
			if (PQstatus(c->conn) != CONNECTION_OK)
				reconnect(c);
			goto done;
		}
		cs.results[s] = res;
		if (step->check == CHECK_ROWS && !has_rows(res))
		{
			strcpy(sqlstate, step->code);
			goto done;
		}
		if (step->check == CHECK_TRUE &&
			!(PQntuples(res) > 0 && PQnfields(res) > 0 && strcmp(PQgetvalue(res, 0, 0), "t") == 0))
		{
			strcpy(sqlstate, step->code);
			goto done;
		}
		if (step->check == CHECK_RETRY && !has_rows(res))
		{
			end_transaction(c->conn);
			clear_call(&cs);
			if (restarts++ == max_retries)
			{
				strcpy(sqlstate, "40001");
				goto done;
			}
			c->retries++;
			s = 0;
			continue;
		}
		s++;
	}
done:
	end_transaction(c->conn);
	clear_call(&cs);
}

/* Run one query that returns a single number; -1 if it fails. */
static long long
query_number(PGconn *conn, const char *sql)
{
	PGresult   *res = PQexec(conn, sql);
	long long	n = -1;

	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 && !PQgetisnull(res, 0, 0))
		n = atoll(PQgetvalue(res, 0, 0));
	PQclear(res);
	return n;
}

/* The backend's private resident memory in kB (RssAnon), or -1. */
static long long
backend_rss_anon(PGconn *conn)
{
	char		path[64];
	char		line[256];
	FILE	   *f;
	long long	kb = -1;

	snprintf(path, sizeof(path), "/proc/%d/status", PQbackendPID(conn));
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "RssAnon: %lld", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static void
sample(MemorySamples *m, long long value, int which)
{
	if (which == 0)
		m->start = m->warm = m->max = value;
	if (which == 1)
		m->warm = value;
	m->end = value;
	if (value > m->max)
		m->max = value;
}

static void
sample_memory(Client *c, int which)
{
	sample(&c->mem, query_number(c->conn,
								 "SELECT sum(total_bytes) FROM pg_catalog.pg_backend_memory_contexts"),
		   which);
	sample(&c->rss, backend_rss_anon(c->conn), which);
}

/* Load this client's pool rows. */
static bool
load_pool(Client *c)
{
	char		number[16];
	const char *params[1] = {number};
	PGresult   *res;
	int			r;
	int			k;

	snprintf(number, sizeof(number), "%d", c->number);
	res = PQexecParams(c->conn, pool_sql, 1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		fprintf(stderr, "driver: client %d: pool query: %s", c->number, PQerrorMessage(c->conn));
		PQclear(res);
		return false;
	}
	c->pool_rows = PQntuples(res);
	c->pool_cols = PQnfields(res);
	c->pool = xmalloc(sizeof(char **) * (c->pool_rows + 1));
	for (r = 0; r < c->pool_rows; r++)
	{
		c->pool[r] = xmalloc(sizeof(char *) * c->pool_cols);
		for (k = 0; k < c->pool_cols; k++)
			c->pool[r][k] = xstrdup(PQgetvalue(res, r, k));
	}
	PQclear(res);
	return true;
}

static void *
client_main(void *arg)
{
	Client	   *c = arg;
	long		i;

	c->conn = PQconnectdb(conninfo);
	if (PQstatus(c->conn) != CONNECTION_OK)
	{
		fprintf(stderr, "driver: client %d: %s", c->number, PQerrorMessage(c->conn));
		c->failed = true;
	}
	else if (!prepare_steps(c) || (pool_sql != NULL && !load_pool(c)))
		c->failed = true;
	if (!c->failed && memory_every > 0 && c->number == 0)
		sample_memory(c, 0);

	pthread_barrier_wait(&ready_line);
	pthread_barrier_wait(&start_line);
	for (i = 0; !c->failed; i++)
	{
		double		t0;
		double		t1;
		char		sqlstate[SQLSTATE_LEN + 1];

		if (rate > 0)
		{
			/* this client's call i is due at its slot of the schedule */
			double		interval = nclients / rate;
			double		due = start_time + (i + (double) c->number / nclients) * interval;
			double		wait = due - now_seconds();

			if (wait > 0)
			{
				struct timespec ts;

				ts.tv_sec = (time_t) wait;
				ts.tv_nsec = (long) ((wait - ts.tv_sec) * 1e9);
				nanosleep(&ts, NULL);
			}
		}
		if (stmt_sql != NULL)
		{
			if (atomic_load(&stmt_done))
				break;
		}
		else if (c->quota >= 0 ? i >= c->quota : now_seconds() - start_time >= run_seconds)
			break;
		if (pool_sql != NULL && !pool_cycle && i >= c->pool_rows)
			break;
		t0 = now_seconds();
		run_call(c, i, sqlstate);
		t1 = now_seconds();
		if (c->ncalls == c->capacity)
		{
			double	   *grown;

			c->capacity = c->capacity ? c->capacity * 2 : 65536;
			grown = realloc(c->latencies_ms, sizeof(double) * c->capacity);
			if (grown == NULL)
				die("out of memory");
			c->latencies_ms = grown;
		}
		c->latencies_ms[c->ncalls++] = (t1 - t0) * 1000.0;
		add_outcome(c->outcomes, &c->noutcomes, sqlstate, 1);
		if (memory_every > 0 && c->number == 0 && (i + 1) % memory_every == 0)
			sample_memory(c, i + 1 == memory_every ? 1 : 2);
		if (stop_code != NULL && strcmp(sqlstate, stop_code) == 0)
			break;
	}
	if (!c->failed && memory_every > 0 && c->number == 0)
		sample_memory(c, 2);
	PQfinish(c->conn);
	return NULL;
}

/*
 * The -S statement: connect and run the set-up before the start line, run
 * the statement once from the start, then tell the clients to stop.
 */
static void *
stmt_main(void *arg)
{
	PGconn	   *conn = PQconnectdb(conninfo);
	PGresult   *res;
	double		t0;

	(void) arg;
	if (PQstatus(conn) != CONNECTION_OK)
	{
		fprintf(stderr, "driver: statement: %s", PQerrorMessage(conn));
		stmt_failed = true;
	}
	else if (stmt_setup_sql != NULL)
	{
		res = PQexec(conn, stmt_setup_sql);
		if (PQresultStatus(res) != PGRES_COMMAND_OK && PQresultStatus(res) != PGRES_TUPLES_OK)
		{
			fprintf(stderr, "driver: statement set-up: %s", PQerrorMessage(conn));
			stmt_failed = true;
		}
		PQclear(res);
	}

	pthread_barrier_wait(&ready_line);
	pthread_barrier_wait(&start_line);
	if (!stmt_failed)
	{
		ExecStatusType status;

		t0 = now_seconds();
		res = PQexec(conn, stmt_sql);
		stmt_seconds = now_seconds() - t0;
		status = PQresultStatus(res);
		if (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK)
		{
			strcpy(stmt_outcome, "00000");
			if (status == PGRES_TUPLES_OK && PQntuples(res) > 0)
			{
				size_t		len = 0;
				int			k;

				for (k = 0; k < PQnfields(res) && len + 1 < sizeof(stmt_result); k++)
				{
					const char *v = PQgetisnull(res, 0, k) ? "null" : PQgetvalue(res, 0, k);

					len += snprintf(stmt_result + len, sizeof(stmt_result) - len, "%s%s",
									k ? "|" : "", v);
				}
				/* one key=value of the result line: no blanks */
				for (len = 0; stmt_result[len]; len++)
					if (stmt_result[len] == ' ' || stmt_result[len] == '\t')
						stmt_result[len] = '_';
			}
		}
		else
		{
			const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);

			snprintf(stmt_outcome, sizeof(stmt_outcome), "%s", state ? state : "08006");
			if (status != PGRES_FATAL_ERROR || state == NULL || strcmp(state, "57014") != 0)
				fprintf(stderr, "driver: statement: %s", PQerrorMessage(conn));
		}
		PQclear(res);
	}
	atomic_store(&stmt_done, true);
	PQfinish(conn);
	return NULL;
}

static int
compare_doubles(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return (x > y) - (x < y);
}

static int
compare_outcomes(const void *a, const void *b)
{
	return strcmp(((const Outcome *) a)->sqlstate, ((const Outcome *) b)->sqlstate);
}

/* The q-quantile of sorted values (nearest rank). */
static double
quantile(const double *sorted, long n, double q)
{
	long		rank;

	if (n == 0)
		return 0;
	rank = (long) (q * n + 0.999999);
	if (rank < 1)
		rank = 1;
	return sorted[rank - 1];
}

static void
usage(void)
{
	fprintf(stderr,
			"usage: driver [-d CONNINFO] [-c CLIENTS] [-T SECONDS | -n CALLS] [-l LABEL]\n"
			"              [-P POOL-SQL [-C]] [-x CODE] [-r RETRIES] [-m EVERY] [-R RATE]\n"
			"              [-S SQL [-s SET-UP-SQL]] SCENARIO-FILE\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	long		total_calls = -1;
	const char *label = "run";
	Client	   *clients;
	Outcome		outcomes[MAX_OUTCOMES];
	int			noutcomes = 0;
	pthread_t	stmt_thread;
	double	   *all;
	long		ncalls = 0;
	long		retries = 0;
	double		elapsed;
	int			failed = 0;
	int			opt;
	int			n;
	int			k;

	while ((opt = getopt(argc, argv, "d:c:T:n:l:P:Cx:r:m:R:S:s:")) != -1)
	{
		switch (opt)
		{
			case 'd':
				conninfo = optarg;
				break;
			case 'c':
				nclients = atoi(optarg);
				break;
			case 'T':
				run_seconds = atof(optarg);
				break;
			case 'n':
				total_calls = atol(optarg);
				break;
			case 'l':
				label = optarg;
				break;
			case 'P':
				pool_sql = optarg;
				break;
			case 'C':
				pool_cycle = true;
				break;
			case 'x':
				stop_code = optarg;
				break;
			case 'r':
				max_retries = atoi(optarg);
				break;
			case 'm':
				memory_every = atol(optarg);
				break;
			case 'R':
				rate = atof(optarg);
				break;
			case 'S':
				stmt_sql = optarg;
				break;
			case 's':
				stmt_setup_sql = optarg;
				break;
			default:
				usage();
		}
	}
	if (optind != argc - 1 || nclients < 1 || run_seconds <= 0 || max_retries < 0 ||
		memory_every < 0 || rate < 0 || (stmt_setup_sql != NULL && stmt_sql == NULL) ||
		(stop_code != NULL && strlen(stop_code) != SQLSTATE_LEN))
		usage();
	read_scenario(argv[optind]);

	clients = calloc(nclients, sizeof(Client));
	if (clients == NULL)
		die("out of memory");
	if (pthread_barrier_init(&ready_line, NULL, nclients + 1 + (stmt_sql != NULL)) != 0 ||
		pthread_barrier_init(&start_line, NULL, nclients + 1 + (stmt_sql != NULL)) != 0)
		die("pthread_barrier_init failed");
	if (stmt_sql != NULL && pthread_create(&stmt_thread, NULL, stmt_main, NULL) != 0)
		die("pthread_create failed");
	for (n = 0; n < nclients; n++)
	{
		clients[n].number = n;
		clients[n].quota = total_calls < 0 ? -1 :
			total_calls / nclients + (n < total_calls % nclients ? 1 : 0);
		if (pthread_create(&clients[n].thread, NULL, client_main, &clients[n]) != 0)
			die("pthread_create failed");
	}
	/* every client has connected, prepared and loaded its pool: go */
	pthread_barrier_wait(&ready_line);
	start_time = now_seconds();
	pthread_barrier_wait(&start_line);
	for (n = 0; n < nclients; n++)
		pthread_join(clients[n].thread, NULL);
	elapsed = now_seconds() - start_time;
	if (stmt_sql != NULL)
		pthread_join(stmt_thread, NULL);

	for (n = 0; n < nclients; n++)
		ncalls += clients[n].ncalls;
	all = xmalloc(sizeof(double) * (ncalls + 1));
	ncalls = 0;
	for (n = 0; n < nclients; n++)
	{
		Client	   *c = &clients[n];

		memcpy(all + ncalls, c->latencies_ms, sizeof(double) * c->ncalls);
		ncalls += c->ncalls;
		retries += c->retries;
		failed += c->failed;
		for (k = 0; k < c->noutcomes; k++)
			add_outcome(outcomes, &noutcomes, c->outcomes[k].sqlstate, c->outcomes[k].count);
	}
	qsort(all, ncalls, sizeof(double), compare_doubles);
	qsort(outcomes, noutcomes, sizeof(Outcome), compare_outcomes);

	printf("label=%s clients=%d seconds=%.3f calls=%ld calls_per_s=%.1f p50_ms=%.3f p99_ms=%.3f max_ms=%.3f outcomes=",
		   label, nclients, elapsed, ncalls, elapsed > 0 ? ncalls / elapsed : 0.0,
		   quantile(all, ncalls, 0.50), quantile(all, ncalls, 0.99),
		   ncalls ? all[ncalls - 1] : 0.0);
	for (k = 0; k < noutcomes; k++)
		printf("%s%s:%ld", k ? "," : "", outcomes[k].sqlstate, outcomes[k].count);
	if (noutcomes == 0)
		printf("none");
	printf(" retries=%ld failed_clients=%d", retries, failed);
	if (memory_every > 0)
		printf(" mem_start=%lld mem_warm=%lld mem_end=%lld mem_max=%lld"
			   " rss_anon_start=%lld rss_anon_warm=%lld rss_anon_end=%lld rss_anon_max=%lld",
			   clients[0].mem.start, clients[0].mem.warm, clients[0].mem.end, clients[0].mem.max,
			   clients[0].rss.start, clients[0].rss.warm, clients[0].rss.end, clients[0].rss.max);
	if (stmt_sql != NULL)
		printf(" stmt_s=%.3f stmt_outcome=%s stmt_result=%s", stmt_seconds, stmt_outcome, stmt_result);
	printf("\n");
	return failed == nclients || stmt_failed ? 1 : 0;
}
