#include "train_op.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/variable.h>

#include <fmt/format.h>

#include <span>

#include "tensor_format.h"
#include "trainhooks/errors.h"

namespace trainhooks::internal {

namespace {

std::string transform_name(const TrainOp& op, size_t i) {
  if (op.clips && i == 0) return "clip_global_norm";
  return fmt::format("gradient_transforms[{}]", op.clips ? i - 1 : i);
}

// Runs op.transforms over the gradients, then makes each entry its variable's gradient. Nothing
// reaches the variables before every transform has run and every replacement has been checked.
void transform_gradients(TrainOp& op, std::string_view train_op) {
  at::NoGradGuard no_grad;
  op.grads.resize(op.params.size());
  for (size_t i = 0; i < op.params.size(); ++i) op.grads[i] = op.params[i].grad();
  for (size_t i = 0; i < op.transforms.size(); ++i) {
    auto fail = [&](Code code, std::string_view message) {
      op.grads.assign(op.grads.size(), at::Tensor());
      throw_error(code, fmt::format("train op '{}': {} failed: {}", train_op, transform_name(op, i),
                                    message));
    };
    try {
      op.transforms[i](std::span<at::Tensor>(op.grads));
    } catch (const Error& e) {
      fail(e.code(), e.what());
    } catch (const c10::Error& e) {
      fail(Code::kInvalidArgument, e.what_without_backtrace());
    } catch (const std::exception& e) {
      fail(Code::kUnknown, e.what());
    }
  }
  for (size_t i = 0; i < op.params.size(); ++i) {
    const at::Tensor& g = op.grads[i];
    const at::Tensor& p = op.params[i];
    if (g.is_same(p.grad()) || !g.defined()) continue;
    if (g.sizes() != p.sizes() || g.scalar_type() != p.scalar_type()) {
      const std::string message = fmt::format(
          "train op '{}': the gradient transforms replaced the gradient of variable '{}' with "
          "one of shape {} and dtype {}; the variable has shape {} and dtype {}",
          train_op, op.var_names[i], format_shape(g.sizes()), format_dtype(g.scalar_type()),
          format_shape(p.sizes()), format_dtype(p.scalar_type()));
      op.grads.assign(op.grads.size(), at::Tensor());
      throw InvalidArgument(message);
    }
  }
  for (size_t i = 0; i < op.params.size(); ++i) {
    if (!op.grads[i].is_same(op.params[i].grad())) op.params[i].mutable_grad() = op.grads[i];
  }
  // The span's references would keep replaced gradients alive until the next step.
  op.grads.assign(op.grads.size(), at::Tensor());
}

}  // namespace

namespace {

// Called when check_loss() fails: a loss that is not a scalar, or that records no gradient.
[[noreturn, gnu::cold, gnu::noinline]] void loss_error(const at::Tensor& loss,
                                                       const TrainStepNames& names) {
  if (!loss.defined() || loss.numel() != 1) {
    throw InvalidArgument(fmt::format("train op '{}': loss '{}' must be a scalar, got shape {}",
                                      names.train_op, names.loss,
                                      loss.defined() ? format_shape(loss.sizes()) : "undefined"));
  }
  throw FailedPreconditionError(fmt::format(
      "train op '{}': loss '{}' does not depend on any trainable variable through operations "
      "that record gradients",
      names.train_op, names.loss));
}

// Inlined in both steps, with the messages out of line: a call per step costs as much as the test.
[[gnu::always_inline]] inline void check_loss(const at::Tensor& loss, const TrainStepNames& names) {
  if (!loss.defined() || loss.numel() != 1 || !loss.requires_grad()) [[unlikely]]
    loss_error(loss, names);
}

// After the gradients are in the variables' .grad: the transforms, the optimizer, the step.
[[gnu::always_inline]] inline void apply_gradients(TrainOp& op, const TrainStepNames& names,
                                                   int64_t& global_step) {
  if (op.grad_accumulators.empty()) {
    for (const auto& p : op.params) {
      if (p.is_leaf() && p.requires_grad())
        op.grad_accumulators.push_back(torch::autograd::impl::grad_accumulator(p));
    }
  }
  if (!op.transforms.empty()) transform_gradients(op, names.train_op);
  op.optimizer->step();
  ++global_step;
}

// Instead of Optimizer::zero_grad(), which zeroes each gradient in place (detach_ and zero_, then
// backward adds into it): the gradients are dropped, and backward hands each variable the
// gradient it computed, without a copy or an addition (what PyTorch's zero_grad(set_to_none)
// does, its default since 2.0). For the seed's model this is about 5 600 instructions less per
// step than zeroing (docs/benchmarks.md); for a large one, a pass over every gradient's memory
// less. A variable the loss does not reach in a step then has no gradient, and the optimizer leaves
// it, and its state, as it is: TF's apply_gradients skips a variable whose gradient is None the
// same way.
[[gnu::always_inline]] inline void release_gradients(TrainOp& op) {
  for (auto& group : op.optimizer->param_groups())
    for (auto& p : group.params()) p.mutable_grad().reset();
}

}  // namespace

void run_train_step(TrainOp& op, const at::Tensor& loss, const TrainStepNames& names,
                    int64_t& global_step) {
  check_loss(loss, names);
  release_gradients(op);
  loss.backward();
  apply_gradients(op, names, global_step);
}

at::Tensor run_accumulating_train_step(
    TrainOp& op, const std::function<const at::Tensor&(int64_t)>& micro_batch_loss,
    const TrainStepNames& names, int64_t& global_step) {
  const int64_t k_steps = op.accumulate_steps;
  const double scale = 1.0 / static_cast<double>(k_steps);
  release_gradients(op);
  at::Tensor sum;
  for (int64_t k = 0; k < k_steps; ++k) {
    const at::Tensor& loss = micro_batch_loss(k);
    check_loss(loss, names);
    // The mean over K micro-batches of B is the mean over one batch of K*B.
    loss.mul(scale).backward();
    at::Tensor value = loss.detach();
    sum = sum.defined() ? sum.add(value) : value.clone();
  }
  apply_gradients(op, names, global_step);
  return sum.mul(scale);
}

}  // namespace trainhooks::internal
