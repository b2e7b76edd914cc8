#!/usr/bin/python3
"""Every query of the Grafana dashboard is valid PromQL and names only loom_
metrics the services define (tests only).

Writes each panel's expressions into a throwaway rules file and runs
`promtool check rules` on it (promtool parses PromQL exactly as Prometheus
does); then checks that every loom_<service>_<name> the queries use is a
metric some service's source sets (a renamed metric would leave a panel
silently empty).

  dashboard_queries.py DASHBOARD.json SOURCE_ROOT
  dashboard_queries.py --expect-failure DASHBOARD.json SOURCE_ROOT
      negative control: passes (0) only if the check reports a problem (1).
  dashboard_queries.py --rules RULES.yml SOURCE_ROOT
      the same for a Prometheus rules file (deploy/prometheus/alerts.yml):
      promtool checks the file, then every `expr:` is checked for names.
Exit status: 0 pass, 1 a bad query or unknown metric (named), 2 usage.
"""
import json
import os
import re
import subprocess
import sys
import tempfile


def exprs(panels):
    for p in panels:
        yield from exprs(p.get("panels", []))
        for t in p.get("targets", []):
            if t.get("expr"):
                yield p.get("title", "?"), t["expr"]


def rule_exprs(path):
    # The `expr:` of each rule: plain, quoted, or a folded block (>-) on the
    # lines below. Enough YAML for our rules files, without a YAML module.
    lines = open(path, encoding="utf-8").read().splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)(?:- )?expr:\s*(.*)$", lines[i])
        i += 1
        if not m:
            continue
        v = m.group(2).strip()
        if v in (">-", ">", "|", "|-"):
            body = []
            while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > len(m.group(1))):
                body.append(lines[i].strip())
                i += 1
            v = " ".join(b for b in body if b)
        elif len(v) >= 2 and v[0] == v[-1] == "'":
            v = v[1:-1].replace("''", "'")
        elif len(v) >= 2 and v[0] == v[-1] == '"':
            v = json.loads(v)
        yield "rule", v


def defined_names(root):
    # Names the code passes to service_metrics (add/set/observe, "x_total"...)
    # and the common ones every service has (libs/metrics/metrics.hpp).
    names = {"requests_total", "request_duration_seconds", "restarts_total", "up", "dropped_total", "denied_total"}
    for d in ("services", "libs"):
        for dirpath, _, files in os.walk(os.path.join(root, d)):
            for f in files:
                if f.endswith(".cpp") and not f.endswith(".test.cpp"):
                    src = open(os.path.join(dirpath, f), encoding="utf-8", errors="replace").read()
                    names.update(re.findall(r'"([a-z][a-z0-9_]*)"', src))
    return names


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    if RULES:
        queries = list(rule_exprs(sys.argv[1]))
        r = subprocess.run(["promtool", "check", "rules", sys.argv[1]], capture_output=True, text=True)
    else:
        dash = json.load(open(sys.argv[1]))
        queries = list(exprs(dash.get("panels", [])))
    if not queries:
        print("no queries in " + sys.argv[1], file=sys.stderr)
        return 1
    if not RULES:
        with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
            f.write("groups:\n- name: dashboard\n  rules:\n")
            for i, (_, e) in enumerate(queries):
                f.write(f"  - record: dashboard_query_{i}\n    expr: {json.dumps(e)}\n")
            rules = f.name
        try:
            r = subprocess.run(["promtool", "check", "rules", rules], capture_output=True, text=True)
        finally:
            os.unlink(rules)
    if r.returncode != 0:
        print("promtool refused a dashboard query:\n" + r.stdout + r.stderr, file=sys.stderr)
        for i, (title, e) in enumerate(queries):
            print(f"  dashboard_query_{i}: [{title}] {e}", file=sys.stderr)
        return 1
    known = defined_names(sys.argv[2])
    bad = []
    services = ("scheduler", "ingest", "trainer", "aggregator", "audit")
    for title, e in queries:
        # {__name__=~"loom_.+_NAME"}: a common metric of every service, by its NAME
        for name in re.findall(r'loom_\.\+_([a-z0-9_]+)"', e):
            if name not in known and re.sub(r"_(bucket|sum|count)$", "", name) not in known:
                bad.append(f"[{title}] loom_.+_{name}: no such metric in the sources")
        for m in re.findall(r"\bloom_([a-z]+)_([a-z0-9_]+)", e):
            service, name = m
            if service not in services:
                bad.append(f"[{title}] loom_{service}_{name}: no service {service}")
                continue
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            if name not in known and base not in known:
                bad.append(f"[{title}] loom_{service}_{name}: no such metric in the sources")
    if bad:
        print("dashboard queries name unknown metrics:\n  " + "\n  ".join(bad), file=sys.stderr)
        return 1
    print(f"{len(queries)} {'rule expressions' if RULES else 'dashboard queries'} parse and name known metrics")
    return 0


RULES = False

if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--rules":
        del sys.argv[1]
        RULES = True
        sys.exit(main())
    if len(sys.argv) == 4 and sys.argv[1] == "--expect-failure":
        del sys.argv[1]
        rc = main()
        print(f"negative control: the check exited {rc} (1 expected)")
        sys.exit(0 if rc == 1 else 1)
    sys.exit(main())
