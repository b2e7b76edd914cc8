#!/bin/bash
# diloco_stage.sh: one `pretrain-diloco-tiny` stage through the real services
# (one `loom up --trainers N` on loopback, site r on its own licence text),
# no faults: the stage's wall time, and per site the seconds its training
# thread stalled on the sync and spent in finish (from the trainers' logs).
#   bench/diloco_stage.sh [BUILD_DIR] [SITES] [STEPS]     (defaults: build 2 48)
# Prints one line: case=diloco_stage sites=… steps=… stage_s=… stall_s_max=…
# stall_s_sum=… finish_s_max=… loss=…
set -euo pipefail
build=${1:-build}; sites=${2:-2}; steps=${3:-48}
loom="$build/bin/loom"
templates="$(cd "$(dirname "$0")/.." && pwd)/templates"
home=$(mktemp -d /tmp/loom-diloco-stage-XXXXXX)
trap '"$loom" down --data-dir "$home" >/dev/null 2>&1 || true; [ -n "${KEEP:-}" ] && echo "kept $home" >&2 || rm -rf "$home"' EXIT
corpora=(GPL-3 GPL-2 LGPL-2.1 MPL-2.0)
"$loom" up --data-dir "$home" --trainers "$sites" --import-root /usr/share/common-licenses >/dev/null
list=""
for ((s = 0; s < sites; s++)); do
  "$loom" data import "/usr/share/common-licenses/${corpora[s]}" --dataset "site$s-text" --data-dir "$home" >/dev/null
  list+="${list:+, }\"site$s-text\""
done
id=$("$loom" job submit --template pretrain-diloco-tiny --set "diloco.sites=$sites" --set "diloco.datasets=[$list]" \
       --set "pretrain.steps=$steps" --templates "$templates" --data-dir "$home" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
"$loom" job watch "$id" --data-dir "$home" >/dev/null || true
"$loom" job show "$id" --data-dir "$home" --json > "$home/job.json"
python3 - "$home" "$sites" "$steps" <<'PY'
import glob, json, re, sys
home, sites, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
j = json.load(open(home + "/job.json"))
s = j["stages"][0]
wall = (s["finished_unix_ns"] - s["started_unix_ns"]) / 1e9
stall, fin = [], []
for f in glob.glob(home + "/logs/trainer*.log"):
    for m in re.finditer(r"diloco: .*?([0-9.]+) s stalled(?:, ([0-9.]+) s in finish)?", open(f).read()):
        stall.append(float(m.group(1)))
        fin.append(float(m.group(2) or 0))
print(f"case=diloco_stage sites={sites} steps={steps} state={s['state']} stage_s={wall:.1f} "
      f"stall_s_max={max(stall, default=0):.2f} stall_s_sum={sum(stall):.2f} finish_s_max={max(fin, default=0):.2f} "
      f"loss={s['loss']:.4f}")
PY
