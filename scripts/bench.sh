#!/usr/bin/env bash
# Runs every benchmark binary in BUILD_DIR/bench, prints the session's derived costs against the
# design budgets and, when valgrind is installed, the seed model's instructions per training step
# (callgrind on N and 3N steps: the difference over 2N cancels start-up and set-up).
#
#   bash scripts/bench.sh [BUILD_DIR]
#
# Environment: BENCH_REPETITIONS (5), BENCH_MIN_TIME (seconds per micro benchmark, 0.5),
# BENCH_SEED_MIN_TIME (seconds per end-to-end benchmark, 3), BENCH_SEED_STEPS (N, 1000),
# BENCH_CALLGRIND (0 skips the instruction counts), BENCH_CHECKPOINT_SIZES_MB (1,100,1024: the
# checkpoint benchmark's state sizes; it writes in BENCH_CHECKPOINT_DIR, default the build dir),
# BENCH_FASHION (0 skips the Fashion-MNIST comparisons), BENCH_FASHION_ROUNDS (3),
# BENCH_FASHION_STEPS (300 per program per round).
set -euo pipefail

BUILD_DIR=${1:-build}
REPS=${BENCH_REPETITIONS:-5}
MIN_TIME=${BENCH_MIN_TIME:-0.5}
SEED_MIN_TIME=${BENCH_SEED_MIN_TIME:-3}
SEED_STEPS=${BENCH_SEED_STEPS:-1000}
CALLGRIND=${BENCH_CALLGRIND:-1}

BENCH_DIR="$BUILD_DIR/bench"
if ! compgen -G "$BENCH_DIR/*_bench" > /dev/null; then
  echo "bench.sh: no benchmark binaries in $BENCH_DIR (build first)" >&2
  exit 1
fi

OUT=$(mktemp -d /tmp/trainhooks-bench.XXXXXX)
trap 'rm -rf "$OUT"' EXIT

echo "Machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), load:$(cut -d' ' -f1-3 /proc/loadavg | sed 's/^/ /')"
echo

common=(--benchmark_repetitions="$REPS" --benchmark_report_aggregates_only=true --benchmark_out_format=json)

for bin in "$BENCH_DIR"/*_bench; do
  [[ -x "$bin" ]] || continue
  name=$(basename "$bin")
  if [[ "$name" == fashion_mnist_bench ]]; then
    continue  # below, against the PyTorch peer
  elif [[ "$name" == checkpoint_bench ]]; then
    # Its own protocol: dd, save, snapshot, copy and restore in turn on one disk.
    "$bin" --sizes-mb "${BENCH_CHECKPOINT_SIZES_MB:-1,100,1024}" --repetitions "${BENCH_CHECKPOINT_REPETITIONS:-5}" \
      --dir "${BENCH_CHECKPOINT_DIR:-$BUILD_DIR}" 2> /dev/null
  elif [[ "$name" == session_bench ]]; then
    # The end-to-end comparison runs longer: its iterations are blocks of 100 training steps.
    "$bin" "${common[@]}" --benchmark_min_time="$MIN_TIME" --benchmark_filter='-BM_Seed' \
      --benchmark_out="$OUT/session_micro.json"
    "$bin" "${common[@]}" --benchmark_min_time="$SEED_MIN_TIME" --benchmark_filter='BM_Seed' \
      --benchmark_out="$OUT/session_seed.json"
  else
    "$bin" "${common[@]}" --benchmark_min_time="$MIN_TIME" --benchmark_out="$OUT/$name.json"
  fi
  echo
done

# The main job's model: trainhooks against the PyTorch peer a user would pick, and
# MonitoredTrainingSession (all of the example's hooks, idle steps) against a hand-written loop.
# Twice: with glibc's default malloc settings, and with the example's (freed memory kept in the
# process; GLIBC_TUNABLES gives the PyTorch process the same).
if [[ "${BENCH_FASHION:-1}" != 0 && -x "$BENCH_DIR/fashion_mnist_bench" ]]; then
  THREADS=$(nproc)
  FSTEPS=${BENCH_FASHION_STEPS:-300}
  PEER="$(dirname "$0")/../bench/fashion_mnist_pytorch.py"
  KEEP="glibc.malloc.mmap_threshold=67108864:glibc.malloc.trim_threshold=268435456"
  for config in default keep; do
    echo "== Fashion-MNIST CNN, batch 64, Adam, $THREADS threads, malloc $config: $FSTEPS steps per program, ${BENCH_FASHION_ROUNDS:-3} rounds, interleaved"
    flag=(); tunables=""
    if [[ $config == keep ]]; then flag=(--keep-freed-memory); tunables=$KEEP; fi
    : > "$OUT/fashion.jsonl"
    if /usr/bin/python3 -c "import torch" 2> /dev/null; then
      for round in $(seq "${BENCH_FASHION_ROUNDS:-3}"); do
        GLIBC_TUNABLES=$tunables /usr/bin/python3 "$PEER" --steps "$FSTEPS" --threads "$THREADS" | tail -1 |
          sed 's/^{/{"program": "pytorch", /' >> "$OUT/fashion.jsonl"
        "$BENCH_DIR/fashion_mnist_bench" --mode mts --steps "$FSTEPS" --threads "$THREADS" "${flag[@]}" 2> /dev/null >> "$OUT/fashion.jsonl"
        "$BENCH_DIR/fashion_mnist_bench" --mode raw --steps "$FSTEPS" --threads "$THREADS" "${flag[@]}" 2> /dev/null >> "$OUT/fashion.jsonl"
      done
      python3 - "$OUT/fashion.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {}
for r in rows:
    by.setdefault(r["program"], []).append(r["median_ms_per_step"])
names = {"pytorch": "PyTorch (Python)", "trainhooks mts": "trainhooks MTS", "trainhooks raw": "LibTorch by hand"}
for name, v in by.items():
    print(f"  {names.get(name, name):>17}: {statistics.median(v):.2f} ms per step (rounds: {', '.join(f'{x:.2f}' for x in v)}), "
          f"{statistics.median(v) * 937 / 1000:.1f} s per epoch of 937 steps")
pt, mts = by.get("pytorch"), by.get("trainhooks mts")
if pt and mts:
    ratios = [m / p for m, p in zip(mts, pt)]
    r = statistics.median(ratios)
    print(f"  trainhooks MTS / PyTorch per step: {r:.3f} (rounds: {', '.join(f'{x:.3f}' for x in ratios)}; goal <= 1.0: {'met' if r <= 1.0 else 'NOT met'})")
PY
    else
      echo "  python3-torch not importable: skipping the PyTorch peer"
    fi
    "$BENCH_DIR/fashion_mnist_bench" --mode parity --threads "$THREADS" "${flag[@]}" 2> /dev/null |
      python3 -c "import json,sys; b=json.load(sys.stdin); print(f\"  MonitoredTrainingSession / hand-written loop, {b['steps_each']} steps each in alternating blocks of 25: {b['mts_ms_per_step']:.2f} / {b['raw_ms_per_step']:.2f} ms per step = {b['ratio']:.4f}; per-block median {b['block_ratio_median']:.4f}, range {b['block_ratio_min']:.3f}-{b['block_ratio_max']:.3f} (goal <= 1.005: {'met' if b['ratio'] <= 1.005 else 'NOT met'})\")"
    echo
  done
fi

# Instructions per step of the seed model for each program.
declare -A IPS=()
if [[ "$CALLGRIND" != 0 && -x "$BENCH_DIR/session_bench" ]]; then
  if command -v valgrind > /dev/null; then
    echo "Counting instructions per seed step with callgrind (N = $SEED_STEPS and 3N steps)..."
    for mode in raw mts mts_into session; do
      counts=()
      for steps in "$SEED_STEPS" $((3 * SEED_STEPS)); do
        file="$OUT/callgrind.$mode.$steps"
        valgrind --tool=callgrind --callgrind-out-file="$file" \
          "$BENCH_DIR/session_bench" --seed-steps="$steps" --mode="$mode" > /dev/null 2> "$file.log"
        counts+=("$(awk '/^(summary|totals):/ {print $2; exit}' "$file")")
      done
      IPS[$mode]=$(( (counts[1] - counts[0]) / (2 * SEED_STEPS) ))
    done
  else
    echo "valgrind not found: skipping instruction counts"
  fi
fi

[[ -f "$OUT/session_micro.json" ]] || exit 0
python3 - "$OUT" "${IPS[raw]:-}" "${IPS[mts]:-}" "${IPS[mts_into]:-}" "${IPS[session]:-}" <<'EOF'
import json, sys, os

out, ips_raw, ips_mts, ips_into, ips_session = sys.argv[1:6]

def medians(path):
    rows = {}
    if not os.path.exists(path):
        return rows
    for b in json.load(open(path))["benchmarks"]:
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        rows[b["run_name"]] = b
    return rows

m = medians(os.path.join(out, "session_micro.json"))
m.update(medians(os.path.join(out, "session_seed.json")))

def ns(name):
    b = m.get(name)
    if b is None:
        return None
    scale = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[b.get("time_unit", "ns")]
    # CPU time: on a shared machine the wall time also counts other processes' turns.
    return b["cpu_time"] * scale

def verdict(ok):
    return "met" if ok else "NOT met"

print("== Core results (medians) ==")
print(f"{'nodes':>5} {'direct':>10} {'run_into':>10} {'run':>10}   (CPU ns per run)")
for n in (1, 10, 100):
    d, s, r = ns(f"BM_DirectClosures/{n}"), ns(f"BM_SessionRunInto/{n}"), ns(f"BM_SessionRun/{n}")
    if None not in (d, s, r):
        print(f"{n:>5} {d:>10.1f} {s:>10.1f} {r:>10.1f}")

for label, prefix in (("run_into", "BM_SessionRunInto"), ("run", "BM_SessionRun")):
    d1, d10 = ns("BM_DirectClosures/1"), ns("BM_DirectClosures/10")
    s1, s10 = ns(f"{prefix}/1"), ns(f"{prefix}/10")
    if None in (d1, d10, s1, s10):
        continue
    per_node = ((s10 - d10) - (s1 - d1)) / 9
    per_run = (s1 - d1) - per_node
    print(f"Session::{label}: overhead {per_run:.0f} ns per run (budget 1000: {verdict(per_run <= 1000)}), "
          f"{per_node:.1f} ns per node (budget 200: {verdict(per_node <= 200)})")

h0, h1, h10 = (ns(f"BM_MonitoredStepIdleHooks/{k}") for k in (0, 1, 10))
if None not in (h0, h1, h10):
    per_hook = (h10 - h0) / 10
    print(f"MonitoredSession::run_into: {h0:.0f} ns with no hook, {h1:.0f} with 1, {h10:.0f} with 10 idle hooks: "
          f"{per_hook:.1f} ns per idle hook (budget 100: {verdict(per_hook <= 100)})")

for arg, what, who in ((0, "sess.run(train_op, feeds) as the seed writes it", "MonitoredTrainingSession"),
                       (1, "run_into with reused feeds", "MonitoredTrainingSession"),
                       (2, "split: a bare Session, no monitored session or hooks", "bare Session")):
    b = m.get(f"BM_SeedInterleaved/{arg}")
    if b is None:
        continue
    print(f"Seed model, {what}:")
    print(f"  wall: raw loop {b['raw_ns'] / 1e3:.2f} us/step, {who} {b['mts_ns'] / 1e3:.2f} us/step, "
          f"ratio {b['ratio']:.4f}, per-block median {b['block_ratio_median']:.4f} "
          f"(budget 1.02: {verdict(b['ratio'] <= 1.02)})")
    print(f"  CPU:  raw loop {b['raw_cpu_ns'] / 1e3:.2f} us/step, {who} {b['mts_cpu_ns'] / 1e3:.2f} us/step, "
          f"ratio {b['cpu_ratio']:.4f}, per-block median {b.get('block_cpu_ratio_median', 0):.4f} "
          f"(budget 1.02: {verdict(b['cpu_ratio'] <= 1.02)})")

if ips_raw and ips_mts:
    raw, mts = int(ips_raw), int(ips_mts)
    print(f"Seed model instructions per step: raw loop {raw}, MonitoredTrainingSession {mts}, "
          f"ratio {mts / raw:.4f} (budget 1.02: {verdict(mts / raw <= 1.02)})")
    if ips_into:
        into = int(ips_into)
        print(f"  with run_into and reused feeds: {into}, ratio {into / raw:.4f}")
    if ips_session:
        bare = int(ips_session)
        print(f"  split: a bare Session's run_into: {bare}, ratio {bare / raw:.4f}")
EOF
