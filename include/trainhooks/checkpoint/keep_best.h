// Keep-best retention: which checkpoints a CheckpointManager keeps because of a metric's value
// (Keras' ModelCheckpoint(monitor, mode, save_best_only), kept as a count). The manager is given
// the policy (CheckpointManagerOptions::keep_best) and the scores (CheckpointManager::save); it
// reads no metric itself. CheckpointSaverHook passes the latest value of the metric on the
// graph's LatestMetrics; MonitoredTrainingSession passes its keep_best option to its manager.
#pragma once

#include <cstdint>
#include <string>

#include "trainhooks/metric_mode.h"

namespace trainhooks {

struct KeepBest {
  // > 0 keeps the n checkpoints with the best values of `metric` (its name, e.g. "eval/loss";
  // required then) by `mode`: max_to_keep never deletes them (they stay on disk, no longer
  // listed in the state file, as the hours rule keeps its own), and one that falls out of the
  // best n is deleted once no longer listed. 0: off. >= 0.
  int n = 0;
  std::string metric;
  MetricMode mode = MetricMode::kMin;
};

// The keep-best metric's value measured at a step, as the caller of save() knows it.
struct CheckpointScore {
  int64_t step = 0;
  double value = 0;
  bool operator==(const CheckpointScore&) const = default;
};

// A checkpoint and the value of the keep-best metric at its step.
struct ScoredCheckpoint {
  std::string path;
  int64_t step = 0;
  double value = 0;
  bool operator==(const ScoredCheckpoint&) const = default;
};

}  // namespace trainhooks
