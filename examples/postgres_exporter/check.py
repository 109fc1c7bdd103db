"""Run every query of queries.yaml the way postgres_exporter would, and check what it returns.

    /usr/bin/python3 examples/postgres_exporter/check.py --admin-dsn DSN

With a superuser's connection (--admin-dsn, to any database of the server) it creates a
database with the extension, a login role given hc_grant_app() (all the exporter needs) and a
known state: an available, a held, an expired-but-not-swept and a sold asset; a product with
a live and an expired reservation.  Then, connected as that role, each query must run, return
exactly the columns its metrics declare, numbers in the GAUGE/COUNTER columns, and for the
holds and stock the figures of that state (the alert of the README rests on them).  A query
that reads an hc_* relation this build does not have is skipped, with a "# SKIP" line.
Prints "ok - ..." / "not ok - ..." lines (counted by make test); exits 0.
"""

import argparse
import os
import re
import sys

import psycopg
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(HERE, "..", "..", "test"))
from tap import check  # noqa: E402  (test/tap.py)

DB = "hc_exporter"
ROLE = "hc_exporter"
USAGES = {"LABEL", "GAUGE", "COUNTER", "DISCARD", "DURATION", "MAPPEDMETRIC"}

# The state set up below, as the metrics must show it (namespace -> {column or label: value}).
EXPECTED = {
    "holdcommit_assets": {"AVAILABLE": 1, "HELD": 1, "HELD_EXPIRED": 1, "SOLD": 1},
    "holdcommit_holds": {"HELD": 2, "COMMITTED": 1, "RELEASED": 0, "EXPIRED": 0},
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
    admin.execute("SELECT hc_grant_app(%s)", [ROLE])
    admin.execute("SELECT hc_asset_add(a) FROM unnest(ARRAY['A-free', 'A-held', 'A-late', 'A-sold']) a")
    admin.execute("SELECT hc_hold('A-held', 'b1', 'k-held')")
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
    admin.execute("UPDATE hc_stock_reservation_lines SET expires_at = expires_at - interval '1 hour'"
                  " WHERE reservation_id = %s", [gone])
    admin.execute("UPDATE hc_stock_reservations SET expires_at = expires_at - interval '1 hour',"
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
        return

    try:
        cur = exporter.execute(spec["query"])
        rows = cur.fetchall()
        got_columns = [d.name for d in cur.description]
    except psycopg.Error as e:
        check(f"{name}: runs as a role given hc_grant_app()", str(e).strip(), "no error")
        return
    check(f"{name}: runs as a role given hc_grant_app(), returns rows", len(rows) > 0, True)
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
            check(f"{name}: the oldest expired 50 minutes ago (ttl 10 minutes, aged 1 hour)", 2990 < seconds < 3100, True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--admin-dsn", required=True)
    ap.add_argument("--queries", default=os.path.join(HERE, "queries.yaml"))
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
            for name, spec in queries.items():
                check_namespace(name, spec, admin, exporter)
    finally:
        admin.close()
        with psycopg.connect(args.admin_dsn, autocommit=True) as c:
            c.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
            c.execute(f"DROP ROLE IF EXISTS {ROLE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
