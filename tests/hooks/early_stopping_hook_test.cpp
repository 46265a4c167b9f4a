#include "trainhooks/hooks/early_stopping_hook.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/zeros.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "test_util.h"
#include "trainhooks/errors.h"
#include "trainhooks/latest_metrics.h"
#include "trainhooks/training_session.h"

namespace th = trainhooks;
using ::testing::ElementsAre;

namespace early_stopping_hook_test {

// Publishes metric values when the global step reaches chosen steps (in after_run), as an
// evaluation hook does.
struct Publisher : th::SessionRunHook {
  Publisher(std::string n, std::map<int64_t, double> v)
      : name(std::move(n)), values(std::move(v)) {}
  void after_run(th::SessionRunContext&, const th::SessionRunValues&) override {
    const int64_t step = graph().global_step_value();
    if (auto it = values.find(step); it != values.end())
      services().metrics().publish(name, it->second, step, 0);
  }
  std::string name;
  std::map<int64_t, double> values;
};

// Records w after each run, by global step.
struct WeightRecorder : th::SessionRunHook {
  explicit WeightRecorder(th::Node v) : w(v) {}
  void after_run(th::SessionRunContext&, const th::SessionRunValues&) override {
    by_step[graph().global_step_value()] = graph().variable_value(w).item<float>();
  }
  th::Node w;
  std::map<int64_t, float> by_step;
};

// One evaluation every 2 steps: best 2.0 at step 4, then 5 evaluations without improvement.
const std::map<int64_t, double> kLosses{{2, 3.0},  {4, 2.0},  {6, 2.5},  {8, 2.0},
                                        {10, 2.1}, {12, 2.2}, {14, 2.3}, {16, 1.0}};

class EarlyStoppingHookTest : public ::testing::Test {
 protected:
  int train_until_stop(th::MonitoredSession& sess, int limit = 100) {
    int runs = 0;
    while (!sess.should_stop() && runs < limit) {
      sess.run(m.train, m.feed());
      ++runs;
    }
    return runs;
  }
  std::vector<std::string> info() const { return fe.log->messages(th::LogLevel::kInfo); }

  th::testing::FakeEnv fe;
  th::testing::TinyModel m;
};

TEST_F(EarlyStoppingHookTest, StopsAfterPatienceEvaluationsWithoutImprovement) {
  auto hook = std::make_shared<th::EarlyStoppingHook>(
      th::EarlyStoppingHookOptions{.monitor = "eval/loss", .patience = 3});
  auto sess = th::testing::chief_session(
      m.g, {std::make_shared<Publisher>("eval/loss", kLosses), hook}, fe.env());
  // 2.5, 2.0 (not below 2.0), 2.1: three evaluations without improvement at step 10.
  EXPECT_EQ(train_until_stop(*sess), 10);
  EXPECT_EQ(hook->stopped_step(), 10);
  EXPECT_EQ(hook->best(), 2.0);
  EXPECT_EQ(hook->best_step(), 4);
  EXPECT_EQ(hook->wait(), 3);
  EXPECT_EQ(hook->evaluations(), 5);
  EXPECT_THAT(info(), ElementsAre("EarlyStoppingHook: eval/loss did not improve for 3 evaluations "
                                  "(best 2 at step 4); stopping at step 10."));
}

TEST_F(EarlyStoppingHookTest, ListedBeforeThePublisherStopsOneStepLater) {
  auto hook = std::make_shared<th::EarlyStoppingHook>(
      th::EarlyStoppingHookOptions{.monitor = "eval/loss", .patience = 3});
  auto sess = th::testing::chief_session(
      m.g, {hook, std::make_shared<Publisher>("eval/loss", kLosses)}, fe.env());
  EXPECT_EQ(train_until_stop(*sess), 11);
  EXPECT_EQ(hook->stopped_step(), 10);  // the step the value was seen at, before step 11 ran
  EXPECT_EQ(hook->best_step(), 4);
}

TEST_F(EarlyStoppingHookTest, MaxModeMinDeltaAndPatienceZero) {
  auto hook = std::make_shared<th::EarlyStoppingHook>(th::EarlyStoppingHookOptions{
      .monitor = "eval/accuracy", .mode = th::MetricMode::kMax, .min_delta = 0.05});
  auto sess = th::testing::chief_session(
      m.g,
      {std::make_shared<Publisher>("eval/accuracy",
                                   std::map<int64_t, double>{{1, 0.5}, {2, 0.6}, {3, 0.64}}),
       hook},
      fe.env());
  EXPECT_EQ(train_until_stop(*sess), 3);  // 0.64 is not above 0.6 + 0.05
  EXPECT_EQ(hook->best(), 0.6);
  EXPECT_THAT(info(), ElementsAre("EarlyStoppingHook: eval/accuracy did not improve for 1 "
                                  "evaluation (best 0.6 at step 2); stopping at step 3."));
}

TEST_F(EarlyStoppingHookTest, TheBaselineMustBeBeatenAndNanNeverImproves) {
  auto hook = std::make_shared<th::EarlyStoppingHook>(
      th::EarlyStoppingHookOptions{.monitor = "eval/loss", .patience = 2, .baseline = 1.0});
  auto sess = th::testing::chief_session(
      m.g,
      {std::make_shared<Publisher>(
           "eval/loss",
           std::map<int64_t, double>{{1, 1.5}, {2, std::numeric_limits<double>::quiet_NaN()}}),
       hook},
      fe.env());
  EXPECT_EQ(train_until_stop(*sess), 2);
  EXPECT_EQ(hook->best_step(), -1);
  EXPECT_THAT(info(), ElementsAre("EarlyStoppingHook: eval/loss did not improve for 2 evaluations "
                                  "(baseline 1 not beaten); stopping at step 2."));
}

TEST_F(EarlyStoppingHookTest, ActsOncePerPublishAndIgnoresValuesFromBeforeTheSession) {
  th::latest_metrics(m.g).publish("eval/loss", 5.0, 0, 0);
  auto hook = std::make_shared<th::EarlyStoppingHook>(
      th::EarlyStoppingHookOptions{.monitor = "eval/loss", .patience = 2});
  auto sess = th::testing::chief_session(
      m.g, {std::make_shared<Publisher>("eval/loss", std::map<int64_t, double>{{3, 1.0}}), hook},
      fe.env());
  for (int i = 0; i < 10; ++i) sess->run(m.train, m.feed());
  EXPECT_EQ(hook->evaluations(), 1);
  EXPECT_EQ(hook->best(), 1.0);
  EXPECT_FALSE(sess->should_stop());
}

TEST_F(EarlyStoppingHookTest, FetchesAScalarNodeOnItsTimer) {
  // The values of the metric's successive evaluations.
  const std::vector<float> values{4, 3, 3, 3, 3, 3};
  size_t calls = 0;
  auto metric = m.g.op("metric", [&](th::Run&) { return at::scalar_tensor(values.at(calls++)); });
  auto hook = std::make_shared<th::EarlyStoppingHook>(
      th::EarlyStoppingHookOptions{.node = metric, .every_n_steps = 2, .patience = 2});
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  // Fetched in the runs at global steps 0, 2, 4, 6 (values 4, 3, 3, 3), after which the global
  // step is 1, 3, 5, 7.
  EXPECT_EQ(train_until_stop(*sess), 7);
  EXPECT_EQ(hook->best(), 3.0);
  EXPECT_EQ(hook->best_step(), 3);
  EXPECT_EQ(hook->state_key(), "hooks/early_stopping/metric");
  EXPECT_THAT(info(), ElementsAre("EarlyStoppingHook: metric did not improve for 2 evaluations "
                                  "(best 3 at step 3); stopping at step 7."));
}

TEST_F(EarlyStoppingHookTest, ANodeThatIsNotAScalarIsAnInvalidArgumentAtItsFirstFetch) {
  auto metric = m.g.op("pair", [](th::Run&) { return at::zeros({2, 3}); });
  auto hook = std::make_shared<th::EarlyStoppingHook>(
      th::EarlyStoppingHookOptions{.node = "pair", .every_n_steps = 1});
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  EXPECT_EQ(th::testing::error_message<th::InvalidArgument>([&] { sess->run(m.train, m.feed()); }),
            "EarlyStoppingHook: node 'pair' must be a scalar, got shape [2, 3]");
  (void)metric;
}

TEST_F(EarlyStoppingHookTest, RestoresTheBestVariablesAtTheEnd) {
  auto recorder = std::make_shared<WeightRecorder>(m.w);
  auto hook = std::make_shared<th::EarlyStoppingHook>(
      th::EarlyStoppingHookOptions{.monitor = "eval/loss", .patience = 3, .restore_best = true});
  auto sess = th::testing::chief_session(
      m.g, {std::make_shared<Publisher>("eval/loss", kLosses), recorder, hook}, fe.env());
  EXPECT_EQ(train_until_stop(*sess), 10);
  const float last = m.g.variable_value(m.w).item<float>();
  EXPECT_NE(last, recorder->by_step.at(4));
  sess->close();
  EXPECT_EQ(m.g.variable_value(m.w).item<float>(), recorder->by_step.at(4));
  EXPECT_THAT(info(), ::testing::Contains("EarlyStoppingHook: restored the variables of the best "
                                          "evaluation (eval/loss = 2 at step 4)."));
}

// Trains a fresh model (new hooks, as a new process) with checkpoints in `dir` until the session
// stops or the global step reaches `interrupt_at`. kill: leave by an exception (no end(), no
// final checkpoint: the next run resumes from the last periodic one, every 7 steps, which the
// evaluations at even steps miss until 14, after the stop).
struct Outcome {
  int64_t stopped_step = -1;
  int64_t final_step = 0;
  int64_t evaluations = 0;
};
Outcome train(const std::string& dir, const th::testing::FakeEnv& fe, int64_t interrupt_at,
              bool kill) {
  th::testing::TinyModel model;
  auto hook = std::make_shared<th::EarlyStoppingHook>(
      th::EarlyStoppingHookOptions{.monitor = "eval/loss", .patience = 3});
  Outcome out;
  try {
    th::MonitoredTrainingSession sess(
        model.g, {.checkpoint_dir = dir,
                  .hooks = {std::make_shared<Publisher>("eval/loss", kLosses), hook},
                  .checkpoints = {.save_steps = 7},
                  .summaries = {.save_steps = 0, .log_step_count_steps = 0},
                  .handle_preemption_signals = false,
                  .env = fe.env()});
    while (!sess.should_stop() && model.g.global_step_value() < interrupt_at)
      sess.run(model.train, model.feed());
    if (kill && !sess.should_stop()) throw std::runtime_error("killed");
    sess.close();
  } catch (const std::runtime_error& e) {
    if (std::string(e.what()) != "killed") throw;
  }
  out.stopped_step = hook->stopped_step();
  out.final_step = model.g.global_step_value();
  out.evaluations = hook->evaluations();
  return out;
}

TEST_F(EarlyStoppingHookTest, AResumedRunStopsAtTheStepOfAnUninterruptedOne) {
  th::testing::TempDir tmp;
  const Outcome straight = train(tmp.file("straight"), fe, 1000, false);
  EXPECT_EQ(straight.stopped_step, 10);
  EXPECT_EQ(straight.final_step, 10);

  // Closed at step 7 (after the evaluations at 2, 4 and 6: wait 1), resumed from step 7.
  const Outcome first = train(tmp.file("closed"), fe, 7, false);
  EXPECT_EQ(first.stopped_step, -1);
  EXPECT_EQ(first.evaluations, 3);
  const Outcome resumed = train(tmp.file("closed"), fe, 1000, false);
  EXPECT_EQ(resumed.stopped_step, straight.stopped_step);
  EXPECT_EQ(resumed.final_step, straight.final_step);
  EXPECT_EQ(resumed.evaluations, 5);  // the restored count goes on

  // Killed at step 9: resumed from the checkpoint of step 7 (wait 1, best 2.0 at 4); steps 8 and
  // 9 run again.
  train(tmp.file("killed"), fe, 9, true);
  const Outcome after_kill = train(tmp.file("killed"), fe, 1000, false);
  EXPECT_EQ(after_kill.stopped_step, straight.stopped_step);
  EXPECT_EQ(after_kill.final_step, straight.final_step);

  // Run again after it stopped: it stops after one step.
  fe.log->clear();
  const Outcome again = train(tmp.file("straight"), fe, 1000, false);
  EXPECT_EQ(again.final_step, 11);
  EXPECT_EQ(again.stopped_step, 10);
  EXPECT_THAT(fe.log->messages(),
              ::testing::Contains("EarlyStoppingHook: training was stopped early at step 10 "
                                  "(restored); stopping after this step."));
}

TEST_F(EarlyStoppingHookTest, RestoreBestWarnsWhenTheBestCameBeforeARestore) {
  th::testing::TempDir tmp;
  auto run = [&](int64_t until) {
    th::testing::TinyModel model;
    auto hook = std::make_shared<th::EarlyStoppingHook>(
        th::EarlyStoppingHookOptions{.monitor = "eval/loss", .patience = 3, .restore_best = true});
    th::MonitoredTrainingSession sess(
        model.g, {.checkpoint_dir = tmp.path(),
                  .hooks = {std::make_shared<Publisher>("eval/loss", kLosses), hook},
                  .checkpoints = {.save_steps = 100},
                  .summaries = {.save_steps = 0, .log_step_count_steps = 0},
                  .handle_preemption_signals = false,
                  .env = fe.env()});
    while (!sess.should_stop() && model.g.global_step_value() < until)
      sess.run(model.train, model.feed());
    sess.close();
  };
  run(5);
  fe.log->clear();
  run(1000);
  EXPECT_THAT(fe.log->messages(th::LogLevel::kWarning),
              ElementsAre("EarlyStoppingHook: the best evaluation (eval/loss = 2 at step 4) came "
                          "before the session was restored; its variables are not in memory and "
                          "are not restored."));
}

TEST_F(EarlyStoppingHookTest, StateRoundTripsAndBadStateIsDataLoss) {
  th::EarlyStoppingHook hook({.monitor = "eval/loss"});
  EXPECT_EQ(hook.save_state(),
            "early_stopping 1\nbest inf\nbest_step -1\nwait 0\nevaluations 0\nstopped_step -1\n");
  const std::string saved =
      "early_stopping 1\nbest 0.25\nbest_step 40\nwait 2\nevaluations 7\nstopped_step -1\n";
  hook.load_state(saved);
  EXPECT_EQ(hook.best(), 0.25);
  EXPECT_EQ(hook.best_step(), 40);
  EXPECT_EQ(hook.wait(), 2);
  EXPECT_EQ(hook.evaluations(), 7);
  EXPECT_EQ(hook.save_state(), saved);
  auto bad = [&](const std::string& bytes) {
    return th::testing::error_message<th::DataLossError>([&] { hook.load_state(bytes); });
  };
  EXPECT_EQ(bad("garbage"),
            "EarlyStoppingHook: cannot read its checkpointed state: unknown format 'garbage'");
  EXPECT_EQ(bad("early_stopping 1\nbest 1\n"),
            "EarlyStoppingHook: cannot read its checkpointed state: missing best_step");
  EXPECT_EQ(hook.save_state(), saved);
}

TEST_F(EarlyStoppingHookTest, RejectsBadOptionsNamingThem) {
  auto message = [](th::EarlyStoppingHookOptions o) {
    return th::testing::error_message<th::InvalidArgument>([&] { th::EarlyStoppingHook h(o); });
  };
  EXPECT_EQ(message({}), "EarlyStoppingHook: monitor must name a metric (or node must be set)");
  EXPECT_EQ(message({.monitor = "l", .patience = -1}),
            "EarlyStoppingHook: patience must be non-negative, got -1");
  EXPECT_EQ(message({.monitor = "l", .min_delta = -0.5}),
            "EarlyStoppingHook: min_delta must be a finite, non-negative number, got -0.5");
  EXPECT_EQ(message({.monitor = "l", .baseline = std::nan("")}),
            "EarlyStoppingHook: baseline must be a finite number, got nan");
  EXPECT_EQ(message({.monitor = "l", .every_n_steps = 5}),
            "EarlyStoppingHook: every_n_steps and every_n_secs apply to a node; the board's "
            "metrics are read when published");
  EXPECT_EQ(message({.node = "loss"}), "Either every_n_secs or every_n_steps should be provided.");
  EXPECT_EQ(message({.node = "loss", .every_n_steps = 1, .every_n_secs = 1}),
            "Can not provide both every_n_secs and every_n_steps.");
  EXPECT_EQ(message({.node = "loss", .every_n_steps = 0}),
            "EarlyStoppingHook: every_n_steps must be positive, got 0");
  EXPECT_EQ(message({.monitor = "l", .patience = 0}), "");
}

}  // namespace early_stopping_hook_test
