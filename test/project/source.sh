#!/usr/bin/env bash
# The checks of src/ on itself, after a build (make test's setup builds first):
#   - the include rules: each folder of src/ includes, of the project's headers, only those of
#     the folders its row of RULES names (a grep of the #include "..." lines, as Citus' CI
#     checks its banned functions); any file may include compat.h; only src/holdcommit.c (and
#     the files of FOLDER, which define what it declares) includes a FOLDER/register.h;
#   - doc/architecture.md's "What may call what" states these rules: its table after the line
#     <!-- include-rules: test/project/source.sh --> is the one `source.sh --rules` prints;
#   - only src/compat.h names PG_VERSION_NUM: what differs between PostgreSQL majors is there;
#   - no import circle between the objects (src/**/*.o: A.o uses a symbol that B.o defines,
#     and B.o, through any path, one of A.o's);
#   - every symbol holdcommit.so exports starts with hc_, or is PostgreSQL's (_PG_init,
#     Pg_magic_func, pg_finfo_*) or the linker's (_init, _fini, _edata, _end, __bss_start:
#     older linkers export them; PGXS adds nothing else);
#   - every ereport() whose level is not below ERROR (ERROR, FATAL, PANIC, or a variable) sets
#     an errcode: the call's arguments are parsed, not a line grepped (elog(ERROR) is for
#     internal errors and needs none);
#   - no .c or .h file of src/ above 800 lines; every file of src/ (.c, .h, README.md) is
#     named in doc/architecture.md by its path from src/ (`core/fetch.c` or `src/core/fetch.c`).
# Prints "ok - ..." / "not ok - ..." lines; exits 0.
#   test/project/source.sh [DIR]   check the tree at DIR (default: this clone)
#   test/project/source.sh --rules print the include rules as doc/architecture.md's table
set -uo pipefail
if [ "${1:-}" = --rules ]; then dir=--rules; else dir=$(realpath "${1:-$(dirname "$0")/../..}"); fi
cd "$(dirname "$0")/../.."

exec "${HC_PYTHON:-/usr/bin/python3}" - "$dir" <<'PY'
import os
import re
import subprocess
import sys

sys.path.insert(0, "test/harness")
from tap import check

DOMAINS = ["hold/", "stock/", "lease/"]
# Who may include which of the project's headers (PostgreSQL's: every file).  A folder's row
# holds for every file under it; the rows name folders from src/ (ending in /) or files.
RULES = [
    ("core/", ["core/"]),
    ("common/", ["core/", "common/"]),
    ("hold/", ["core/", "common/", "hold/"]),
    ("stock/", ["core/", "common/", "stock/"]),
    ("lease/", ["core/", "common/", "lease/", "bgw/autonomous/autonomous.h"]),
    ("admin/", ["core/", "common/"] + DOMAINS + ["admin/"]),
    ("bgw/autonomous/", ["core/", "common/", "bgw/autonomous/"]),
    ("bgw/sweeper/", ["core/", "common/", "admin/", "bgw/sweeper/"]),
    ("bgw/spreader/", ["core/", "common/", "stock/auto_spread.h", "bgw/spreader/"]),
    ("scaleout/", ["core/", "common/"] + DOMAINS + ["admin/", "scaleout/"]),
    ("holdcommit.c", ["*"]),
]
# The compatibility header for PostgreSQL versions: any file may include it.
COMPAT = "compat.h"
# A layer's registration, which _PG_init calls: only holdcommit.c includes it (and the
# files of its own folder, which define what it declares).
REGISTER = "register.h"
MAX_LINES = 800
NOT_BELOW_ERROR = ("DEBUG1", "DEBUG2", "DEBUG3", "DEBUG4", "DEBUG5", "LOG", "LOG_SERVER_ONLY",
                   "COMMERROR", "INFO", "NOTICE", "WARNING", "WARNING_CLIENT_ONLY")
EXPORTS = re.compile(r"hc_\w+|_PG_init|Pg_magic_func|pg_finfo_\w+|_init|_fini|_edata|_end|__bss_start")
MARKER = "<!-- include-rules: test/project/source.sh -->"


def doc_rows():
    """RULES as doc/architecture.md's table: (who, may include) per row."""
    rows = [(f"`{who}`", ", ".join("everything" if m == "*" else f"`{m}`" for m in may))
            for who, may in RULES]
    rows.append(("any file", f"`{COMPAT}` (the compatibility header for PostgreSQL versions)"))
    rows.append((f"only `holdcommit.c` (and the files of the folder, which define it)", f"`*/{REGISTER}`"))
    return rows


def ticked(cell):
    return frozenset(re.findall(r"`([^`]+)`", cell))


if sys.argv[1] == "--rules":
    print(MARKER)
    print("| who | may include (besides PostgreSQL's headers) |")
    print("|---|---|")
    for who, may in doc_rows():
        print(f"| {who} | {may} |")
    sys.exit(0)

root = sys.argv[1]
src = os.path.join(root, "src")
files = sorted(os.path.relpath(os.path.join(d, f), src)
               for d, _, names in os.walk(src) for f in names
               if f.endswith((".c", ".h")) or f == "README.md")
code = [f for f in files if f.endswith((".c", ".h"))]
text = {f: open(os.path.join(src, f), encoding="utf-8").read() for f in code}
check("src/ has C files", len(code) > 0, True)


def rule_of(f):
    """The row of RULES for file f (a path from src/): the longest folder holding it."""
    best = None
    for who, may in RULES:
        if (f == who or (who.endswith("/") and f.startswith(who))) and (best is None or len(who) > len(best[0])):
            best = (who, may)
    return best


def project_header(f, name):
    """The project's header that #include "name" in f reads (a path from src/), or None."""
    for cand in (name, os.path.join(os.path.dirname(f), name)):
        cand = os.path.normpath(cand)
        if not cand.startswith("..") and os.path.isfile(os.path.join(src, cand)):
            return cand
    return None


# The include rules.
broken = {who: [] for who, _ in RULES}
outside, register, ours = [], [], 0
for f in code:
    rule = rule_of(f)
    if rule is None:
        if f != COMPAT:
            outside.append(f)
        continue
    for name in re.findall(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', text[f], re.M):
        h = project_header(f, name)
        if h is None:
            continue
        ours += 1
        if os.path.basename(h) == COMPAT:
            continue
        if os.path.basename(h) == REGISTER:
            if f != "holdcommit.c" and os.path.dirname(f) != os.path.dirname(h):
                register.append(f"{f}: {h}")
            continue
        if not any(m == "*" or h == m or (m.endswith("/") and h.startswith(m)) for m in rule[1]):
            broken[rule[0]].append(f"{f}: {h}")
check("src/ includes headers of its own", ours > 0, True)
check("every file of src/ is in a folder of the include rules", outside, [])
for who, may in RULES:
    if "*" not in may:
        check(f"{who} includes only {', '.join(may)} (and {COMPAT})", broken[who], [])
check(f"only holdcommit.c (and the files of its folder) includes a */{REGISTER}", register, [])
check(f"only src/{COMPAT} names PG_VERSION_NUM (what differs between PostgreSQL majors is there)",
      [f for f in code if f != COMPAT and "PG_VERSION_NUM" in text[f]], [])

# doc/architecture.md states the same rules.
arch_path = os.path.join(root, "doc", "architecture.md")
arch = open(arch_path, encoding="utf-8").read() if os.path.isfile(arch_path) else ""
lines = arch.split("\n")
section, table = None, None
for i, line in enumerate(lines):
    if line.startswith("#"):
        section = line
    if line.strip() == MARKER:
        table = [(section or "").lower(), []]
        for row in lines[i + 1:]:
            if not row.strip() and not table[1]:
                continue
            if not row.startswith("|"):
                break
            table[1].append(row)
        break
check("doc/architecture.md's \"What may call what\" has the table of the include rules "
      f"(after {MARKER})", table is not None and "what may call what" in table[0], True)
if table is not None:
    got = set()
    for row in table[1][2:]:
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        got.add((ticked(cells[0]), ticked(cells[1]) if len(cells) > 1 else frozenset()))
    want = {(ticked(who), ticked(may)) for who, may in doc_rows()}
    show = lambda rows: sorted(f"{sorted(w)} -> {sorted(m)}" for w, m in rows)
    check("doc/architecture.md's table states the include rules of test/project/source.sh "
          "(source.sh --rules prints them)", [show(got - want), show(want - got)], [[], []])

# No import circle between the objects.
objects = sorted(f[:-2] + ".o" for f in code if f.endswith(".c"))
missing = [o for o in objects if not os.path.isfile(os.path.join(src, o))]
check("every .c file of src/ has its object (built)", missing, [])
defined, used = {}, {}
for o in objects:
    if o in missing:
        continue
    out = subprocess.run(["nm", "-g", os.path.join(src, o)], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        p = line.split()
        if len(p) == 2 and p[0] == "U":
            used.setdefault(o, set()).add(p[1])
        elif len(p) == 3:
            defined[p[2]] = o
uses = {o: {defined[s] for s in used.get(o, ()) if defined.get(s, o) != o} for o in objects}
check("the objects use each other's symbols", any(uses.values()), True)
# Tarjan's strongly connected components: each of more than one object is a circle.
index, low, stack, circles = {}, {}, [], []


def visit(v):
    index[v] = low[v] = len(index)
    stack.append(v)
    for w in sorted(uses[v]):
        if w not in index:
            visit(w)
            low[v] = min(low[v], low[w])
        elif w in stack:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop()
            comp.append(w)
            if w == v:
                break
        if len(comp) > 1:
            circles.append(" ".join(
                f"{a} -> {b} ({', '.join(sorted(s for s in used[a] if defined.get(s) == b))})"
                for a in sorted(comp) for b in sorted(uses[a]) if b in comp))


sys.setrecursionlimit(10000)
for o in objects:
    if o not in index:
        visit(o)
check("no import circle between the objects of src/", circles, [])

# The library's exports.
so = os.path.join(root, "holdcommit.so")
exported = []
if os.path.isfile(so):
    out = subprocess.run(["nm", "-D", "--defined-only", so], capture_output=True, text=True, check=True).stdout
    exported = [line.split()[-1] for line in out.splitlines() if line.strip()]
check("holdcommit.so exports hc_ functions", any(s.startswith("hc_") for s in exported), True)
check("every symbol holdcommit.so exports starts with hc_ (or is PostgreSQL's or the linker's)",
      sorted(s for s in exported if not EXPORTS.fullmatch(s)), [])


# Every ereport() that may raise an error sets an errcode.
def blank(m):
    return re.sub(r"[^\n]", " ", m.group(0))


def code_only(t):
    """t with its comments, strings and character literals blanked (lines kept)."""
    return re.sub(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', blank, t, flags=re.S)


calls, missing_code = 0, []
for f in code:
    t = code_only(text[f])
    for m in re.finditer(r"\bereport(?:_domain)?\s*\(", t):
        depth, args, start = 1, [], m.end()
        i = start
        while i < len(t) and depth:
            c = t[i]
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth -= 1
            elif c == "," and depth == 1:
                args.append(t[start:i])
                start = i + 1
            i += 1
        args.append(t[start:i - 1])
        # A level below ERROR, or a choice between such levels (quiet ? DEBUG1 : LOG).
        levels = re.findall(r"\b[A-Z][A-Z0-9_]*\b", args[0])
        if levels and all(x in NOT_BELOW_ERROR for x in levels):
            continue
        calls += 1
        if not re.search(r"\berrcode(?:_for_\w+)?\s*\(", " ".join(args[1:])):
            missing_code.append(f"{f}:{text[f].count(chr(10), 0, m.start()) + 1}")
check("src/ has ereport(ERROR) calls", calls > 0, True)
check("every ereport() at ERROR or above (or at a variable level) sets an errcode", missing_code, [])

# The size of the files, and the doc names each.
check(f"no .c or .h file of src/ above {MAX_LINES} lines",
      sorted(f"{f}: {text[f].count(chr(10))}" for f in code if text[f].count(chr(10)) > MAX_LINES), [])


def named(f):
    for m in re.finditer(re.escape(f) + r"(?![\w])", arch):
        before = arch[:m.start()]
        if not before or not re.match(r"[\w./-]", before[-1]) or before.endswith("src/"):
            return True
    return False


check("doc/architecture.md names every file of src/ by its path from src/",
      [f for f in files if not named(f)], [])
PY
