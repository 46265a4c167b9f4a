#include "trainhooks/hook_services.h"

#include <fmt/format.h>

#include <cmath>

#include "trainhooks/errors.h"
#include "trainhooks/graph.h"

namespace trainhooks {

HookServices::HookServices(Graph& graph) : graph_(&graph), metrics_(&latest_metrics(graph)) {}

double HookServices::learning_rate_scale(Node train_op) const {
  auto it = learning_rate_scales_.find(train_op.index);
  return it == learning_rate_scales_.end() ? 1.0 : it->second;
}

void HookServices::set_learning_rate_scale(Node train_op, double scale) {
  if (!(scale >= 0) || !std::isfinite(scale)) {
    throw InvalidArgument(fmt::format(
        "HookServices: the learning-rate scale of '{}' must be finite and non-negative, got {}",
        graph_->name(train_op), scale));
  }
  learning_rate_scales_[train_op.index] = scale;
}

}  // namespace trainhooks
