// LatestMetrics: the latest value of each named metric measured on one graph.
//
// A hook that measures something (EvaluationHook: "eval/accuracy", "eval/loss") publishes it
// here; hooks that act on a metric (ReduceLROnPlateauHook, EarlyStoppingHook, MetricsLoggerHook,
// CheckpointSaverHook's keep-best scores) read it, through their services().metrics()
// (hook_services.h); the program reads it too, after training (latest_metrics(graph)). Each
// publish bumps the metric's version, so a reader can tell a new value from one it has already
// acted on, even when the value itself repeats (MetricMonitor does that, metric_monitor.h).
//
//   services().metrics().publish("eval/loss", 0.31, /*step=*/1200, env().clock->wall_seconds());
//   auto m = th::latest_metrics(graph).latest("eval/loss");   // after training
//
// Not thread-safe: hooks run on the training thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trainhooks {

class Graph;

struct MetricValue {
  double value = 0;
  int64_t step = 0;      // the global step the value was measured at
  double wall_time = 0;  // seconds since the epoch
  uint64_t version = 0;  // 1 for the first publish of this name, then 2, 3, ...
};

class LatestMetrics {
 public:
  void publish(std::string_view name, double value, int64_t step, double wall_time);
  // Null when `name` was never published.
  std::optional<MetricValue> latest(std::string_view name) const;
  // Every published name, sorted.
  std::vector<std::string> names() const;
  void clear() { metrics_.clear(); }

 private:
  std::map<std::string, MetricValue, std::less<>> metrics_;
};

// The metrics of `graph` (one per graph, created on first use, kept across its sessions).
LatestMetrics& latest_metrics(Graph& graph);

}  // namespace trainhooks
