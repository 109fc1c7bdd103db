#!/usr/bin/env bash
# No file of the repository names a package host (a Debian, Ubuntu or PostgreSQL mirror or
# archive, or a URL of a .../debian tree): the chroots of the other majors take their mirror
# from the machine's own apt sources at run time (test/majors/chroot.sh), so that make test
# fetches from wherever the machine does.
# Prints "ok - ..." / "not ok - ..." lines; exits 0.
set -uo pipefail
cd "$(dirname "$0")/../.."
. test/harness/tap.bash

hosts='\b(deb|ftp[0-9]*|snapshot|security|httpredir|archive|apt|download|mirrors?|packages|cdn[a-z-]*)\.([a-z0-9-]+\.)*(debian|ubuntu|postgresql|pgdg)\.(org|com|net)\b'
trees='https?://[^/[:space:]]+/(debian|ubuntu)(-security|-ports)?/?([[:space:]"'"'"'>)]|$)'
found=$(git ls-files -z --cached --others --exclude-standard |
    xargs -0 grep -nIoE "$hosts|$trees" 2>/dev/null | sort -u)
check "no file names a package host ($(git ls-files --cached --others --exclude-standard | wc -l) files)" \
    "${found:-none}" "none"
# The check finds what it is for.
check "it finds one: a mirror's host, and a URL of a Debian tree" \
    "$(printf '%s\n' "URIs: http://$(echo ftp.de).debian.org/debian" "deb http://mirror.example.net/$(echo debian)/ bookworm main" |
       grep -cE "$hosts|$trees")" "2"
