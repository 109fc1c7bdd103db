#!/usr/bin/env bash
# Runs every code snippet that README.md and doc/*.md print, so that no recipe can drift
# from the code.  One TAP line per snippet:
#     ok - README.md:123 sql
#     not ok - doc/locking.md:40 sql: ERROR:  ...
#     ok - doc/operations.md:12 sh # SKIP illustration: builds and installs a package
#
# Snippets are the fenced blocks tagged ```sql, ```sh / ```bash / ```shell, ```python and
# ```js / ```javascript; blocks without a tag or with another one (signatures, output,
# YAML) are not snippets.  The line right before a fence (blank lines aside) may carry a
# marker:
#     <!-- snippet: illustration REASON -->  not run; counted as skipped, with the reason
#                                            (an output sample, a command that needs its
#                                            own server, port, network or the whole suite)
#     <!-- snippet: error SQLSTATE -->       an SQL snippet meant to fail: it passes only
#                                            if it raises that SQLSTATE
#     <!-- snippet: install -->              the README's installation of the extension;
#                                            every other document runs it first
#     <!-- snippet: run-by SCRIPT NAME -->   not run here: SCRIPT (a suite of make test)
#                                            extracts the block by NAME and runs it as
#                                            printed (e.g. the pg_cron recipe, which needs
#                                            pg_cron's database and schedules jobs); counted
#                                            as skipped.  It may precede any fenced block
#                                            (a postgresql.conf excerpt too)
#
# Each document runs in a fresh database of its own (hc_snippets_<name>), its snippets in
# order, so a document's snippets may build on each other and documents do not depend on
# each other.  The SQL snippets of a document run in one psql session (psql -X
# -v ON_ERROR_STOP=1), as a reader types them into one psql: a document that has no
# install snippet of its own starts with the README's, which installs holdcommit in its
# own schema and sets the session's search_path as the README tells a user to.  After a
# snippet fails, the document's later snippets are not run (not ok, "not run").
#
# Shell, Python and JavaScript snippets run as their own process, from the top of the
# tree, and connect the way libpq's clients do by default: PGHOST, PGPORT, PGUSER and
# PGDATABASE (the document's database) are in their environment.  Shell: bash -e -o
# pipefail.  Python: /usr/bin/python3 (Debian's, with psycopg 3), with clients/python on
# PYTHONPATH, so that `import holdcommit` is the package of this tree (its own suite,
# clients/python/test.sh, tests it installed by pip).  JavaScript: node, as
# an ES module, with node-postgres installed once per run by `npm install pg` into a
# temporary directory.  Roles a document creates are dropped after it.
# The JavaScript snippets may import this tree's Node package ('holdcommit', clients/node),
# installed there with pg (--install-links: copied as from a tarball, not linked).
#
# Needs PGHOST, PGPORT, PGUSER (a superuser) for a running server with holdcommit
# installed.  Exits 0 when it ran (failures are the not ok lines), non-zero only if it
# could not run at all.
set -uo pipefail
trap '' PIPE
cd "$(dirname "$0")/../.."
top=$PWD

: "${PGHOST:?set PGHOST, PGPORT and PGUSER}" "${PGPORT:?}" "${PGUSER:?}"
export PGHOST PGPORT PGUSER
unset PGDATABASE PGSERVICE
# A server's own default search_path (the test server's has holdcommit on it) must not
# stand in for the search_path the documents tell their reader to set.
export PGOPTIONS='-c search_path=public'
timeout_s=${HC_SNIPPET_TIMEOUT:-300}
docs=(README.md doc/*.md)

work=$(mktemp -d)
session_pid=
cleanup() {
    [ -n "$session_pid" ] && kill "$session_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

admin() { psql -X -qAt -v ON_ERROR_STOP=1 -d postgres "$@"; }
admin_in() { local db=$1; shift; psql -X -qAt -v ON_ERROR_STOP=1 -d "$db" "$@"; }
if ! admin -c "SELECT 1" >/dev/null 2>"$work/err"; then
    echo "Bail out! cannot connect to the server: $(head -1 "$work/err")"
    exit 2
fi
if [ "$(admin -c "SELECT count(*) FROM pg_available_extensions WHERE name = 'holdcommit'")" != 1 ]; then
    echo "Bail out! holdcommit is not installed on the server"
    exit 2
fi

# Extract: one directory entry per snippet, $work/s/NNNN.body, and one manifest line
# "NNNN<TAB>file<TAB>line<TAB>lang<TAB>marker" (lang "-" for a marker that precedes no
# snippet: an error in the markdown).
mkdir "$work/s"
export WORK=$work
perl -e '
    my %lang = (sql => "sql", sh => "sh", bash => "sh", shell => "sh", python => "python",
                py => "python", js => "js", javascript => "js");
    my $n = 0;
    for my $file (@ARGV) {
        open my $fh, "<", $file or die "$file: $!\n";
        my @lines = <$fh>;
        my ($marker, $marker_line) = ("", 0);
        for (my $i = 0; $i < @lines; $i++) {
            my $l = $lines[$i];
            if ($l =~ /^\s*<!--\s*snippet:\s*(.*?)\s*-->\s*$/) {
                print join("\t", sprintf("%04d", ++$n), $file, $marker_line, "-", $marker), "\n"
                    if $marker ne "";
                ($marker, $marker_line) = ($1, $i + 1);
                next;
            }
            next if $l =~ /^\s*$/;
            if ($l =~ /^(\s*)(`{3,})\s*([A-Za-z0-9_+-]*)\s*$/) {
                my ($indent, $ticks, $tag) = ($1, $2, lc $3);
                my @body;
                my $j = $i + 1;
                for (; $j < @lines && $lines[$j] !~ /^\s*\Q$ticks\E\s*$/; $j++) {
                    (my $b = $lines[$j]) =~ s/^\Q$indent\E//;
                    push @body, $b;
                }
                if (exists $lang{$tag}) {
                    my $id = sprintf("%04d", ++$n);
                    open my $out, ">", "$ENV{WORK}/s/$id.body" or die;
                    print $out @body;
                    close $out;
                    print join("\t", $id, $file, $i + 1, $lang{$tag}, $marker), "\n";
                } elsif ($marker =~ /^run-by\b/) {
                    # Another suite runs it, whatever its language.
                    print join("\t", sprintf("%04d", ++$n), $file, $i + 1, $tag =~ /^\w+$/ ? $tag : "block", $marker), "\n";
                } elsif ($marker ne "") {
                    print join("\t", sprintf("%04d", ++$n), $file, $marker_line, "-", $marker), "\n";
                }
                ($marker, $marker_line) = ("", 0);
                $i = $j;
                next;
            }
            if ($marker ne "") {
                print join("\t", sprintf("%04d", ++$n), $file, $marker_line, "-", $marker), "\n";
                ($marker, $marker_line) = ("", 0);
            }
        }
    }' "${docs[@]}" >"$work/manifest" 2>"$work/err" || {
    echo "Bail out! cannot read the documents: $(head -1 "$work/err")"
    exit 2
}

install_id=$(awk -F'\t' '$2 == "README.md" && $4 == "sql" && $5 == "install" { print $1 }' "$work/manifest")
if [ "$(wc -w <<<"$install_id")" -ne 1 ]; then
    echo "Bail out! README.md needs exactly one sql snippet marked <!-- snippet: install -->"
    exit 2
fi
install_line=$(awk -F'\t' -v id="$install_id" '$1 == id { print $3 }' "$work/manifest")

total=0 passed=0 skipped=0 failed=0
report() {  # report ok|skip|fail "label" ["message"]
    total=$((total + 1))
    case $1 in
    ok) passed=$((passed + 1)); echo "ok - $2" ;;
    skip) skipped=$((skipped + 1)); echo "ok - $2 # SKIP $3" ;;
    fail) failed=$((failed + 1)); echo "not ok - $2: $3" ;;
    esac
}
# The line of a failure's output worth a TAP line: the first error, else the last line.
error_line() {
    local line
    line=$(grep -m1 -E 'ERROR|Error|error' "$1")
    [ -n "$line" ] || line=$(grep -v '^[[:space:]]*$' "$1" | tail -1)
    printf '%s' "${line:-failed without a message}" | tr -s '\t ' ' ' | cut -c1-300
}
diagnostics() { sed -n '1,15{s/^/#   /;p}' "$1"; }

# The document's psql session: a coprocess fed one snippet at a time.  After each
# snippet it echoes "@@end ID SQLSTATE", the SQLSTATE of the last error since the
# snippet began (00000: none).
session_start() {
    : >"$work/session.err"
    coproc SESSION { exec psql -X -q -v ON_ERROR_STOP=1 -d "$1" 2>>"$work/session.err"; }
    session_pid=$SESSION_PID
    exec {session_in}<&"${SESSION[0]}" {session_out}>&"${SESSION[1]}"
}
session_stop() {
    [ -n "$session_pid" ] || return 0
    printf '\\q\n' >&"$session_out" 2>/dev/null
    exec {session_in}<&- {session_out}>&-
    wait "$session_pid" 2>/dev/null
    session_pid=
}
# session_run ID EXPECTED: runs snippet ID; sets run_state (ok, error SQLSTATE, dead,
# timeout) and leaves the snippet's stderr in $work/out.
session_run() {
    local id=$1 expected=$2 offset line state=dead
    offset=$(stat -c %s "$work/session.err")
    {
        printf '\\set LAST_ERROR_SQLSTATE 00000\n'
        [ -n "$expected" ] && printf '\\set ON_ERROR_STOP 0\n'
        cat "$work/s/$id.body"
        printf '\n\\echo @@end %s :LAST_ERROR_SQLSTATE\n' "$id"
        [ -n "$expected" ] && printf '\\set ON_ERROR_STOP 1\n'
    } >&"$session_out" 2>/dev/null
    while true; do
        if ! IFS= read -r -t "$timeout_s" line <&"$session_in"; then
            [ $? -gt 128 ] && state=timeout
            break
        fi
        [ -n "${HC_SNIPPETS_VERBOSE:-}" ] && printf '#   | %s\n' "$line"
        if [[ $line == "@@end $id "* ]]; then
            state=${line#"@@end $id "}
            break
        fi
    done
    tail -c +"$((offset + 1))" "$work/session.err" >"$work/out"
    run_state=$state
}

# A shell, Python or JavaScript snippet: its own process, from the top of the tree.
node_dir=
process_run() {  # process_run ID LANG DB; returns its status, output in $work/out
    local id=$1 lang=$2 db=$3 file
    case $lang in
    sh) cmd=(bash -e -o pipefail "$work/s/$id.body") ;;
    python) cmd=(env "PYTHONPATH=$top/clients/python${PYTHONPATH:+:$PYTHONPATH}" /usr/bin/python3 "$work/s/$id.body") ;;
    js)
        if [ -z "$node_dir" ]; then
            node_dir=$work/node
            mkdir -p "$node_dir"
            if ! (cd "$node_dir" && npm install --no-audit --no-fund --silent --install-links pg "$top/clients/node") >"$work/npm.log" 2>&1; then
                node_dir=failed
            fi
        fi
        if [ "$node_dir" = failed ]; then
            echo "npm install pg ./clients/node failed: $(error_line "$work/npm.log")" >"$work/out"
            return 1
        fi
        file=$node_dir/snippet-$id.mjs
        cp "$work/s/$id.body" "$file"
        cmd=(node "$file")
        ;;
    esac
    PGDATABASE=$db timeout "$timeout_s" "${cmd[@]}" >"$work/out" 2>&1 </dev/null
}

roles_before=$(admin -c "SELECT rolname FROM pg_roles ORDER BY 1")

for doc in "${docs[@]}"; do
    awk -F'\t' -v d="$doc" '$2 == d' "$work/manifest" >"$work/doc"
    [ -s "$work/doc" ] || continue
    db=hc_snippets_$(basename "$doc" .md | tr -c 'a-zA-Z0-9\n' _ | tr 'A-Z' 'a-z')
    dead=

    # Marker problems, illustrations and the blocks other suites run need no database.
    needs_db=$(awk -F'\t' '$4 != "-" && $5 !~ /^(illustration|run-by)/' "$work/doc" | wc -l)
    if [ "$needs_db" -gt 0 ]; then
        admin -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1
        if ! admin -c "CREATE DATABASE $db" >/dev/null 2>"$work/out"; then
            dead="cannot create database $db: $(error_line "$work/out")"
        else
            session_start "$db"
            if ! awk -F'\t' '$5 == "install"' "$work/doc" | grep -q .; then
                echo "# $doc: holdcommit installed as README.md:$install_line does"
                session_run "$install_id" ""
                if [ "$run_state" != 00000 ]; then
                    dead="the README's installation failed: $(error_line "$work/out")"
                fi
            fi
        fi
    fi

    while IFS=$'\t' read -r id file line lang marker; do
        label="$file:$line $lang"
        kind=${marker%%[ :]*}
        arg=${marker#"$kind"}
        arg=${arg#:}
        arg=${arg# }
        if [ "$lang" = - ]; then
            report fail "$file:$line" "the marker <!-- snippet: $marker --> is not right before a sql, sh, python or js block"
            continue
        fi
        case $kind in
        "" | install) expected= ;;
        illustration)
            report skip "$label" "illustration${arg:+: $arg}"
            continue
            ;;
        run-by)
            # run-by SCRIPT NAME: SCRIPT must be a file of the tree that extracts run-by blocks.
            read -r script name _ <<<"$arg"
            if [ -z "$name" ] || [ ! -f "$top/$script" ] || ! grep -q 'run-by' "$top/$script"; then
                report fail "$label" "<!-- snippet: run-by SCRIPT NAME --> needs a NAME and a SCRIPT of the tree that extracts it"
            else
                report skip "$label" "run by $script ($name)"
            fi
            continue
            ;;
        error)
            expected=$arg
            if [ "$lang" != sql ] || ! [[ $expected =~ ^[0-9A-Z]{5}$ ]]; then
                report fail "$label" "<!-- snippet: error SQLSTATE --> needs an sql block and a 5-character SQLSTATE"
                continue
            fi
            ;;
        *)
            report fail "$label" "unknown marker <!-- snippet: $marker -->"
            continue
            ;;
        esac
        if [ -n "$dead" ]; then
            report fail "$label" "not run: $dead"
            continue
        fi
        if [ "$lang" = sql ]; then
            # What a reader would paste into psql: the last statement ends with a semicolon.
            if ! sed -e 's/--.*$//' "$work/s/$id.body" | tr -d ' \t\n' | grep -qE '(;|\\[a-z]+[^;]*)$'; then
                report fail "$label" "its last statement does not end with a semicolon"
                continue
            fi
            session_run "$id" "$expected"
            case $run_state in
            timeout)
                report fail "$label" "timed out after $timeout_s s"
                dead="an earlier snippet ($file:$line) timed out"
                kill "$session_pid" 2>/dev/null
                ;;
            dead)
                report fail "$label" "$(error_line "$work/out")"
                diagnostics "$work/out"
                dead="an earlier snippet ($file:$line) failed"
                ;;
            *)
                if [ -z "$expected" ] && [ "$run_state" = 00000 ]; then
                    report ok "$label"
                elif [ -n "$expected" ] && [ "$run_state" = "$expected" ]; then
                    report ok "$label"
                elif [ -n "$expected" ] && [ "$run_state" = 00000 ]; then
                    report fail "$label" "expected SQLSTATE $expected, but nothing failed"
                else
                    report fail "$label" "expected SQLSTATE ${expected:-00000}, got $run_state: $(error_line "$work/out")"
                    diagnostics "$work/out"
                fi
                ;;
            esac
        else
            if process_run "$id" "$lang" "$db"; then
                report ok "$label"
                [ -n "${HC_SNIPPETS_VERBOSE:-}" ] && sed 's/^/#   | /' "$work/out"
            else
                report fail "$label" "$(error_line "$work/out")"
                diagnostics "$work/out"
            fi
        fi
    done <"$work/doc"

    session_stop
    if [ "$needs_db" -gt 0 ]; then
        # Roles are the server's, not the database's: drop those this document created.
        for role in $(comm -13 <(echo "$roles_before") <(admin -c "SELECT rolname FROM pg_roles ORDER BY 1")); do
            admin_in "$db" -c "DROP OWNED BY \"$role\"" >/dev/null 2>&1
        done
        admin -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1
        for role in $(comm -13 <(echo "$roles_before") <(admin -c "SELECT rolname FROM pg_roles ORDER BY 1")); do
            admin -c "DROP ROLE \"$role\"" >/dev/null 2>&1 || echo "# could not drop role $role"
        done
    fi
done

echo "1..$total"
echo "# snippets: $total, $passed ok, $skipped skipped, $failed not ok"
exit 0
