#!/usr/bin/env bash
# compare.sh BEFORE_BIN AFTER_BIN [ROUNDS]: the benchmarks of a refactor's
# no-regression rule (train_bench, diloco_bench, codec_bench, job_admit_bench,
# ingest_bench), each run from two builds' bin/ directories in one session on
# this machine, alternated (before, after, before, after, ...) so that load
# drifts hit both sides alike. Prints every run's case lines, then one line per
# (bench, case, figure): the median of each side and after/before.
#   compare.sh /work/wt/integ/build/bin build/bin 3
# Last lines, one per figure:
#   bench=<b> case=<c> key=<k> before=<median> after=<median> ratio=<after/before>
set -euo pipefail
before=$(cd "$1" && pwd) after=$(cd "$2" && pwd) rounds=${3:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
declare -A args=(
  [train_bench]="tiny"
  [codec_bench]="4"
  [job_admit_bench]="--jobs 1000 --clients 16"
  [ingest_bench]=""
  [diloco_bench]="--steps 200 --only diloco_int8"
)
for r in $(seq 1 "$rounds"); do
  for b in train_bench codec_bench job_admit_bench ingest_bench diloco_bench; do
    for side in before after; do
      dir=$before; [ "$side" = after ] && dir=$after
      echo "== round $r $b $side" >&2
      # shellcheck disable=SC2086
      "$dir/$b" ${args[$b]} 2>/dev/null | grep '^case=' | sed "s/^/bench=$b side=$side /" | tee -a "$out/all" >&2
    done
  done
done
python3 - "$out/all" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    kv = dict(f.split("=", 1) for f in line.split() if "=" in f)
    for k, v in kv.items():
        if k in ("bench", "side", "case"):
            continue
        try:
            x = float(v)
        except ValueError:  # text (a load average in quotes): not a figure
            continue
        runs.setdefault((kv["bench"], kv["case"], k), {}).setdefault(kv["side"], []).append(x)
for (b, c, k), sides in sorted(runs.items()):
    if "before" not in sides or "after" not in sides:
        continue
    mb, ma = statistics.median(sides["before"]), statistics.median(sides["after"])
    ratio = ma / mb if mb else float("nan")
    print(f"bench={b} case={c} key={k} before={mb:g} after={ma:g} ratio={ratio:.3f}")
PY
