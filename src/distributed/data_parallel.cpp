#include "trainhooks/distributed/data_parallel.h"

#include <fmt/format.h>

#include <algorithm>

#include "trainhooks/distributed/model_average_hook.h"
#include "trainhooks/distributed/process_group.h"
#include "trainhooks/errors.h"

namespace trainhooks::distributed {

DataParallel::DataParallel(std::shared_ptr<ProcessGroup> group, AverageGradientsOptions options)
    : group_(std::move(group)), options_(options) {
  if (!group_) throw InvalidArgument("data_parallel: the process group is null");
  if (options_.bucket_bytes == 0) throw InvalidArgument("data_parallel: bucket_bytes is 0");
}

MinimizeOptions DataParallel::minimize_options(MinimizeOptions options) const {
  options.gradient_transforms.push_back(average_gradients(group_, options_));
  if (options.clip_global_norm) {
    options.gradient_transforms.push_back(clip_by_global_norm(*options.clip_global_norm));
    options.clip_global_norm.reset();
  }
  return options;
}

DataParallel data_parallel(std::shared_ptr<ProcessGroup> group, AverageGradientsOptions options) {
  return DataParallel(std::move(group), options);
}

void check_data_parallel(const Graph& graph, const std::shared_ptr<ProcessGroup>& group,
                         const Hooks& hooks) {
  const bool several = group && group->world_size() > 1;
  const bool local_sgd = std::any_of(hooks.begin(), hooks.end(), [](const auto& h) {
    return dynamic_cast<const ModelAverageHook*>(h.get()) != nullptr;
  });
  for (const Node train_op : graph.train_ops()) {
    bool averages = false;
    for (const GradientTransform& t : graph.gradient_transforms(train_op)) {
      const std::shared_ptr<ProcessGroup> across = averaging_group(t);
      if (!across) continue;
      if (across == group) {
        averages = true;
      } else if (across->world_size() > 1) {
        throw InvalidArgument(fmt::format(
            "trainhooks distributed: train op '{}' averages its gradients across a process group "
            "({}) {}: give both the same group, e.g. dp = distributed::data_parallel(pg), "
            "dp.minimize_options() for the train op and "
            "MonitoredTrainingSessionOptions::distributed.process_group = dp.process_group(), so "
            "that the ranks start from the chief's state and stop together",
            graph.name(train_op), across->describe(),
            group ? "other than the session's"
                  : "but the session has no distributed.process_group"));
      }
    }
    if (several && !averages && !local_sgd) {
      throw InvalidArgument(fmt::format(
          "trainhooks distributed: train op '{}' does not average its gradients across the "
          "process group ({}), so the ranks would drift apart: build it with "
          "g.minimize(..., distributed::data_parallel(pg).minimize_options()) (or "
          "distributed::average_gradients(pg) in MinimizeOptions::gradient_transforms), or add a "
          "distributed::ModelAverageHook to the hooks for local SGD",
          graph.name(train_op), group->describe()));
    }
  }
}

}  // namespace trainhooks::distributed
