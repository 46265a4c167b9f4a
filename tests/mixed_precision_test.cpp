// CPU autocast around an op: the forward pass in bfloat16, the variables, gradients and
// checkpoints in float32, and the thread's autocast state restored after each run.
#include "trainhooks/mixed_precision.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>

#include "test_util.h"
#include "trainhooks/errors.h"
#include "trainhooks/graph.h"
#include "trainhooks/input.h"
#include "trainhooks/optimizers.h"
#include "trainhooks/session.h"

namespace th = trainhooks;
using th::testing::error_message;

namespace mixed_precision_test {

// y = x·w + b on 64 examples, the matmul under autocast.
struct Model {
  explicit Model(th::AutocastOptions o = {}, bool enabled = true) {
    at::Tensor xs = at::sin(at::arange(192, at::kFloat)).reshape({64, 3});
    at::Tensor ys = at::matmul(xs, at::tensor({{1.f}, {-2.f}, {3.f}})) + 0.5f;
    batch = g.input("train", th::tensor_source({xs, ys}, {"x", "y"}),
                    {.batch_size = 16, .num_epochs = 0});
    w = g.variable("w", at::zeros({3, 1}));
    b = g.variable("b", at::zeros({1}));
    const th::Node x = batch[0], y = batch[1], wn = w, bn = b;
    th::OpFn forward = [this, x, wn, bn](th::Run& r) {
      seen_enabled = at::autocast::is_cpu_enabled();
      return at::matmul(r[x], r[wn]) + r[bn];
    };
    // Without float_output: the matmul alone (with b added, type promotion gives float32).
    if (!o.float_output) forward = [x, wn](th::Run& r) { return at::matmul(r[x], r[wn]); };
    prediction = g.op("prediction", enabled ? th::autocast(forward, o) : forward);
    const th::Node p = prediction;
    loss = g.op("loss", [=](th::Run& r) { return (r[p] - r[y]).pow(2).mean(); });
    train = g.minimize("train_op", loss, th::sgd(0.1));
  }
  th::Graph g;
  th::InputNodes batch;
  th::Node w, b, prediction, loss, train;
  bool seen_enabled = false;
};

TEST(AutocastTest, TheForwardRunsInBfloat16AndTheVariablesStayFloat) {
  Model m, reference({}, /*enabled=*/false);
  th::Session sess(m.g), ref(reference.g);
  for (int i = 0; i < 100; ++i) {
    auto out = sess.run({m.loss, m.train, m.prediction});
    EXPECT_EQ(out[m.prediction].scalar_type(), at::kFloat);  // cast back: float_output
    ref.run({reference.train});
  }
  EXPECT_TRUE(m.seen_enabled);
  EXPECT_FALSE(reference.seen_enabled);
  EXPECT_FALSE(at::autocast::is_cpu_enabled());  // restored after the op
  EXPECT_EQ(m.g.variable_value(m.w).scalar_type(), at::kFloat);
  EXPECT_EQ(m.g.variable_value(m.w).grad().scalar_type(), at::kFloat);
  // It trains as float32 does, to bfloat16's precision (8 bits of mantissa).
  const at::Tensor w = m.g.variable_value(m.w), want = reference.g.variable_value(reference.w);
  EXPECT_TRUE(at::allclose(w, want, 0.02, 0.02)) << w << want;
  EXPECT_FALSE(at::equal(w, want));  // and it did run in lower precision
}

TEST(AutocastTest, WithoutFloatOutputTheOpReturnsBfloat16) {
  Model m({.float_output = false});
  th::Session sess(m.g);
  auto out = sess.run({m.prediction});
  EXPECT_EQ(out[m.prediction].scalar_type(), at::kBFloat16);
}

TEST(AutocastTest, ScopesNestAndRestoreTheThreadsState) {
  ASSERT_FALSE(at::autocast::is_cpu_enabled());
  const at::Tensor a = at::ones({4, 4}), b = at::ones({4, 4});
  {
    th::AutocastScope outer;
    {
      th::AutocastScope inner;
      EXPECT_EQ(at::matmul(a, b).scalar_type(), at::kBFloat16);
    }
    EXPECT_TRUE(at::autocast::is_cpu_enabled());
  }
  EXPECT_FALSE(at::autocast::is_cpu_enabled());
  EXPECT_EQ(at::matmul(a, b).scalar_type(), at::kFloat);
}

TEST(AutocastTest, OnlyBfloat16IsAccepted) {
  EXPECT_EQ(error_message<th::InvalidArgument>(
                [] { th::autocast([](th::Run&) { return at::Tensor(); }, {.dtype = at::kHalf}); }),
            "autocast: LibTorch's CPU autocast supports bfloat16 only, got Half");
  EXPECT_EQ(error_message<th::InvalidArgument>([] { th::AutocastScope scope(at::kDouble); }),
            "autocast: LibTorch's CPU autocast supports bfloat16 only, got Double");
  EXPECT_FALSE(at::autocast::is_cpu_enabled());
}

}  // namespace mixed_precision_test
