# holdcommit: PGXS build, plus the two commands of the README (make run, make test)

EXTENSION = holdcommit
MODULE_big = holdcommit
OBJS = $(patsubst %.c,%.o,$(wildcard src/*.c))
DATA = $(wildcard sql/holdcommit--*.sql)
PGFILEDESC = "holdcommit - hold-and-commit inside PostgreSQL"

# Regression inputs are sql/<name>.sql (the install scripts are sql/holdcommit--*.sql);
# setup, with the helpers the others share, runs first.
REGRESS = setup $(sort $(filter-out holdcommit--% setup,$(basename $(notdir $(wildcard sql/*.sql)))))
REGRESS_OPTS = --load-extension=holdcommit
ISOLATION = $(sort $(basename $(notdir $(wildcard test/isolation/specs/*.spec))))
ISOLATION_OPTS = --inputdir=test/isolation --outputdir=output_iso --load-extension=holdcommit

PG_CONFIG ?= pg_config
# make test builds with WERROR=-Werror; a user's build does not fail on a new compiler's warning.
PG_CPPFLAGS = -Wall -Wextra $(WERROR) -Wno-unused-parameter -Wno-missing-field-initializers
EXTRA_CLEAN = results output_iso regression.diffs regression.out test/tmp

# No JIT bitcode: it needs clang, and the functions are not JIT candidates.
override with_llvm = no

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# The headers are small and shared: a change to one rebuilds every object.
$(OBJS): $(wildcard src/*.h)

RUN_PORT = 54320

.PHONY: run stop test bench deps
deps:
	@test/deps.sh

run:
	@test/run-demo.sh

stop:
	@test/server.sh stop $(RUN_PORT)

test:
	@test/run-tests.sh

# Against the server of make run: hc_hold vs a plain-SQL hold, and the ratio.
bench:
	@PGHOST=$${TMPDIR:-/tmp}/holdcommit-$(RUN_PORT) PGPORT=$(RUN_PORT) PGUSER=postgres test/bench/holds.sh
