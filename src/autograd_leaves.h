// The leaf tensors an op's value was computed from, found in its autograd graph: how a recording
// run (Session::record_trace) learns that an op used a module's parameters, which its closure
// reads without going through the Run.
//
//   for (const c10::TensorImpl* leaf : internal::autograd_leaves(logits, {&images}))
//     ...  // the variables whose gradients backward() from `logits` would accumulate
//
// Not thread-safe with respect to a concurrent backward() through the same graph.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

namespace trainhooks::internal {

// The tensors whose gradient accumulators `output`'s autograd graph reaches without passing
// through the autograd node of one of `stop` (the op's inputs: what they were computed from is
// theirs). In no particular order; empty for a value that records no gradient.
std::vector<const c10::TensorImpl*> autograd_leaves(const at::Tensor& output,
                                                    const std::vector<const at::Tensor*>& stop);

}  // namespace trainhooks::internal
