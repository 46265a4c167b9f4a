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
# BENCH_FASHION_STEPS (300 per program per round), BENCH_BOARD (0 skips the board at scale),
# BENCH_BOARD_ROUNDS (3), BENCH_BOARD_DIR (its 2.5 GB log directory, default BUILD_DIR/board_bench_logdir).
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
TABLE="$OUT/table.tsv"  # metric, budget, measured, verdict: printed as one table at the end
: > "$TABLE"

echo "Machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), load:$(cut -d' ' -f1-3 /proc/loadavg | sed 's/^/ /')"
echo

common=(--benchmark_repetitions="$REPS" --benchmark_report_aggregates_only=true --benchmark_out_format=json)

for bin in "$BENCH_DIR"/*_bench; do
  [[ -x "$bin" ]] || continue
  name=$(basename "$bin")
  if [[ "$name" == fashion_mnist_bench ]]; then
    continue  # below, against the PyTorch peer
  elif [[ "$name" == board_bench ]]; then
    # `trainhooks board` at the issue's scale: 20 runs x 50 tags x 100 k steps (a 2.5 GB log
    # directory, written once and reused), read and served BENCH_BOARD_ROUNDS times.
    [[ "${BENCH_BOARD:-1}" == 0 ]] && continue
    board_dir=${BENCH_BOARD_DIR:-$BUILD_DIR/board_bench_logdir}
    echo "== Board: 20 runs x 50 tags x 100k steps in $board_dir"
    for _ in $(seq "${BENCH_BOARD_ROUNDS:-3}"); do
      "$bin" --logdir "$board_dir" | tee -a "$OUT/board.txt" | grep -v '^json:' || echo "  board_bench failed"
    done
    grep '^json:' "$OUT/board.txt" | cut -c7- > "$OUT/board.jsonl" || true
    python3 - "$OUT/board.jsonl" "$TABLE" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
if rows:
    def agg(key):
        v = [r[key] for r in rows]
        return statistics.median(v), min(v), max(v)
    with open(sys.argv[2], "a") as t:
        def row(metric, budget, key, unit, limit, fmt="{:.2f}"):
            m, lo, hi = agg(key)
            measured = f"{fmt.format(m)} {unit} ({fmt.format(lo)}-{fmt.format(hi)}, {len(rows)} runs)"
            verdict = "(reported)" if limit is None else ("met" if m <= limit else "NOT met")
            t.write(f"{metric}\t{budget}\t{measured}\t{verdict}\n")
        row("board: tag list (GET /api/runs), 20 runs x 50 tags", "< 1 s", "runs_ms", "ms", 1000)
        row("board: a 100k-point series, downsampled to 2000", "< 0.5 s", "series_2000_ms", "ms", 500)
        row("board: a 100k-point series in full (max_points=100000)", "< 0.5 s", "series_100k_ms", "ms", 500)
        row("board: first read of the 2.5 GB log directory", "(reported)", "load_s", "s", None)
        row("board: peak memory after reading 100 M scalar points", "bounded (20 B a point)", "hwm_mib", "MiB", None, "{:.0f}")
PY
    echo
  elif [[ "$name" == distributed_bench ]]; then
    # Two processes of itself on loopback: gradient averaging and 1- vs 2-process throughput.
    echo "== Distributed (2 processes on loopback, $(nproc) cores)"
    "$bin" --rounds "${BENCH_DISTRIBUTED_ROUNDS:-5}" 2> /dev/null > "$OUT/distributed.jsonl" || echo "  distributed_bench failed"
    python3 - "$OUT/distributed.jsonl" "$TABLE" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
table = open(sys.argv[2], "a")
def fmt(d, unit=""):
    return f"{d['median']:.3g}{unit} ({d['min']:.3g}-{d['max']:.3g})"
tp = {}
for r in rows:
    if r["bench"] == "averaging":
        print(f"  averaging {r['gradients']} ({r['tensors']} tensors, {r['elements']} elements): "
              f"bucketed {fmt(r['bucketed_us'], ' us')}, one allreduce per tensor {fmt(r['per_tensor_us'], ' us')}, "
              f"one allreduce of all {fmt(r['one_flat_us'], ' us')}")
        ok = r["ratio_per_tensor"]["median"] <= 1.05
        table.write("\t".join([f"gradient averaging / per-tensor allreduce, {r['gradients']}", "<= 1.05",
                               fmt(r["ratio_per_tensor"]), "met" if ok else "NOT met"]) + "\n")
        table.write("\t".join([f"gradient averaging / one flat allreduce, {r['gradients']}", "(reported)",
                               fmt(r["ratio_one_flat"]), "-"]) + "\n")
    elif r["bench"] == "stop_agreement":
        print(f"  agreed stop decision (one allreduce of a flag per run): {fmt(r['us'], ' us')}")
        table.write("\t".join(["agreed stop decision per run, 2 processes, us", "(reported)",
                               fmt(r["us"]), "-"]) + "\n")
    elif r["bench"] == "throughput":
        tp[(r["processes"], r["threads_each"])] = r
        print(f"  {r['processes']} process(es), {r['threads_each']} thread(s) each, batch {r['batch_each']} each: "
              f"{fmt(r['examples_per_s'], ' examples/s')}")
one = max((k for k in tp if k[0] == 1), default=None, key=lambda k: k[1])
two = next((k for k in tp if k[0] == 2), None)
if one and two:
    ratio = tp[two]["examples_per_s"]["median"] / tp[one]["examples_per_s"]["median"]
    table.write("\t".join(["CNN throughput, 2 processes / 1 process, same global batch", "(reported)",
                           f"{ratio:.3f}", "-"]) + "\n")
PY
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

# Instructions per step, with callgrind: N and 3N steps of each loop, the difference over 2N
# (start-up and set-up cancel out). Deterministic: the machine's load does not change them.
declare -A IPS=()
if [[ "$CALLGRIND" != 0 && -x "$BENCH_DIR/session_bench" ]]; then
  if command -v valgrind > /dev/null; then
    # LibTorch loads libhwy, whose start-up reads the time stamp counter with RDTSCP. On a CPU that
    # does not announce RDTSCP (some virtual machines), valgrind stops there with SIGILL: a
    # one-function stand-in is preloaded, which only the timer calibration ever calls.
    PRELOAD=""
    if ! grep -qw rdtscp /proc/cpuinfo && command -v c++ > /dev/null; then
      printf '#include <cstdint>\nnamespace hwy::platform { uint64_t TimerResolution() { return 1; } }\n' > "$OUT/hwy_timer.cpp"
      c++ -shared -fPIC -O2 -o "$OUT/libhwy_timer.so" "$OUT/hwy_timer.cpp" && PRELOAD="$OUT/libhwy_timer.so"
    fi
    # per_step NAME MODE [ARG...]: callgrind's events per step of `session_bench --mode=MODE`
    # (instructions; with CACHE_SIM set, also the simulated cache and branch events), space-separated.
    per_step() {
      local name=$1 mode=$2; shift 2
      local counts=() file
      for steps in "$SEED_STEPS" $((3 * SEED_STEPS)); do
        file="$OUT/callgrind.$name.$steps"
        LD_PRELOAD=$PRELOAD valgrind --tool=callgrind ${CACHE_SIM:+--cache-sim=yes --branch-sim=yes} \
          --callgrind-out-file="$file" "$BENCH_DIR/session_bench" --seed-steps="$steps" --mode="$mode" "$@" \
          > /dev/null 2> "$file.log"
        counts+=("$(awk '/^(summary|totals):/ {$1 = ""; print; exit}' "$file")")
      done
      python3 -c "import sys; a, b = (list(map(int, x.split())) for x in sys.argv[1:3]); n = int(sys.argv[3]); print(' '.join(str(round((y - x) / (2 * n), 1)) for x, y in zip(a, b)))" \
        "${counts[0]}" "${counts[1]}" "$SEED_STEPS"
    }
    echo "Counting instructions per step with callgrind (N = $SEED_STEPS and 3N steps)..."
    for mode in raw raw_keep mts mts_into session; do
      IPS[$mode]=$(CACHE_SIM=1 per_step "$mode" "$mode")
    done
    for spec in "idle_hooks 0" "idle_hooks 10" "declared_idle_hooks 10" "chain 1" "chain 100" "direct 1" "direct 100"; do
      set -- $spec
      IPS[$1_$2]=$(per_step "$1_$2" "$1" --n="$2" | cut -d' ' -f1)
    done
    python3 - "$TABLE" "${IPS[raw]}" "${IPS[raw_keep]}" "${IPS[mts]}" "${IPS[mts_into]}" "${IPS[session]}" \
      "${IPS[idle_hooks_0]}" "${IPS[idle_hooks_10]}" "${IPS[chain_1]}" "${IPS[chain_100]}" \
      "${IPS[direct_1]}" "${IPS[direct_100]}" "${IPS[declared_idle_hooks_10]}" <<'PY'
import sys
table = sys.argv[1]
# Callgrind's event order with --cache-sim=yes --branch-sim=yes.
names = ["Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw", "Bc", "Bcm", "Bi", "Bim"]
ev = {k: dict(zip(names, map(float, v.split()))) for k, v in zip(
    ["raw", "raw_keep", "mts", "mts_into", "session"], sys.argv[2:7])}
idle0, idle10, chain1, chain100, direct1, direct100 = map(float, sys.argv[7:13])
rows = []
def row(metric, budget, measured, ok):
    rows.append((metric, budget, measured, "met" if ok else "NOT met"))
raw, keep, mts = ev["raw"]["Ir"], ev["raw_keep"]["Ir"], ev["mts"]["Ir"]
print(f"Instructions per seed step: raw loop {raw:.0f}, raw loop keeping its last loss {keep:.0f}, "
      f"MonitoredTrainingSession {mts:.0f} (run_into, reused feeds: {ev['mts_into']['Ir']:.0f}; bare Session: {ev['session']['Ir']:.0f})")
row("seed step instructions, MTS / loop keeping its loss", "<= 1.005", f"{mts / keep:.4f} ({mts:.0f} / {keep:.0f})", mts / keep <= 1.005)
row("seed step instructions, MTS / loop dropping its loss", "(reported)", f"{mts / raw:.4f} ({mts:.0f} / {raw:.0f})", True)
added = {k: ev["mts"][k] - ev["raw_keep"][k] for k in ("D1mr", "D1mw", "Bcm", "Bim")}
print("Added per seed step against the loop keeping its loss: "
      f"{added['D1mr']:+.0f} L1 data read misses, {added['D1mw']:+.0f} write misses, "
      f"{added['Bcm'] + added['Bim']:+.0f} branch mispredicts (callgrind's simulated caches)")
row("added L1d read / write misses, branch mispredicts per step", "(reported)",
    f"{added['D1mr']:+.0f} / {added['D1mw']:+.0f} / {added['Bcm'] + added['Bim']:+.0f}", True)
declared10 = float(sys.argv[13])
per_declared = (declared10 - idle0) / 10
row("idle hook declaring its calls (SessionRunHook::calls), instructions per step", "<= 50",
    f"{per_declared:.1f}", per_declared <= 50)
per_hook = (idle10 - idle0) / 10
row("idle hook declaring nothing (both calls made), instructions per step", "(reported)",
    f"{per_hook:.1f}", True)
per_node = ((chain100 - direct100) - (chain1 - direct1)) / 99
row("session bookkeeping per node, instructions", "<= 100", f"{per_node:.1f}", per_node <= 100)
per_run = (idle0 - direct1) - per_node
row("monitored run bookkeeping (no hook), instructions", "<= 500", f"{per_run:.0f}", per_run <= 500)
with open(table, "a") as f:
    for r in rows:
        f.write("\t".join(r) + "\n")
PY
  else
    echo "valgrind not found: skipping instruction counts"
  fi
fi

# The session's derived costs, when session_bench ran.
[[ -f "$OUT/session_micro.json" ]] && python3 - "$OUT" "$TABLE" <<'EOF'
import json, sys, os

out, table = sys.argv[1:3]
def table_row(metric, budget, measured, ok):
    with open(table, "a") as f:
        f.write("\t".join((metric, budget, measured, "met" if ok else "NOT met")) + "\n")

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
    if label == "run_into":
        table_row("Session run overhead, CPU ns (median of repetitions)", "<= 1000", f"{per_run:.0f}", per_run <= 1000)
        table_row("Session per-node overhead, CPU ns", "<= 200", f"{per_node:.1f}", per_node <= 200)

h0, h1, h10 = (ns(f"BM_MonitoredStepIdleHooks/{k}") for k in (0, 1, 10))
if None not in (h0, h1, h10):
    per_hook = (h10 - h0) / 10
    print(f"MonitoredSession::run_into: {h0:.0f} ns with no hook, {h1:.0f} with 1, {h10:.0f} with 10 idle hooks: "
          f"{per_hook:.1f} ns per idle hook (budget 100: {verdict(per_hook <= 100)})")
    table_row("idle hook, CPU ns per step", "<= 100", f"{per_hook:.1f}", per_hook <= 100)

for arg, what, who in ((3, "sess.run(train_op, feeds) as the seed writes it, against the loop keeping its loss", "MonitoredTrainingSession"),
                       (0, "sess.run(train_op, feeds) as the seed writes it, against the loop dropping its loss", "MonitoredTrainingSession"),
                       (1, "run_into with reused feeds", "MonitoredTrainingSession"),
                       (2, "split: a bare Session, no monitored session or hooks", "bare Session")):
    b = m.get(f"BM_SeedInterleaved/{arg}")
    if b is None:
        continue
    print(f"Seed model, {what}:")
    print(f"  wall: raw loop {b['raw_ns'] / 1e3:.2f} us/step, {who} {b['mts_ns'] / 1e3:.2f} us/step, "
          f"ratio {b['ratio']:.4f}, per-block median {b['block_ratio_median']:.4f} "
          f"(budget 1.02: {verdict(b['ratio'] <= 1.02)})")
    if arg == 3:
        table_row("seed step wall time, MTS / loop keeping its loss, interleaved", "<= 1.02",
                  f"{b['ratio']:.4f} (per-block median {b['block_ratio_median']:.4f})", b["ratio"] <= 1.02)
    if arg == 0:
        table_row("seed step wall time, MTS / loop dropping its loss, interleaved", "(reported)",
                  f"{b['ratio']:.4f} (per-block median {b['block_ratio_median']:.4f})", True)
    print(f"  CPU:  raw loop {b['raw_cpu_ns'] / 1e3:.2f} us/step, {who} {b['mts_cpu_ns'] / 1e3:.2f} us/step, "
          f"ratio {b['cpu_ratio']:.4f}, per-block median {b.get('block_cpu_ratio_median', 0):.4f} "
          f"(budget 1.02: {verdict(b['cpu_ratio'] <= 1.02)})")

EOF

# The one table: every budget with what was measured and its verdict.
if [[ -s "$TABLE" ]]; then
  echo
  echo "== Budgets ($(nproc) cores, load at the end:$(cut -d' ' -f1-3 /proc/loadavg | sed 's/^/ /')) =="
  python3 - "$TABLE" <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
head = ("metric", "budget", "measured", "verdict")
w = [max(len(r[i]) for r in rows + [head]) for i in range(4)]
print("| " + " | ".join(h.ljust(w[i]) for i, h in enumerate(head)) + " |")
print("|" + "|".join("-" * (x + 2) for x in w) + "|")
for r in rows:
    print("| " + " | ".join(c.ljust(w[i]) for i, c in enumerate(r)) + " |")
PY
fi
