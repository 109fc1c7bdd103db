#!/usr/bin/env bash
# Install the Debian packages holdcommit needs to build and test, if missing.
# As root it installs them; otherwise it prints the apt-get line and fails.
#   deps.sh              the machine's (PostgreSQL 15, and debootstrap for the other majors'
#                        chroots: test/majors/chroot.sh)
#   deps.sh --major N    print the packages the suites of major N need in its chroot
#   PG_MAJOR=N deps.sh   in that chroot: check (or install) those
set -euo pipefail

# What make test runs in a chroot of another major (TIER=major in test/harness/run-tests.sh):
# the build, pgTAP and pg_prove, pg_cron, psycopg (load/autonomous), make deb (package).
major_packages() {
    echo build-essential postgresql-$1 postgresql-server-dev-$1 postgresql-$1-pgtap \
        postgresql-$1-cron libtap-parser-sourcehandler-pgtap-perl python3 python3-psycopg \
        postgresql-server-dev-all debhelper dpkg-dev git
}
if [ "${1:-}" = --major ]; then
    major_packages "${2:?usage: deps.sh --major N}" | tr ' ' '\n'
    exit 0
fi

if [ -n "${PG_MAJOR:-}" ]; then
    packages=($(major_packages "$PG_MAJOR"))
else
    packages=(build-essential postgresql-15 postgresql-server-dev-15 postgresql-15-pgtap
              postgresql-15-cron libtap-parser-sourcehandler-pgtap-perl
              # the example HTTP service (examples/http) and PgBouncer in front of it
              python3-fastapi python3-uvicorn python3-psycopg python3-psycopg-pool curl pgbouncer
              # its operators' page, /ops, in a real browser (examples/http/ops-test.sh)
              chromium chromium-driver python3-selenium
              # the driver snippets of doc/locking.md and doc/clients.md (psycopg, SQLAlchemy,
              # Django, node-postgres from npm)
              python3-sqlalchemy python3-psycopg2 python3-django
              # the Python package (clients/python): pip install into a venv, offline
              python3-venv python3-setuptools python3-wheel
              # make deb (pg_buildext), make dist, the postgres_exporter queries check
              postgresql-server-dev-all debhelper dpkg-dev git python3-yaml prometheus-postgres-exporter
              # the benchmark's load driver (bench/driver.c)
              libpq-dev
              # the chroots of the other majors (test/majors/chroot.sh)
              debootstrap)
    # node and npm (the js snippets, clients/node): Debian's, unless a node and an npm are there
    # already (another build of node brings its own npm, which Debian's npm would conflict with).
    command -v node >/dev/null && command -v npm >/dev/null || packages+=(nodejs npm)
fi
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
    echo "holdcommit needs: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
fi
echo "installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${missing[@]}" >/dev/null
