#!/usr/bin/env bash
# Measures what a newcomer waits for: a fresh clone of this checkout's HEAD, an empty ccache,
# `make demo` (set-up, configure, build of what the demo needs, the demo itself), then `make test`
# in the same clone (the rest of the build and the whole suite). Prints wall and CPU seconds and
# the load average, so runs under other load can be told apart.
#
#   bash scripts/build-times.sh [REPO]     # REPO: a git repository or path (default: this one)
#
# BUILD_TIMES_DEMO_LOG=FILE keeps a copy of the demo's output.
set -euo pipefail

REPO=${1:-$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)}
WORK=$(mktemp -d /tmp/trainhooks-build-times.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
git clone -q "$REPO" "$WORK/src"
export CCACHE_DIR="$WORK/ccache"  # empty: every translation unit is compiled

load() { cut -d' ' -f1-3 /proc/loadavg; }
sub() { awk -v a="${!1}" -v b="${!2}" 'BEGIN { printf "%.0f", a - b }'; }
# User + system seconds of this shell's finished children; `times` must run in this shell, not in
# a command substitution (a subshell has no children of its own yet).
cpu_seconds() {
  times > "$WORK/times"
  awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/); print u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$WORK/times"
}

echo "Machine: $(nproc) cores, commit $(git -C "$WORK/src" rev-parse --short HEAD), load before: $(load)"
cd "$WORK/src"
cpu_seconds > "$WORK/c0"; c0=$(cat "$WORK/c0"); t0=$(date +%s.%N)
# The build of what the demo needs, then the demo itself (which finds it built).
make build-demo > "$WORK/demo.log" 2>&1 || { tail -30 "$WORK/demo.log"; exit 1; }
tb=$(date +%s.%N)
make demo >> "$WORK/demo.log" 2>&1 || { tail -30 "$WORK/demo.log"; exit 1; }
t1=$(date +%s.%N); cpu_seconds > "$WORK/c1"; c1=$(cat "$WORK/c1")
echo "make demo (fresh clone, empty ccache): $(sub t1 t0) s wall ($(sub tb t0) s set-up and build, $(sub t1 tb) s running the demo), $(sub c1 c0) s CPU, load after: $(load)"
grep -E "^Budget|epochs; regularisation|^Final test accuracy" "$WORK/demo.log" | sed 's/^/  demo: /'
[[ -n "${BUILD_TIMES_DEMO_LOG:-}" ]] && cp "$WORK/demo.log" "$BUILD_TIMES_DEMO_LOG"
make test > "$WORK/test.log" 2>&1 || { tail -30 "$WORK/test.log"; exit 1; }
t2=$(date +%s.%N); cpu_seconds > "$WORK/c2"; c2=$(cat "$WORK/c2")
echo "make test after it: $(sub t2 t1) s wall, $(sub c2 c1) s CPU, load after: $(load)"
grep -E "tests passed|Total Test time" "$WORK/test.log"
echo "make test on a fresh clone (the two together): $(sub t2 t0) s wall"
