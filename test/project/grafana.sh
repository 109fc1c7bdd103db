#!/usr/bin/env bash
# examples/grafana/holdcommit.json, checked without Grafana (not in Debian): valid JSON,
# every panel on the dashboard's Prometheus data source, and every query naming only
# metrics that examples/postgres_exporter/queries.yaml defines (<namespace>_<column>),
# with only the labels their queries give (and instance, job).  A query naming a metric
# or a label that is not there fails, as the last check shows.
# Prints "ok - ..." / "not ok - ..." lines; exits 0.
set -uo pipefail
cd "$(dirname "$0")/../.."
. test/harness/tap.bash

lint() {
    "${HC_PYTHON:-/usr/bin/python3}" - "$@" <<'PY'
import json, re, sys
import yaml

dashboard, queries = sys.argv[1], sys.argv[2]
metrics = {}
for ns, q in yaml.safe_load(open(queries)).items():
    cols = [(name, spec["usage"]) for m in q["metrics"] for name, spec in m.items()]
    labels = {name for name, usage in cols if usage == "LABEL"} | {"instance", "job"}
    for name, usage in cols:
        if usage != "LABEL":
            metrics[f"{ns}_{name}"] = labels
problems = []
try:
    d = json.load(open(dashboard))
except ValueError as e:
    print(f"not JSON: {e}")
    sys.exit(0)
targets = 0
for p in d.get("panels", []):
    if p.get("datasource", {}).get("uid") != "${datasource}":
        problems.append(f"panel {p.get('title')!r}: not on the dashboard's data source")
    for t in p.get("targets", []):
        targets += 1
        expr = t.get("expr", "")
        names = re.findall(r"\b(holdcommit_[a-z_]+)\b", expr)
        if not names:
            problems.append(f"{expr!r}: names no holdcommit metric")
        for name, matchers in re.findall(r"\b(holdcommit_[a-z_]+)(?:\{([^}]*)\})?", expr):
            if name not in metrics:
                problems.append(f"{expr!r}: {name} is not a metric of queries.yaml")
                continue
            for label in re.findall(r"([a-z_]+)\s*(?:=~|!~|!=|=)", matchers):
                if label not in metrics[name]:
                    problems.append(f"{expr!r}: {name} has no label {label}")
            for by in re.findall(r"by \(([^)]*)\)", expr):
                for label in (l.strip() for l in by.split(",")):
                    if label not in metrics[name]:
                        problems.append(f"{expr!r}: {name} has no label {label}")
print(f"{targets} queries" if not problems else "\n".join(problems))
PY
}

out=$(lint examples/grafana/holdcommit.json examples/postgres_exporter/queries.yaml)
check "the dashboard's queries name metrics and labels of queries.yaml ($out)" \
    "$(grep -cv ' queries$' <<<"$out")" "0"

# The check finds what it is for: a metric queries.yaml lacks, a label its query lacks.
bad=$(mktemp)
trap 'rm -f "$bad"' EXIT
"${HC_PYTHON:-/usr/bin/python3}" - examples/grafana/holdcommit.json "$bad" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["panels"][0]["targets"][0]["expr"] = 'holdcommit_holds_sold{instance=~"$instance"}'
d["panels"][1]["targets"][0]["expr"] = 'sum by (product) (holdcommit_stock_reserved_units)'
json.dump(d, open(sys.argv[2], "w"))
PY
check "it finds a metric and a label that queries.yaml does not define" \
    "$(lint "$bad" examples/postgres_exporter/queries.yaml | grep -cE 'holdcommit_holds_sold is not a metric|has no label product')" "2"
