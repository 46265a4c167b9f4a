#!/usr/bin/env bash
# Runs every benchmark binary in BUILD_DIR/bench and ends with one table of every budget: metric,
# budget as DESIGN.md (or the issue that set it) states it, what was measured (median, range and
# number of runs; callgrind's exact instruction counts where a per-step ratio is claimed), verdict
# and the load average while that row was measured. The table is printed and written as Markdown
# to BUILD_DIR/bench/budgets.md; the raw results it is made from stay in BUILD_DIR/bench/results
# (`python3 scripts/bench_table.py --results DIR` remakes the table from them).
#
#   bash scripts/bench.sh [--update-docs] [BUILD_DIR]
#
# --update-docs: also replace the "Budgets on this machine" section of docs/benchmarks.md with the
# table (`make bench-docs`); `python3 scripts/bench_table.py --check docs/benchmarks.md` (a ctest)
# checks that section.
#
# Environment: BENCH_REPETITIONS (5, at least 3: Google Benchmark's repetitions, each one a run of
# the table), BENCH_MIN_TIME (seconds per micro benchmark, 0.5), BENCH_SEED_MIN_TIME (seconds per
# end-to-end benchmark, 3), BENCH_SEED_STEPS (N for callgrind, 1000), BENCH_CALLGRIND (0 skips the
# instruction counts), BENCH_CHECKPOINT_SIZES_MB (1,100,1024: the checkpoint benchmark's state
# sizes; it writes in BENCH_CHECKPOINT_DIR, default the build dir), BENCH_CHECKPOINT_REPETITIONS
# (5), BENCH_FASHION (0 skips the Fashion-MNIST comparisons), BENCH_FASHION_ROUNDS (3, each one
# running the three malloc configurations in turn), BENCH_FASHION_STEPS (300 per program per round),
# BENCH_FASHION_PARITY_BLOCKS (20 blocks of 25 steps per program in each round's parity run),
# BENCH_BOARD (0 skips the board at scale), BENCH_BOARD_ROUNDS (3), BENCH_BOARD_DIR (its 2.5 GB
# log directory, default BUILD_DIR/board_bench_logdir), BENCH_DISTRIBUTED_ROUNDS (5).
set -euo pipefail

UPDATE_DOCS=0
if [[ "${1:-}" == --update-docs ]]; then
  UPDATE_DOCS=1
  shift
fi
BUILD_DIR=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TABLE_PY="$ROOT/scripts/bench_table.py"
REPS=${BENCH_REPETITIONS:-5}
MIN_TIME=${BENCH_MIN_TIME:-0.5}
SEED_MIN_TIME=${BENCH_SEED_MIN_TIME:-3}
SEED_STEPS=${BENCH_SEED_STEPS:-1000}
CALLGRIND=${BENCH_CALLGRIND:-1}
CHECKPOINT_SIZES=${BENCH_CHECKPOINT_SIZES_MB:-1,100,1024}
CHECKPOINT_REPS=${BENCH_CHECKPOINT_REPETITIONS:-5}
FASHION=${BENCH_FASHION:-1}
FASHION_ROUNDS=${BENCH_FASHION_ROUNDS:-3}
FSTEPS=${BENCH_FASHION_STEPS:-300}
PARITY_BLOCKS=${BENCH_FASHION_PARITY_BLOCKS:-20}
BOARD=${BENCH_BOARD:-1}
BOARD_ROUNDS=${BENCH_BOARD_ROUNDS:-3}
DISTRIBUTED_ROUNDS=${BENCH_DISTRIBUTED_ROUNDS:-5}
if ((REPS < 3)); then
  # Fewer repetitions give no range worth the name; the table shows the median of n >= 3.
  echo "bench.sh: BENCH_REPETITIONS=$REPS raised to 3 (each row gives a median and a range)" >&2
  REPS=3
fi

BENCH_DIR="$BUILD_DIR/bench"
if ! compgen -G "$BENCH_DIR/*_bench" > /dev/null; then
  echo "bench.sh: no benchmark binaries in $BENCH_DIR (build first)" >&2
  exit 1
fi

# Raw results, kept for the table (and for anyone who wants to remake it); scratch files elsewhere.
RESULTS="$BENCH_DIR/results"
rm -rf "$RESULTS"
mkdir -p "$RESULTS"
OUT=$(mktemp -d /tmp/trainhooks-bench.XXXXXX)
trap 'rm -rf "$OUT"' EXIT

# load_mark STAGE: the 1-minute load average now, filed under STAGE. Each stage is marked before
# and after it runs (and between rounds), which gives every row of the table its load column.
load_mark() { printf '%s\t%s\n' "$1" "$(cut -d' ' -f1 /proc/loadavg)" >> "$RESULTS/load.tsv"; }

CPU_MODEL=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
{
  printf 'date\t%s\n' "$(date -u '+%Y-%m-%d %H:%M UTC')"
  printf 'commit\t%s\n' "$(git -C "$ROOT" describe --always --dirty 2> /dev/null || echo unknown)"
  printf 'cores\t%s\n' "$(nproc)"
  printf 'cpu\t%s\n' "$CPU_MODEL"
  printf 'distributed_rounds\t%s\n' "$DISTRIBUTED_ROUNDS"
  printf 'settings\t%s\n' "BENCH_REPETITIONS=$REPS BENCH_MIN_TIME=$MIN_TIME BENCH_SEED_MIN_TIME=$SEED_MIN_TIME \
BENCH_CALLGRIND=$CALLGRIND BENCH_SEED_STEPS=$SEED_STEPS BENCH_CHECKPOINT_SIZES_MB=$CHECKPOINT_SIZES \
BENCH_CHECKPOINT_REPETITIONS=$CHECKPOINT_REPS BENCH_FASHION=$FASHION BENCH_FASHION_ROUNDS=$FASHION_ROUNDS \
BENCH_FASHION_STEPS=$FSTEPS BENCH_FASHION_PARITY_BLOCKS=$PARITY_BLOCKS BENCH_BOARD=$BOARD \
BENCH_BOARD_ROUNDS=$BOARD_ROUNDS BENCH_DISTRIBUTED_ROUNDS=$DISTRIBUTED_ROUNDS"
} > "$RESULTS/meta.tsv"
load_mark run

echo "Machine: $(nproc) cores, $CPU_MODEL, load:$(cut -d' ' -f1-3 /proc/loadavg | sed 's/^/ /')"
echo

# Every repetition stays in the JSON (the table's median and range come from them); the console
# shows only the aggregates.
common=(--benchmark_repetitions="$REPS" --benchmark_display_aggregates_only=true --benchmark_out_format=json)

for bin in "$BENCH_DIR"/*_bench; do
  [[ -x "$bin" ]] || continue
  name=$(basename "$bin")
  if [[ "$name" == fashion_mnist_bench ]]; then
    continue  # below, against the PyTorch peer
  elif [[ "$name" == board_bench ]]; then
    # `trainhooks board` at the issue's scale: 20 runs x 50 tags x 100 k steps (a 2.5 GB log
    # directory, written once and reused), read and served BENCH_BOARD_ROUNDS times.
    [[ "$BOARD" == 0 ]] && continue
    board_dir=${BENCH_BOARD_DIR:-$BUILD_DIR/board_bench_logdir}
    echo "== Board: 20 runs x 50 tags x 100k steps in $board_dir"
    load_mark board_bench
    for _ in $(seq "$BOARD_ROUNDS"); do
      "$bin" --logdir "$board_dir" | tee -a "$RESULTS/board.txt" | grep -v '^json:' || echo "  board_bench failed"
      load_mark board_bench
    done
  elif [[ "$name" == distributed_bench ]]; then
    # Two processes of itself on loopback: gradient averaging and 1- vs 2-process throughput.
    echo "== Distributed (2 processes on loopback, $(nproc) cores)"
    load_mark distributed_bench
    "$bin" --rounds "$DISTRIBUTED_ROUNDS" 2> /dev/null > "$RESULTS/distributed.jsonl" || echo "  distributed_bench failed"
    load_mark distributed_bench
    python3 "$TABLE_PY" --results "$RESULTS" --summary distributed
  elif [[ "$name" == checkpoint_bench ]]; then
    # Its own protocol: dd, save, snapshot, copy and restore in turn on one disk. Its human table
    # shows MB/s for orientation; the budget table takes only the "json:" lines' ratios.
    load_mark checkpoint_bench
    "$bin" --sizes-mb "$CHECKPOINT_SIZES" --repetitions "$CHECKPOINT_REPS" \
      --dir "${BENCH_CHECKPOINT_DIR:-$BUILD_DIR}" 2> /dev/null | tee "$RESULTS/checkpoint.txt" | grep -v '^json:' ||
      echo "  checkpoint_bench failed"
    load_mark checkpoint_bench
  elif [[ "$name" == session_bench ]]; then
    # The end-to-end comparison runs longer: its iterations are blocks of 100 training steps.
    load_mark session_micro
    "$bin" "${common[@]}" --benchmark_min_time="$MIN_TIME" --benchmark_filter='-BM_Seed' \
      --benchmark_out="$RESULTS/session_micro.json" || echo "  session_bench failed"
    load_mark session_micro
    load_mark session_seed
    "$bin" "${common[@]}" --benchmark_min_time="$SEED_MIN_TIME" --benchmark_filter='BM_Seed' \
      --benchmark_out="$RESULTS/session_seed.json" || echo "  session_bench (seed) failed"
    load_mark session_seed
    python3 "$TABLE_PY" --results "$RESULTS" --summary session
  else
    load_mark "$name"
    "$bin" "${common[@]}" --benchmark_min_time="$MIN_TIME" --benchmark_out="$RESULTS/$name.json" || echo "  $name failed"
    load_mark "$name"
  fi
  echo
done

# The main job's model: trainhooks against the PyTorch peer a user would pick, and
# MonitoredTrainingSession (all of the example's hooks, idle steps) against a hand-written loop
# in one process (the parity run), in three malloc configurations:
#   default  no setting anywhere, as a user's program runs: the first Session tunes malloc itself
#            (the hand-written loop creates none and keeps glibc's defaults, as does the peer);
#   keep     mallopt by hand (--keep-freed-memory), and the same thresholds through
#            GLIBC_TUNABLES for the peer;
#   off      TRAINHOOKS_MALLOC_TUNING=0 for the C++ programs: glibc's defaults, what a program got
#            before the library tuned malloc; the peer as in default.
# Each round runs the configurations one after the other (and each one's programs in turn), so that
# a slow phase of the machine hits both sides of a ratio (default against keep, trainhooks against
# the peer) in the same round. "off" skips the hand-written loop (without a Session it is the same
# program in the same environment as in default) but keeps the parity run: since its Session tunes
# the whole process, that is where MonitoredTrainingSession against the loop at glibc's defaults
# still shows. Each JSON line gets its configuration, round and program, for the table; each
# configuration's runs are load-marked under fashion_<config>.
if [[ "$FASHION" != 0 && -x "$BENCH_DIR/fashion_mnist_bench" ]]; then
  THREADS=$(nproc)
  PEER="$ROOT/bench/fashion_mnist_pytorch.py"
  KEEP="glibc.malloc.mmap_threshold=67108864:glibc.malloc.trim_threshold=268435456"
  # Malloc settings of the caller's environment would turn the library's tuning off or tune the
  # peer: every program starts without them and gets only its configuration's.
  CLEAN_ENV=(env -u GLIBC_TUNABLES -u MALLOC_MMAP_THRESHOLD_ -u MALLOC_TRIM_THRESHOLD_ -u TRAINHOOKS_MALLOC_TUNING)
  have_peer=1
  /usr/bin/python3 -c "import torch" 2> /dev/null || have_peer=0
  echo "== Fashion-MNIST CNN, batch 64, Adam, $THREADS threads: $FASHION_ROUNDS rounds of malloc default, keep and" \
    "off in turn; $FSTEPS steps per program, then $PARITY_BLOCKS blocks of 25 steps each in one process"
  ((have_peer)) || echo "  python3-torch not importable: skipping the PyTorch peer"
  for round in $(seq "$FASHION_ROUNDS"); do
    for config in default keep off; do
      flag=()
      peer_env=()
      cpp_env=()
      modes=(mts raw)
      case $config in
        keep)
          flag=(--keep-freed-memory)
          peer_env=("GLIBC_TUNABLES=$KEEP")
          ;;
        off)
          cpp_env=(TRAINHOOKS_MALLOC_TUNING=0)
          modes=(mts)
          ;;
      esac
      tag="\"config\": \"$config\", \"round\": $round"
      load_mark "fashion_$config"
      if ((have_peer)); then
        "${CLEAN_ENV[@]}" "${peer_env[@]}" /usr/bin/python3 "$PEER" --steps "$FSTEPS" --threads "$THREADS" | tail -1 |
          sed "s/^{/{$tag, \"program\": \"pytorch\", /" >> "$RESULTS/fashion.jsonl" || echo "  the PyTorch peer failed"
      fi
      for mode in "${modes[@]}"; do
        "${CLEAN_ENV[@]}" "${cpp_env[@]}" "$BENCH_DIR/fashion_mnist_bench" --mode "$mode" --steps "$FSTEPS" \
          --threads "$THREADS" "${flag[@]}" 2> /dev/null |
          sed "s/^{/{$tag, /" >> "$RESULTS/fashion.jsonl" || echo "  fashion_mnist_bench --mode $mode ($config) failed"
      done
      "${CLEAN_ENV[@]}" "${cpp_env[@]}" "$BENCH_DIR/fashion_mnist_bench" --mode parity --blocks "$PARITY_BLOCKS" \
        --threads "$THREADS" "${flag[@]}" 2> /dev/null |
        sed "s/^{/{$tag, \"program\": \"parity\", /" >> "$RESULTS/fashion.jsonl" ||
        echo "  fashion_mnist_bench --mode parity ($config) failed"
      load_mark "fashion_$config"
    done
    echo "  round $round of $FASHION_ROUNDS done"
  done
  python3 "$TABLE_PY" --results "$RESULTS" --summary fashion
  echo
fi

# Instructions per step, with callgrind: N and 3N steps of each loop, the difference over 2N
# (start-up and set-up cancel out). Deterministic: the machine's load does not change them.
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
    # count NAME MODE [ARG...]: callgrind's totals for N and 3N steps of `session_bench
    # --mode=MODE`, one line each in callgrind.tsv (instructions; with CACHE_SIM set, also the
    # simulated cache and branch events). bench_table.py takes the difference per step.
    count() {
      local name=$1 mode=$2 file steps
      shift 2
      for steps in "$SEED_STEPS" $((3 * SEED_STEPS)); do
        file="$OUT/callgrind.$name.$steps"
        if LD_PRELOAD=$PRELOAD valgrind --tool=callgrind ${CACHE_SIM:+--cache-sim=yes --branch-sim=yes} \
          --callgrind-out-file="$file" "$BENCH_DIR/session_bench" --seed-steps="$steps" --mode="$mode" "$@" \
          > /dev/null 2> "$file.log"; then
          printf '%s\t%s\t%s\n' "$name" "$steps" "$(awk '/^(summary|totals):/ {$1 = ""; print; exit}' "$file" | sed 's/^ *//')" \
            >> "$RESULTS/callgrind.tsv"
        else
          echo "  callgrind of session_bench --mode=$mode $* failed (see $file.log)"
        fi
      done
    }
    echo "== Instructions per step with callgrind (N = $SEED_STEPS and 3N steps)"
    load_mark callgrind
    # seed_hook: the seed program as it runs (its hook fetches the loss every step), the budget
    # row; mts: the default hooks only. The *_value pair records the loss's value (item()) on
    # both sides, as the seed's MyHook does.
    for mode in raw raw_keep seed_hook mts mts_into session; do
      CACHE_SIM=1 count "$mode" "$mode"
    done
    # raw_keep_none: the loop dropping its gradients as the library's train op does (the
    # bookkeeping alone, without that saving).
    for mode in seed_hook_value raw_keep_value raw_keep_none; do
      count "$mode" "$mode"
    done
    for spec in "idle_hooks 0" "idle_hooks 10" "declared_idle_hooks 10" "called_idle_hooks 10" "chain 1" "chain 100" "direct 1" "direct 100"; do
      set -- $spec
      count "$1_$2" "$1" --n="$2"
    done
    load_mark callgrind
    python3 "$TABLE_PY" --results "$RESULTS" --summary callgrind
    echo
  else
    echo "valgrind not found: skipping instruction counts"
  fi
fi

# The one table: every budget with what was measured, its verdict and the load.
load_mark run
echo "== Budgets"
python3 "$TABLE_PY" --results "$RESULTS" --markdown "$BENCH_DIR/budgets.md"
echo "(written to $BENCH_DIR/budgets.md; raw results in $RESULTS)"
if ((UPDATE_DOCS)); then
  python3 "$TABLE_PY" --update-docs "$ROOT/docs/benchmarks.md" --markdown "$BENCH_DIR/budgets.md"
  echo "docs/benchmarks.md: the \"Budgets on this machine\" section replaced"
fi
