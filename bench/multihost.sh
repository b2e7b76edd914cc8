#!/usr/bin/env bash
# multihost.sh [STEPS]: issue 26's benchmark, as root. A cloud and two edge
# sites through the real services on three hosts (network and mount
# namespaces on a bridge) and on loopback, in one run (build/bin/multihost_bench:
# enrolment time, the diloco job's wall time, bytes per link each way), then
# the aggregator's round at GPT-2 124M (d12) and ~350M (build/bin/aggregator_round_bench:
# the aggregator's round logic with its saves, in process: round time, bytes
# each way, peak RSS). Prints the case=… key=value lines of each.
#   sudo bench/multihost.sh 24
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-24}
bin=build/bin
for b in multihost_bench aggregator_round_bench; do
  [ -x "$bin/$b" ] || { echo "multihost.sh: $bin/$b not built (bash scripts/build)" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || echo "multihost.sh: not root: the three-host case is skipped (loopback only)" >&2
"$bin/multihost_bench" --steps "$steps" | grep '^case='
for model in d12 350m; do
  "$bin/aggregator_round_bench" "$model" | grep '^case='
done
