// Optimizer factories for Graph::minimize.
//
// The graph creates the optimizer over the train op's variables, and recreates it when the graph
// is re-initialised, so a factory rather than an optimizer is passed:
//
//   g.minimize("train", loss, th::sgd(0.1, {.momentum = 0.9}));
//   g.minimize("train", loss, th::adam(1e-3));
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace torch::optim {
class Optimizer;
}

namespace trainhooks {

struct OptimizerFactory {
  std::string name;  // "sgd", "adam", ...; for messages
  std::function<std::unique_ptr<torch::optim::Optimizer>(std::vector<at::Tensor> params)> make;
};

struct SgdOptions {
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
};
struct AdamOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  bool amsgrad = false;
};
struct RmspropOptions {
  double alpha = 0.99;
  double eps = 1e-8;
  double weight_decay = 0;
  double momentum = 0;
  bool centered = false;
};
struct AdagradOptions {
  double lr_decay = 0;
  double weight_decay = 0;
  double initial_accumulator_value = 0;
  double eps = 1e-10;
};

// Each validates its arguments (InvalidArgument naming the argument and value).
OptimizerFactory sgd(double learning_rate, SgdOptions options = {});
OptimizerFactory adam(double learning_rate, AdamOptions options = {});
OptimizerFactory adamw(double learning_rate, AdamOptions options = {.weight_decay = 1e-2});
OptimizerFactory rmsprop(double learning_rate, RmspropOptions options = {});
OptimizerFactory adagrad(double learning_rate, AdagradOptions options = {});

// The learning rate of every parameter group (first group's value).
double learning_rate(const torch::optim::Optimizer& optimizer);
void set_learning_rate(torch::optim::Optimizer& optimizer, double learning_rate);

}  // namespace trainhooks
