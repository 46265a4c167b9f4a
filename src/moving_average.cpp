#include "trainhooks/moving_average.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "trainhooks/errors.h"
#include "trainhooks/graph.h"
#include "trainhooks/session.h"

namespace trainhooks {

ExponentialMovingAverage::ExponentialMovingAverage(Graph& graph,
                                                   ExponentialMovingAverageOptions options)
    : graph_(graph), options_(std::move(options)) {
  if (!(options_.decay > 0 && options_.decay < 1)) {
    throw InvalidArgument(
        fmt::format("ExponentialMovingAverage: decay must be in (0, 1), got {}", options_.decay));
  }
  if (options_.name.empty()) throw InvalidArgument("ExponentialMovingAverage: name is empty.");
  variables_ = options_.var_list.empty() ? graph_.trainable_variables() : options_.var_list;
  if (variables_.empty())
    throw InvalidArgument("ExponentialMovingAverage: there is no variable to average.");
  std::set<int32_t> seen;
  for (Node v : variables_) {
    if (graph_.kind(v) != NodeKind::kVariable) {
      throw InvalidArgument(
          fmt::format("ExponentialMovingAverage: '{}' is a node of kind {}, not a variable",
                      graph_.name(v), node_kind_name(graph_.kind(v))));
    }
    if (!seen.insert(v.index).second) {
      throw InvalidArgument(
          fmt::format("ExponentialMovingAverage: variable '{}' is listed twice", graph_.name(v)));
    }
    const at::Tensor& value = graph_.variable_value(v);
    if (!value.is_floating_point()) {
      throw InvalidArgument(
          fmt::format("ExponentialMovingAverage: variable '{}' is {}, not floating-point",
                      graph_.name(v), c10::toString(value.scalar_type())));
    }
  }
  averages_.reserve(variables_.size());
  for (Node v : variables_) {
    const at::Tensor& value = graph_.variable_value(v);
    averages_.push_back(graph_.variable(graph_.name(v) + "/" + options_.name,
                                        value.detach().clone(), {.trainable = false}));
  }
}

Node ExponentialMovingAverage::apply(NodeRef train_op) {
  if (applied_) throw FailedPreconditionError("ExponentialMovingAverage: apply() was called.");
  const Node train = graph_.resolve(train_op);
  applied_ = true;
  return graph_.op(graph_.name(train) + "/" + options_.name, [this, train](Run& r) {
    at::Tensor out;
    {
      // A run records gradients only when it fetches a train op itself: this one is inside.
      at::AutoGradMode record_gradients(true);
      out = r[train];
    }
    update(graph_.global_step_value());
    return out;
  });
}

double ExponentialMovingAverage::decay_at(int64_t step) const {
  if (!options_.num_updates_warmup) return options_.decay;
  const double n = static_cast<double>(std::max<int64_t>(step, 0));
  return std::min(options_.decay, (1 + n) / (10 + n));
}

namespace {

// Below this many elements a plain loop beats lerp_'s dispatch and TensorIterator set-up (about
// 17,000 instructions per call): a small model's averages then cost little beside its step.
constexpr int64_t kLoopElements = 16384;

// lerp_'s formula for a float weight (ATen's, both halves), element by element.
void lerp_small(float* shadow, const float* value, int64_t n, float weight) {
  if (weight < 0.5f) {
    for (int64_t k = 0; k < n; ++k) shadow[k] = shadow[k] + weight * (value[k] - shadow[k]);
  } else {
    for (int64_t k = 0; k < n; ++k) shadow[k] = value[k] - (value[k] - shadow[k]) * (1.0f - weight);
  }
}

}  // namespace

void ExponentialMovingAverage::update(int64_t step) {
  const double weight = 1 - decay_at(step);
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < variables_.size(); ++i) {
    // shadow + (1 - d) * (w - shadow): TF's shadow -= (1 - d) * (shadow - w), in place.
    at::Tensor& shadow = graph_.variable_value(averages_[i]);
    const at::Tensor& value = graph_.variable_value(variables_[i]);
    if (shadow.numel() <= kLoopElements && shadow.scalar_type() == at::kFloat &&
        value.scalar_type() == at::kFloat && shadow.is_cpu() && value.is_cpu() &&
        shadow.is_contiguous() && value.is_contiguous()) {
      lerp_small(shadow.data_ptr<float>(), value.data_ptr<float>(), shadow.numel(),
                 static_cast<float>(weight));
    } else {
      shadow.lerp_(value, weight);
    }
  }
}

Node ExponentialMovingAverage::average(NodeRef variable) const {
  const Node v = graph_.resolve(variable);
  const auto at = std::find(variables_.begin(), variables_.end(), v);
  if (at == variables_.end()) {
    throw NotFoundError(
        fmt::format("ExponentialMovingAverage: variable '{}' is not averaged", graph_.name(v)));
  }
  return averages_[static_cast<size_t>(at - variables_.begin())];
}

void ExponentialMovingAverage::swap() {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < variables_.size(); ++i) {
    at::Tensor& live = graph_.variable_value(variables_[i]);
    at::Tensor& shadow = graph_.variable_value(averages_[i]);
    if (!scratch_.defined() || scratch_.numel() < live.numel() ||
        scratch_.scalar_type() != live.scalar_type()) {
      scratch_ = at::empty({live.numel()}, live.options().requires_grad(false));
    }
    at::Tensor tmp = scratch_.narrow(0, 0, live.numel()).view(live.sizes());
    tmp.copy_(live);
    live.copy_(shadow);
    shadow.copy_(tmp);
  }
  swapped_ = !swapped_;
}

AveragedWeightsScope::AveragedWeightsScope(ExponentialMovingAverage* average) : average_(average) {
  if (average_) average_->swap();
}

AveragedWeightsScope::~AveragedWeightsScope() {
  if (average_) average_->swap();
}

}  // namespace trainhooks
