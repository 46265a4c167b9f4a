// A train op made by Graph::minimize, and its step, which the evaluator runs when the train op is
// evaluated (session.cpp only dispatches to it):
//   check the loss (a scalar that records gradients) -> drop the gradients -> loss.backward() ->
//   the gradient transforms in order (gradient_transforms.h) -> optimizer step -> ++global_step
// With gradient accumulation the middle part repeats for each micro-batch: check and
// (loss / K).backward(), K times, gradients adding up in the variables' .grad.
// A step that throws before the optimizer step leaves the variables, the optimizer state and the
// global step unchanged.
//
//   internal::run_train_step(op, loss_value, {.train_op = "train", .loss = "loss"}, global_step);
//
// Not thread-safe, as Graph.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "trainhooks/gradient_transforms.h"
#include "trainhooks/node.h"
#include "trainhooks/optimizers.h"

namespace torch::autograd {
struct Node;
}

namespace trainhooks::internal {

struct TrainOp {
  Node loss;
  OptimizerFactory factory;
  std::vector<Node> vars;
  std::vector<std::string> var_names;  // for messages
  std::vector<at::Tensor> params;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  // MinimizeOptions::clip_global_norm's transform when set (clips == true), then the
  // MinimizeOptions::gradient_transforms.
  std::vector<GradientTransform> transforms;
  bool clips = false;
  int64_t accumulate_steps = 1;   // MinimizeOptions::accumulate_steps
  std::vector<at::Tensor> grads;  // scratch: the transforms' span
  // The variables' gradient accumulators, held from the first step on. LibTorch keeps them only
  // while a graph refers to them: without this, every step would make them anew once the last
  // step's loss is gone (a loop that keeps its loss alive gets the same for free).
  std::vector<std::shared_ptr<torch::autograd::Node>> grad_accumulators;
};

// Names for the step's messages.
struct TrainStepNames {
  std::string_view train_op;
  std::string_view loss;
};

// One step of `op` with `loss`, this run's value of op.loss; increments `global_step`.
// InvalidArgument for a loss that is not a scalar, FailedPreconditionError for one that records
// no gradient; a transform's error keeps its type and gains the train op's and the transform's
// names.
void run_train_step(TrainOp& op, const at::Tensor& loss, const TrainStepNames& names,
                    int64_t& global_step);

// One step of `op` over op.accumulate_steps micro-batches: `micro_batch_loss(k)` evaluates
// micro-batch k's loss (k = 0 .. K-1; the reference is read before the next call). The gradients
// of loss / K are added up, then transformed and applied once. Returns the mean of the K losses
// (detached). Throws as run_train_step, or what micro_batch_loss throws; either way nothing
// reaches the variables, the optimizer state or the global step.
at::Tensor run_accumulating_train_step(
    TrainOp& op, const std::function<const at::Tensor&(int64_t)>& micro_batch_loss,
    const TrainStepNames& names, int64_t& global_step);

}  // namespace trainhooks::internal
