# Shared by test/packaging/package.sh and test/packaging/sanitize.sh (sourced,
# with $port set): $root, a scratch directory the server's user can read, for
# a private copy of the PostgreSQL 15 tree and what is installed into it; on
# exit, or when interrupted, the throwaway server of that tree on $port is
# stopped and $root removed.
#   private_tree [MAJOR]   copy the system's PostgreSQL MAJOR (default 15) into
#                          $root, minus any holdcommit files; exits 0 after
#                          "not ok" if it cannot
root=$(mktemp -d)
chmod 755 "$root"

private_tree_cleanup() {
    HC_PGROOT=$root test/harness/server.sh stop "$port"
    rm -rf "$root"
}
trap private_tree_cleanup EXIT
trap "exit 1" INT TERM

private_tree() {
    local major=${1:-15}
    mkdir -p "$root/usr/lib/postgresql" "$root/usr/share/postgresql"
    cp -a "/usr/lib/postgresql/$major" "$root/usr/lib/postgresql/" &&
    cp -a "/usr/share/postgresql/$major" "$root/usr/share/postgresql/" || { echo "not ok - copy the PostgreSQL $major tree"; exit 0; }
    rm -f "$root/usr/lib/postgresql/$major/lib/holdcommit.so" "$root/usr/share/postgresql/$major/extension"/holdcommit[.-]*
}
