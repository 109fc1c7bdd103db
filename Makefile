# holdcommit: PGXS build, plus the commands of the README (make run, make test, make deb,
# make dist)

EXTENSION = holdcommit
# The version lives in holdcommit.control (default_version); META.json, debian/changelog and
# the install script's name must agree with it (test/project/versions.sh checks).
EXTVERSION := $(shell sed -n "s/^default_version *= *'\(.*\)'/\1/p" $(dir $(firstword $(MAKEFILE_LIST)))$(EXTENSION).control)
MODULE_big = holdcommit
# The sources by folder (doc/architecture.md): src/holdcommit.c and src/FOLDER/[FOLDER/]*.c.
SOURCES = $(wildcard src/*.c src/*/*.c src/*/*/*.c)
OBJS = $(SOURCES:.c=.o)
# Released versions keep their scripts, committed (test/project/released.md5).  A
# version in the making has no script of its own: its install script is made
# from the last released full script and the update scripts after it
# (FULL_SCRIPT_CHAIN), so fresh and updated installs have one source, and
# make dist and make deb ship the made file (MADE_SCRIPT).  Empty while the
# version is a released one; 0.4.0 is in the making.
FULL_SCRIPT_CHAIN = sql/holdcommit--0.3.0.sql sql/holdcommit--0.3.0--0.4.0.sql
FULL_SCRIPT = sql/$(EXTENSION)--$(EXTVERSION).sql
MADE_SCRIPT = $(if $(FULL_SCRIPT_CHAIN),$(FULL_SCRIPT))
DATA = $(sort $(wildcard sql/holdcommit--*.sql) $(MADE_SCRIPT))
PGFILEDESC = "holdcommit - hold-and-commit inside PostgreSQL"

# The tests by domain (test/README.md): regression inputs test/sql/NAME.sql, isolation specs
# test/specs/NAME.spec, both with their expected output in test/expected/NAME.out; sql/ holds
# only the install scripts.  setup, with the helpers the others share, runs first.
# make installcheck runs both against the server of PGHOST/PGPORT, after saying what that
# server lets them test (REGRESS_PREP: test/harness/installcheck-server.sql).
REGRESS = setup $(sort $(filter-out setup,$(basename $(notdir $(wildcard test/sql/*.sql)))))
REGRESS_OPTS = --inputdir=test --load-extension=holdcommit
REGRESS_PREP = installcheck-server
# The suites call the functions unqualified, as an application does that has the
# extension's schema on its search_path (after public, so that their own tables stay there).
installcheck: export PGOPTIONS += -c search_path=public,holdcommit
ISOLATION = $(sort $(basename $(notdir $(wildcard test/specs/*.spec))))
ISOLATION_OPTS = --inputdir=test --outputdir=output_iso --load-extension=holdcommit

PG_CONFIG ?= pg_config
# make test builds with WERROR=-Werror; a user's build does not fail on a new compiler's warning.
PG_CPPFLAGS = -I$(srcdir)/src -Wall -Wextra $(WERROR) -Wno-unused-parameter -Wno-missing-field-initializers \
	-DHC_LIBRARY_VERSION='"$(EXTVERSION)"'
EXTRA_CLEAN = $(MADE_SCRIPT) results output_iso regression.diffs regression.out test/tmp $(BUILD_DIR)

# No JIT bitcode: it needs clang, and the functions are not JIT candidates.
override with_llvm = no

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# The headers are small and shared: a change to one rebuilds every object.
$(OBJS): $(wildcard src/*.h src/*/*.h src/*/*/*.h) $(EXTENSION).control

all: $(MADE_SCRIPT)
ifneq ($(FULL_SCRIPT_CHAIN),)
$(FULL_SCRIPT): $(FULL_SCRIPT_CHAIN)
	{ echo '-- holdcommit $(EXTVERSION), made by make from $(FULL_SCRIPT_CHAIN): edit those.'; \
	  echo '\\echo Use "CREATE EXTENSION holdcommit" to load this file. \\quit'; \
	  sed '/^\\echo Use /d' $(FULL_SCRIPT_CHAIN); } >$@
endif

RUN_PORT = 54320
# make deb and make dist put what they make here (ignored by git).
BUILD_DIR = build

.PHONY: run stop test test-major check-quick installcheck-server sanitize bench bench-citus bench-notify deps deb dist version ops-screenshot
deps:
	@test/harness/deps.sh

run:
	@test/demo/run-demo.sh

stop:
	@test/harness/server.sh stop $(RUN_PORT)

# make test: every suite (TIER=quick: the quick tier only); make check-quick: the quick tier.
# One line per suite, the log of a failing one, then "N passed, N failed" (test/harness/run-tests.sh).
TIER ?= full
test:
	@TIER=$(TIER) test/harness/run-tests.sh

check-quick:
	@TIER=quick test/harness/run-tests.sh

# make test-major MAJOR=18: the suites make test runs on another major, alone, in its Debian
# chroot (test/majors/run.sh; make test runs them for HC_MAJORS, by default 17 18 19).
test-major:
	@test/majors/run.sh $(MAJOR)

# ASan and UBSan (test/packaging/sanitize.sh, also a suite of make test): the module built with the
# sanitizers in build/sanitize, the regression and isolation suites against a throwaway server
# with their runtime, and a canary build whose planted defects they must report.  Fails on any
# "not ok" line.
sanitize:
	@test/packaging/sanitize.sh | awk '{ print } /^not ok/ { failed = 1 } END { exit failed }'

installcheck-server:
	@$(bindir)/psql -X -q -v dbname=$(CONTRIB_TESTDB) -d postgres -f test/harness/installcheck-server.sql

# Every scenario of issues 9 and 20 against the PL/pgSQL port and the seeds' plain SQL,
# on its own throwaway server: bench/results/latest.md and latest.png.
bench:
	@bench/run.sh

# Through a Citus coordinator against a single node (bench/citus.sh): needs Citus installed.
bench-citus:
	@bench/citus.sh

# Against the server of make run: what holdcommit.notify costs on hold throughput.
bench-notify:
	@PGHOST=$${TMPDIR:-/tmp}/holdcommit-$(RUN_PORT) PGPORT=$(RUN_PORT) PGUSER=postgres bench/notify.sh

version:
	@echo $(EXTVERSION)

# The screenshot of the operators' page that doc/operations.md shows, doc/images/ops.png:
# examples/http/ops-test.sh (a server of its own, Chromium headless) with the extension
# installed as make run installs it.
ops-screenshot:
	@test/harness/deps.sh && $(MAKE) -s && \
	  if [ -n "$${HC_PGROOT:-}" ]; then $(MAKE) -s install DESTDIR="$$HC_PGROOT"; else $(MAKE) -s install; fi && \
	  HC_OPS_SCREENSHOT=doc/images/ops.png examples/http/ops-test.sh

# The Debian packages postgresql-MAJOR-holdcommit, built by pg_buildext (debian/rules) for each
# major of debian/pgversions whose server headers are installed (postgresql-server-dev-MAJOR),
# or for PG_MAJOR alone (make deb PG_MAJOR=17): pg_buildext updatecontrol writes debian/control
# for those majors in a copy of the working tree (the files git tracks or would track; without
# git, as in make test's chroots, every file but build/, and dh_clean's make clean removes what
# a build left), so the tree stays clean.  The .debs land in build/deb/.
deb: SHELL = /bin/bash
deb: .SHELLFLAGS = -o pipefail -ec
deb:
	rm -rf $(BUILD_DIR)/deb && mkdir -p $(BUILD_DIR)/deb/$(EXTENSION)-$(EXTVERSION)
	{ git ls-files -z --cached --others --exclude-standard 2>/dev/null || \
	    find . -path ./$(BUILD_DIR) -prune -o ! -type d -print0; } | \
	    while IFS= read -r -d '' f; do [ -e "$$f" ] && printf '%s\0' "$$f"; done | \
	    tar --null -T - -cf - | tar -xf - -C $(BUILD_DIR)/deb/$(EXTENSION)-$(EXTVERSION)
	cd $(BUILD_DIR)/deb/$(EXTENSION)-$(EXTVERSION) && \
	    export PG_SUPPORTED_VERSIONS=$(or $(PG_MAJOR),installed) && \
	    pg_buildext updatecontrol && dpkg-buildpackage -us -uc -b
	@ls $(BUILD_DIR)/deb/*.deb

# The PGXN release archive of the committed tree (HEAD): build/holdcommit-VERSION.zip.
# It adds the install script that make makes (MADE_SCRIPT), if any, at its place in sql/.
dist: $(MADE_SCRIPT)
	mkdir -p $(BUILD_DIR)
	git archive --format zip $(if $(MADE_SCRIPT),--prefix=$(EXTENSION)-$(EXTVERSION)/sql/ --add-file=$(MADE_SCRIPT)) \
	    --prefix=$(EXTENSION)-$(EXTVERSION)/ -o $(BUILD_DIR)/$(EXTENSION)-$(EXTVERSION).zip HEAD
	@echo $(BUILD_DIR)/$(EXTENSION)-$(EXTVERSION).zip
