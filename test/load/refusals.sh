#!/usr/bin/env bash
# Refusals stay out of the server log unless holdcommit.log_refusals is on:
# 200 refused holds and reserves add no line to the log; with the setting
# on, each is logged.  Needs the harness's server (its log file).
. "$(dirname "$0")/lib.bash"
load_setup hc_load_refusals 2
log=${TMPDIR:-/tmp}/holdcommit-$PGPORT/server.log
[ -r "$log" ] || { echo "not ok - server log readable at $log"; exit 0; }

q "CREATE EXTENSION holdcommit" >/dev/null
q "SELECT hc_asset_add('REF-1'), hc_stock_set('REF-P', 0)" >/dev/null
q "SELECT hc_hold('REF-1', 'owner', 'ref-owner')" >/dev/null

refuse() {
    psql -X -q -d "$db" -v ON_ERROR_STOP=0 -c "SET holdcommit.log_refusals = $1" \
        -c "SELECT hc_hold('REF-1', 'b$2', 'ref-hold-$2')" \
        -c "SELECT hc_reserve('REF-P', 1, 'b$2', 'ref-stock-$2')" 2>&1 | grep -c '^ERROR'
}
count() { grep -cE 'asset "REF-1" is not available|insufficient stock for product "REF-P"' "$log"; }

before=$(count)
errors=0
for i in $(seq 100); do errors=$((errors + $(refuse off "$i"))); done
check "the clients got 200 refusals" "$errors" "200"
check "refusals leave no line in the server log" "$(( $(count) - before ))" "0"
before=$(count)
for i in $(seq 101 105); do refuse on "$i" >/dev/null; done
check "with holdcommit.log_refusals on, each refusal is logged" "$(( $(count) - before ))" "10"
