# Shared by the upgrade paths (test/upgrade/upgrade.sh from 0.1.0, test/upgrade/upgrade-0.2.0.sh,
# test/upgrade/move.sh out of public); sourced.  Each compares an updated database
# OLD with a fresh install NEW on the same server:
#   check_same_schema OLD NEW WHAT    pg_dump --schema-only --binary-upgrade of
#                                     both, normalized, is the same
#   check_same_grants OLD NEW ROLE    the privileges ROLE has on the extension's
#                                     objects, and what pg_dump keeps of them
#   check_tour OLD NEW                test/upgrade/upgrade-tour.sql answers the same in
#                                     both, and calls every function and view
# and each starts with upgrade_scratch OLD NEW ROLE... (below).
#   q DB ARGS...                      psql in DB, rows unaligned, stops at an error
# Needs PGHOST, PGPORT, PGUSER (a superuser).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../harness/tap.bash"
# pg_dump of the server's major (PG_CONFIG, as test/harness/server.sh).
upgrade_bin=${HC_PGROOT:-}$("${PG_CONFIG:-pg_config}" --bindir)
work=$(mktemp -d)
q() { local d=$1; shift; psql -X -qAt -v ON_ERROR_STOP=1 -d "$d" "$@"; }
# The version an update ends at and a fresh install gives: the control file's.
current=$(sed -n "s/^default_version *= *'\(.*\)'/\1/p" "$(dirname "${BASH_SOURCE[0]}")/../../holdcommit.control")

# upgrade_scratch OLD NEW ROLE... [-- LATER...]: the databases $old and $new
# and the ROLEs are dropped (left over from an earlier run) and created, and
# dropped again on exit with $work (a scratch directory); a role the path
# creates itself (LATER) is only dropped.  A path that cannot have them ends.
upgrade_scratch() {
    old=$1 new=$2
    shift 2
    local create=(-c "CREATE DATABASE $old" -c "CREATE DATABASE $new")
    upgrade_roles=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        create+=(-c "CREATE ROLE $1")
        upgrade_roles+=("$1")
        shift
    done
    [ $# -gt 0 ] && shift
    upgrade_roles+=("$@")
    trap 'upgrade_drop; rm -rf "$work"' EXIT
    upgrade_drop
    if ! psql -X -q -v ON_ERROR_STOP=1 -d postgres "${create[@]}" >/dev/null; then
        echo "not ok - scratch databases and roles"
        exit 0
    fi
}
upgrade_drop() {
    local d r
    for d in "$old" "$new"; do
        psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $d WITH (FORCE)" >/dev/null 2>&1
    done
    for r in "${upgrade_roles[@]}"; do
        psql -X -q -d postgres -c "DROP ROLE IF EXISTS $r" >/dev/null 2>&1
    done
}

# The schema.  Normalized away is only what must differ between two
# databases, or between a table altered in place and one created whole:
# OIDs, LSNs and transaction ids that binary-upgrade mode preserves, the
# sequence position, placeholders of dropped columns, the stored default of a
# column added later (atthasmissing), an ACL entry that only spells out the
# default (left by a REVOKE in the update script), psql's \restrict keys.
# A column added by an update script must come last in the install script
# too: column order is schema.
schema_dump() {
    "$upgrade_bin/pg_dump" --schema-only --binary-upgrade -d "$1" 2>"$work/$1.err" |
        perl -0777 -pe '
            s/^\\(un)?restrict .*\n//mg;
            s/^.*(binary_upgrade_set_next_|binary_upgrade_set_missing_value).*\n//mg;
            s/^-- set missing value\.\n//mg;
            s/^SET relfrozenxid = .*\n//mg;
            s/^WHERE oid = .*\n//mg;
            s/^.*pg_catalog\.setval\(.*\n//mg;
            s/^-- For binary upgrade, recreate dropped column\.\nUPDATE pg_catalog\.pg_attribute\n(.*\n){3}.*DROP (COLUMN|ATTRIBUTE) "\.+pg\.dropped\.\d+\.+";\n//mg;
            s/^[ \t]*"\.+pg\.dropped\.\d+\.+" .*\n//mg;
            s/,\n\);/\n);/g;
            s/^--\n-- Name: [^\n]*; Type: ACL; [^\n]*\n--\n\nSELECT pg_catalog\.binary_upgrade_set_record_init_privs\(true\);\nSELECT pg_catalog\.binary_upgrade_set_record_init_privs\(false\);\n//mg;
            s/\n{3,}/\n\n/g;
            s/(binary_upgrade_create_empty_extension.*)/my $l = $1; $l =~ s{\b\d{4,}\b}{OID}g; $l/e;
        ' >"$work/$1.sql"
}

check_same_schema() {
    local old=$1 new=$2 what=$3
    schema_dump "$old"
    schema_dump "$new"
    if [ -s "$work/$old.sql" ] && [ -s "$work/$new.sql" ] && cmp -s "$work/$old.sql" "$work/$new.sql"; then
        echo "ok - pg_dump --schema-only --binary-upgrade: $what equals a fresh install ($(
            grep -c '^ALTER EXTENSION holdcommit ADD' "$work/$new.sql") members)"
    else
        echo "not ok - pg_dump --schema-only --binary-upgrade: $what equals a fresh install"
        cat "$work/$old.err" "$work/$new.err" | sed 's/^/#   /'
        diff -u --label "$what" --label "fresh install" "$work/$old.sql" "$work/$new.sql" |
            head -200 | sed 's/^/#   /'
    fi
    check "pg_dump keeps the same tables' data after $what" \
        "$(psql -X -qAt -d "$old" -c "$upgrade_config")" "$(psql -X -qAt -d "$new" -c "$upgrade_config")"
}
upgrade_config="SELECT string_agg(c::regclass::text, ' ' ORDER BY c::regclass::text)
                  FROM pg_extension, unnest(extconfig) c WHERE extname = 'holdcommit'"

# Every privilege ROLE has on the extension's schema, functions, tables and
# views; and the GRANT lines a plain pg_dump writes for it (a grant the update
# script made would be the extension's initial privilege, left out of a dump).
role_privileges() {
    psql -X -qAt -d "$1" -c "
        WITH e AS (SELECT extnamespace FROM pg_extension WHERE extname = 'holdcommit')
        SELECT string_agg(p, ' ' ORDER BY p) FROM (
            SELECT 'f:' || p.oid::regprocedure::text AS p FROM pg_proc p, e
             WHERE p.pronamespace = e.extnamespace AND has_function_privilege('$2', p.oid, 'EXECUTE')
            UNION ALL
            SELECT c.relname || ':' || x.priv FROM pg_class c, e,
                   unnest('{SELECT,INSERT,UPDATE,DELETE,TRUNCATE}'::text[]) x (priv)
             WHERE c.relnamespace = e.extnamespace AND c.relkind IN ('r', 'v')
               AND has_table_privilege('$2', c.oid, x.priv)
            UNION ALL
            SELECT 's:' || has_schema_privilege('$2', e.extnamespace, 'USAGE') FROM e) s"
}

check_same_grants() {
    local old=$1 new=$2 role=$3
    check "$role has a fresh install's privileges" "$(role_privileges "$old" "$role")" \
        "$(role_privileges "$new" "$role")"
    "$upgrade_bin/pg_dump" --schema-only -d "$old" 2>&1 | grep -E "^(GRANT|REVOKE).* $role;\$" | sort >"$work/grants.old"
    "$upgrade_bin/pg_dump" --schema-only -d "$new" 2>&1 | grep -E "^(GRANT|REVOKE).* $role;\$" | sort >"$work/grants.new"
    if [ -s "$work/grants.new" ] && cmp -s "$work/grants.old" "$work/grants.new"; then
        echo "ok - pg_dump keeps $role's grants as for a fresh install"
    else
        echo "not ok - pg_dump keeps $role's grants as for a fresh install"
        comm -13 "$work/grants.old" "$work/grants.new" | sed 's/^/#   only on a fresh install: /'
        comm -23 "$work/grants.old" "$work/grants.new" | sed 's/^/#   only after the update: /'
    fi
}

# The tour (test/upgrade/upgrade-tour.sql) in both databases, with the extension's
# schema first on the search_path: the same answers.  And it names every
# function and view of the extension (an event trigger's function by its
# trigger's refusal), so that a new one cannot be left out.
check_tour() {
    local old=$1 new=$2 tour calls missing d
    tour=$(dirname "${BASH_SOURCE[0]}")/upgrade-tour.sql
    for d in "$old" "$new"; do
        psql -X -d "$d" -c "SELECT set_config('search_path', extnamespace::regnamespace || ', public', false)
                              FROM pg_extension WHERE extname = 'holdcommit'" -f "$tour" >"$work/tour.$d" 2>&1
    done
    check "the tour of every function runs in a fresh install" "$(grep -c 'ERROR' "$work/tour.$new")" "4"
    if cmp -s "$work/tour.$old" "$work/tour.$new"; then
        echo "ok - every function answers as in a fresh install ($(wc -l <"$work/tour.$new") lines)"
    else
        echo "not ok - every function answers as in a fresh install"
        diff -u --label updated --label fresh "$work/tour.$old" "$work/tour.$new" | head -60 | sed 's/^/#   /'
    fi
    calls=$(grep -v '^[[:space:]]*--' "$tour")
    missing=$(psql -X -qAt -d "$new" -c "
        SELECT coalesce(p.proname, c.relname) FROM pg_depend d
          LEFT JOIN pg_proc p ON d.classid = 'pg_proc'::regclass AND p.oid = d.objid
          LEFT JOIN pg_class c ON d.classid = 'pg_class'::regclass AND c.oid = d.objid
         WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
           AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'holdcommit')
           AND (p.prorettype IS DISTINCT FROM 'event_trigger'::regtype)
           AND (p.oid IS NOT NULL OR c.relkind IN ('r', 'v')) ORDER BY 1" |
        while read -r name; do grep -qw "$name" <<<"$calls" || echo "$name"; done | tr '\n' ' ')
    check "the tour calls every function and reads every table and view" "${missing:-none}" "none"
}
