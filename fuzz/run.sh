#!/usr/bin/env bash
# Runs the fuzz targets built in <build dir>, each for <seconds>, and fails on the first finding.
#
#   fuzz/run.sh <build dir> <seconds> [target...]     (targets: all when none are named)
#
# Seed corpora are written afresh into <build dir>/seeds/<target> by make_seeds (files the library
# writes, and the event files of ../shared/testdata when it exists); what a run finds interesting
# accumulates in <build dir>/corpus/<target>. A finding (crash, sanitizer report, uncaught
# exception, leak, timeout, out-of-memory) is saved under <build dir>/findings/<target>/ and the
# script exits non-zero; the log of each run is <build dir>/logs/<target>.log.
set -euo pipefail

build=$(cd "$1" && pwd)
seconds=$2
shift 2
targets=("$@")
if ((${#targets[@]} == 0)); then
  targets=(event_reader checkpoint_variables trainstate checkpoint_state idx safetensors)
fi
root=$(cd "$(dirname "$0")/.." && pwd)
testdata=${TRAINHOOKS_SHARED_TESTDATA:-$root/../shared/testdata}

# Bounded memory: RSS above 2 GiB or a single allocation above 512 MiB is a finding (a length
# field that announces gigabytes must be refused before anything is allocated).
limits=(-rss_limit_mb=2048 -malloc_limit_mb=512 -timeout=30)
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:suppressions=$root/sanitizers/asan.supp}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$root/sanitizers/lsan.supp:print_suppressions=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
# LibTorch's own thread pools add nothing to a reader's coverage.
export OMP_NUM_THREADS=1

event_files=()
if [[ -d $testdata/tfevents ]]; then
  while IFS= read -r -d '' f; do event_files+=("$f"); done \
    < <(find "$testdata/tfevents" -type f -name '*tfevents*' -print0 | sort -z)
else
  echo "fuzz: $testdata/tfevents not found; the event reader starts from generated files only"
fi
rm -rf "$build/seeds"
"$build/make_seeds" "$build/seeds" "${event_files[@]}"

status=0
for t in "${targets[@]}"; do
  bin=$build/${t}_fuzzer
  [[ -x $bin ]] || { echo "fuzz: no target $bin" >&2; exit 2; }
  mkdir -p "$build/corpus/$t" "$build/findings/$t" "$build/logs"
  log=$build/logs/$t.log
  echo "fuzz: $t for ${seconds}s"
  if "$bin" "${limits[@]}" -max_total_time="$seconds" -print_final_stats=1 \
      -artifact_prefix="$build/findings/$t/" "$build/corpus/$t" "$build/seeds/$t" >"$log" 2>&1; then
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 || true)
    echo "fuzz: $t: no finding, ${execs:-?} executions, $cov"
  else
    echo "fuzz: $t: FINDING (log $log, input in $build/findings/$t/)" >&2
    grep -m1 -A30 -E '^==[0-9]+==|runtime error|uncaught|libFuzzer: ' "$log" >&2 || tail -40 "$log" >&2
    status=1
  fi
done
exit $status
