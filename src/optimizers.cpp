#include "trainhooks/optimizers.h"

#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include <fmt/format.h>

#include "trainhooks/errors.h"

namespace trainhooks {

namespace {

void check_lr(const char* name, double lr) {
  if (!(lr >= 0)) throw InvalidArgument(fmt::format("{}: Invalid learning rate: {}", name, lr));
}

void check_non_negative(const char* name, const char* arg, double v) {
  if (!(v >= 0)) throw InvalidArgument(fmt::format("{}: Invalid {}: {}", name, arg, v));
}

}  // namespace

OptimizerFactory sgd(double lr, SgdOptions o) {
  check_lr("sgd", lr);
  check_non_negative("sgd", "momentum", o.momentum);
  check_non_negative("sgd", "weight_decay", o.weight_decay);
  if (o.nesterov && (o.momentum <= 0 || o.dampening != 0)) {
    throw InvalidArgument("sgd: Nesterov momentum requires a momentum and zero dampening");
  }
  return {"sgd",
          [lr, o](std::vector<at::Tensor> params) -> std::unique_ptr<torch::optim::Optimizer> {
            return std::make_unique<torch::optim::SGD>(std::move(params),
                                                       torch::optim::SGDOptions(lr)
                                                           .momentum(o.momentum)
                                                           .dampening(o.dampening)
                                                           .weight_decay(o.weight_decay)
                                                           .nesterov(o.nesterov));
          }};
}

static void check_adam(const char* name, double lr, const AdamOptions& o) {
  check_lr(name, lr);
  if (!(o.beta1 >= 0 && o.beta1 < 1))
    throw InvalidArgument(fmt::format("{}: Invalid beta1: {}", name, o.beta1));
  if (!(o.beta2 >= 0 && o.beta2 < 1))
    throw InvalidArgument(fmt::format("{}: Invalid beta2: {}", name, o.beta2));
  check_non_negative(name, "eps", o.eps);
  check_non_negative(name, "weight_decay", o.weight_decay);
}

OptimizerFactory adam(double lr, AdamOptions o) {
  check_adam("adam", lr, o);
  return {"adam",
          [lr, o](std::vector<at::Tensor> params) -> std::unique_ptr<torch::optim::Optimizer> {
            return std::make_unique<torch::optim::Adam>(std::move(params),
                                                        torch::optim::AdamOptions(lr)
                                                            .betas({o.beta1, o.beta2})
                                                            .eps(o.eps)
                                                            .weight_decay(o.weight_decay)
                                                            .amsgrad(o.amsgrad));
          }};
}

OptimizerFactory adamw(double lr, AdamOptions o) {
  check_adam("adamw", lr, o);
  return {"adamw",
          [lr, o](std::vector<at::Tensor> params) -> std::unique_ptr<torch::optim::Optimizer> {
            return std::make_unique<torch::optim::AdamW>(std::move(params),
                                                         torch::optim::AdamWOptions(lr)
                                                             .betas({o.beta1, o.beta2})
                                                             .eps(o.eps)
                                                             .weight_decay(o.weight_decay)
                                                             .amsgrad(o.amsgrad));
          }};
}

OptimizerFactory rmsprop(double lr, RmspropOptions o) {
  check_lr("rmsprop", lr);
  check_non_negative("rmsprop", "alpha", o.alpha);
  check_non_negative("rmsprop", "eps", o.eps);
  check_non_negative("rmsprop", "momentum", o.momentum);
  check_non_negative("rmsprop", "weight_decay", o.weight_decay);
  return {"rmsprop",
          [lr, o](std::vector<at::Tensor> params) -> std::unique_ptr<torch::optim::Optimizer> {
            return std::make_unique<torch::optim::RMSprop>(std::move(params),
                                                           torch::optim::RMSpropOptions(lr)
                                                               .alpha(o.alpha)
                                                               .eps(o.eps)
                                                               .weight_decay(o.weight_decay)
                                                               .momentum(o.momentum)
                                                               .centered(o.centered));
          }};
}

OptimizerFactory adagrad(double lr, AdagradOptions o) {
  check_lr("adagrad", lr);
  check_non_negative("adagrad", "lr_decay", o.lr_decay);
  check_non_negative("adagrad", "weight_decay", o.weight_decay);
  check_non_negative("adagrad", "initial_accumulator_value", o.initial_accumulator_value);
  check_non_negative("adagrad", "eps", o.eps);
  return {"adagrad",
          [lr, o](std::vector<at::Tensor> params) -> std::unique_ptr<torch::optim::Optimizer> {
            return std::make_unique<torch::optim::Adagrad>(
                std::move(params), torch::optim::AdagradOptions(lr)
                                       .lr_decay(o.lr_decay)
                                       .weight_decay(o.weight_decay)
                                       .initial_accumulator_value(o.initial_accumulator_value)
                                       .eps(o.eps));
          }};
}

double learning_rate(const torch::optim::Optimizer& optimizer) {
  const auto& groups = optimizer.param_groups();
  if (groups.empty()) throw InvalidArgument("learning_rate: the optimizer has no parameter groups");
  return groups.front().options().get_lr();
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  check_lr("set_learning_rate", lr);
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

}  // namespace trainhooks
