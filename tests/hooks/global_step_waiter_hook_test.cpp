#include "trainhooks/hooks/global_step_waiter_hook.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "test_util.h"
#include "trainhooks/errors.h"

namespace th = trainhooks;
using ::testing::Each;
using ::testing::ElementsAre;

namespace global_step_waiter_hook_test {

// Stands in for the other workers: every sleep moves the graph's global step to the next value
// of `steps`. Sleeping more often than that is a test failure (the hook should have stopped).
class StepBumpingSleeper : public th::Sleeper {
 public:
  StepBumpingSleeper(th::Graph& g, std::vector<int64_t> steps) : g_(g), steps_(std::move(steps)) {}

  void sleep_for(double seconds) override {
    sleeps.push_back(seconds);
    if (sleeps.size() > steps_.size())
      throw std::logic_error("slept after the last global step update");
    g_.set_global_step_value(steps_[sleeps.size() - 1]);
  }

  std::vector<double> sleeps;

 private:
  th::Graph& g_;
  std::vector<int64_t> steps_;
};

class GlobalStepWaiterHookTest : public ::testing::Test {
 protected:
  th::Env env_with(std::shared_ptr<th::Sleeper> sleeper) const {
    return th::Env{fe.clock, std::move(sleeper), fe.log};
  }
  std::vector<std::string> info() const { return fe.log->messages(th::LogLevel::kInfo); }

  th::testing::FakeEnv fe;
  th::testing::TinyModel m;
};

TEST_F(GlobalStepWaiterHookTest, BlocksTheFirstRunUntilTheGlobalStepIsReached) {
  auto sleeper = std::make_shared<StepBumpingSleeper>(m.g, std::vector<int64_t>{500, 1100});
  auto hook = std::make_shared<th::GlobalStepWaiterHook>(1000);
  auto sess = th::testing::chief_session(m.g, {hook}, env_with(sleeper));
  EXPECT_TRUE(sleeper->sleeps.empty());  // nothing waits before the first run

  sess->run(m.train, m.feed());
  EXPECT_THAT(sleeper->sleeps, ElementsAre(0.5, 0.5));
  EXPECT_EQ(m.g.global_step_value(), 1101);  // the run trained once the step was reached
  EXPECT_THAT(info(), ElementsAre("Waiting for global step 1000 before starting training."));

  // Later runs are not delayed.
  sess->run(m.train, m.feed());
  sess->run(m.train, m.feed());
  EXPECT_EQ(sleeper->sleeps.size(), 2u);
  EXPECT_EQ(info().size(), 1u);
}

TEST_F(GlobalStepWaiterHookTest, SleepsThroughTheSessionsSleeperByDefault) {
  // FakeSleeper advances the fake clock; the global step is moved from outside after 3 polls.
  class CountingSleeper : public th::Sleeper {
   public:
    CountingSleeper(th::Graph& g, th::FakeSleeper& inner) : g_(g), inner_(inner) {}
    void sleep_for(double seconds) override {
      inner_.sleep_for(seconds);
      if (inner_.sleeps().size() == 3) g_.set_global_step_value(10);
    }

   private:
    th::Graph& g_;
    th::FakeSleeper& inner_;
  };
  auto sleeper = std::make_shared<CountingSleeper>(m.g, *fe.sleeper);
  auto hook = std::make_shared<th::GlobalStepWaiterHook>(10);
  auto sess = th::testing::chief_session(m.g, {hook}, env_with(sleeper));
  sess->run(m.train, m.feed());
  EXPECT_THAT(fe.sleeper->sleeps(), ElementsAre(0.5, 0.5, 0.5));
  EXPECT_EQ(fe.clock->steady_seconds(), 1.5);
}

TEST_F(GlobalStepWaiterHookTest, HookEnvOverridesTheSessionsSleeper) {
  auto sleeper = std::make_shared<StepBumpingSleeper>(m.g, std::vector<int64_t>{7});
  auto hook = std::make_shared<th::GlobalStepWaiterHook>(7);
  hook->set_env(th::Env{.sleeper = sleeper});
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  sess->run(m.train, m.feed());
  EXPECT_THAT(sleeper->sleeps, ElementsAre(0.5));
  EXPECT_TRUE(fe.sleeper->sleeps().empty());
  EXPECT_THAT(info(), ElementsAre("Waiting for global step 7 before starting training."));
}

TEST_F(GlobalStepWaiterHookTest, LogsProgressEveryThousandSteps) {
  auto sleeper =
      std::make_shared<StepBumpingSleeper>(m.g, std::vector<int64_t>{1001, 1500, 2002, 2500, 5000});
  auto hook = std::make_shared<th::GlobalStepWaiterHook>(5000);
  auto sess = th::testing::chief_session(m.g, {hook}, env_with(sleeper));
  sess->run(m.train, m.feed());
  EXPECT_EQ(sleeper->sleeps.size(), 5u);
  EXPECT_THAT(sleeper->sleeps, Each(0.5));
  EXPECT_THAT(
      info(),
      ElementsAre("Waiting for global step 5000 before starting training.",
                  "Waiting for global step 5000 before starting training. Current step is 1001.",
                  "Waiting for global step 5000 before starting training. Current step is 2002."));
}

TEST_F(GlobalStepWaiterHookTest, AStepAlreadyReachedDoesNotSleep) {
  m.g.set_global_step_value(10);
  auto sleeper = std::make_shared<StepBumpingSleeper>(m.g, std::vector<int64_t>{});
  auto hook = std::make_shared<th::GlobalStepWaiterHook>(5);
  auto sess = th::testing::worker_session(m.g, {hook}, env_with(sleeper));
  sess->run(m.train, m.feed());
  EXPECT_TRUE(sleeper->sleeps.empty());
  EXPECT_THAT(info(), ElementsAre("Waiting for global step 5 before starting training."));
}

TEST_F(GlobalStepWaiterHookTest, ZeroOrNegativeStepNeverWaits) {
  for (int64_t step : {int64_t{0}, int64_t{-5}}) {
    fe.log->clear();
    auto sleeper = std::make_shared<StepBumpingSleeper>(m.g, std::vector<int64_t>{});
    auto hook = std::make_shared<th::GlobalStepWaiterHook>(step);
    auto sess = th::testing::chief_session(m.g, {hook}, env_with(sleeper));
    sess->run(m.train, m.feed());
    sess->run(m.train, m.feed());
    EXPECT_TRUE(sleeper->sleeps.empty()) << "wait_until_step " << step;
    EXPECT_TRUE(info().empty()) << "wait_until_step " << step;
  }
}

TEST_F(GlobalStepWaiterHookTest, WithoutAGlobalStepFailsAtSessionCreation) {
  th::Graph g;
  auto x = g.placeholder("x", {.dtype = at::kFloat});
  g.op("y", [=](th::Run& r) { return r[x] + 1; });
  auto hook = std::make_shared<th::GlobalStepWaiterHook>(10);
  EXPECT_EQ(th::testing::error_message<th::RuntimeError>(
                [&] { th::testing::chief_session(g, {hook}, fe.env()); }),
            "Global step should be created to use GlobalStepWaiterHook.");
}

}  // namespace global_step_waiter_hook_test
