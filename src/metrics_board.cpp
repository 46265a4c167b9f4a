#include "trainhooks/metrics_board.h"

#include "trainhooks/graph.h"

namespace trainhooks {

void MetricsBoard::publish(std::string_view name, double value, int64_t step, double wall_time) {
  auto it = metrics_.find(name);
  if (it == metrics_.end()) it = metrics_.emplace(std::string(name), MetricValue{}).first;
  auto& m = it->second;
  m = MetricValue{value, step, wall_time, m.version + 1};
}

std::optional<MetricValue> MetricsBoard::latest(std::string_view name) const {
  auto it = metrics_.find(name);
  if (it == metrics_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> MetricsBoard::names() const {
  std::vector<std::string> out;
  out.reserve(metrics_.size());
  for (const auto& [name, value] : metrics_) out.push_back(name);
  return out;
}

MetricsBoard& metrics_board(Graph& graph) { return graph.extension<MetricsBoard>(); }

}  // namespace trainhooks
