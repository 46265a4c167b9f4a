#include "trainhooks/hooks/step_counter_hook.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "test_util.h"
#include "trainhooks/errors.h"
#include "trainhooks/summary/event_writer.h"

namespace th = trainhooks;
using ::testing::ElementsAre;

namespace step_counter_hook_test {

class StepCounterHookTest : public ::testing::Test {
 protected:
  std::vector<std::string> info() const { return fe.log->messages(th::LogLevel::kInfo); }
  std::vector<std::string> warnings() const { return fe.log->messages(th::LogLevel::kWarning); }

  // Trains `n` steps, advancing the fake clock by `secs` before each; returns the global steps
  // after which a line was logged.
  std::vector<int64_t> train(th::MonitoredSession& sess, int n, double secs) {
    std::vector<int64_t> logged_at;
    for (int i = 0; i < n; ++i) {
      fe.clock->advance(secs);
      const size_t before = info().size();
      sess.run(m.train, m.feed());
      if (info().size() > before) logged_at.push_back(m.g.global_step_value());
    }
    return logged_at;
  }

  th::testing::FakeEnv fe;
  th::testing::TinyModel m;
};

TEST_F(StepCounterHookTest, FirstTriggerIsABaselineThenLogsGlobalStepsPerSecond) {
  auto hook =
      std::make_shared<th::StepCounterHook>(th::StepCounterHookOptions{.every_n_steps = 10});
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  // Baseline at global step 1, then lines at 11 and 21: 10 steps over 10 * 0.5 fake seconds.
  EXPECT_THAT(train(*sess, 30, 0.5), ElementsAre(11, 21));
  EXPECT_THAT(info(), ElementsAre("global_step/sec: 2", "global_step/sec: 2"));
  EXPECT_TRUE(warnings().empty());
  sess->close();
  EXPECT_EQ(info().size(), 2u);
}

TEST_F(StepCounterHookTest, RateIsPrintedWithPercentG) {
  auto hook = std::make_shared<th::StepCounterHook>(th::StepCounterHookOptions{.every_n_steps = 3});
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  // 3 steps over 3 * 0.125 s = 8 steps/sec; then 3 steps over 3 * 1.5 s = 0.666667.
  train(*sess, 4, 0.125);
  train(*sess, 3, 1.5);
  EXPECT_THAT(info(), ElementsAre("global_step/sec: 8", "global_step/sec: 0.666667"));
}

TEST_F(StepCounterHookTest, EveryNSecsTriggersByTheClock) {
  auto hook =
      std::make_shared<th::StepCounterHook>(th::StepCounterHookOptions{.every_n_secs = 0.1});
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  sess->run(m.train, m.feed());  // baseline at step 1
  fe.clock->advance(0.25);
  sess->run(m.train, m.feed());  // step 2: 1 step / 0.25 s
  fe.clock->advance(0.25);
  sess->run(m.train, m.feed());  // step 3
  EXPECT_THAT(info(), ElementsAre("global_step/sec: 4", "global_step/sec: 4"));
}

TEST_F(StepCounterHookTest, EveryNSecsWaitsForTheSecondsToPass) {
  auto hook =
      std::make_shared<th::StepCounterHook>(th::StepCounterHookOptions{.every_n_secs = 1.0});
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  EXPECT_THAT(train(*sess, 5, 0.25),
              ElementsAre(5));  // baseline at 1 (t = 0.25), line at 5 (t = 1.25)
  EXPECT_THAT(info(), ElementsAre("global_step/sec: 4"));
}

TEST_F(StepCounterHookTest, DefaultsToEvery100Steps) {
  auto hook = std::make_shared<th::StepCounterHook>();
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  EXPECT_THAT(train(*sess, 201, 0.01), ElementsAre(101, 201));
}

TEST_F(StepCounterHookTest, BaselineIsTheFirstRunOfAResumedWorker) {
  m.g.set_global_step_value(100);
  auto hook =
      std::make_shared<th::StepCounterHook>(th::StepCounterHookOptions{.every_n_steps = 10});
  auto sess = th::testing::worker_session(m.g, {hook}, fe.env());
  EXPECT_THAT(train(*sess, 21, 1.0), ElementsAre(111, 121));
  EXPECT_THAT(info(), ElementsAre("global_step/sec: 1", "global_step/sec: 1"));
}

TEST_F(StepCounterHookTest, WarnsAtMostFiveTimesWhenTheGlobalStepDoesNotIncrease) {
  auto hook = std::make_shared<th::StepCounterHook>(th::StepCounterHookOptions{.every_n_steps = 1});
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  sess->run(m.train, m.feed());  // global step 0 -> 1
  sess->run(m.loss, m.feed());   // starts from 1: the previous run advanced it
  EXPECT_TRUE(warnings().empty());
  for (int i = 0; i < 30; ++i) sess->run(m.loss, m.feed());
  const std::string expected =
      "It seems that global step has not been increased. Current value (could be stable): 1 vs "
      "previous value: 1. "
      "You could increase the global step by running a train op made by Graph::minimize.";
  EXPECT_THAT(warnings(), ElementsAre(expected, expected, expected, expected, expected));
}

TEST_F(StepCounterHookTest, DoesNotWarnWhileTraining) {
  auto hook = std::make_shared<th::StepCounterHook>(th::StepCounterHookOptions{.every_n_steps = 1});
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  train(*sess, 20, 0.5);
  EXPECT_TRUE(warnings().empty());
  EXPECT_EQ(info().size(), 19u);
}

TEST_F(StepCounterHookTest, RejectsBadOptionsWithTensorFlowsTexts) {
  auto message = [](th::StepCounterHookOptions o) {
    return th::testing::error_message<th::InvalidArgument>([&] { th::StepCounterHook h(o); });
  };
  EXPECT_EQ(message({.every_n_steps = 10, .every_n_secs = 1.0}),
            "exactly one of every_n_steps and every_n_secs should be provided.");
  EXPECT_EQ(message({.every_n_steps = 0}),
            "StepCounterHook: every_n_steps must be positive, got 0");
  EXPECT_EQ(message({.every_n_secs = -1.5}),
            "StepCounterHook: every_n_secs must be positive, got -1.5");
  th::testing::TempDir dir;
  auto writer = std::make_shared<th::summary::EventWriter>(dir.path());
  EXPECT_EQ(message({.output_dir = dir.path(), .summary_writer = writer}),
            "StepCounterHook: at most one of output_dir and summary_writer may be provided.");
  EXPECT_EQ(message({}), "");
  EXPECT_EQ(message({.every_n_secs = 2.0}), "");
}

TEST_F(StepCounterHookTest, WithoutAGlobalStepFailsAtSessionCreation) {
  th::Graph g;
  auto x = g.placeholder("x", {.dtype = at::kFloat});
  g.op("y", [=](th::Run& r) { return r[x] + 1; });
  auto hook = std::make_shared<th::StepCounterHook>();
  try {
    th::testing::chief_session(g, {hook}, fe.env());
    FAIL() << "expected RuntimeError";
  } catch (const th::RuntimeError& e) {
    EXPECT_STREQ(e.what(), "Global step should be created to use StepCounterHook.");
  }
}

}  // namespace step_counter_hook_test
