"""Run every query of queries.yaml the way postgres_exporter would, and check what it returns.

    /usr/bin/python3 examples/postgres_exporter/check.py --admin-dsn DSN

With a superuser's connection (--admin-dsn, to any database of the server) it creates a
database with the extension, a login role given hc_grant_monitor() (all the exporter needs) and a
known state: an available, a held, an expired-but-not-swept and a sold asset; a product with
a live and an expired reservation.  Then, connected as that role, each query must run, return
exactly the columns its metrics declare, numbers in the GAUGE/COUNTER columns, and for the
holds and stock the figures of that state (the alert of the README rests on them).  A query
that reads an hc_* relation this build does not have is skipped, with a "# SKIP" line.
Then postgres_exporter itself (Debian's prometheus-postgres-exporter) runs the queries left,
as that role, on --exporter-port (HC_EXPORTER_PORT, default 24338), and its metrics page must
show every metric of the file with those figures.
Prints "ok - ..." / "not ok - ..." lines (counted by make test); exits 0.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

import psycopg
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(HERE, "..", "..", "test", "harness"))
from tap import check  # noqa: E402  (test/harness/tap.py)

DB = "hc_exporter"
ROLE = "hc_exporter"
EXPORTER = "prometheus-postgres-exporter"
USAGES = {"LABEL", "GAUGE", "COUNTER", "DISCARD", "DURATION", "MAPPEDMETRIC"}

# The state set up below, as the metrics must show it (namespace -> {column or label: value}).
EXPECTED = {
    "holdcommit_assets": {"AVAILABLE": 1, "HELD": 3, "HELD_EXPIRED": 1, "SOLD": 1},
    "holdcommit_holds": {"HELD": 4, "COMMITTED": 1, "RELEASED": 0, "EXPIRED": 0},
    "holdcommit_group_holds": {"HELD": 1, "COMMITTED": 0, "RELEASED": 0, "EXPIRED": 0},
    "holdcommit_holds_overdue": {"count": 1},
    "holdcommit_stock": {"products": 1, "stock_units": 10, "reserved_units": 5, "available_units": 5,
                         "sold_out_products": 0},
    "holdcommit_stock_reservations_overdue": {"count": 1, "units": 2},
}




def set_up(admin_dsn):
    with psycopg.connect(admin_dsn, autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        c.execute(f"DROP ROLE IF EXISTS {ROLE}")
        c.execute(f"CREATE DATABASE {DB}")
        c.execute(f"CREATE ROLE {ROLE} LOGIN NOSUPERUSER")
    admin = psycopg.connect(admin_dsn, dbname=DB, autocommit=True)
    admin.execute("CREATE EXTENSION holdcommit")
    admin.execute("SELECT hc_grant_monitor(%s)", [ROLE])
    admin.execute("SELECT hc_asset_add(a) FROM unnest(ARRAY['A-free', 'A-held', 'A-late', 'A-sold']) a")
    admin.execute("SELECT hc_hold('A-held', 'b1', 'k-held')")
    admin.execute("SELECT hc_asset_add(a) FROM unnest(ARRAY['G-1', 'G-2']) a")
    admin.execute("SELECT count(*) FROM hc_hold_many(ARRAY['G-1', 'G-2'], 'b6', 'k-group')")
    late = admin.execute("SELECT reservation_id FROM hc_hold('A-late', 'b2', 'k-late')").fetchone()[0]
    sold = admin.execute("SELECT reservation_id FROM hc_hold('A-sold', 'b3', 'k-sold')").fetchone()[0]
    admin.execute("SELECT hc_commit(%s)", [sold])
    admin.execute("SELECT hc_stock_set('SKU', 10)")
    admin.execute("SELECT hc_reserve('SKU', 3, 'b4', 'k-live')")
    gone = admin.execute("SELECT reservation_id FROM hc_reserve('SKU', 2, 'b5', 'k-gone')").fetchone()[0]
    # Time passes for two of them: made an hour ago with a 10-minute ttl, they expired 50
    # minutes ago, and nothing has swept them yet.
    admin.execute("UPDATE hc_assets SET hold_expires_at = hold_expires_at - interval '1 hour'"
                  " WHERE current_reservation_id = %s", [late])
    admin.execute("UPDATE hc_reservations SET expires_at = expires_at - interval '1 hour',"
                  " created_at = created_at - interval '1 hour' WHERE id = %s", [late])
    admin.execute("UPDATE hc_stock_order_lines SET expires_at = expires_at - interval '1 hour'"
                  " WHERE reservation_id = %s", [gone])
    admin.execute("UPDATE hc_stock_orders SET expires_at = expires_at - interval '1 hour',"
                  " created_at = created_at - interval '1 hour' WHERE id = %s", [gone])
    return admin


def check_namespace(name, spec, admin, exporter):
    """One query of the file: its shape, then what it returns."""
    metrics = spec.get("metrics") or []
    columns = [next(iter(m)) for m in metrics if isinstance(m, dict) and len(m) == 1]
    usages = {c: (m[c] or {}).get("usage") for m, c in zip(metrics, columns)}
    check(f"{name}: a query and one column name per metric, each with a known usage",
          (isinstance(spec.get("query"), str), len(columns) == len(metrics) > 0,
           all(u in USAGES for u in usages.values())), (True, True, True))

    relations = sorted(set(re.findall(r"\bhc_[a-z_]+\b", spec.get("query", ""))))
    missing = [r for r in relations
               if admin.execute("SELECT to_regclass(%s) IS NULL", [r]).fetchone()[0]]
    if missing:
        print(f"# SKIP {name}: {', '.join(missing)} does not exist in this build of holdcommit")
        return False

    try:
        cur = exporter.execute(spec["query"])
        rows = cur.fetchall()
        got_columns = [d.name for d in cur.description]
    except psycopg.Error as e:
        check(f"{name}: runs as a role given hc_grant_monitor()", str(e).strip(), "no error")
        return True
    check(f"{name}: runs as a role given hc_grant_monitor(), returns rows", len(rows) > 0, True)
    check(f"{name}: returns exactly the declared columns", got_columns, columns)
    numbers = [r[i] for r in rows for i, c in enumerate(got_columns) if usages.get(c) in ("GAUGE", "COUNTER")]
    check(f"{name}: every GAUGE and COUNTER value is a number",
          all(isinstance(v, (int, float)) for v in numbers), True)

    if name in EXPECTED:
        labels = [i for i, c in enumerate(got_columns) if usages.get(c) == "LABEL"]
        if labels:
            got = {r[labels[0]]: r[got_columns.index("count")] for r in rows}
        else:
            got = {c: rows[0][i] for i, c in enumerate(got_columns) if c in EXPECTED[name]}
        check(f"{name}: shows the state set up", got, EXPECTED[name])
        if name.endswith("_overdue"):
            seconds = rows[0][got_columns.index("oldest_seconds")]
            check(f"{name}: the oldest expired 50 minutes ago (ttl 10 minutes, aged 1 hour)",
                  2990 < seconds < 3100, True)
    return True


def check_monitor_only(exporter):
    """The monitoring role reads the figures and nothing else: no table, no key, no call."""
    refused = []
    for sql in ("SELECT count(*) FROM holdcommit.hc_assets",
                "SELECT buyer_id FROM holdcommit.hc_reservations",
                "SELECT key FROM holdcommit.hc_idempotency_keys",
                "SELECT count(*) FROM holdcommit.hc_ledger",
                "SELECT holdcommit.hc_hold('A-free', 'mallory', 'k-monitor')",
                "SELECT holdcommit.hc_sweep()"):
        try:
            exporter.execute(sql)
            refused.append("allowed: " + sql)
        except psycopg.errors.InsufficientPrivilege:
            refused.append("42501")
    check("the monitoring role may read no table, key or ledger, and call nothing",
          refused, ["42501"] * 6)


def scrape(url):
    """The samples of a Prometheus text page: {'name{labels}': value}."""
    samples = {}
    with urllib.request.urlopen(url, timeout=30) as r:
        for line in r.read().decode().splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                samples[re.sub(r'server="[^"]*",?', "", key).replace("{}", "")] = float(value)
    return samples


def check_with_exporter(queries, present, admin, port):
    """Run postgres_exporter itself with the queries this build can answer, as the role, and
    read its metrics page: the file loads, every query runs, every metric is there."""
    if not shutil.which(EXPORTER):
        print(f"# SKIP the real exporter: {EXPORTER} is not installed (test/harness/deps.sh installs it)")
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "queries.yaml")
        with open(path, "w", encoding="utf-8") as f:
            yaml.safe_dump({n: queries[n] for n in present}, f)
        params = admin.info.get_parameters()
        env = dict(os.environ, DATA_SOURCE_NAME=(f"host={params.get('host', '/var/run/postgresql')} "
                                                 f"port={params.get('port', '5432')} dbname={DB} "
                                                 f"user={ROLE} sslmode=disable"))
        # The port may be taken (by a connection's ephemeral port, if it lies in that range): then the next ones.
        for port in range(port, port + 500, 100):
            url = f"http://127.0.0.1:{port}/metrics"
            with open(os.path.join(tmp, "exporter.log"), "w") as log:
                proc = subprocess.Popen([EXPORTER, f"--extend.query-path={path}",
                                         f"--web.listen-address=127.0.0.1:{port}",
                                         "--disable-default-metrics", "--disable-settings-metrics"],
                                        env=env, stdout=log, stderr=subprocess.STDOUT)
                try:
                    samples = None
                    for _ in range(100):
                        try:
                            samples = scrape(url)
                            break
                        except OSError:
                            if proc.poll() is not None:
                                break
                            time.sleep(0.1)
                finally:
                    proc.terminate()
                    proc.wait()
            if samples is not None or "address already in use" not in open(log.name).read():
                break
        if samples is None:
            check(f"{EXPORTER} serves {url}", open(os.path.join(tmp, "exporter.log")).read()[-500:], "")
            return
    check("postgres_exporter loads the file and every query runs",
          ([v for k, v in samples.items() if k.startswith("pg_exporter_user_queries_load_error")],
           samples.get("pg_exporter_last_scrape_error")), ([0.0], 0.0))
    wanted = sorted(f"{n}_{next(iter(m))}" for n in present for m in queries[n]["metrics"]
                    if next(iter(m.values())).get("usage") in ("GAUGE", "COUNTER"))
    names = {k.split("{")[0] for k in samples}
    check("postgres_exporter publishes every metric of the file", [w for w in wanted if w not in names], [])
    check("... with the figures of the state set up (the alert's: one overdue hold)",
          (samples.get("holdcommit_holds_overdue_count"),
           samples.get('holdcommit_assets_count{status="HELD_EXPIRED"}'),
           samples.get("holdcommit_stock_reservations_overdue_units")), (1.0, 1.0, 2.0))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--admin-dsn", required=True)
    ap.add_argument("--queries", default=os.path.join(HERE, "queries.yaml"))
    ap.add_argument("--exporter-port", type=int, default=int(os.environ.get("HC_EXPORTER_PORT", "24338")))
    args = ap.parse_args()

    with open(args.queries, encoding="utf-8") as f:
        queries = yaml.safe_load(f)
    check("queries.yaml is a mapping of namespaces", isinstance(queries, dict) and len(queries) > 0, True)
    try:
        admin = set_up(args.admin_dsn)
    except psycopg.Error as e:
        check("set up a database with the extension and the exporter's role", str(e).strip(), "no error")
        return 0
    try:
        with psycopg.connect(args.admin_dsn, dbname=DB, user=ROLE, autocommit=True) as exporter:
            present = [name for name, spec in queries.items() if check_namespace(name, spec, admin, exporter)]
            check_monitor_only(exporter)
        check_with_exporter(queries, present, admin, args.exporter_port)
    finally:
        admin.close()
        with psycopg.connect(args.admin_dsn, autocommit=True) as c:
            c.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
            c.execute(f"DROP ROLE IF EXISTS {ROLE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
