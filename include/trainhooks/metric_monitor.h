// MetricMonitor: watches one metric for improvement (Keras' monitor, mode, min_delta, patience),
// for what acts on a metric: EarlyStoppingHook, ReduceLROnPlateauHook; keep-best checkpoints rank
// by the same rule (improves(), metric_mode.h).
//
// It reads each value published on LatestMetrics once (poll(): a new version or step since the
// last one seen), records values (record(): the best so far, and the evaluations since it), and
// says when patience has run out. Its best, best step and wait are what hooks checkpoint.
//
//   th::MetricMonitor monitor({.name = "eval/loss", .min_delta = 1e-4, .patience = 3});
//   monitor.start(services().metrics());                       // after_create_session
//   if (auto m = monitor.poll(services().metrics())) {          // each run
//     if (!monitor.record(m->value, m->step) && monitor.patience_exhausted()) stop();
//   }
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "trainhooks/latest_metrics.h"
#include "trainhooks/metric_mode.h"

namespace trainhooks {

struct MetricMonitorOptions {
  // The metric's name on LatestMetrics (e.g. "eval/loss"). Required for poll().
  std::string name;
  MetricMode mode = MetricMode::kMin;
  // An improvement beats the best by more than this. Finite, >= 0.
  double min_delta = 0;
  // Evaluations without improvement after which patience_exhausted(). >= 0.
  int64_t patience = 0;
};

class MetricMonitor {
 public:
  // InvalidArgument naming `owner` and the option for a bad mode, min_delta or patience.
  explicit MetricMonitor(MetricMonitorOptions options, const char* owner = "MetricMonitor");

  const MetricMonitorOptions& options() const { return options_; }

  // What `metrics` holds now counts as seen: poll() returns only what is published later.
  void start(const LatestMetrics& metrics);
  // The metric's latest value when it is new since the last poll() or start(); nullopt otherwise.
  std::optional<MetricValue> poll(const LatestMetrics& metrics);

  // Whether `value` improves on best() by more than min_delta (NaN never does).
  bool improves(double value) const;
  // Records an evaluation: an improvement becomes the best and resets the wait, anything else
  // adds one to it. Returns whether it improved.
  bool record(double value, int64_t step);
  bool patience_exhausted() const { return wait_ >= options_.patience; }

  // Forgets the best (the worst value of the mode, or `baseline`) and the wait.
  void reset(std::optional<double> baseline = std::nullopt);
  // Restores a checkpointed best, best step (-1: none) and wait.
  void restore(double best, int64_t best_step, int64_t wait);
  void reset_wait() { wait_ = 0; }

  double best() const { return best_; }
  int64_t best_step() const { return best_step_; }  // -1 while nothing improved
  int64_t wait() const { return wait_; }

 private:
  MetricMonitorOptions options_;
  double best_ = std::numeric_limits<double>::infinity();
  int64_t best_step_ = -1;
  int64_t wait_ = 0;
  uint64_t seen_version_ = 0;
  int64_t seen_step_ = std::numeric_limits<int64_t>::min();
};

}  // namespace trainhooks
