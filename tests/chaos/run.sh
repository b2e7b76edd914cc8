#!/usr/bin/env bash
# tests/chaos/run.sh [--minutes N] [--seed S]
#
# One chaos run (tests/chaos/chaos.test.cpp) of N minutes (default 10) with
# seed S (default: from the clock, printed): seeded kill -9 of the deployment's
# processes, failing fsync and a full data disk under jobs, imports and audit
# traffic, then every invariant. Needs a built tree (scripts/build) and root
# for the full-disk fault. Ends with the run's line:
#   case=chaos seed=S seconds=D faulted_ms=... faults=N kills=... violations=0
# and exits non-zero when an invariant was violated (each is printed as
# VIOLATION: ...). The suite (CI) runs it for 60 s with seed 2026.
set -uo pipefail
cd "$(dirname "$0")/../.."
minutes=10 seed=$(( $(date +%s) % 100000 ))
while [[ $# -gt 0 ]]; do
  case $1 in
    --minutes) minutes=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $minutes =~ ^[1-9][0-9]*$ && $seed =~ ^[0-9]+$ ]] ||
  { echo "run.sh: --minutes takes a whole number >= 1, --seed one >= 0" >&2; exit 2; }
bin=build/tests/chaos_tests
[[ -x $bin ]] || { echo "run.sh: $bin is missing: run scripts/build first" >&2; exit 1; }
echo "chaos: $minutes min, seed $seed"
export LOOM_CHAOS_SECONDS=$((minutes * 60)) LOOM_CHAOS_SEED=$seed
"$bin" --success=false
