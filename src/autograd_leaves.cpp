#include "autograd_leaves.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>

#include <unordered_set>

namespace trainhooks::internal {

std::vector<const c10::TensorImpl*> autograd_leaves(const at::Tensor& output,
                                                    const std::vector<const at::Tensor*>& stop) {
  std::vector<const c10::TensorImpl*> leaves;
  if (!output.defined() || !output.grad_fn()) return leaves;
  std::unordered_set<const torch::autograd::Node*> seen;
  for (const at::Tensor* t : stop) {
    if (t && t->defined() && t->grad_fn()) seen.insert(t->grad_fn().get());
  }
  std::vector<torch::autograd::Node*> pending;
  if (seen.insert(output.grad_fn().get()).second) pending.push_back(output.grad_fn().get());
  while (!pending.empty()) {
    torch::autograd::Node* node = pending.back();
    pending.pop_back();
    if (auto* acc = dynamic_cast<torch::autograd::AccumulateGrad*>(node)) {
      leaves.push_back(acc->variable.unsafeGetTensorImpl());
      continue;
    }
    for (const torch::autograd::Edge& edge : node->next_edges()) {
      torch::autograd::Node* next = edge.function.get();
      if (next && seen.insert(next).second) pending.push_back(next);
    }
  }
  return leaves;
}

}  // namespace trainhooks::internal
