#!/usr/bin/env bash
# The main job: trains the seed model (y = W·x + b) inside MonitoredTrainingSession with a hook
# that prints the loss every step and saves the model when the session ends.
set -euo pipefail
BUILD_DIR=${1:-build}
OUT_DIR=${OUT_DIR:-$BUILD_DIR/demo}
mkdir -p "$OUT_DIR"
rm -rf "$OUT_DIR/logs"
"$BUILD_DIR/examples/seed_linear_regression" --model "$OUT_DIR/model.pt" --logdir "$OUT_DIR/logs"
echo "TensorBoard summaries written to $OUT_DIR/logs (tensorboard --logdir $OUT_DIR/logs):"
"$BUILD_DIR/tools/trainhooks" events "$OUT_DIR/logs"
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
  echo "The saved model, read back in Python with torch.load:"
  /usr/bin/python3 -c "import sys, torch; print({k: v.tolist() for k, v in torch.load(sys.argv[1]).items()})" "$OUT_DIR/model.pt"
fi
