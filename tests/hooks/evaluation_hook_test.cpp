#include "trainhooks/hooks/evaluation_hook.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "test_util.h"
#include "trainhooks/errors.h"
#include "trainhooks/latest_metrics.h"
#include "trainhooks/summary/event_reader.h"

namespace th = trainhooks;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace evaluation_hook_test {

// Counts the runs it sees: training hooks must not fire during an evaluation.
struct CountingHook : th::SessionRunHook {
  int before = 0, after = 0;
  th::SessionRunArgs before_run(th::SessionRunContext&) override {
    ++before;
    return {};
  }
  void after_run(th::SessionRunContext&, const th::SessionRunValues&) override { ++after; }
};

// The tiny training model plus a validation input of 5 examples 1..5 in batches of 2
// ([1,2], [3,4], [5]) and metrics over it.
class EvaluationHookTest : public ::testing::Test {
 protected:
  void build(int64_t num_epochs = 1) {
    val = m.g.input("val", th::tensor_source({at::arange(1, 6, at::kFloat)}, {"x"}),
                    {.batch_size = 2, .num_epochs = num_epochs});
    const th::Node vx = val[0], w = m.w;
    mean_x = m.g.op("val/mean_x", [=, this](th::Run& r) {
      grad_enabled_in_eval = at::GradMode::is_enabled();
      return r[vx].mean();
    });
    // Depends on the trained variable: the value changes as training goes.
    w_sum = m.g.op("val/w_sum", [=](th::Run& r) { return (r[w] * r[vx]).sum(); });
  }

  th::EvaluationHookOptions options() {
    return {.metrics = {{"mean_x", mean_x}, {"w_sum", w_sum}}, .input = val[0]};
  }

  std::vector<std::string> info() const { return fe.log->messages(th::LogLevel::kInfo); }

  th::testing::FakeEnv fe;
  th::testing::TinyModel m;
  th::InputNodes val;
  th::Node mean_x, w_sum;
  bool grad_enabled_in_eval = true;
};

TEST_F(EvaluationHookTest, EvaluatesAtMultiplesOfNAndAtTheEndWithBatchWeightedMeans) {
  build();
  auto o = options();
  o.every_n_steps = 3;
  auto hook = std::make_shared<th::EvaluationHook>(o);
  auto counter = std::make_shared<CountingHook>();
  auto sess = th::testing::chief_session(m.g, {hook, counter}, fe.env());
  std::vector<float> w_at;
  for (int i = 0; i < 7; ++i) {
    sess->run(m.train, m.feed());
    if (m.g.global_step_value() % 3 == 0) w_at.push_back(m.g.variable_value(m.w).item<float>());
  }
  w_at.push_back(m.g.variable_value(m.w).item<float>());
  sess->close();
  // Weighted by batch size: (1+2+3+4+5)/5 = 3, not the mean of batch means (1.5+3.5+5)/3.
  // w_sum, a per-batch sum, weighs as (2 * 3w + 2 * 7w + 1 * 5w) / 5 = 5w.
  auto line = [](float w, int step) {
    return fmt::format("eval: mean_x = 3, w_sum = {:.4g} (step {})", 5.0 * w, step);
  };
  EXPECT_THAT(info(), ElementsAre(line(w_at[0], 3), line(w_at[1], 6), line(w_at[2], 7)));
  // The passes fired no training hook and moved no training state.
  EXPECT_EQ(counter->before, 7);
  EXPECT_EQ(counter->after, 7);
  EXPECT_EQ(m.g.global_step_value(), 7);
  EXPECT_FALSE(grad_enabled_in_eval);
  EXPECT_EQ(hook->last_evaluated_step(), 7);
}

TEST_F(EvaluationHookTest, PublishesOnTheLatestMetricsWithVersions) {
  build();
  auto o = options();
  o.every_n_steps = 2;
  o.name = "val";
  o.at_end = false;
  auto sess = th::testing::chief_session(m.g, {std::make_shared<th::EvaluationHook>(o)}, fe.env());
  fe.clock->set_wall_seconds(1000);
  for (int i = 0; i < 4; ++i) sess->run(m.train, m.feed());
  auto& board = th::latest_metrics(m.g);
  EXPECT_EQ(board.names(), (std::vector<std::string>{"val/mean_x", "val/w_sum"}));
  auto mx = board.latest("val/mean_x");
  ASSERT_TRUE(mx.has_value());
  EXPECT_EQ(mx->value, 3.0);
  EXPECT_EQ(mx->step, 4);
  EXPECT_EQ(mx->version, 2u);
  EXPECT_EQ(mx->wall_time, 1000.0);
  sess->close();
  EXPECT_EQ(info().size(), 2u);  // at steps 2 and 4; at_end off
}

TEST_F(EvaluationHookTest, WritesEachMeanAsAScalarSummary) {
  build();
  th::testing::TempDir dir;
  auto o = options();
  o.every_n_steps = 2;
  o.output_dir = dir.file("eval");
  auto sess = th::testing::chief_session(m.g, {std::make_shared<th::EvaluationHook>(o)}, fe.env());
  for (int i = 0; i < 3; ++i) sess->run(m.train, m.feed());
  sess->close();
  std::vector<std::pair<std::string, int64_t>> written;
  for (const auto& e : th::summary::read_events(dir.file("eval")))
    for (const auto& v : e.values) {
      EXPECT_EQ(v.kind, th::summary::ValueKind::kScalar);
      written.emplace_back(v.tag, e.step);
      if (v.tag == "mean_x") {
        EXPECT_EQ(v.scalar, 3.0);
      }
    }
  EXPECT_THAT(written, ElementsAre(std::pair<std::string, int64_t>{"mean_x", 2},
                                   std::pair<std::string, int64_t>{"w_sum", 2},
                                   std::pair<std::string, int64_t>{"mean_x", 3},
                                   std::pair<std::string, int64_t>{"w_sum", 3}));
}

TEST_F(EvaluationHookTest, AResumedRunEvaluatesAtTheSameSteps) {
  build();
  auto o = options();
  o.every_n_steps = 3;
  o.at_end = false;
  // As if restored at step 4: the next evaluation is at 6, not at 4 + 3.
  m.g.set_global_step_value(4);
  auto sess = th::testing::worker_session(m.g, {std::make_shared<th::EvaluationHook>(o)}, fe.env());
  std::vector<int64_t> at;
  for (int i = 0; i < 6; ++i) {
    const size_t before = info().size();
    sess->run(m.train, m.feed());
    if (info().size() > before) at.push_back(m.g.global_step_value());
  }
  EXPECT_THAT(at, ElementsAre(6, 9));
}

TEST_F(EvaluationHookTest, EverySecondsCountsFromSessionCreation) {
  build();
  auto o = options();
  o.every_n_secs = 10;
  o.at_end = false;
  auto sess = th::testing::chief_session(m.g, {std::make_shared<th::EvaluationHook>(o)}, fe.env());
  std::vector<int64_t> at;
  for (int i = 0; i < 10; ++i) {
    fe.clock->advance(4);
    const size_t before = info().size();
    sess->run(m.train, m.feed());
    if (info().size() > before) at.push_back(m.g.global_step_value());
  }
  // 4 s per step: 12 s at step 3, then 12 s after that at step 6, then 9.
  EXPECT_THAT(at, ElementsAre(3, 6, 9));
}

TEST_F(EvaluationHookTest, AnInputThatRepeatsEndsThePassWhenItWraps) {
  build(/*num_epochs=*/0);
  auto o = options();
  auto hook = std::make_shared<th::EvaluationHook>(o);
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  auto means = hook->evaluate(sess->raw_session());
  EXPECT_EQ(means.at("mean_x"), 3.0);
  // And again: the input restarts for every pass.
  EXPECT_EQ(hook->evaluate(sess->raw_session()).at("mean_x"), 3.0);
}

TEST_F(EvaluationHookTest, MaxBatchesLimitsThePass) {
  build();
  auto o = options();
  o.max_batches = 2;
  auto hook = std::make_shared<th::EvaluationHook>(o);
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  EXPECT_EQ(hook->evaluate(sess->raw_session()).at("mean_x"), 2.5);  // (1+2+3+4)/4
}

TEST_F(EvaluationHookTest, SetTrainingIsCalledAroundEachPass) {
  build();
  std::vector<bool> calls;
  auto o = options();
  o.set_training = [&](bool training) { calls.push_back(training); };
  auto hook = std::make_shared<th::EvaluationHook>(o);
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  sess->run(m.train, m.feed());
  sess->close();  // at_end
  EXPECT_THAT(calls, ElementsAre(false, true));
}

TEST_F(EvaluationHookTest, ANonScalarMetricIsAnError) {
  build();
  const th::Node vx = val[0];
  auto whole = m.g.op("val/whole", [=](th::Run& r) { return r[vx] * 1; });
  auto hook = std::make_shared<th::EvaluationHook>(
      th::EvaluationHookOptions{.metrics = {{"whole", whole}}, .input = val[0]});
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  EXPECT_EQ(
      th::testing::error_message<th::InvalidArgument>([&] { hook->evaluate(sess->raw_session()); }),
      "EvaluationHook: metric 'whole' (val/whole) must be a scalar per batch, got shape 2");
}

TEST_F(EvaluationHookTest, InvalidOptionsNameTheOption) {
  build();
  auto err = [](th::EvaluationHookOptions o) {
    return th::testing::error_message<th::InvalidArgument>([&] { th::EvaluationHook hook(o); });
  };
  EXPECT_EQ(err({.input = val[0]}), "EvaluationHook: metrics must not be empty.");
  EXPECT_EQ(err({.metrics = {{"m", mean_x}}}),
            "EvaluationHook: input (a node of the validation input) is required.");
  EXPECT_EQ(err({.metrics = {{"m", mean_x}, {"m", w_sum}}, .input = val[0]}),
            "EvaluationHook: metric 'm' is given twice.");
  EXPECT_EQ(
      err({.metrics = {{"m", mean_x}}, .input = val[0], .every_n_steps = 1, .every_n_secs = 1.0}),
      "EvaluationHook: at most one of every_n_steps and every_n_secs may be provided.");
  EXPECT_EQ(err({.metrics = {{"m", mean_x}}, .input = val[0], .every_n_steps = 0}),
            "EvaluationHook: every_n_steps must be positive, got 0");
  EXPECT_THAT(err({.metrics = {{"m", mean_x}}, .input = val[0], .at_end = false}),
              HasSubstr("nothing would trigger an evaluation"));
  // The input must be an input node.
  auto hook = std::make_shared<th::EvaluationHook>(
      th::EvaluationHookOptions{.metrics = {{"m", mean_x}}, .input = m.w});
  EXPECT_EQ(th::testing::error_message<th::InvalidArgument>(
                [&] { th::testing::chief_session(m.g, {hook}, fe.env()); }),
            "EvaluationHook: input 'w' is a variable, not an input node.");
}

}  // namespace evaluation_hook_test
