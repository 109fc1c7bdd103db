#!/usr/bin/env bash
# The Python package's suite (make test: clients/python): build and install the package with
# pip into a fresh venv, as a user would, and run its tests (clients/python/tests) with that
# venv's python against the server of PGHOST, PGPORT, PGUSER (a superuser, holdcommit
# installed). Prints TAP ("ok - ..." / "not ok - ..."); exits non-zero if a test failed.
#   HC_PYTHON   the python to make the venv with (default /usr/bin/python3, Debian's, whose
#               python3-psycopg, python3-setuptools and python3-wheel the venv sees)
#   HC_PY_DB    the database the tests make and drop (default hc_py)
set -uo pipefail
cd "$(dirname "$0")"
: "${PGHOST:?set PGHOST, PGPORT and PGUSER}" "${PGPORT:?}" "${PGUSER:?}"
python=${HC_PYTHON:-/usr/bin/python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ! "$python" -m venv --system-site-packages "$work/venv" >"$work/venv.log" 2>&1; then
    echo "not ok - a venv is made ($python -m venv: python3-venv)"; sed 's/^/#   /' "$work/venv.log"; exit 1
fi
echo "ok - a venv is made with $python"
# Offline, without build isolation: setuptools and psycopg come from Debian's packages. The
# build's own files (build/, *.egg-info) go to a copy, so the tree stays clean.
cp -r . "$work/src"
rm -rf "$work/src/build" "$work/src"/*.egg-info
if ! "$work/venv/bin/pip" install --no-build-isolation --no-index "$work/src" >"$work/pip.log" 2>&1; then
    echo "not ok - pip installs clients/python"; sed 's/^/#   /' "$work/pip.log"; exit 1
fi
echo "ok - pip installs clients/python into the venv"
"$work/venv/bin/python" tests/run.py
