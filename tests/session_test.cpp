#include "trainhooks/session.h"

#include <torch/torch.h>

#include <gtest/gtest.h>

#include "test_util.h"
#include "trainhooks/errors.h"
#include "trainhooks/graph.h"
#include "trainhooks/optimizers.h"

namespace th = trainhooks;

namespace session_test {

// y_pred = x * W + b, loss = mean((y_pred - y)^2), each op counting its evaluations.
struct Linear {
  th::Graph g;
  th::Node x, y, W, b, y_pred, loss, train;
  int y_pred_calls = 0, loss_calls = 0;
  Linear() {
    x = g.placeholder("x", {.dtype = torch::kFloat, .shape = {-1}});
    y = g.placeholder("y", {.dtype = torch::kFloat, .shape = {-1}});
    W = g.variable("W", torch::zeros({1}));
    b = g.variable("b", torch::zeros({1}));
    y_pred = g.op("y_pred", [this](th::Run& r) {
      ++y_pred_calls;
      return r[x] * r[W] + r[b];
    });
    loss = g.op("loss", [this](th::Run& r) {
      ++loss_calls;
      return (r[y_pred] - r[y]).square().mean();
    });
    train = g.minimize("train", loss, th::sgd(0.1));
  }
  th::Feeds feeds() { return {{x, torch::tensor({1.0f, 2.0f})}, {y, torch::tensor({3.0f, 5.0f})}}; }
};

TEST(SessionTest, EvaluatesEachNodeAtMostOncePerRun) {
  Linear m;
  th::Session s(m.g);
  auto r = s.run({m.loss, m.y_pred, m.loss, m.train}, m.feeds());
  EXPECT_EQ(m.y_pred_calls, 1);
  EXPECT_EQ(m.loss_calls, 1);
  EXPECT_EQ(r.size(), 4u);
  // loss = mean((0 - 3)^2, (0 - 5)^2) = 17, computed before the train op stepped.
  EXPECT_FLOAT_EQ(r[m.loss].item<float>(), 17.0f);
  EXPECT_FLOAT_EQ(r.at(2).item<float>(), 17.0f);
  EXPECT_FLOAT_EQ(r["loss"].item<float>(), 17.0f);
  s.run(m.loss, m.feeds());
  EXPECT_EQ(m.loss_calls, 2);  // memo is per run
}

TEST(SessionTest, OnlyNeededNodesAreEvaluated) {
  Linear m;
  th::Session s(m.g);
  auto r = s.run(m.W);
  EXPECT_EQ(m.y_pred_calls, 0);
  EXPECT_TRUE(torch::equal(r[m.W].detach(), torch::zeros({1})));
}

TEST(SessionTest, FetchesByName) {
  Linear m;
  th::Session s(m.g);
  auto r = s.run({"y_pred", "b"}, {{"x", torch::tensor({1.0f})}});
  EXPECT_FLOAT_EQ(r[m.y_pred].item<float>(), 0.0f);
  EXPECT_TRUE(r.contains(m.b));
  EXPECT_FALSE(r.contains(m.loss));
  EXPECT_EQ(th::testing::error_message([&] { (void)r[m.loss]; }),
            "'loss' was not fetched in this run");
}

TEST(SessionTest, FeedsOverrideAnyNode) {
  Linear m;
  th::Session s(m.g);
  // Feeding an op skips its closure; feeding a variable overrides it for this run only.
  auto r =
      s.run(m.loss, {{m.y_pred, torch::tensor({3.0f, 5.0f})}, {m.y, torch::tensor({3.0f, 5.0f})}});
  EXPECT_FLOAT_EQ(r[m.loss].item<float>(), 0.0f);
  EXPECT_EQ(m.y_pred_calls, 0);
  auto r2 = s.run(m.y_pred, {{m.x, torch::tensor({2.0f})}, {m.W, torch::tensor({4.0f})}});
  EXPECT_FLOAT_EQ(r2[m.y_pred].item<float>(), 8.0f);
  EXPECT_FLOAT_EQ(m.g.variable_value(m.W).item<float>(), 0.0f);
}

TEST(SessionTest, MissingFeedNamesPlaceholderAndPath) {
  Linear m;
  th::Session s(m.g);
  th::Feeds only_y = {{m.y, torch::tensor({1.0f})}};
  EXPECT_THROW(s.run(m.loss, only_y), th::InvalidArgument);
  EXPECT_EQ(th::testing::error_message([&] { s.run(m.loss, only_y); }),
            "You must feed a value for placeholder 'x' with dtype float and shape [-1] "
            "[while evaluating loss <- y_pred <- x]");
}

TEST(SessionTest, FeedDtypeAndShapeAreChecked) {
  Linear m;
  th::Session s(m.g);
  EXPECT_EQ(th::testing::error_message([&] {
              s.run(m.y_pred, {{m.x, torch::tensor({1.0, 2.0}, torch::kDouble)}});
            }),
            "Cannot feed value of dtype double for placeholder 'x', which has dtype float");
  EXPECT_EQ(th::testing::error_message([&] {
              s.run(m.y_pred, {{m.x, torch::zeros({2, 3})}});
            }),
            "Cannot feed value of shape [2, 3] for placeholder 'x', which has shape [-1]");
  th::Graph g;
  auto img = g.placeholder("img", {.shape = {-1, 28, 28}});
  th::Session s2(g);
  EXPECT_NO_THROW(s2.run(img, {{img, torch::zeros({5, 28, 28})}}));
  EXPECT_THROW(s2.run(img, {{img, torch::zeros({5, 28, 27})}}), th::InvalidArgument);
  auto scalar = g.placeholder("s", {.shape = th::Shape::scalar()});
  EXPECT_NO_THROW(s2.run(scalar, {{scalar, torch::tensor(1.0f)}}));
  EXPECT_THROW(s2.run(scalar, {{scalar, torch::tensor({1.0f})}}), th::InvalidArgument);
  EXPECT_THROW(s2.run(img, {{img, torch::Tensor()}}), th::InvalidArgument);
}

TEST(SessionTest, UnknownAndDuplicateFeedsAreErrors) {
  Linear m;
  th::Session s(m.g);
  EXPECT_THROW(s.run("nope"), th::NotFoundError);
  EXPECT_EQ(th::testing::error_message([&] {
              s.run(m.y_pred, {{"z", torch::zeros({1})}});
            }),
            "No node named 'z' in the graph");
  EXPECT_EQ(th::testing::error_message([&] {
              s.run(m.y_pred, {{m.x, torch::zeros({1})}, {"x", torch::zeros({1})}});
            }),
            "Node 'x' is fed more than once in the same run");
}

TEST(SessionTest, UnknownNameInsideAnOpKeepsTypeAndPath) {
  th::Graph g;
  auto a = g.op("a", [](th::Run& r) { return r["ghost"]; });
  auto b = g.op("b", [=](th::Run& r) { return r[a] + 1; });
  th::Session s(g);
  EXPECT_THROW(s.run(b), th::NotFoundError);
  EXPECT_EQ(th::testing::error_message([&] { s.run(b); }),
            "No node named 'ghost' in the graph [while evaluating b <- a]");
}

TEST(SessionTest, CyclesAreReportedWithThePath) {
  th::Graph g;
  th::Node a, b;
  a = g.op("a", [&](th::Run& r) { return r[b] + 1; });
  b = g.op("b", [&](th::Run& r) { return r[a] * 2; });
  th::Session s(g);
  EXPECT_EQ(th::testing::error_message([&] { s.run(a); }),
            "Cycle detected: node 'a' depends on itself [while evaluating a <- b <- a]");
}

TEST(SessionTest, ThrowingOpIsWrappedWithItsPathAndType) {
  th::Graph g;
  auto bad =
      g.op("bad", [](th::Run&) -> torch::Tensor { throw th::UnavailableError("peer lost"); });
  auto top = g.op("top", [=](th::Run& r) { return r[bad]; });
  auto mismatch = g.op("mismatch", [](th::Run&) { return torch::ones({2}) + torch::ones({3}); });
  auto plain = g.op("plain", [](th::Run&) -> torch::Tensor { throw std::runtime_error("boom"); });
  th::Session s(g);
  EXPECT_THROW(s.run(top), th::UnavailableError);
  EXPECT_EQ(th::testing::error_message([&] { s.run(top); }),
            "peer lost [while evaluating top <- bad]");
  EXPECT_THROW(s.run(mismatch), th::InvalidArgument);
  EXPECT_NE(
      th::testing::error_message([&] { s.run(mismatch); }).find("[while evaluating mismatch]"),
      std::string::npos);
  EXPECT_THROW(s.run(plain), th::UnknownError);
  EXPECT_EQ(th::testing::error_message([&] { s.run(plain); }), "boom [while evaluating plain]");
}

TEST(SessionTest, ErrorCaughtInsideAnOpDoesNotLeakIntoLaterErrors) {
  th::Graph g;
  auto missing = g.placeholder("missing");
  auto tolerant = g.op("tolerant", [=](th::Run& r) {
    try {
      return r[missing].clone();
    } catch (const th::InvalidArgument&) {
      return torch::zeros({1});
    }
  });
  auto later = g.op("later", [=](th::Run& r) -> torch::Tensor {
    r[tolerant];
    throw th::InternalError("later failed");
  });
  th::Session s(g);
  EXPECT_FLOAT_EQ(s.run(tolerant)[tolerant].item<float>(), 0.0f);
  EXPECT_EQ(th::testing::error_message([&] { s.run(later); }),
            "later failed [while evaluating later]");
}

TEST(SessionTest, FailedRunBeforeTrainOpLeavesVariablesUntouched) {
  Linear m;
  th::Session s(m.g);
  s.run(m.train, m.feeds());
  auto W = m.g.variable_value(m.W).detach().clone();
  auto b = m.g.variable_value(m.b).detach().clone();
  // y is missing: the loss fails before the optimizer step.
  EXPECT_THROW(s.run(m.train, {{m.x, torch::tensor({1.0f, 2.0f})}}), th::InvalidArgument);
  EXPECT_TRUE(torch::equal(m.g.variable_value(m.W).detach(), W));
  EXPECT_TRUE(torch::equal(m.g.variable_value(m.b).detach(), b));
  EXPECT_EQ(m.g.global_step_value(), 1);
}

TEST(SessionTest, GradientsAreRecordedOnlyInRunsThatTrain) {
  Linear m;
  th::Session s(m.g);
  EXPECT_FALSE(s.run(m.loss, m.feeds())[m.loss].requires_grad());
  EXPECT_TRUE(s.run({m.loss, m.train}, m.feeds())[m.loss].requires_grad());
}

TEST(SessionTest, TheCallersGradModeIsRestoredAfterEveryRun) {
  Linear m;
  th::Session s(m.g);
  ASSERT_TRUE(at::GradMode::is_enabled());
  s.run(m.loss, m.feeds());  // evaluates without gradients
  EXPECT_TRUE(at::GradMode::is_enabled());
  {
    at::NoGradGuard no_grad;
    s.run(m.train, m.feeds());  // trains with them
    EXPECT_FALSE(at::GradMode::is_enabled());
    EXPECT_THROW(s.run(m.train, {{m.x, torch::tensor({1.0f, 2.0f})}}), th::InvalidArgument);
    EXPECT_FALSE(at::GradMode::is_enabled());
  }
  EXPECT_THROW(s.run(m.loss, {{m.x, torch::tensor({1.0f, 2.0f})}}), th::InvalidArgument);
  EXPECT_TRUE(at::GradMode::is_enabled());
}

TEST(SessionTest, TracedRunsRecordNodeTimes) {
  th::testing::FakeEnv fake;
  Linear m;
  th::Session s(m.g, fake.env());
  th::RunMetadata md;
  s.run(m.loss, m.feeds(), {.trace_level = th::RunOptions::FULL_TRACE}, &md);
  std::vector<std::string> names;
  for (const auto& st : md.step_stats) names.push_back(st.name);
  EXPECT_EQ(names, (std::vector<std::string>{"y_pred", "loss"}));
  s.run(m.loss, m.feeds(), {}, &md);
  EXPECT_TRUE(md.step_stats.empty());
}

TEST(SessionTest, TimeoutFailsTheRunWithDeadlineExceeded) {
  th::testing::FakeEnv fake;
  th::Graph g;
  auto slow = g.op("slow", [&](th::Run&) {
    fake.clock->advance(2.0);
    return torch::zeros({1});
  });
  auto top = g.op("top", [=](th::Run& r) { return r[slow] + 1; });
  th::Session s(g, fake.env());
  EXPECT_NO_THROW(s.run(top));
  EXPECT_THROW(s.run(top, {}, {.timeout_in_ms = 1000}), th::DeadlineExceededError);
  EXPECT_NO_THROW(s.run(top, {}, {.timeout_in_ms = 5000}));
}

TEST(SessionTest, RunOptionsMergeByMaximum) {
  th::RunOptions a{.trace_level = th::RunOptions::SOFTWARE_TRACE, .timeout_in_ms = 100};
  a.merge_from({.trace_level = th::RunOptions::NO_TRACE,
                .timeout_in_ms = 500,
                .report_tensor_allocations_upon_oom = true});
  EXPECT_EQ(a.trace_level, th::RunOptions::SOFTWARE_TRACE);
  EXPECT_EQ(a.timeout_in_ms, 500);
  EXPECT_TRUE(a.report_tensor_allocations_upon_oom);
}

TEST(SessionTest, RunIntoReusesTheResults) {
  Linear m;
  th::Session s(m.g);
  th::RunResults out;
  s.run_into({m.loss}, m.feeds(), {}, nullptr, out);
  EXPECT_FLOAT_EQ(out[m.loss].item<float>(), 17.0f);
  s.run_into({m.y_pred}, m.feeds(), {}, nullptr, out);
  EXPECT_EQ(out.size(), 1u);
  EXPECT_FALSE(out.contains(m.loss));
}

}  // namespace session_test

namespace session_test {

TEST(SessionTest, FetchedVariableIsASnapshot) {
  Linear m;
  th::Session s(m.g);
  auto before = s.run(m.W)[m.W];
  s.run(m.train, m.feeds());
  EXPECT_FLOAT_EQ(before.item<float>(), 0.0f);
  EXPECT_NE(s.run(m.W)[m.W].item<float>(), 0.0f);
  EXPECT_FALSE(before.requires_grad());
}

// A variable read in place, then fed for one run, then read in place again: each run sees the
// value it should, and the fed run does not change the variable.
TEST(SessionTest, AFedVariableIsTheFeedForOneRunOnly) {
  Linear m;
  th::Session s(m.g);
  auto r = s.run(m.y_pred, {{m.x, torch::tensor({1.0f})}});
  EXPECT_FLOAT_EQ(r[m.y_pred].item<float>(), 0.0f);  // W = 0, b = 0
  r = s.run({m.y_pred, m.W}, {{m.x, torch::tensor({1.0f})}, {m.W, torch::tensor({3.0f})}});
  EXPECT_FLOAT_EQ(r[m.y_pred].item<float>(), 3.0f);
  EXPECT_FLOAT_EQ(r[m.W].item<float>(), 3.0f);  // the feed, as TF returns a fed tensor
  r = s.run({m.y_pred, m.W}, {{m.x, torch::tensor({1.0f})}});
  EXPECT_FLOAT_EQ(r[m.y_pred].item<float>(), 0.0f);
  EXPECT_FLOAT_EQ(r[m.W].item<float>(), 0.0f);
}

// Feeds as a braced list in the call and as a reused th::Feeds give the same run.
TEST(SessionTest, ABracedFeedListAndAKeptFeedsGiveTheSameRun) {
  Linear m;
  th::Session s(m.g);
  const auto xs = torch::tensor({1.0f, 2.0f});
  const auto ys = torch::tensor({3.0f, 5.0f});
  const th::Feeds kept = {{m.x, xs}, {m.y, ys}};
  const float from_list = s.run(m.loss, {{m.x, xs}, {m.y, ys}})[m.loss].item<float>();
  const float from_kept = s.run(m.loss, kept)[m.loss].item<float>();
  EXPECT_FLOAT_EQ(from_list, 17.0f);
  EXPECT_FLOAT_EQ(from_kept, 17.0f);
  // The session keeps no reference to a feed after the run: xs and kept's copy are all.
  EXPECT_EQ(xs.use_count(), 2);
}

TEST(SessionTest, AnOpThatAddsNodesDuringARunIsRefused) {
  th::Graph g;
  auto v = g.variable("v", torch::ones({1}));
  auto grow = g.op("grow", [&](th::Run& r) {
    g.constant("late", torch::zeros({1}));
    return r[v] + 1;
  });
  th::Session s(g);
  try {
    s.run(grow);
    FAIL() << "expected FailedPreconditionError";
  } catch (const th::FailedPreconditionError& e) {
    EXPECT_NE(std::string(e.what()).find("Op 'grow' added nodes to the graph during a run"),
              std::string::npos)
        << e.what();
  }
}

// Nodes added between runs are seen by the next run, and the variables read before still are.
TEST(SessionTest, NodesAddedBetweenRunsAreEvaluated) {
  th::Graph g;
  auto v = g.variable("v", torch::ones({1}));
  auto twice = g.op("twice", [v](th::Run& r) { return r[v] * 2; });
  th::Session s(g);
  EXPECT_FLOAT_EQ(s.run(twice)[twice].item<float>(), 2.0f);
  for (int i = 0; i < 64; ++i) g.constant("c" + std::to_string(i), torch::full({1}, float(i)));
  auto sum = g.op("sum", [v, twice](th::Run& r) { return r[v] + r[twice] + r["c63"]; });
  EXPECT_FLOAT_EQ(s.run(sum)[sum].item<float>(), 66.0f);
  EXPECT_FLOAT_EQ(s.run(twice)[twice].item<float>(), 2.0f);
}

}  // namespace session_test
