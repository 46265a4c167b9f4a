#include "trainhooks/gradient_transforms.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/stack.h>

#include <fmt/format.h>

#include <vector>

#include "trainhooks/errors.h"

namespace trainhooks {

GradientTransform clip_by_global_norm(double max_norm) {
  if (!(max_norm > 0)) {
    throw InvalidArgument(
        fmt::format("clip_by_global_norm: invalid max_norm {} (must be positive)", max_norm));
  }
  return [max_norm, norms = std::vector<at::Tensor>()](std::span<at::Tensor> grads) mutable {
    // clip_grad_norm_'s operations, in its order, on the gradients themselves: the same bits.
    norms.clear();
    for (const at::Tensor& g : grads)
      if (g.defined()) norms.push_back(g.norm(2));
    if (norms.empty()) return;
    const at::Tensor total = norms.size() == 1 ? norms[0] : at::stack(norms).norm(2);
    // max_norm / (total + 1e-6) as <ATen/TensorOperators.h> computes it, without parsing all of
    // ATen/Functions.h that it includes.
    const at::Tensor denom = total.add(1e-6);
    const at::Tensor quotient =
        at::empty_like(denom, at::MemoryFormat::Preserve).fill_(max_norm).div_(denom);
    const at::Tensor coef = at::clamp(quotient, c10::nullopt, 1.0);
    norms.clear();  // release the per-gradient norms now rather than at the next step
    for (at::Tensor& g : grads)
      if (g.defined()) g.mul_(coef);
  };
}

}  // namespace trainhooks
