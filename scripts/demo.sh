#!/usr/bin/env bash
# The main job: a small CNN trained on Fashion-MNIST for DEMO_MINUTES (3) minutes inside
# MonitoredTrainingSession with evaluation, a learning-rate schedule, summaries, checkpoints and a
# progress bar (examples/fashion_mnist.cpp), from a fresh directory.
#
# Then the seed program: trains the seed model (y = W·x + b) inside MonitoredTrainingSession with a hook
# that prints the loss every step and saves the model with a Saver when the session ends, then
# trains again with the same checkpoint directory: the second run resumes where the first stopped.
set -euo pipefail
BUILD_DIR=${1:-build}
OUT_DIR=${OUT_DIR:-$BUILD_DIR/demo}
SEED="$BUILD_DIR/examples/seed_linear_regression"
FASHION="$BUILD_DIR/examples/fashion_mnist"
mkdir -p "$OUT_DIR"

rm -rf "$OUT_DIR/fashion_mnist"
echo "== Fashion-MNIST: $FASHION --minutes ${DEMO_MINUTES:-3} --logdir $OUT_DIR/fashion_mnist"
rc=0
"$FASHION" --minutes "${DEMO_MINUTES:-3}" --logdir "$OUT_DIR/fashion_mnist" || rc=$?
# 75: stopped by its time limit before the end of its plan (checkpoint saved): not a failure of
# the demo, and said above.
if ((rc != 0 && rc != 75)); then exit "$rc"; fi
echo
echo "Summaries of that run (the live board: $BUILD_DIR/tools/trainhooks board $OUT_DIR/fashion_mnist):"
"$BUILD_DIR/tools/trainhooks" events "$OUT_DIR/fashion_mnist" || true
echo
echo "== The seed program: y = W·x + b in MonitoredTrainingSession(hooks = {MyHook})"
rm -rf "$OUT_DIR/logs" "$OUT_DIR/ckpt"
echo "== First run: 100 steps, checkpoints every 50 steps in $OUT_DIR/ckpt"
"$SEED" --steps 100 --model "$OUT_DIR/model.pt" --logdir "$OUT_DIR/logs" --checkpoint_dir "$OUT_DIR/ckpt"
echo
echo "== Second run, same checkpoint directory: resumes from the first run's last checkpoint"
"$SEED" --steps 20 --model "$OUT_DIR/model.pt" --checkpoint_dir "$OUT_DIR/ckpt" 2>&1 |
  grep -E "Restoring parameters|Starting at|Saving checkpoints|^W = |Saved the model"
echo
echo "Checkpoints in $OUT_DIR/ckpt:"
"$BUILD_DIR/tools/trainhooks" checkpoint list "$OUT_DIR/ckpt" || true
echo
echo "Summaries of the first run in $OUT_DIR/logs:"
"$BUILD_DIR/tools/trainhooks" events "$OUT_DIR/logs"
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
  echo "The saved model, read back in Python with torch.load:"
  /usr/bin/python3 -c "import sys, torch; print({k: v.tolist() for k, v in torch.load(sys.argv[1]).items()})" "$OUT_DIR/model.pt"
fi
echo
echo "To see the training curves in the browser (no Python needed), run"
echo "  $BUILD_DIR/tools/trainhooks board $OUT_DIR"
echo "and open http://localhost:6006, or write them into one HTML file:"
echo "  $BUILD_DIR/tools/trainhooks report $OUT_DIR -o $OUT_DIR/report.html"
