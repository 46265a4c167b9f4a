// Gradient accumulation (MinimizeOptions::accumulate_steps): one run of the train op is K
// micro-batches and one optimizer step, equal to one step on a batch K times as large, on one rank
// and on two; the loss a run fetches is the window's mean; fed values stay the same for every
// micro-batch; an error inside a window changes nothing.
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <span>
#include <string>
#include <vector>

#include "distributed/fake_ranks.h"
#include "test_util.h"
#include "trainhooks/distributed/average_gradients.h"
#include "trainhooks/errors.h"
#include "trainhooks/graph.h"
#include "trainhooks/input.h"
#include "trainhooks/optimizers.h"
#include "trainhooks/session.h"
#include "trainhooks/testing/fake_process_group.h"

namespace th = trainhooks;
namespace dist = trainhooks::distributed;

namespace gradient_accumulation_test {

constexpr int64_t kExamples = 48;

// y = x·(1, -2, 3) + 0.5 plus a little noise, without the RNG (ranks are threads).
at::Tensor features() {
  return at::sin(at::arange(kExamples * 3, at::kFloat) * 0.7).reshape({kExamples, 3});
}
at::Tensor targets() {
  return at::matmul(features(), at::tensor({1.f, -2.f, 3.f}).view({3, 1})) + 0.5f +
         0.1f * at::cos(at::arange(kExamples, at::kFloat)).view({kExamples, 1});
}

struct Regression {
  // A linear model on an input of batch `batch` (shuffled), trained by `optimizer` with
  // `options`; the input reads shard `shard` of `shards`.
  Regression(int64_t batch, th::MinimizeOptions options, th::OptimizerFactory optimizer,
             int64_t shards = 1, int64_t shard = 0) {
    input = g.input("train", th::tensor_source({features(), targets()}, {"x", "y"}),
                    {.batch_size = batch,
                     .shuffle = true,
                     .seed = 11,
                     .num_epochs = 0,
                     .num_shards = shards,
                     .shard_index = shard});
    w = g.variable("w", at::zeros({3, 1}));
    b = g.variable("b", at::zeros({1}));
    loss = g.op("loss", [x = input[0], y = input[1], w = w, b = b](th::Run& r) {
      return at::mse_loss(at::matmul(r[x], r[w]) + r[b], r[y]);
    });
    first_x = g.op("first_x", [x = input[0]](th::Run& r) { return r[x][0][0]; });
    g.global_step();
    train = g.minimize("train", loss, std::move(optimizer), std::move(options));
  }
  at::Tensor value(th::Node v) { return g.variable_value(v).detach().clone(); }

  th::Graph g;
  th::InputNodes input;
  th::Node w, b, loss, first_x, train;
};

void expect_close(const at::Tensor& a, const at::Tensor& b, const std::string& what) {
  EXPECT_TRUE(at::allclose(a, b, /*rtol=*/1e-5, /*atol=*/1e-6)) << what << "\n"
                                                                << a << "\nvs\n"
                                                                << b;
}

TEST(GradientAccumulationTest, KMicroBatchesOfBEqualOneBatchOfKB) {
  struct Case {
    std::string name;
    th::OptimizerFactory optimizer;
    th::MinimizeOptions options;
  };
  std::vector<Case> cases;
  cases.push_back({"sgd with momentum", th::sgd(0.05, {.momentum = 0.9}), {}});
  cases.push_back({"adam", th::adam(0.01), {}});
  // Clipping sees the accumulated gradient, as it would see the big batch's.
  cases.push_back({"sgd, clipped", th::sgd(0.05), {.clip_global_norm = 0.5}});
  for (auto& c : cases) {
    SCOPED_TRACE(c.name);
    th::MinimizeOptions small_options = c.options;
    small_options.accumulate_steps = 3;
    Regression big(12, c.options, c.optimizer), small(4, small_options, c.optimizer);
    EXPECT_EQ(small.g.accumulate_steps(small.train), 3);
    EXPECT_EQ(big.g.accumulate_steps(big.train), 1);
    th::Session sb(big.g), ss(small.g);
    for (int step = 0; step < 10; ++step) {  // 120 examples: across two epochs' ends
      SCOPED_TRACE(step);
      auto rb = sb.run({big.train, big.loss});
      auto rs = ss.run({small.train, small.loss});
      // The loss fetched with the train op is the window's mean: the big batch's loss.
      expect_close(rs[small.loss], rb[big.loss], "loss");
      expect_close(small.value(small.w), big.value(big.w), "w");
      expect_close(small.value(small.b), big.value(big.b), "b");
    }
    // The global step counts optimizer steps; the input read three batches a step.
    EXPECT_EQ(small.g.global_step_value(), 10);
    EXPECT_EQ(small.g.input_position(small.input[0]), big.g.input_position(big.input[0]));
    EXPECT_EQ(small.g.input_position(small.input[0]), (th::InputPosition{2, 24}));
  }
}

TEST(GradientAccumulationTest, TheFetchedLossIsTheWindowsMeanWhateverTheFetchOrder) {
  Regression small(4, {.accumulate_steps = 2}, th::sgd(0.0));  // the weights stay: losses compare
  Regression one(4, {}, th::sgd(0.0));
  th::Session ss(small.g), s1(one.g);
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE(step);
    // The loss first: the train op still runs before it is read.
    auto r = ss.run({small.loss, small.first_x, small.train});
    auto a = s1.run({one.train, one.loss});
    auto b = s1.run({one.train, one.loss, one.first_x});
    expect_close(r[small.loss], (a[one.loss] + b[one.loss]) / 2, "loss");
    // Other nodes have their last micro-batch's values.
    EXPECT_TRUE(at::equal(r[small.first_x], b[one.first_x]));
  }
  EXPECT_EQ(small.g.global_step_value(), 3);
  EXPECT_EQ(one.g.global_step_value(), 6);
}

TEST(GradientAccumulationTest, FedValuesAreTheSameInEveryMicroBatch) {
  // Two micro-batches of the same fed batch: the same gradient as one.
  auto build = [](th::Graph& g, int64_t k) {
    auto x = g.placeholder("x", {.dtype = at::kFloat, .shape = th::Shape{-1, 3}});
    auto y = g.placeholder("y", {.dtype = at::kFloat, .shape = th::Shape{-1, 1}});
    auto w = g.variable("w", at::zeros({3, 1}));
    auto loss =
        g.op("loss", [=](th::Run& r) { return at::mse_loss(at::matmul(r[x], r[w]), r[y]); });
    g.minimize("train", loss, th::sgd(0.1), {.accumulate_steps = k});
    return w;
  };
  th::Graph g1, g2;
  auto w1 = build(g1, 1), w2 = build(g2, 2);
  th::Session s1(g1), s2(g2);
  const at::Tensor xs = features().slice(0, 0, 8), ys = targets().slice(0, 0, 8);
  for (int step = 0; step < 5; ++step) {
    s1.run("train", {{"x", xs}, {"y", ys}});
    s2.run("train", {{"x", xs}, {"y", ys}});
  }
  expect_close(g2.variable_value(w2), g1.variable_value(w1), "w");
  EXPECT_EQ(g2.global_step_value(), 5);
}

TEST(GradientAccumulationTest, InvalidAccumulateStepsIsRefused) {
  for (int64_t k : {0, -2}) {
    th::Graph g;
    auto w = g.variable("w", at::ones({2}));
    auto loss = g.op("loss", [=](th::Run& r) { return r[w].sum(); });
    EXPECT_EQ(
        th::testing::error_message<th::InvalidArgument>(
            [&] { g.minimize("train", loss, th::sgd(0.1), {.accumulate_steps = k}); }),
        "minimize 'train': invalid accumulate_steps " + std::to_string(k) + " (must be >= 1)");
  }
}

// The end of the data in the middle of a window: the window is not applied (as a partial batch
// dropped), the variables, optimizer and global step stay as they were.
TEST(GradientAccumulationTest, TheEndOfInputInsideAWindowChangesNothing) {
  th::Graph g;
  auto input = g.input("train", th::tensor_source({features().slice(0, 0, 10)}, {"x"}),
                       {.batch_size = 4, .num_epochs = 1});
  auto w = g.variable("w", at::ones({3}));
  auto loss = g.op("loss", [x = input[0], w](th::Run& r) { return (r[x] * r[w]).sum(); });
  auto train = g.minimize("train", loss, th::sgd(0.1), {.accumulate_steps = 2});
  th::Session s(g);
  s.run(train);  // batches of 4 and 4
  const at::Tensor after_one = g.variable_value(w).clone();
  EXPECT_THROW(s.run(train), th::OutOfRangeError);  // a batch of 2, then the end
  EXPECT_TRUE(at::equal(g.variable_value(w), after_one));
  EXPECT_EQ(g.global_step_value(), 1);
}

// Two ranks, each with micro-batches of 2 from its shard, accumulating 2: the same steps as one
// process on batches of 8, and the gradients are averaged across the ranks once per step.
TEST(GradientAccumulationTest, TwoRanksAverageOncePerOptimizerStep) {
  constexpr int kSteps = 8;
  Regression one(8, {}, th::sgd(0.05, {.momentum = 0.9}));
  th::Session s1(one.g);
  std::vector<at::Tensor> w_one, loss_one;
  for (int step = 0; step < kSteps; ++step) {
    loss_one.push_back(s1.run({one.train, one.loss})[one.loss]);
    w_one.push_back(one.value(one.w));
  }

  auto groups = dist::make_fake_process_groups(2);
  std::atomic<int> averaged[2] = {0, 0};
  std::vector<std::vector<at::Tensor>> w_rank(2), loss_rank(2);
  auto errors = dist::run_ranks(2, [&](int rank) {
    th::MinimizeOptions options{.accumulate_steps = 2};
    options.gradient_transforms.push_back(dist::average_gradients(groups[rank]));
    options.gradient_transforms.push_back([&, rank](std::span<at::Tensor>) { ++averaged[rank]; });
    Regression m(2, std::move(options), th::sgd(0.05, {.momentum = 0.9}), 2, rank);
    th::Session s(m.g);
    for (int step = 0; step < kSteps; ++step) {
      loss_rank[rank].push_back(s.run({m.train, m.loss})[m.loss]);
      w_rank[rank].push_back(m.value(m.w));
    }
  });
  for (int rank = 0; rank < 2; ++rank) ASSERT_EQ(th::testing::error_text(errors[rank]), "");
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(averaged[rank].load(), kSteps);
    for (int step = 0; step < kSteps; ++step)
      expect_close(w_rank[rank][step], w_one[step], "w, rank " + std::to_string(rank));
  }
  // Each rank's loss is its own half's mean; together they are the big batch's.
  for (int step = 0; step < kSteps; ++step)
    expect_close((loss_rank[0][step] + loss_rank[1][step]) / 2, loss_one[step], "loss");
}

}  // namespace gradient_accumulation_test
