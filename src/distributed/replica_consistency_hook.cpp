#include "trainhooks/distributed/replica_consistency_hook.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/zeros.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

#include "trainhooks/distributed/process_group.h"
#include "trainhooks/errors.h"
#include "trainhooks/graph.h"
#include "trainhooks/session.h"

namespace trainhooks::distributed {

ReplicaConsistencyHook::ReplicaConsistencyHook(std::shared_ptr<ProcessGroup> group,
                                               int64_t every_n_steps)
    : group_(std::move(group)), every_n_steps_(every_n_steps) {
  if (!group_) throw InvalidArgument("ReplicaConsistencyHook: the process group is null");
  check_positive("ReplicaConsistencyHook", "every_n_steps", every_n_steps_);
}

void ReplicaConsistencyHook::after_run(SessionRunContext& ctx, const SessionRunValues&) {
  const int64_t step = ctx.session().global_step();
  if (step % every_n_steps_ != 0) return;
  if (group_->world_size() == 1) {
    ++checks_;
    return;
  }
  Graph& g = ctx.session().graph();
  const std::vector<Node> variables = g.variables();
  const int world = group_->world_size();
  const auto n = static_cast<int64_t>(variables.size());
  // differs[r][i]: rank r's variable i is not the chief's.
  at::Tensor differs = at::zeros({world, std::max<int64_t>(n, 1)}, at::kInt);
  auto* d = differs.data_ptr<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    at::Tensor chief = g.variable_value(variables[i]).contiguous().clone();
    group_->broadcast(chief, 0);
    if (!group_->is_chief() && !at::equal(chief, g.variable_value(variables[i])))
      d[group_->rank() * differs.size(1) + i] = 1;
  }
  group_->allreduce(differs, ReduceOp::kMax);
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int> ranks;
    for (int r = 1; r < world; ++r)
      if (d[r * differs.size(1) + i] != 0) ranks.push_back(r);
    if (!ranks.empty()) {
      throw InternalError(fmt::format(
          "ReplicaConsistencyHook: at global step {} variable '{}' differs from rank 0's on "
          "rank{} {}",
          step, g.name(variables[i]), ranks.size() > 1 ? "s" : "", fmt::join(ranks, ", ")));
    }
  }
  ++checks_;
}

}  // namespace trainhooks::distributed
