// The train op's step (src/train_op.cpp): drop the gradients -> backward -> gradient transforms
// in order -> optimizer step -> ++global_step, through Graph::minimize and Session::run.
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>
#include <torch/types.h>  // clip_grad.h uses torch::Tensor without including it

#include <torch/nn/utils/clip_grad.h>

#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_util.h"
#include "trainhooks/errors.h"
#include "trainhooks/gradient_transforms.h"
#include "trainhooks/graph.h"
#include "trainhooks/optimizers.h"
#include "trainhooks/session.h"

namespace th = trainhooks;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace train_op_test {

// loss = sum(w * c): the gradient of w is exactly c.
struct LinearLoss {
  explicit LinearLoss(th::MinimizeOptions options, th::OptimizerFactory optimizer = th::sgd(0.25)) {
    w = g.variable("w", torch::tensor({1.0f, 2.0f}));
    loss = g.op("loss", [w = w, c = coefficients](th::Run& r) { return (r[w] * c).sum(); });
    train = g.minimize("train", loss, std::move(optimizer), std::move(options));
  }
  at::Tensor value() const { return g.variable_value(w).detach().clone(); }

  at::Tensor coefficients = torch::tensor({1.5f, -3.0f});
  th::Graph g;
  th::Node w, loss, train;
};

// Two copies of one small network: one trained by a train op, one by a hand-written LibTorch loop.
struct TwinNets {
  TwinNets() {
    torch::manual_seed(3);
    graph_net = torch::nn::Linear(4, 3);
    hand_net = torch::nn::Linear(4, 3);
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < hand_net->parameters().size(); ++i)
      hand_net->parameters()[i].copy_(graph_net->parameters()[i]);
    xs = torch::randn({8, 4}) * 5;
    ys = torch::randn({8, 3});
  }
  th::Node minimize(th::Graph& g, th::OptimizerFactory optimizer, th::MinimizeOptions options) {
    g.add_module("net", graph_net);
    auto net = graph_net.ptr();  // a shared_ptr: forward() is non-const
    auto x = xs, y = ys;
    auto loss = g.op("loss", [=](th::Run&) { return (net->forward(x) - y).square().mean(); });
    return g.minimize("train", loss, std::move(optimizer), std::move(options));
  }
  template <typename Step>
  void hand_steps(torch::optim::Optimizer& opt, int n, Step between) {
    for (int i = 0; i < n; ++i) {
      opt.zero_grad();
      (hand_net->forward(xs) - ys).square().mean().backward();
      between();
      opt.step();
    }
  }
  void expect_equal_parameters() const {
    const auto a = graph_net->parameters(), b = hand_net->parameters();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_TRUE(torch::equal(a[i], b[i])) << "parameter " << i;
  }

  torch::nn::Linear graph_net{nullptr}, hand_net{nullptr};
  at::Tensor xs, ys;
};

TEST(TrainOpTest, TransformsRunInOrderBetweenBackwardAndTheOptimizerStep) {
  std::vector<std::string> calls;
  LinearLoss* model = nullptr;
  at::Tensor before_step;
  auto record = [&](std::string name) {
    return [&, name](std::span<at::Tensor> grads) {
      // After backward (the gradient is there), before the step (w is unchanged).
      calls.push_back(name + " sees " + std::to_string(grads[0][1].item<float>()));
      EXPECT_TRUE(torch::equal(model->g.variable_value(model->w), before_step));
      grads[0].mul_(10);
    };
  };
  LinearLoss m({.gradient_transforms = {record("first"), record("second")}});
  model = &m;
  th::Session s(m.g);
  before_step = m.value();
  s.run(m.train);
  EXPECT_THAT(calls, ElementsAre("first sees -3.000000", "second sees -30.000000"));
  // w - 0.25 * 100 * c
  EXPECT_TRUE(
      torch::equal(m.value(), torch::tensor({1.0f, 2.0f}).add(m.coefficients * 100, -0.25)));
  EXPECT_EQ(m.g.global_step_value(), 1);
  // Every step: the gradients are zeroed before backward, not accumulated across steps.
  calls.clear();
  before_step = m.value();
  s.run(m.train);
  EXPECT_THAT(calls, ElementsAre("first sees -3.000000", "second sees -30.000000"));
}

TEST(TrainOpTest, ATransformThatZeroesTheGradientsLeavesTheVariablesUnchanged) {
  LinearLoss m({.gradient_transforms = {[](std::span<at::Tensor> grads) {
                  for (auto& g : grads) g.zero_();
                }}});
  th::Session s(m.g);
  const auto before = m.value();
  s.run(m.train);
  s.run(m.train);
  EXPECT_TRUE(torch::equal(m.value(), before));
  EXPECT_EQ(m.g.global_step_value(), 2);  // the steps themselves happened
}

TEST(TrainOpTest, ATransformThatDoublesTheGradientsDoublesTheSgdUpdate) {
  LinearLoss m({.gradient_transforms = {[](std::span<at::Tensor> grads) {
                  for (auto& g : grads) g.mul_(2);
                }}});
  th::Session s(m.g);
  s.run(m.train);
  // By hand: w - 0.25 * 2 * c = (1, 2) - 0.25 * (3, -6) = (0.25, 3.5), exact in binary.
  EXPECT_TRUE(torch::equal(m.value(), torch::tensor({0.25f, 3.5f})));
  LinearLoss plain({});
  th::Session ps(plain.g);
  ps.run(plain.train);
  EXPECT_TRUE(torch::equal(torch::tensor({1.0f, 2.0f}) - m.value(),
                           2 * (torch::tensor({1.0f, 2.0f}) - plain.value())));
}

TEST(TrainOpTest, AReplacedGradientIsTheOneTheOptimizerUses) {
  LinearLoss m({.gradient_transforms = {
                    [](std::span<at::Tensor> grads) { grads[0] = at::ones_like(grads[0]); }}});
  th::Session s(m.g);
  s.run(m.train);
  EXPECT_TRUE(torch::equal(m.value(), torch::tensor({0.75f, 1.75f})));
  EXPECT_TRUE(torch::equal(m.g.variable_value(m.w).grad(), torch::ones({2})));
}

TEST(TrainOpTest, AReplacementOfAnotherShapeIsRejectedBeforeTheStep) {
  LinearLoss m(
      {.gradient_transforms = {[](std::span<at::Tensor> grads) { grads[0] = at::ones({3}); }}});
  th::Session s(m.g);
  const auto before = m.value();
  EXPECT_EQ(th::testing::error_message<th::InvalidArgument>([&] { s.run(m.train); }),
            "train op 'train': the gradient transforms replaced the gradient of variable 'w' with "
            "one of shape [3] and dtype float; the variable has shape [2] and dtype float "
            "[while evaluating train]");
  EXPECT_TRUE(torch::equal(m.value(), before));
  EXPECT_EQ(m.g.global_step_value(), 0);
}

TEST(TrainOpTest, AThrowingTransformLeavesTheStateUntouchedAndNamesTheTrainOp) {
  int calls = 0;
  LinearLoss m({.clip_global_norm = 100.0,
                .gradient_transforms = {[&](std::span<at::Tensor> grads) {
                                          grads[0].mul_(7);  // changed, then abandoned
                                          ++calls;
                                        },
                                        [&](std::span<at::Tensor>) {
                                          if (calls == 2) throw th::UnavailableError("lost a peer");
                                        }}},
               th::sgd(0.25, {.momentum = 0.5}));
  th::Session s(m.g);
  s.run(m.train);
  const auto before = m.value();
  const auto& momentum = m.g.optimizer(m.train).state();
  ASSERT_EQ(momentum.size(), 1u);
  const auto buffer = static_cast<torch::optim::SGDParamState&>(*momentum.begin()->second)
                          .momentum_buffer()
                          .clone();
  EXPECT_EQ(
      th::testing::error_message<th::UnavailableError>([&] { s.run(m.train); }),
      "train op 'train': gradient_transforms[1] failed: lost a peer [while evaluating train]");
  EXPECT_TRUE(torch::equal(m.value(), before));
  EXPECT_EQ(m.g.global_step_value(), 1);
  const auto& after = m.g.optimizer(m.train).state();
  EXPECT_TRUE(torch::equal(
      static_cast<torch::optim::SGDParamState&>(*after.begin()->second).momentum_buffer(), buffer));
  // The next step starts from fresh gradients.
  s.run(m.train);
  EXPECT_EQ(m.g.global_step_value(), 2);
}

TEST(TrainOpTest, ErrorsOfOtherTypesAreNamedToo) {
  LinearLoss m({.gradient_transforms = {
                    [](std::span<at::Tensor>) { throw std::runtime_error("plain failure"); }}});
  th::Session s(m.g);
  EXPECT_EQ(th::testing::error_message<th::UnknownError>([&] { s.run(m.train); }),
            "train op 'train': gradient_transforms[0] failed: plain failure [while evaluating "
            "train]");
  LinearLoss torch_error({.gradient_transforms = {[](std::span<at::Tensor> grads) {
                            grads[0].add_(at::ones({5}));  // c10::Error: sizes do not match
                          }}});
  th::Session ts(torch_error.g);
  EXPECT_THAT(th::testing::error_message<th::InvalidArgument>([&] { ts.run(torch_error.train); }),
              HasSubstr("train op 'train': gradient_transforms[0] failed: "));
}

TEST(TrainOpTest, AVariableTheLossDoesNotReachHasAnUndefinedGradient) {
  th::Graph g;
  auto a = g.variable("a", torch::tensor({1.0f}));
  auto b = g.variable("b", torch::tensor({1.0f}));
  auto loss = g.op("loss", [=](th::Run& r) { return r[a].sum(); });
  std::vector<bool> defined;
  auto train = g.minimize("train", loss, th::sgd(0.5),
                          {.gradient_transforms = {[&](std::span<at::Tensor> grads) {
                             for (const auto& t : grads) defined.push_back(t.defined());
                           }},
                           .var_list = {a, b}});
  th::Session s(g);
  s.run(train);
  EXPECT_THAT(defined, ElementsAre(true, false));
  EXPECT_FLOAT_EQ(g.variable_value(a).item<float>(), 0.5f);
  EXPECT_FLOAT_EQ(g.variable_value(b).item<float>(), 1.0f);
}

// TF's apply_gradients skips a variable whose gradient is None in that step: its value and its
// slots (momentum) stay as they are. Each step starts with no gradients (dropped, not zeroed), so
// a variable the loss reached in the last step but not in this one is left alone too, where
// zeroed gradients would have let momentum and weight decay move it.
TEST(TrainOpTest, AVariableTheLossReachedBeforeButNotInThisStepIsNotUpdated) {
  th::Graph g;
  auto a = g.variable("a", torch::tensor({1.0f}));
  auto b = g.variable("b", torch::tensor({1.0f}));
  bool use_b = true;
  auto loss = g.op("loss", [&, a, b](th::Run& r) {
    return use_b ? (r[a] * 2).sum() + (r[b] * 3).sum() : (r[a] * 2).sum();
  });
  std::vector<bool> defined;
  auto train = g.minimize("train", loss, th::sgd(0.5, {.momentum = 0.9, .weight_decay = 0.1}),
                          {.gradient_transforms = {[&](std::span<at::Tensor> grads) {
                             for (const auto& t : grads) defined.push_back(t.defined());
                           }}});
  th::Session s(g);
  s.run(train);
  const float b_after_first = g.variable_value(b).item<float>();
  EXPECT_FLOAT_EQ(b_after_first, 1.0f - 0.5f * (3.0f + 0.1f * 1.0f));
  use_b = false;
  const float a_before = g.variable_value(a).item<float>();
  s.run(train);
  s.run(train);
  EXPECT_THAT(defined, ElementsAre(true, true, true, false, true, false));
  EXPECT_EQ(g.variable_value(b).item<float>(), b_after_first);
  EXPECT_LT(g.variable_value(a).item<float>(), a_before);  // a goes on training
  // The gradient a step computed stays readable until the next step begins.
  EXPECT_FLOAT_EQ(g.variable_value(a).grad().item<float>(), 2.0f);
  EXPECT_FALSE(g.variable_value(b).grad().defined());
}

TEST(TrainOpTest, WithoutTransformsAStepIsBitIdenticalToAHandWrittenOne) {
  TwinNets nets;
  th::Graph g;
  auto train = nets.minimize(g, th::adam(0.05), {});
  torch::optim::Adam hand(nets.hand_net->parameters(), torch::optim::AdamOptions(0.05));
  th::Session s(g);
  for (int i = 0; i < 5; ++i) s.run(train);
  nets.hand_steps(hand, 5, [] {});
  nets.expect_equal_parameters();
}

TEST(TrainOpTest, ClipGlobalNormMatchesClipGradNorm) {
  TwinNets nets;
  th::Graph g;
  auto train = nets.minimize(g, th::sgd(0.1, {.momentum = 0.9}), {.clip_global_norm = 0.5});
  torch::optim::SGD hand(nets.hand_net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  th::Session s(g);
  for (int i = 0; i < 5; ++i) s.run(train);
  nets.hand_steps(hand, 5,
                  [&] { torch::nn::utils::clip_grad_norm_(nets.hand_net->parameters(), 0.5); });
  nets.expect_equal_parameters();
}

TEST(TrainOpTest, ClipGlobalNormComesBeforeTheUsersTransforms) {
  TwinNets nets;
  th::Graph g;
  auto train = nets.minimize(
      g, th::sgd(0.1),
      {.clip_global_norm = 0.5, .gradient_transforms = {[](std::span<at::Tensor> grads) {
                                  for (auto& t : grads) t.mul_(3);
                                }}});
  torch::optim::SGD hand(nets.hand_net->parameters(), torch::optim::SGDOptions(0.1));
  th::Session s(g);
  for (int i = 0; i < 3; ++i) s.run(train);
  nets.hand_steps(hand, 3, [&] {
    torch::nn::utils::clip_grad_norm_(nets.hand_net->parameters(), 0.5);
    for (auto& p : nets.hand_net->parameters()) p.grad().mul_(3);
  });
  nets.expect_equal_parameters();
}

TEST(TrainOpTest, MinimizeRejectsAnEmptyTransform) {
  th::Graph g;
  auto w = g.variable("w", torch::zeros({1}));
  auto loss = g.op("loss", [=](th::Run& r) { return r[w].sum(); });
  EXPECT_EQ(th::testing::error_message<th::InvalidArgument>(
                [&] { g.minimize("t", loss, th::sgd(0.1), {.gradient_transforms = {nullptr}}); }),
            "minimize 't': gradient_transforms[0] is empty");
}

// A loss that is not a scalar, or that records no gradient, is refused before anything changes,
// in one step or in a window of micro-batches.
TEST(TrainOpTest, ALossThatIsNotAScalarOrRecordsNoGradientIsRefusedNamingIt) {
  for (int64_t k : {1, 2}) {
    th::Graph g;
    auto w = g.variable("w", torch::tensor({1.0f, 2.0f}));
    auto vector_loss = g.op("vector_loss", [=](th::Run& r) { return r[w] * 2; });
    auto constant_loss = g.op("constant_loss", [](th::Run&) { return torch::tensor(1.0f); });
    auto t1 = g.minimize("t1", vector_loss, th::sgd(0.1), {.accumulate_steps = k});
    auto t2 = g.minimize("t2", constant_loss, th::sgd(0.1), {.accumulate_steps = k});
    th::Session s(g);
    EXPECT_THAT(th::testing::error_message<th::InvalidArgument>([&] { s.run(t1); }),
                HasSubstr("train op 't1': loss 'vector_loss' must be a scalar, got shape [2]"))
        << "K = " << k;
    EXPECT_THAT(th::testing::error_message<th::FailedPreconditionError>([&] { s.run(t2); }),
                HasSubstr("train op 't2': loss 'constant_loss' does not depend on any trainable "
                          "variable through operations that record gradients"))
        << "K = " << k;
    EXPECT_TRUE(torch::equal(g.variable_value(w), torch::tensor({1.0f, 2.0f})));
    EXPECT_EQ(g.global_step_value(), 0);
  }
}

}  // namespace train_op_test
