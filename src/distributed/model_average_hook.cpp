#include "trainhooks/distributed/model_average_hook.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>

#include "trainhooks/distributed/process_group.h"
#include "trainhooks/errors.h"
#include "trainhooks/graph.h"
#include "trainhooks/session.h"

namespace trainhooks::distributed {

ModelAverageHook::ModelAverageHook(std::shared_ptr<ProcessGroup> group, int64_t every_n_steps)
    : group_(std::move(group)), every_n_steps_(every_n_steps) {
  if (!group_) throw InvalidArgument("ModelAverageHook: the process group is null");
  check_positive("ModelAverageHook", "every_n_steps", every_n_steps_);
}

void ModelAverageHook::after_run(SessionRunContext& ctx, const SessionRunValues&) {
  const int64_t step = ctx.session().global_step();
  if (step % every_n_steps_ != 0 || step == last_step_) return;
  last_step_ = step;
  if (group_->world_size() == 1) return;
  Graph& g = ctx.session().graph();
  at::NoGradGuard no_grad;
  const double scale = 1.0 / group_->world_size();
  for (Node v : g.trainable_variables()) {
    at::Tensor& value = g.variable_value(v);
    if (value.is_contiguous()) {
      group_->allreduce(value);
      value.mul_(scale);
    } else {
      at::Tensor sum = value.contiguous();
      group_->allreduce(sum);
      value.copy_(sum.mul_(scale));
    }
  }
}

}  // namespace trainhooks::distributed
