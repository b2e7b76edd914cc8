#!/usr/bin/env python3
"""The Kubernetes manifests (deploy/k8s), rendered as an operator renders them
and read back object by object (issue 27 item 3). No cluster can be started
here, so what is checked is everything a cluster would take on trust:

  * secrets filled as docs/operations.md says (`loom keys init`, flattened);
    each overlay rendered with `kubectl kustomize` (the kubectl on PATH:
    Debian 12's 1.20, kustomize v2.0, or later);
  * every container's image is the one deploy/images builds; its command is
    one of our binaries (build/bin) and every --flag it is given appears in
    that binary's own --help for that subcommand; every $(VAR) it uses is
    defined in its env; every env var named LOOM_* is one our code reads;
  * every probe asks GET /metrics on the container's `metrics` port, and that
    is the port endpoints.json says the service serves its metrics on;
  * every Secret, key in it, ConfigMap, file in it and PersistentVolumeClaim
    a pod refers to is defined by the render; a pod mounts its own service's
    private key and no other's; pods run as non-root with requests and limits;
  * each pod's endpoints.json (its ConfigMap file) parses, names the pod's own
    service alone in "only", agrees with the other pods' but for that, and
    puts each of this deployment's services at a Service of the render on a
    port that Service and its pod's container expose; NodePorts are the same
    number inside and out (the advertise host is all that changes).

  k8s_render.py --source deploy/k8s --bin build/bin [--break all]

--break all: each known fault injected in turn into the rendered objects; the
check must report every one (exit 0) — a check that cannot fail is no check.
Exit 77 (a CTest skip) when no kubectl is on PATH.
"""
import argparse
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

IMAGE = "edgeloom:dev"  # deploy/images/build.sh's tag for the services' image
SERVICES = ["aggregator", "audit", "client", "ingest", "scheduler", "trainer"]


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kw)


def fill_secrets(root, loom):
    """What docs/operations.md has an operator do before rendering."""
    keys = os.path.join(root, "keys-src")
    r = run([loom, "keys", "init", "--data-dir", keys])
    if r.returncode != 0:
        sys.exit("loom keys init: " + r.stderr)
    for overlay in ("cloud", "site"):
        dst = os.path.join(root, "k8s", "overlays", overlay, "secrets", "keys")
        os.makedirs(dst)
        for name in ("token.key", "checkpoint.key"):
            shutil.copy(os.path.join(keys, "keys", name), dst)
        for name in os.listdir(os.path.join(keys, "keys", "curve")):
            shutil.copy(os.path.join(keys, "keys", "curve", name), dst)
    site = os.path.join(root, "k8s", "overlays", "site", "secrets", "keys")
    shutil.copy(os.path.join(keys, "keys", "curve", "scheduler.pub"), os.path.join(site, "cloud-scheduler.pub"))
    shutil.copy(os.path.join(keys, "keys", "curve", "aggregator.pub"), os.path.join(site, "cloud-aggregator.pub"))
    with open(os.path.join(site, "cloud-token"), "w") as f:
        f.write("a site's bearer token from its enrolment\n")
    with open(os.path.join(root, "k8s", "overlays", "cloud", "secrets", "database-url"), "w") as f:
        f.write("postgresql://loom:secret@db.example.net/loom\n")


def render(root, overlay):
    r = run(["kubectl", "kustomize", os.path.join(root, "k8s", "overlays", overlay)])
    if r.returncode != 0:
        sys.exit(f"kubectl kustomize overlays/{overlay}: {r.stderr}")
    return [d for d in yaml.safe_load_all(r.stdout) if d]


_help_cache = {}


def help_text(bindir, command, args):
    """The --help of the binary for the subcommand the args name."""
    sub = []
    for a in args:
        if a.startswith("-") or "/" in a or "$(" in a:
            break
        sub.append(a)
    key = (command, tuple(sub))
    if key not in _help_cache:
        r = run([os.path.join(bindir, command)] + sub + ["--help"])
        _help_cache[key] = r.stdout + r.stderr
    return _help_cache[key]


def env_vars_read(source):
    """Every LOOM_* name our C++ sources mention as a string."""
    names = set()
    for top in ("libs", "services", "client"):
        for dirpath, _, files in os.walk(os.path.join(source, top)):
            for f in files:
                if f.endswith((".cpp", ".hpp")):
                    with open(os.path.join(dirpath, f), errors="replace") as fh:
                        names.update(re.findall(r'"(LOOM_[A-Z0-9_]+)', fh.read()))
    return names


def check(objs, overlay, bindir, loom_env):
    errors = []
    by_kind = {}
    for o in objs:
        by_kind.setdefault(o["kind"], {})[o["metadata"]["name"]] = o
    secrets, maps = by_kind.get("Secret", {}), by_kind.get("ConfigMap", {})
    services, claims = by_kind.get("Service", {}), by_kind.get("PersistentVolumeClaim", {})
    workloads = list(by_kind.get("Deployment", {}).values()) + list(by_kind.get("StatefulSet", {}).values())
    if not workloads:
        errors.append(f"{overlay}: no workload rendered")
    endpoints_files = {}
    pod_ports = {}  # workload name -> {port name: number}
    for w in workloads:
        name, spec = w["metadata"]["name"], w["spec"]["template"]["spec"]
        where = f"{overlay}: {w['kind']} {name}"
        if not spec.get("securityContext", {}).get("runAsNonRoot"):
            errors.append(f"{where}: not runAsNonRoot")
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        claim_templates = {t["metadata"]["name"] for t in w["spec"].get("volumeClaimTemplates", [])}
        for v in volumes.values():
            if "secret" in v:
                s = secrets.get(v["secret"]["secretName"])
                if not s:
                    errors.append(f"{where}: volume {v['name']} names Secret {v['secret']['secretName']}, not rendered")
                    continue
                for it in v["secret"].get("items", []):
                    if it["key"] not in s.get("data", {}):
                        errors.append(f"{where}: volume {v['name']} wants key {it['key']} of Secret {s['metadata']['name']}")
            if "configMap" in v and v["configMap"]["name"] not in maps:
                errors.append(f"{where}: volume {v['name']} names ConfigMap {v['configMap']['name']}, not rendered")
            if "persistentVolumeClaim" in v and v["persistentVolumeClaim"]["claimName"] not in claims:
                errors.append(f"{where}: volume {v['name']} names claim {v['persistentVolumeClaim']['claimName']}, not rendered")
        containers = spec.get("containers", [])
        ports = {}
        for c in containers:
            for p in c.get("ports", []):
                ports[p["name"]] = p["containerPort"]
        pod_ports[name] = ports
        own = None  # the service this pod runs (its endpoints.json's "only")
        for c in spec.get("initContainers", []) + containers:
            cw = f"{where} container {c['name']}"
            if c.get("image") != IMAGE:
                errors.append(f"{cw}: image {c.get('image')}, not {IMAGE}")
            cmd = (c.get("command") or [""])[0]
            if not re.fullmatch(r"loom(-[a-z]+)?", cmd) or not os.access(os.path.join(bindir, cmd), os.X_OK):
                errors.append(f"{cw}: command {cmd!r} is not one of our binaries in {bindir}")
                continue
            args = [str(a) for a in c.get("args", [])]
            text = help_text(bindir, cmd, args)
            for a in args:
                if a.startswith("--") and not re.search(re.escape(a) + r"\b", text):
                    errors.append(f"{cw}: {cmd} {' '.join(args[:2])} has no flag {a} (its --help does not name it)")
            env = {e["name"]: e for e in c.get("env", [])}
            for a in args:
                for ref in re.findall(r"\$\(([A-Za-z_0-9]+)\)", a):
                    if ref not in env:
                        errors.append(f"{cw}: argument {a} uses $({ref}), not in its env")
            for e in env.values():
                if e["name"].startswith("LOOM_") and e["name"] not in loom_env:
                    errors.append(f"{cw}: env {e['name']} is read by none of our code")
                ref = e.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    s = secrets.get(ref["name"])
                    if not s or ref["key"] not in s.get("data", {}):
                        errors.append(f"{cw}: env {e['name']} from Secret {ref['name']} key {ref['key']}, not rendered")
            for m in c.get("volumeMounts", []):
                if m["name"] not in volumes and m["name"] not in claim_templates:
                    errors.append(f"{cw}: mounts {m['name']}, no such volume")
                    continue
                v = volumes.get(m["name"], {})
                if m.get("mountPath") == "/data/endpoints.json" and "configMap" in v:
                    cm = maps.get(v["configMap"]["name"], {})
                    body = cm.get("data", {}).get(m.get("subPath", ""))
                    if body is None:
                        errors.append(f"{cw}: endpoints.json from {m.get('subPath')}, not in ConfigMap {v['configMap']['name']}")
                        continue
                    try:
                        eps = json.loads(body)
                    except ValueError as ex:
                        errors.append(f"{cw}: {m.get('subPath')} does not parse: {ex}")
                        continue
                    endpoints_files[m["subPath"]] = eps
                    only = eps.get("only", [])
                    if len(only) != 1:
                        errors.append(f"{cw}: {m['subPath']} names {only} in \"only\", not the pod's one service")
                    else:
                        own = only[0]
            if c in containers:
                res = c.get("resources", {})
                for k in ("requests", "limits"):
                    if not {"cpu", "memory"} <= set(res.get(k, {})):
                        errors.append(f"{cw}: no cpu and memory {k}")
                for probe in ("readinessProbe", "livenessProbe"):
                    get = c.get(probe, {}).get("httpGet")
                    if not get or get.get("path") != "/metrics" or get.get("port") != "metrics" or "metrics" not in ports:
                        errors.append(f"{cw}: {probe} is not GET /metrics on its metrics port")
        if own is None:
            errors.append(f"{where}: no endpoints.json names the service it runs")
            continue
        items = [it["path"] for v in volumes.values() if "secret" in v for it in v["secret"].get("items", [])]
        private = [p for p in items if p.startswith("curve/") and p.endswith(".key")]
        if private != [f"curve/{own}.key"]:
            errors.append(f"{where}: mounts private keys {private}; its service {own} needs curve/{own}.key alone")
        eps = next(e for e in endpoints_files.values() if e.get("only") == [own])
        entry = eps.get("services", {}).get(own, {})
        metrics = entry.get("metrics", "")
        if not metrics.endswith(":" + str(ports.get("metrics"))):
            errors.append(f"{where}: endpoints.json serves {own}'s metrics at {metrics!r}, the probe's port is {ports.get('metrics')}")
    # The pods' endpoints.json files: one deployment, seen from each pod.
    bodies = list(endpoints_files.values())
    for name, e in endpoints_files.items():
        rest = {k: v for k, v in e.items() if k != "only"}
        if rest != {k: v for k, v in bodies[0].items() if k != "only"}:
            errors.append(f"{overlay}: {name} differs from the other pods' endpoints.json beyond \"only\"")
    ours = {e["only"][0] for e in bodies if len(e.get("only", [])) == 1}
    for svc in ours:
        entry = bodies[0].get("services", {}).get(svc, {}) if bodies else {}
        for field in ("rpc", "data", "pull", "metrics"):
            if field not in entry:
                continue
            m = re.fullmatch(r"(?:tcp://)?([a-z0-9.-]+):(\d+)", entry[field])
            if not m:
                errors.append(f"{overlay}: {svc}.{field} {entry[field]!r} is not HOST:PORT")
                continue
            host, port = m.group(1), int(m.group(2))
            svc_name = host.split(".")[-1] if host.count(".") == 1 else host  # pod.headless-service
            s = services.get(svc_name)
            if not s:
                errors.append(f"{overlay}: {svc}.{field} is at {host}, no such Service")
                continue
            sp = [p for p in s["spec"]["ports"] if p["port"] == port]
            if not sp:
                errors.append(f"{overlay}: {svc}.{field} is at port {port}, Service {svc_name} has no such port")
                continue
            target = sp[0]["targetPort"]
            wl = [w for w in workloads if w["spec"]["template"]["metadata"]["labels"].items() >= s["spec"]["selector"].items()]
            if not wl or pod_ports[wl[0]["metadata"]["name"]].get(target) != port:
                errors.append(f"{overlay}: Service {svc_name} port {port} -> {target}: the pod does not listen on {port} there")
    for s in services.values():
        for p in s["spec"]["ports"]:
            if s["spec"].get("type") == "NodePort" and p.get("nodePort") != p["port"]:
                errors.append(f"{overlay}: Service {s['metadata']['name']} NodePort {p.get('nodePort')} != port {p['port']}")
    return errors


def breakages(objs):
    """(what, objects with that fault) for the self-check."""
    def first(kind, objs2):
        return next(o for o in objs2 if o["kind"] in kind)

    def mutate(fn):
        o2 = copy.deepcopy(objs)
        fn(o2)
        return o2

    wl = ("Deployment", "StatefulSet")
    yield "an unknown flag", mutate(lambda o: first(wl, o)["spec"]["template"]["spec"]["containers"][0]["args"].append("--no-such-flag"))
    yield "another image", mutate(lambda o: first(wl, o)["spec"]["template"]["spec"]["containers"][0].update(image="busybox"))
    yield "a binary we do not ship", mutate(lambda o: first(wl, o)["spec"]["template"]["spec"]["containers"][0].update(command=["loom-nope"]))
    yield "a probe of nothing", mutate(lambda o: first(wl, o)["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["httpGet"].update(path="/healthz"))
    yield "a Secret not defined", mutate(lambda o: first(wl, o)["spec"]["template"]["spec"]["volumes"][0]["secret"].update(secretName="edgeloom-nope"))
    yield "another service's private key", mutate(lambda o: first(wl, o)["spec"]["template"]["spec"]["volumes"][0]["secret"]["items"].append({"key": "token.key", "path": "curve/other.key"}))
    yield "an env var nobody reads", mutate(lambda o: first(wl, o)["spec"]["template"]["spec"]["containers"][0].setdefault("env", []).append({"name": "LOOM_NO_SUCH", "value": "1"}))
    yield "a metrics port that is not endpoints.json's", mutate(lambda o: [p.update(containerPort=9999) for p in first(wl, o)["spec"]["template"]["spec"]["containers"][0]["ports"] if p["name"] == "metrics"])
    yield "no limits", mutate(lambda o: first(wl, o)["spec"]["template"]["spec"]["containers"][0]["resources"].pop("limits"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--break", dest="breaks", choices=["all"])
    a = ap.parse_args()
    if not shutil.which("kubectl"):
        print("SKIP: no kubectl on PATH (scripts/setup installs Debian's kubernetes-client)")
        return 77
    bindir = os.path.abspath(a.bin)
    loom_env = env_vars_read(a.source)
    with tempfile.TemporaryDirectory() as root:
        shutil.copytree(os.path.join(a.source, "deploy", "k8s"), os.path.join(root, "k8s"))
        fill_secrets(root, os.path.join(bindir, "loom"))
        failed = False
        for overlay in ("cloud", "site"):
            objs = render(root, overlay)
            kinds = sorted({o["kind"] for o in objs})
            if a.breaks:
                clean = set(check(objs, overlay, bindir, loom_env))
                for what, broken in breakages(objs):
                    new = [e for e in check(broken, overlay, bindir, loom_env) if e not in clean]
                    print(f"{overlay} with {what}: {'caught: ' + new[0] if new else 'NOT CAUGHT'}")
                    failed |= not new
                continue
            errs = check(objs, overlay, bindir, loom_env)
            print(f"{overlay}: {len(objs)} objects ({', '.join(kinds)}): {'ok' if not errs else str(len(errs)) + ' errors'}")
            for e in errs:
                print("  " + e)
            failed |= bool(errs)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
