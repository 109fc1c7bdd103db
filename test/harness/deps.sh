#!/usr/bin/env bash
# Install the Debian packages holdcommit needs to build and test, if missing.
# As root it installs them; otherwise it prints the apt-get line and fails.
set -euo pipefail

packages=(build-essential postgresql-15 postgresql-server-dev-15 postgresql-15-pgtap
          postgresql-15-cron libtap-parser-sourcehandler-pgtap-perl
          # the example HTTP service (examples/http) and PgBouncer in front of it
          python3-fastapi python3-uvicorn python3-psycopg python3-psycopg-pool curl pgbouncer
          # the driver snippets of doc/locking.md and doc/clients.md (psycopg, SQLAlchemy,
          # Django, node-postgres from npm)
          python3-sqlalchemy python3-psycopg2 python3-django
          # the Python package (clients/python): pip install into a venv, offline
          python3-venv python3-setuptools python3-wheel
          # make deb (pg_buildext), make dist, the postgres_exporter queries check
          postgresql-server-dev-all debhelper dpkg-dev git python3-yaml prometheus-postgres-exporter
          # the benchmark's load driver (bench/driver.c)
          libpq-dev)
# node and npm (the js snippets, clients/node): Debian's, unless a node and an npm are there
# already (another build of node brings its own npm, which Debian's npm would conflict with).
command -v node >/dev/null && command -v npm >/dev/null || packages+=(nodejs npm)
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
