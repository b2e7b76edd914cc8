#!/usr/bin/env bash
# tests/fuzz/run.sh [--seconds N] [--jobs J] [--seed S] [--build-only] [TARGET...]
#
# Builds the libFuzzer targets (clang, ASan + UBSan, LOOM_FUZZ=ON) into
# build-fuzz/ and runs each for N seconds (default 30), J at a time (default
# 2), on a copy of its seed corpus (tests/fuzz/corpus/<target>/ is never
# written), with its dictionary (tests/fuzz/*.dict, the table below). All
# targets when none is named. Ends with one key=value line per target:
#   case=fuzz_envelope seconds=30 execs=123456 execs_per_s=4115 corpus=210 crashes=0 result=ok
# and exits non-zero if any target crashed, leaked, timed out, ran out of
# memory or failed to build; the input that did it is kept (path printed).
# Runs under nice -n 19: the machine is shared with other builds.
# --seed S: libFuzzer's -seed for every target (CI passes a fixed one; the
# default, 0, lets libFuzzer pick). --build-only: configure and build, run
# nothing (scripts/test, before ctest).
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
seconds=30 jobs=2 seed=0 build_only=0 targets=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --build-only) build_only=1; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    -*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done

# Largest input per target: a little above its largest seed; bigger inputs
# only slow a parser down without reaching new code.
declare -A max_len=(
  [fuzz_envelope]=4096 [fuzz_bulk]=16384 [fuzz_collective_frame]=1024 [fuzz_codec]=8192
  [fuzz_shard]=8192 [fuzz_manifest]=4096 [fuzz_safetensors]=8192 [fuzz_gguf]=8192
  [fuzz_hf_tokenizer]=16384 [fuzz_token]=1024 [fuzz_run_config]=8192 [fuzz_template]=8192
  [fuzz_hpo]=4096 [fuzz_ingest]=16384 [fuzz_tokenizer]=4096
  [fuzz_request]=8192 [fuzz_enrol]=2048 [fuzz_snapshot]=8192 [fuzz_sealed]=12288 [fuzz_audit_archive]=8192
  [fuzz_media]=16384 [fuzz_audio]=16384
)
# Dictionaries (tests/fuzz/*.dict): the words each parser looks for.
declare -A dict=(
  [fuzz_manifest]=json.dict [fuzz_safetensors]=json.dict [fuzz_hf_tokenizer]=json.dict
  [fuzz_run_config]=toml.dict [fuzz_template]=toml.dict [fuzz_hpo]=toml.dict [fuzz_ingest]=ingest.dict
  [fuzz_snapshot]=snapshot.dict [fuzz_audit_archive]=audit_archive.dict [fuzz_media]=media.dict
)
[[ $seconds =~ ^[1-9][0-9]*$ && $jobs =~ ^[1-9][0-9]*$ && $seed =~ ^[0-9]+$ ]] ||
  { echo "run.sh: --seconds and --jobs take a whole number >= 1, --seed one >= 0" >&2; exit 2; }
command -v clang++-14 >/dev/null 2>&1 ||
  { echo "run.sh: clang++-14 is not installed: run scripts/setup (it installs clang-14 and libFuzzer)" >&2; exit 1; }
if [[ ${#targets[@]} -eq 0 ]]; then
  mapfile -t targets < <(printf '%s\n' "${!max_len[@]}" | sort)
fi
for t in "${targets[@]}"; do
  [[ -n ${max_len[$t]:-} ]] || { echo "run.sh: unknown target $t (known: ${!max_len[*]})" >&2; exit 2; }
done

build=build-fuzz
export CCACHE_DIR=${CCACHE_DIR:-/var/cache/edgeloom-ccache}
mkdir -p "$CCACHE_DIR" 2>/dev/null || export CCACHE_DIR=$HOME/.cache/edgeloom-ccache
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
if [[ ! -f $build/build.ninja ]]; then
  nice -n 19 cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 -DLOOM_FUZZ=ON >/dev/null || exit 1
fi
# One ninja call for all (parallel); only when it fails, one per target to
# tell which failed (the others still run).
declare -A built
if nice -n 19 ninja -C $build -j"${BUILD_JOBS:-2}" "${targets[@]}" >"$build/build-fuzz.log" 2>&1; then
  for t in "${targets[@]}"; do built[$t]=1; done
else
  for t in "${targets[@]}"; do
    if nice -n 19 ninja -C $build -j"${BUILD_JOBS:-2}" "$t" >"$build/build-$t.log" 2>&1; then
      built[$t]=1
    else
      echo "run.sh: $t failed to build; see $build/build-$t.log" >&2
    fi
  done
fi

if ((build_only)); then
  ((${#built[@]} == ${#targets[@]})) || exit 1
  echo "run.sh: ${#targets[@]} fuzz targets built in $build/fuzz"
  exit 0
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:symbolize=1}
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# Leaks inside third-party libraries, each with its reason (tests/fuzz/lsan.supp).
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/fuzz/lsan.supp}
work=$build/fuzz-work

# Runs one target; its log and summary go to $work/<target>/.
run_one() {
  local t=$1 dir=$work/$1
  rm -rf "$dir"
  mkdir -p "$dir/corpus" "$dir/artifacts"
  [[ -d tests/fuzz/corpus/$t ]] && cp -r "tests/fuzz/corpus/$t/." "$dir/corpus/"
  local words=()
  [[ -n ${dict[$t]:-} ]] && words=(-dict="tests/fuzz/${dict[$t]}")
  nice -n 19 "$build/fuzz/$t" "$dir/corpus" "${words[@]}" -max_len="${max_len[$t]}" \
    -max_total_time="$seconds" -seed="$seed" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$dir/artifacts/" >"$dir/log" 2>&1
  echo $? >"$dir/rc"
}

running=0
for t in "${targets[@]}"; do
  [[ -n ${built[$t]:-} ]] || continue
  if ((running >= jobs)); then wait -n; ((running--)); fi
  run_one "$t" &
  ((running++))
done
wait

failed=0
for t in "${targets[@]}"; do
  if [[ -z ${built[$t]:-} ]]; then
    echo "case=$t seconds=0 execs=0 execs_per_s=0 corpus=0 crashes=0 result=build_failed"
    failed=1
    continue
  fi
  dir=$work/$t
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/log" | tail -1)
  corpus=$(find "$dir/corpus" -type f | wc -l)
  mapfile -t found < <(find "$dir/artifacts" -type f | sort)
  rc=$(cat "$dir/rc")
  result=ok
  if ((${#found[@]} > 0)) || [[ $rc != 0 ]]; then
    result=$(basename "${found[0]:-failed-}" | cut -d- -f1)
    failed=1
  fi
  echo "case=$t seconds=$seconds execs=${execs:-0} execs_per_s=${rate:-0} corpus=$corpus crashes=${#found[@]} result=$result"
  for f in "${found[@]}"; do echo "  input saved: $f (log: $dir/log)"; done
done
exit $failed
