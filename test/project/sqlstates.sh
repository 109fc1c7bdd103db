#!/usr/bin/env bash
# The one SQLSTATE -> HTTP map, clients/sqlstates.json, and everything that repeats it
# (run by make test, no server needed):
#   - the file: valid, one row per SQLSTATE, every RS00x that src/common/errors.h defines;
#   - doc/clients.md's table: the same rows (SQLSTATE, name, status, class);
#   - doc/reference.md's SQLSTATE table: the same SQLSTATEs, names and statuses;
#   - the README's "Errors and HTTP statuses" table: a shorter list, so each SQLSTATE it
#     lists has the file's status (and name, where a row gives one name per SQLSTATE), every
#     RS00x is listed, and its success rows are the file's 201 and 200;
#   - the copies that the client packages ship (clients/python/**/sqlstates.json,
#     clients/node/**/sqlstates.json): identical to the file;
#   - examples/http/app.py: takes its map from the file (names sqlstates.json or the
#     Python package's map) and has no SQLSTATE -> status table of its own.
# A copy or a service that is not there yet prints "ok - ... # SKIP not there yet".
# Prints "ok - ..." / "not ok - ..." lines; exits 0.
set -uo pipefail
cd "$(dirname "$0")/../.."

exec "${HC_PYTHON:-/usr/bin/python3}" - <<'PY'
import glob
import json
import re
import sys

sys.path.insert(0, "test/harness")
from tap import check

SOURCE = "clients/sqlstates.json"


def skip(what, why="not there yet"):
    print(f"ok - {what} # SKIP {why}")


def table(path, heading):
    """The rows of the first markdown table under HEADING (up to the next heading of its
    level): a list of (line number, cells)."""
    level = heading.split(" ", 1)[0]
    rows, inside = [], False
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        line = line.rstrip("\n")
        if line == heading:
            inside = True
            continue
        if inside and re.match(rf"^#{{1,{len(level)}}} ", line):
            break
        if inside and line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not set("".join(cells)) <= set("-: "):
                rows.append((n, cells))
        elif inside and rows:
            break                               # the first table only
    return rows


def differences(got, want):
    """KEY -> (got, wanted) for every key where the two maps differ (None: missing)."""
    return {k: (got.get(k), want.get(k)) for k in sorted(set(got) | set(want)) if got.get(k) != want.get(k)}


def codes(cell):
    return re.findall(r"`([0-9A-Z]{5})`", cell)


def by_code(path, heading, want_class=False):
    """SQLSTATE -> (name or None, status[, class]) of a table whose columns start with
    SQLSTATE, name, HTTP; names where the row gives one per SQLSTATE."""
    out = {}
    for n, cells in table(path, heading):
        cs = codes(cells[0])
        if not cs or len(cells) < 3 or not cells[2].isdigit():
            continue
        names = [x.strip().strip("`") for x in cells[1].split("/")]
        named = len(names) == len(cs) and all(re.fullmatch(r"[a-z0-9_]+", x) for x in names)
        for i, c in enumerate(cs):
            row = (names[i] if named else None, int(cells[2]))
            if want_class:
                row += (cells[3].strip("`") if len(cells) > 3 else None,)
            if c in out:
                print(f"not ok - {path}:{n} lists {c} once\n#   it is listed twice")
            out[c] = row
    return out


# The file itself.
try:
    source = json.load(open(SOURCE, encoding="utf-8"))
    rows = source["sqlstates"]
    sqlstates = {r["sqlstate"]: (r["name"], r["http"], r["class"]) for r in rows}
    print(f"ok - {SOURCE} is JSON with a list of sqlstates")
except (OSError, ValueError, KeyError, TypeError) as e:
    print(f"not ok - {SOURCE} is JSON with a list of sqlstates\n#   {e}")
    sys.exit(0)
check(f"{SOURCE}: one row per SQLSTATE", len(rows), len(sqlstates))
check(f"{SOURCE}: every row has a 5-character SQLSTATE, a name, an HTTP status and a class",
      [r for r in rows if not (re.fullmatch(r"[0-9A-Z]{5}", str(r.get("sqlstate")))
                               and re.fullmatch(r"[a-z0-9_]+", str(r.get("name")))
                               and isinstance(r.get("http"), int) and 100 <= r["http"] <= 599
                               and re.fullmatch(r"[A-Z][A-Za-z]+", str(r.get("class"))))], [])
check(f"{SOURCE}: success is 201 created, 200 replayed",
      source.get("success"), {"created": 201, "replayed": 200})

defined = {}
for m in re.finditer(r"#define\s+ERRCODE_HC_(\w+)\s+MAKE_SQLSTATE\(([^)]*)\)",
                     open("src/common/errors.h", encoding="utf-8").read()):
    defined["".join(re.findall(r"'(.)'", m.group(2)))] = m.group(1).lower()
check("src/common/errors.h defines RS001 and more", "RS001" in defined, True)
check(f"every SQLSTATE of src/common/errors.h is in {SOURCE}, by its name there",
      differences({c: sqlstates.get(c, (None,))[0] for c in defined}, defined), {})

# doc/clients.md: a copy of every row.
clients = by_code("doc/clients.md", "## SQLSTATEs and HTTP statuses", want_class=True)
check("doc/clients.md's table has the rows of the file (SQLSTATE, name, status, class)",
      differences(clients, sqlstates), {})

# doc/reference.md: the full table, with when each is raised.
reference = by_code("doc/reference.md", "## SQLSTATEs")
check("doc/reference.md's SQLSTATE table lists exactly the file's SQLSTATEs",
      {"not in reference.md": sorted(set(sqlstates) - set(reference)),
       "not in the file": sorted(set(reference) - set(sqlstates))},
      {"not in reference.md": [], "not in the file": []})
check("doc/reference.md's SQLSTATE table gives each the file's name and status",
      differences({c: v for c, v in reference.items() if c in sqlstates},
                  {c: (v[0], v[1]) for c, v in sqlstates.items() if c in reference}), {})

# The README: the SQLSTATEs an application meets most, each as in the file.
readme = by_code("README.md", "## Errors and HTTP statuses")
check("the README's table lists every RS00x of src/common/errors.h", sorted(set(defined) - set(readme)), [])
check("the README's table lists only SQLSTATEs of the file", sorted(set(readme) - set(sqlstates)), [])
# A row that names its SQLSTATEs informally ("null / invalid value / too long") is held to
# the status only.
check("the README's table gives each SQLSTATE the file's status (and name)",
      differences({c: v for c, v in readme.items() if c in sqlstates},
                  {c: (sqlstates[c][0] if name else None, sqlstates[c][1])
                   for c, (name, _) in readme.items() if c in sqlstates}), {})
success = {cells[1]: int(cells[2]) for _, cells in table("README.md", "## Errors and HTTP statuses")
           if not codes(cells[0]) and len(cells) > 2 and cells[2].isdigit()}
check("the README's success rows are the file's 201 (replayed = false) and 200 (replayed = true)",
      sorted(success.values()), sorted(source["success"].values()))

# The client packages' copies.
with open(SOURCE, "rb") as f:
    raw = f.read()
for pkg in ("clients/python", "clients/node"):
    copies = sorted(p for p in glob.glob(f"{pkg}/**/sqlstates.json", recursive=True)
                    if "/node_modules/" not in p and "/build/" not in p)
    if not copies:
        skip(f"{pkg} ships a copy of {SOURCE} identical to it")
    for p in copies:
        with open(p, "rb") as f:
            check(f"{p} is identical to {SOURCE}", f.read() == raw, True)

# The example service.
app = "examples/http/app.py"
try:
    text = open(app, encoding="utf-8").read()
except OSError:
    text = None
if text is None:
    skip(f"{app} takes its map from {SOURCE}")
else:
    # A table of its own: a SQLSTATE literal followed by a status (or a tuple starting with one).
    own = re.findall(r"""["']([0-9A-Z]{5})["']\s*:\s*\(?\s*([1-5][0-9][0-9])\b""", text)
    reads = bool(re.search(r"sqlstates\.json|\bHTTP_STATUS\b|holdcommit\.errors|\berror_from\b", text))
    if own and not reads:
        # The service before issue 22's part for it: its own table must at least agree.
        skip(f"{app} takes its map from {SOURCE}", "it still has its own table (ERRORS)")
        check(f"{app}'s own table gives each SQLSTATE the file's status",
              differences({c: int(s) for c, s in own},
                          {c: sqlstates.get(c, (None, None))[1] for c, _ in own}), {})
    else:
        check(f"{app} takes its map from {SOURCE} (names the file or the Python package's map)",
              reads, True)
        check(f"{app} has no SQLSTATE -> status table of its own", own, [])
PY
