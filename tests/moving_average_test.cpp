// ExponentialMovingAverage against TF's definition written out here (shadow -= (1 - d) *
// (shadow - w), d = min(decay, (1 + n) / (10 + n)) with num_updates), its checkpointing through
// MonitoredTrainingSession (an exact resume), and evaluation with the averaged weights.
#include "trainhooks/moving_average.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "test_util.h"
#include "trainhooks/errors.h"
#include "trainhooks/graph.h"
#include "trainhooks/hooks/evaluation_hook.h"
#include "trainhooks/hooks/stop_at_step_hook.h"
#include "trainhooks/input.h"
#include "trainhooks/optimizers.h"
#include "trainhooks/training_session.h"

namespace th = trainhooks;
using ::testing::HasSubstr;
using th::testing::error_message;

namespace moving_average_test {

// y = x·w + b on 8 fixed examples in batches of 4, SGD: w and b move at every step.
struct Linear {
  explicit Linear(th::ExponentialMovingAverageOptions o = {.decay = 0.9}) {
    at::Tensor xs = at::sin(at::arange(16, at::kFloat)).reshape({8, 2});
    at::Tensor ys = at::matmul(xs, at::tensor({{2.f}, {-1.f}})) + 0.5f;
    batch = g.input("train", th::tensor_source({xs, ys}, {"x", "y"}),
                    {.batch_size = 4, .shuffle = true, .seed = 3, .num_epochs = 0});
    w = g.variable("w", at::zeros({2, 1}));
    b = g.variable("b", at::zeros({1}));
    const th::Node x = batch[0], y = batch[1], wn = w, bn = b;
    loss = g.op("loss",
                [=](th::Run& r) { return (at::matmul(r[x], r[wn]) + r[bn] - r[y]).pow(2).mean(); });
    ema = std::make_shared<th::ExponentialMovingAverage>(g, o);
    train = ema->apply(g.minimize("train_op", loss, th::sgd(0.1)));
  }
  std::vector<float> values(th::Node n) {
    at::Tensor t = g.variable_value(n).contiguous();
    return std::vector<float>(t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
  }
  th::Graph g;
  th::InputNodes batch;
  th::Node w, b, loss, train;
  std::shared_ptr<th::ExponentialMovingAverage> ema;
};

// Runs `steps` steps and checks each average against the definition, computed in double from the
// variables' values after each step.
void expect_tf_averages(Linear& m, int steps, const std::function<double(int64_t)>& decay) {
  th::testing::FakeEnv fe;
  auto sess = th::testing::chief_session(m.g, {}, fe.env());
  std::vector<double> w_avg(2, 0.0), b_avg(1, 0.0);  // the initial values: zeros
  for (int i = 0; i < steps; ++i) {
    sess->run(m.train);
    const int64_t n = m.g.global_step_value();
    const double d = decay(n);
    const auto w = m.values(m.w), b = m.values(m.b);
    for (size_t k = 0; k < 2; ++k) w_avg[k] -= (1 - d) * (w_avg[k] - w[k]);
    b_avg[0] -= (1 - d) * (b_avg[0] - b[0]);
    const auto got_w = m.values(m.ema->average(m.w)), got_b = m.values(m.ema->average("b"));
    for (size_t k = 0; k < 2; ++k) EXPECT_NEAR(got_w[k], w_avg[k], 1e-6) << "step " << n;
    EXPECT_NEAR(got_b[0], b_avg[0], 1e-6) << "step " << n;
  }
  // The averages trail the weights: not equal to them.
  EXPECT_NE(m.values(m.ema->average(m.w)), m.values(m.w));
  sess->close();
}

TEST(ExponentialMovingAverageTest, AveragesAreTensorFlowsAfterEveryStep) {
  Linear m;
  EXPECT_EQ(m.g.name(m.ema->average(m.w)), "w/ExponentialMovingAverage");
  EXPECT_FALSE(m.g.is_trainable(m.ema->average(m.w)));
  EXPECT_EQ(m.g.name(m.train), "train_op/ExponentialMovingAverage");
  expect_tf_averages(m, 12, [](int64_t) { return 0.9; });
}

TEST(ExponentialMovingAverageTest, NumUpdatesWarmsTheDecayUpAsTensorFlowDoes) {
  Linear m({.decay = 0.99, .num_updates_warmup = true});
  EXPECT_DOUBLE_EQ(m.ema->decay_at(1), 2.0 / 11);
  EXPECT_DOUBLE_EQ(m.ema->decay_at(100), 101.0 / 110);
  EXPECT_DOUBLE_EQ(m.ema->decay_at(100000), 0.99);
  expect_tf_averages(m, 12, [](int64_t n) { return std::min(0.99, (1.0 + n) / (10.0 + n)); });
}

TEST(ExponentialMovingAverageTest, BadOptionsAreRefusedNamingWhatIsWrong) {
  for (double d : {0.0, 1.0, 1.5, -0.1, std::nan("")}) {
    th::Graph g;
    g.variable("w", at::zeros({2}));
    EXPECT_THAT(
        error_message<th::InvalidArgument>([&] { th::ExponentialMovingAverage(g, {.decay = d}); }),
        HasSubstr("ExponentialMovingAverage: decay must be in (0, 1), got"));
  }
  th::Graph g;
  const th::Node w = g.variable("w", at::zeros({2}));
  const th::Node op = g.op("op", [](th::Run&) { return at::zeros({1}); });
  const th::Node steps = g.variable("count", at::zeros({1}, at::kLong), {.trainable = false});
  EXPECT_EQ(error_message<th::InvalidArgument>(
                [&] { th::ExponentialMovingAverage(g, {.var_list = {op}}); }),
            "ExponentialMovingAverage: 'op' is a node of kind op, not a variable");
  EXPECT_EQ(error_message<th::InvalidArgument>([&] {
              th::ExponentialMovingAverage(g, {.var_list = {w, w}});
            }),
            "ExponentialMovingAverage: variable 'w' is listed twice");
  EXPECT_EQ(error_message<th::InvalidArgument>(
                [&] { th::ExponentialMovingAverage(g, {.var_list = {steps}}); }),
            "ExponentialMovingAverage: variable 'count' is Long, not floating-point");
  th::Graph empty;
  EXPECT_EQ(error_message<th::InvalidArgument>([&] { th::ExponentialMovingAverage{empty}; }),
            "ExponentialMovingAverage: there is no variable to average.");
  th::ExponentialMovingAverage ema(g, {.var_list = {w}});
  EXPECT_THAT(error_message<th::NotFoundError>([&] { ema.average(steps); }),
              HasSubstr("variable 'count' is not averaged"));
}

// Swapping twice gives back both exactly, and an evaluation sees the averages while the trained
// weights stay where they were.
TEST(ExponentialMovingAverageTest, EvaluationUsesTheAveragesAndLeavesTheWeights) {
  Linear m;
  auto val = m.g.input("val", th::tensor_source({at::ones({3, 1})}, {"one"}), {.batch_size = 3});
  const th::Node one = val[0], w = m.w;
  const th::Node w_sum = m.g.op("val/w_sum", [=](th::Run& r) { return r[w].sum() * r[one][0][0]; });
  auto hook = std::make_shared<th::EvaluationHook>(th::EvaluationHookOptions{
      .metrics = {{"w_sum", w_sum}}, .input = one, .moving_average = m.ema});
  th::testing::FakeEnv fe;
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  for (int i = 0; i < 5; ++i) sess->run(m.train);
  const auto live = m.values(m.w), averaged = m.values(m.ema->average(m.w));
  const auto metrics = hook->evaluate(sess->raw_session());
  EXPECT_FLOAT_EQ(static_cast<float>(metrics.at("w_sum")), averaged[0] + averaged[1]);
  EXPECT_EQ(m.values(m.w), live);
  EXPECT_EQ(m.values(m.ema->average(m.w)), averaged);
  EXPECT_FALSE(m.ema->swapped());
  m.ema->swap();
  EXPECT_EQ(m.values(m.w), averaged);
  EXPECT_EQ(m.values(m.ema->average(m.w)), live);
  m.ema->swap();
  EXPECT_EQ(m.values(m.w), live);
  sess->close();
}

// The averages are variables: the chief's checkpoints hold them, and a run resumed from one
// continues bit for bit as a run never stopped.
TEST(ExponentialMovingAverageTest, AResumedRunContinuesTheAveragesBitForBit) {
  th::testing::TempDir dir;
  auto train = [&](Linear& m, const std::string& ckpt, int64_t last_step) {
    th::MonitoredTrainingSession sess(m.g,
                                      {.checkpoint_dir = ckpt,
                                       .hooks = {std::make_shared<th::StopAtStepHook>(
                                           th::StopAtStepHookOptions{.last_step = last_step})},
                                       .summaries = {.save_steps = 0, .log_step_count_steps = 0}});
    while (!sess.should_stop()) sess.run(m.train);
    sess.close();
  };
  Linear straight, first, resumed;
  train(straight, dir.file("straight"), 10);
  train(first, dir.file("resumed"), 4);
  train(resumed, dir.file("resumed"), 10);
  EXPECT_EQ(resumed.g.global_step_value(), 10);
  EXPECT_EQ(resumed.values(resumed.ema->average(resumed.w)),
            straight.values(straight.ema->average(straight.w)));
  EXPECT_EQ(resumed.values(resumed.ema->average(resumed.b)),
            straight.values(straight.ema->average(straight.b)));
  EXPECT_EQ(resumed.values(resumed.w), straight.values(straight.w));
}

}  // namespace moving_average_test
