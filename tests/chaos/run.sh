#!/usr/bin/env bash
# tests/chaos/run.sh [--minutes N] [--seed S] [--store embedded|postgres | --hosts]
#
# One chaos run (tests/chaos/chaos.test.cpp) of N minutes (default 10) with
# seed S (default: from the clock, printed): seeded kill -9 of the deployment's
# processes, failing fsync and a full data disk under jobs, imports and audit
# traffic, then every invariant. Needs a built tree (scripts/build) and root
# for the full-disk fault. Ends with the run's line:
#   case=chaos seed=S seconds=D faulted_ms=... faults=N kills=... violations=0
# and exits non-zero when an invariant was violated (each is printed as
# VIOLATION: ...). --store postgres: the deployment on a PostgreSQL cluster of
# the run's own, which the faults kill -9 too. --hosts: a cloud and two sites
# on hosts of their own (network namespaces; root), links cut, cross-site and
# single-site jobs (tests/chaos/chaos_lan.test.cpp; its line is case=chaos_lan).
# The suite (CI) runs 60 s on the embedded store, 40 s on PostgreSQL and 40 s
# across hosts, seed 2026.
set -uo pipefail
cd "$(dirname "$0")/../.."
minutes=10 seed=$(( $(date +%s) % 100000 )) store=embedded
while [[ $# -gt 0 ]]; do
  case $1 in
    --minutes) minutes=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --store) store=$2; shift 2 ;;
    --hosts) store=hosts; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $minutes =~ ^[1-9][0-9]*$ && $seed =~ ^[0-9]+$ ]] ||
  { echo "run.sh: --minutes takes a whole number >= 1, --seed one >= 0" >&2; exit 2; }
bin=build/tests/chaos_tests
[[ -x $bin ]] || { echo "run.sh: $bin is missing: run scripts/build first" >&2; exit 1; }
[[ $store == embedded || $store == postgres || $store == hosts ]] ||
  { echo "run.sh: --store is embedded or postgres" >&2; exit 2; }
case $store in
  embedded) only='chaos: kill -9*' ;;
  postgres) only='chaos on PostgreSQL*' ;;
  hosts) only='chaos across hosts*' ;;
esac
echo "chaos: $minutes min, seed $seed, $([[ $store == hosts ]] && echo "three hosts" || echo "$store store")"
export LOOM_CHAOS_SECONDS=$((minutes * 60)) LOOM_CHAOS_SEED=$seed
"$bin" --success=false -tc="$only"
