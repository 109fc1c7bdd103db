#!/usr/bin/env bash
# The documentation in doc/*.md and the installed catalog agree.  In a scratch
# database with the extension installed:
#   - every function that is a member of the extension has a heading
#     "### name(arg, ...)" listing its input arguments by name, in order;
#   - every holdcommit.* setting in pg_settings has a heading "### holdcommit.name";
#   - every table, view and composite type of the extension has a heading "### hc_name";
#   - every such heading names something that exists, with those arguments;
#   - every SQLSTATE that src/ raises with errcode() has its row in a table.
# No function is exempt: the extension has no internal helpers, and any it
# gets must be documented too (or listed here, with the reason).
# Needs PGHOST, PGPORT, PGUSER (a superuser) for a running server.
set -uo pipefail
cd "$(dirname "$0")/../.."

db=hc_docs
work=$(mktemp -d)
q() { psql -X -qAt -v ON_ERROR_STOP=1 -F $'\t' -d "$db" -c "$1"; }
cleanup() {
    psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1
    rm -rf "$work"
}
trap cleanup EXIT

psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1
if ! psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE DATABASE $db" >/dev/null ||
   ! psql -X -q -v ON_ERROR_STOP=1 -d "$db" -c "CREATE EXTENSION holdcommit" >/dev/null; then
    echo "not ok - scratch database $db with the extension"
    exit 0
fi

# What the catalog has, one "kind<TAB>key" per line; key is what a heading says.
q "WITH ext AS (SELECT oid FROM pg_extension WHERE extname = 'holdcommit'),
members AS (
    SELECT d.classid, d.objid FROM pg_depend d, ext
     WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid
       AND d.deptype = 'e')
SELECT 'function', p.proname || '(' || coalesce((
           SELECT string_agg(coalesce(nullif(a.name, ''), '\$' || a.i), ', ' ORDER BY a.i)
             FROM unnest(coalesce(p.proargnames, array_fill(''::text, ARRAY[p.pronargs])),
                         coalesce(p.proargmodes, array_fill('i'::\"char\", ARRAY[p.pronargs])))
                  WITH ORDINALITY AS a(name, mode, i)
            WHERE a.mode IN ('i', 'b', 'v')), '') || ')'
  FROM members m JOIN pg_proc p ON m.classid = 'pg_proc'::regclass AND p.oid = m.objid
UNION ALL
SELECT CASE WHEN c.relkind = 'S' THEN 'sequence' ELSE 'relation' END, c.relname
  FROM members m JOIN pg_class c ON m.classid = 'pg_class'::regclass AND c.oid = m.objid
UNION ALL
SELECT 'type', t.typname
  FROM members m JOIN pg_type t ON m.classid = 'pg_type'::regclass AND t.oid = m.objid
 WHERE t.typtype = 'c'
UNION ALL
SELECT 'setting', name FROM pg_settings WHERE name LIKE 'holdcommit.%'
ORDER BY 1, 2" >"$work/catalog" || { echo "not ok - read the catalog"; exit 0; }

# What the documentation has: "file<TAB>key" for each heading naming an hc_*
# object or a holdcommit.* setting.  "### hc_hold(asset_id text, ttl interval
# DEFAULT '10 minutes')" becomes "hc_hold(asset_id, ttl)": the first word of
# each argument, split at commas outside quotes and brackets.
perl -ne '
    next unless /^###\s+((?:hc_|holdcommit\.)[A-Za-z0-9_.]*)\s*(\((.*)\))?\s*$/;
    my ($name, $paren, $args) = ($1, $2, $3);
    if (!defined $paren) { print "$ARGV\t$name\n"; next; }
    my @parts; my ($cur, $depth, $quote) = ("", 0, 0);
    for my $ch (split //, $args) {
        if ($ch eq "\x27") { $quote = !$quote; }
        elsif (!$quote && $ch =~ /[(\[]/) { $depth++; }
        elsif (!$quote && $ch =~ /[)\]]/) { $depth--; }
        elsif (!$quote && $depth == 0 && $ch eq ",") { push @parts, $cur; $cur = ""; next; }
        $cur .= $ch;
    }
    push @parts, $cur if $cur =~ /\S/;
    my @names = map { /^\s*([A-Za-z_\$][A-Za-z0-9_]*)/ ? $1 : "?" } @parts;
    print "$ARGV\t$name(", join(", ", @names), ")\n";
' doc/*.md >"$work/headings" 2>/dev/null

documented() { cut -f2 "$work/headings" | grep -qxF -- "$1"; }

# Every function, setting, table, view and composite type has its heading.
while IFS=$'\t' read -r kind key; do
    [ "$kind" = sequence ] && continue
    if documented "$key"; then
        echo "ok - $kind $key is documented"
    else
        echo "not ok - $kind $key is documented"
        name=${key%%(*}
        grep -E "	$name(\(|$)" "$work/headings" | sed 's/^/#   a heading says: /'
    fi
done <"$work/catalog"

# Every heading names something that exists.
bad=0
while IFS=$'\t' read -r file key; do
    if ! cut -f2 "$work/catalog" | grep -qxF -- "$key"; then
        bad=$((bad + 1))
        echo "not ok - $file: heading $key names something that exists"
        name=${key%%(*}
        grep -E "	$name(\(|$)" "$work/catalog" | sed 's/^/#   the catalog has: /'
    fi
done <"$work/headings"
# Every SQLSTATE the C code raises is documented: a table row such as "| `RS001` |".
errcodes=$(${PG_CONFIG:-pg_config} --includedir-server)/utils/errcodes.h
for name in $(grep -rhoh --include='*.c' 'errcode(ERRCODE_[A-Z0-9_]*)' src | sed 's/^errcode(//; s/)$//' | sort -u); do
    code=$(grep -hE "^#define $name[[:space:]]" src/common/errors.h "$errcodes" |
           sed 's/.*MAKE_SQLSTATE(//; s/).*//' | tr -dc 'A-Z0-9')
    if [ ${#code} -eq 5 ] && grep -qE "^\| \`$code\`" doc/*.md; then
        echo "ok - SQLSTATE $code ($name) is documented"
    else
        echo "not ok - SQLSTATE ${code:-?} ($name) is documented"
    fi
done

n=$(wc -l <"$work/headings")
[ "$bad" -eq 0 ] && echo "ok - each of the $n headings in doc/*.md names something that exists"
[ "$n" -gt 0 ] || echo "not ok - doc/*.md has headings for the extension's objects"
exit 0
