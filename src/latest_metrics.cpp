#include "trainhooks/latest_metrics.h"

#include "trainhooks/graph.h"

namespace trainhooks {

void LatestMetrics::publish(std::string_view name, double value, int64_t step, double wall_time) {
  auto it = metrics_.find(name);
  if (it == metrics_.end()) it = metrics_.emplace(std::string(name), MetricValue{}).first;
  auto& m = it->second;
  m = MetricValue{value, step, wall_time, m.version + 1};
}

std::optional<MetricValue> LatestMetrics::latest(std::string_view name) const {
  auto it = metrics_.find(name);
  if (it == metrics_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> LatestMetrics::names() const {
  std::vector<std::string> out;
  out.reserve(metrics_.size());
  for (const auto& [name, value] : metrics_) out.push_back(name);
  return out;
}

LatestMetrics& latest_metrics(Graph& graph) { return graph.extension<LatestMetrics>(); }

}  // namespace trainhooks
