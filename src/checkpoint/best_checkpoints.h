// The keep-best list of a checkpoint directory: `<dir>/best_checkpoints.json`, written beside
// TensorFlow's `checkpoint` state file (which it leaves alone, so TF still reads that one).
//
// It holds the metric the checkpoints are ranked by, the mode, N, and the metric value of every
// checkpoint on disk whose evaluation is known (listed ones, and the best ones that max_to_keep
// no longer lists but keeps). CheckpointManager writes it crash-safely (util/atomic_file.h) before
// the state file and before deleting anything, so a kill never leaves a best checkpoint deleted
// while the file still ranks it, and `trainhooks checkpoint list` reads it.
//
//   {"metric": "eval/loss", "mode": "min", "keep_best_n": 2,
//    "checkpoints": [{"path": "model.ckpt-400", "step": 400, "value": 0.2511}, ...]}
//
// Paths inside the directory are stored relative to it and returned joined with it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trainhooks/checkpoint/checkpoint_manager.h"
#include "trainhooks/metric_mode.h"

namespace trainhooks::internal {

struct BestCheckpoints {
  std::string metric;
  MetricMode mode = MetricMode::kMin;
  int keep_best_n = 0;
  std::vector<ScoredCheckpoint> scored;  // by step
};

std::string best_checkpoints_path(const std::string& checkpoint_dir);
const char* metric_mode_name(MetricMode mode);  // "min", "max"

// nullopt when the file does not exist; DataLossError naming it when it cannot be parsed.
std::optional<BestCheckpoints> read_best_checkpoints(const std::string& checkpoint_dir);
// Crash-safe: a temporary file, fsync, rename, fsync of the directory.
void write_best_checkpoints(const std::string& checkpoint_dir, const BestCheckpoints& best);

// The keep_best_n best of `scored`, best first: lower values for kMin, higher for kMax; NaN never
// ranks; of equal values the earlier step wins (it was reached first).
std::vector<ScoredCheckpoint> rank_best(const std::vector<ScoredCheckpoint>& scored,
                                        MetricMode mode, int keep_best_n);

}  // namespace trainhooks::internal
