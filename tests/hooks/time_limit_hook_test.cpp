#include "trainhooks/hooks/time_limit_hook.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "test_util.h"
#include "trainhooks/checkpoint/checkpoint_manager.h"
#include "trainhooks/errors.h"
#include "trainhooks/training_session.h"

namespace th = trainhooks;
using std::chrono::duration;

namespace time_limit_hook_test {

class TimeLimitHookTest : public ::testing::Test {
 protected:
  // Runs until the session stops, the fake clock moving `secs_per_step` before each step.
  int train_until_stop(th::MonitoredSession& sess, double secs_per_step, int limit = 1000) {
    int runs = 0;
    while (!sess.should_stop() && runs < limit) {
      fe.clock->advance(secs_per_step);
      sess.run(m.train, m.feed());
      ++runs;
    }
    return runs;
  }

  th::testing::FakeEnv fe;
  th::testing::TinyModel m;
};

TEST_F(TimeLimitHookTest, StopsAfterTheRunThatSpendsTheBudget) {
  auto hook = std::make_shared<th::TimeLimitHook>(duration<double>(10));
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  // 3 s per step: 9 s after the third run, 12 s after the fourth.
  EXPECT_EQ(train_until_stop(*sess, 3), 4);
  EXPECT_TRUE(hook->stopped());
  EXPECT_EQ(m.g.global_step_value(), 4);
  EXPECT_EQ(fe.log->messages(),
            (std::vector<std::string>{
                "TimeLimitHook: time limit of 10 s reached after 12.0 s; stopping at global step "
                "4."}));
}

TEST_F(TimeLimitHookTest, ABudgetReachedExactlyStops) {
  auto hook = std::make_shared<th::TimeLimitHook>(std::chrono::minutes(1));
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  EXPECT_EQ(hook->duration_seconds(), 60);
  EXPECT_EQ(train_until_stop(*sess, 15), 4);
}

TEST_F(TimeLimitHookTest, CountsFromBeginIncludingSessionCreation) {
  // Time spent before the session exists (a restore) is part of the budget.
  struct SlowStart : th::SessionRunHook {
    explicit SlowStart(th::FakeClock& c) : clock(c) {}
    void after_create_session(th::Session&, th::Coordinator&) override { clock.advance(8); }
    Calls calls() const override { return {.before_run = false, .after_run = false}; }
    th::FakeClock& clock;
  };
  auto hook = std::make_shared<th::TimeLimitHook>(duration<double>(10));
  auto sess =
      th::testing::chief_session(m.g, {hook, std::make_shared<SlowStart>(*fe.clock)}, fe.env());
  EXPECT_EQ(train_until_stop(*sess, 1), 2);
}

TEST_F(TimeLimitHookTest, LeavesTheFinalCheckpointToTheCheckpointSaverHook) {
  th::testing::TempDir tmp;
  auto hook = std::make_shared<th::TimeLimitHook>(duration<double>(5));
  th::MonitoredTrainingSession sess(m.g, {.checkpoint_dir = tmp.path(),
                                          .hooks = {hook},
                                          .checkpoints = {.save_steps = 1000},
                                          .summaries = {.save_steps = 0, .log_step_count_steps = 0},
                                          .handle_preemption_signals = false,
                                          .env = fe.env()});
  EXPECT_EQ(train_until_stop(sess, 1), 5);
  sess.close();
  EXPECT_EQ(th::CheckpointManager(tmp.path()).latest(), tmp.file("model.ckpt-5"));
  EXPECT_THAT(fe.log->messages(),
              ::testing::Contains("TimeLimitHook: time limit of 5 s reached after 5.0 s; "
                                  "stopping at global step 5."));
}

TEST_F(TimeLimitHookTest, AReusedHookGetsANewBudget) {
  auto hook = std::make_shared<th::TimeLimitHook>(duration<double>(2));
  {
    auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
    EXPECT_EQ(train_until_stop(*sess, 1), 2);
  }
  fe.clock->advance(100);
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  EXPECT_FALSE(hook->stopped());
  EXPECT_EQ(train_until_stop(*sess, 1), 2);
}

TEST_F(TimeLimitHookTest, RejectsABudgetThatIsNotPositiveAndFinite) {
  auto message = [](double secs) {
    return th::testing::error_message<th::InvalidArgument>(
        [&] { th::TimeLimitHook h{duration<double>(secs)}; });
  };
  EXPECT_EQ(message(0),
            "TimeLimitHook: duration must be a positive, finite number of seconds, got 0");
  EXPECT_EQ(message(-1),
            "TimeLimitHook: duration must be a positive, finite number of seconds, got -1");
  EXPECT_EQ(message(std::nan("")),
            "TimeLimitHook: duration must be a positive, finite number of seconds, got nan");
  EXPECT_EQ(message(std::numeric_limits<double>::infinity()),
            "TimeLimitHook: duration must be a positive, finite number of seconds, got inf");
  EXPECT_EQ(message(0.5), "");
}

}  // namespace time_limit_hook_test
