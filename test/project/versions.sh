#!/usr/bin/env bash
# The version lives in one place, holdcommit.control's default_version; the
# Makefile reads it there, and this check (run by make test) holds META.json,
# debian/changelog and the SQL script names to it.  To release a new version:
# set default_version, add sql/holdcommit--NEW.sql and the upgrade script from
# the last release, then update META.json and add a debian/changelog entry
# (dch -v NEW-1) until this passes.
# Prints "ok - ..." / "not ok - ..." lines; exits 0.
set -uo pipefail
cd "$(dirname "$0")/../.."
. test/harness/tap.bash

version=$(sed -n "s/^default_version *= *'\(.*\)'/\1/p" holdcommit.control)
check "holdcommit.control has a default_version of the form N.N.N" \
    "$(grep -cE '^[0-9]+\.[0-9]+\.[0-9]+$' <<<"$version")" "1"
check "the Makefile's version is the control file's" "$(make -s version)" "$version"

# name version provides.holdcommit.version provides.holdcommit.file, and the
# PGXN META spec's required keys that are missing (none).
meta=$(perl -MJSON::PP -0777 -ne '
    my $m = decode_json($_);
    my $p = $m->{provides}{holdcommit} // {};
    my @missing = grep { !defined $m->{$_} } qw(name abstract version maintainer license provides meta-spec);
    print join(" ", $m->{name} // "-", $m->{version} // "-", $p->{version} // "-", $p->{file} // "-",
               "missing:" . join(",", @missing)), "\n";' META.json 2>&1)
read -r meta_name meta_version provides_version provides_file meta_missing <<<"$meta"
check "META.json is valid JSON with every key PGXN requires" "$meta_missing" "missing:"
check "META.json names the extension holdcommit" "$meta_name" "holdcommit"
check "META.json's version is the control file's" "$meta_version" "$version"
check "META.json provides holdcommit in that version" "$provides_version" "$version"
check "META.json's provided file is sql/holdcommit--$version.sql" "$provides_file" "sql/holdcommit--$version.sql"

changelog=$(dpkg-parsechangelog -l debian/changelog -S Version 2>&1)
check "debian/changelog's newest entry is version $version (a Debian revision after the dash)" \
    "${changelog%-*}" "$version"

check "the install script sql/holdcommit--$version.sql exists" \
    "$(test -f "sql/holdcommit--$version.sql" && echo yes)" "yes"

# Every script name is a version or a step between versions, none beyond the
# control file's, and every older install script's version upgrades to it.
newer=
for s in sql/holdcommit--*.sql; do
    name=$(basename "$s" .sql)
    for v in $(sed 's/^holdcommit--//; s/--/ /' <<<"$name"); do
        dpkg --compare-versions "$v" gt "$version" && newer="$newer $name"
    done
done
check "no SQL script for a version after $version" "${newer:-none}" "none"

unreachable=
for s in sql/holdcommit--*.sql; do
    from=$(basename "$s" .sql | sed 's/^holdcommit--//')
    case $from in *--*) continue ;; esac
    reach=" $from "
    changed=1
    while [ -n "$changed" ]; do
        changed=
        for u in sql/holdcommit--*--*.sql; do
            [ -e "$u" ] || continue
            step=$(basename "$u" .sql | sed 's/^holdcommit--//')
            a=${step%%--*} b=${step##*--}
            if [[ $reach == *" $a "* && $reach != *" $b "* ]]; then
                reach="$reach$b "
                changed=1
            fi
        done
    done
    [[ $reach == *" $version "* ]] || unreachable="$unreachable $from"
done
check "every installable version upgrades to $version" "${unreachable:-none}" "none"

# Every update script creates, replaces or drops a function: the pg_proc
# change is how running libraries learn of an update (src/core/version.c).
silent=
for u in sql/holdcommit--*--*.sql; do
    grep -qiE '^(CREATE( OR REPLACE)?|DROP|ALTER) FUNCTION' "$u" || silent="$silent $(basename "$u")"
done
check "every update script changes a function, so running libraries check the version again" \
    "${silent:-none}" "none"

# Every C function that any SQL version names is in the library, so that a
# database not yet updated reaches the library's version check instead of
# failing with 42883 (doc/operations.md, Library and SQL versions).
missing=
if [ -f holdcommit.so ]; then
    exported=" $(nm -D --defined-only holdcommit.so | awk '{print $3}' | tr '\n' ' ') "
    for sym in $(grep -ho "'MODULE_PATHNAME', '[a-z_0-9]*'" sql/holdcommit--*.sql | cut -d"'" -f4 | sort -u); do
        [[ $exported == *" $sym "* ]] || missing="$missing $sym"
    done
    check "the library exports every C function that a SQL version names" "${missing:-none}" "none"
else
    echo "not ok - holdcommit.so is built"
fi
exit 0
