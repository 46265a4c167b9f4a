// Gradient transforms: what a train op does to the gradients between backward and the optimizer
// step (clipping, averaging across ranks, accumulation, loss-scale correction).
//
// A GradientTransform receives the gradients of the train op's variables, grads[i] being that of
// its i-th variable (MinimizeOptions::var_list order, or the graph's order of trainable
// variables). It may change them in place or replace entries: after the last transform, each
// entry becomes its variable's gradient (a replacement must have the variable's shape and dtype).
// An entry is undefined when no gradient reached its variable. Transforms run under no-grad, on
// the thread that runs the session, in this order (graph.h, Graph::minimize):
//   drop the gradients -> loss.backward() -> clip_global_norm (when set) -> transforms in order
//   -> optimizer step -> ++global_step
// A transform that throws stops the step before the optimizer: the variables, the optimizer state
// and the global step are unchanged, and the error names the train op and the transform.
//
//   g.minimize("train", loss, th::sgd(0.1),
//              {.gradient_transforms = {th::clip_by_global_norm(1.0),
//                                       [](std::span<at::Tensor> grads) { ... }}});
//
// A transform is called by one session at a time; it may keep state of its own (an accumulator).
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <span>

namespace trainhooks {

using GradientTransform = std::function<void(std::span<at::Tensor> grads)>;

// Scales every gradient by min(1, max_norm / (global L2 norm + 1e-6)), exactly as
// torch::nn::utils::clip_grad_norm_(params, max_norm) does (TF's clip_by_global_norm).
// MinimizeOptions::clip_global_norm is this transform, applied first. InvalidArgument naming
// max_norm unless it is positive.
GradientTransform clip_by_global_norm(double max_norm);

}  // namespace trainhooks
