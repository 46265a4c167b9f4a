// An exponential moving average of variables, as TensorFlow's tf.train.ExponentialMovingAverage
// (and Keras's `use_ema`): a shadow variable per variable, updated after every optimizer step,
// saved in checkpoints with the variables, and swapped in for an evaluation.
//
//   auto ema = std::make_shared<th::ExponentialMovingAverage>(
//       g, th::ExponentialMovingAverageOptions{.decay = 0.999});
//   th::Node train = ema->apply(g.minimize("train_op", loss, th::adam(1e-3)));
//   // EvaluationHookOptions{..., .moving_average = ema}: evaluates with the averaged weights.
//
// The shadow of variable `w` is the non-trainable variable `w/ExponentialMovingAverage` (TF's
// name), starting as a copy of `w`'s initial value. After each run of the train op, every shadow
// becomes shadow - (1 - d) * (shadow - w), in place: no allocation on the step. With
// num_updates_warmup, d = min(decay, (1 + n) / (10 + n)) at global step n (the step just
// trained, 1 after the first), as TF's num_updates: the first averages follow the weights
// closely instead of the initial values.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "trainhooks/node.h"

namespace trainhooks {

class Graph;

struct ExponentialMovingAverageOptions {
  double decay = 0.999;  // in (0, 1)
  bool num_updates_warmup = false;
  // The variables to average; empty: every trainable variable that exists at construction.
  std::vector<Node> var_list;
  // The shadows' names are `<variable>/<name>`.
  std::string name = "ExponentialMovingAverage";
};

class ExponentialMovingAverage {
 public:
  // Creates the shadow variables in `graph`, before the session is created. InvalidArgument for
  // a decay outside (0, 1), an empty name, a var_list entry that is not a floating-point variable,
  // a variable listed twice, or no variable at all.
  ExponentialMovingAverage(Graph& graph, ExponentialMovingAverageOptions options = {});
  ExponentialMovingAverage(const ExponentialMovingAverage&) = delete;
  ExponentialMovingAverage& operator=(const ExponentialMovingAverage&) = delete;

  // A node `<train_op>/<name>` that runs `train_op` and then updates every average (TF's
  // ema.apply() under a control dependency on the optimizer's op): run it in place of train_op.
  // Its value is train_op's. Call once.
  Node apply(NodeRef train_op);

  // Updates every average now, with the decay of global step `step`.
  void update(int64_t step);
  // The decay used at global step `step`.
  double decay_at(int64_t step) const;

  // The shadow variable of `variable` (NotFoundError when it has none).
  Node average(NodeRef variable) const;
  const std::vector<Node>& variables() const { return variables_; }
  const std::vector<Node>& averages() const { return averages_; }

  // Exchanges the values of the variables and their averages, exactly (a copy through a scratch
  // buffer kept for the next time). Called twice it restores both.
  void swap();
  // Whether the averages are swapped in now.
  bool swapped() const { return swapped_; }

 private:
  Graph& graph_;
  ExponentialMovingAverageOptions options_;
  std::vector<Node> variables_, averages_;
  at::Tensor scratch_;
  bool applied_ = false, swapped_ = false;
};

// Swaps a moving average's values in for the lifetime of this object (if `average` is set),
// and back however the scope ends.
class AveragedWeightsScope {
 public:
  explicit AveragedWeightsScope(ExponentialMovingAverage* average);
  ~AveragedWeightsScope();
  AveragedWeightsScope(const AveragedWeightsScope&) = delete;
  AveragedWeightsScope& operator=(const AveragedWeightsScope&) = delete;

 private:
  ExponentialMovingAverage* average_;
};

}  // namespace trainhooks
