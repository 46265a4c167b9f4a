#include "trainhooks/hooks/stop_at_step_hook.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "test_util.h"
#include "trainhooks/errors.h"

namespace th = trainhooks;

namespace stop_at_step_hook_test {

class StopAtStepHookTest : public ::testing::Test {
 protected:
  // Trains until the session asks to stop (at most `limit` runs); returns the number of runs.
  int train_until_stop(th::MonitoredSession& sess, int limit = 1000) {
    int runs = 0;
    while (!sess.should_stop() && runs < limit) {
      sess.run(m.train, m.feed());
      ++runs;
    }
    return runs;
  }

  th::testing::FakeEnv fe;
  th::testing::TinyModel m;
};

TEST_F(StopAtStepHookTest, RejectsBothOrNeitherOfNumStepsAndLastStep) {
  EXPECT_EQ(th::testing::error_message<th::InvalidArgument>(
                [] { th::StopAtStepHook({.num_steps = 10, .last_step = 20}); }),
            "Only one of num_steps or last_step can be specified.");
  EXPECT_EQ(th::testing::error_message<th::InvalidArgument>(
                [] { th::StopAtStepHook(th::StopAtStepHookOptions{}); }),
            "One of num_steps or last_step must be specified.");
}

TEST_F(StopAtStepHookTest, RequestsStopWhenGlobalStepReachesLastStep) {
  auto hook = std::make_shared<th::StopAtStepHook>(th::StopAtStepHookOptions{.last_step = 10});
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  for (int i = 1; i < 10; ++i) {
    sess->run(m.train, m.feed());
    EXPECT_FALSE(sess->should_stop()) << "after run " << i;
  }
  // The run that reaches last_step completes and returns its results.
  auto results = sess->run({m.train, m.loss}, m.feed());
  EXPECT_TRUE(results.contains(m.loss));
  EXPECT_TRUE(sess->should_stop());
  EXPECT_EQ(m.g.global_step_value(), 10);
  EXPECT_EQ(hook->last_step(), 10);
  EXPECT_THROW(sess->run(m.train, m.feed()), th::RuntimeError);
}

TEST_F(StopAtStepHookTest, NumStepsRunsExactlyThatManySteps) {
  auto hook = std::make_shared<th::StopAtStepHook>(th::StopAtStepHookOptions{.num_steps = 7});
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  EXPECT_EQ(train_until_stop(*sess), 7);
  EXPECT_EQ(m.g.global_step_value(), 7);
  EXPECT_EQ(hook->last_step(), 7);
}

TEST_F(StopAtStepHookTest, NumStepsCountsFromTheGlobalStepAtSessionCreation) {
  // A worker session does not re-initialise: training resumes from global step 5.
  m.g.set_global_step_value(5);
  auto hook = std::make_shared<th::StopAtStepHook>(th::StopAtStepHookOptions{.num_steps = 10});
  EXPECT_FALSE(hook->last_step().has_value());
  auto sess = th::testing::worker_session(m.g, {hook}, fe.env());
  EXPECT_EQ(hook->last_step(), 15);
  EXPECT_EQ(train_until_stop(*sess), 10);
  EXPECT_EQ(m.g.global_step_value(), 15);
}

TEST_F(StopAtStepHookTest, LastStepIsAbsoluteWhateverTheStartingGlobalStep) {
  m.g.set_global_step_value(5);
  auto hook = std::make_shared<th::StopAtStepHook>(th::StopAtStepHookOptions{.last_step = 10});
  auto sess = th::testing::worker_session(m.g, {hook}, fe.env());
  EXPECT_EQ(train_until_stop(*sess), 5);
  EXPECT_EQ(m.g.global_step_value(), 10);
}

TEST_F(StopAtStepHookTest, StopsOnTheGlobalStepAfterEachRunWithLastStep) {
  // As TF's test: the global step is set from outside between runs that do not train.
  m.g.set_global_step_value(5);
  auto hook = std::make_shared<th::StopAtStepHook>(th::StopAtStepHookOptions{.last_step = 10});
  auto sess = th::testing::worker_session(m.g, {hook}, fe.env());
  sess->run(m.loss, m.feed());
  EXPECT_FALSE(sess->should_stop());
  m.g.set_global_step_value(9);
  sess->run(m.loss, m.feed());
  EXPECT_FALSE(sess->should_stop());
  m.g.set_global_step_value(10);
  sess->run(m.loss, m.feed());
  EXPECT_TRUE(sess->should_stop());
}

TEST_F(StopAtStepHookTest, StopsOnTheGlobalStepAfterEachRunWithNumSteps) {
  m.g.set_global_step_value(5);
  auto hook = std::make_shared<th::StopAtStepHook>(th::StopAtStepHookOptions{.num_steps = 10});
  auto sess = th::testing::worker_session(m.g, {hook}, fe.env());
  sess->run(m.loss, m.feed());
  EXPECT_FALSE(sess->should_stop());
  m.g.set_global_step_value(13);
  sess->run(m.loss, m.feed());
  EXPECT_FALSE(sess->should_stop());
  m.g.set_global_step_value(14);
  sess->run(m.loss, m.feed());
  EXPECT_FALSE(sess->should_stop());
  m.g.set_global_step_value(15);
  sess->run(m.loss, m.feed());
  EXPECT_TRUE(sess->should_stop());
}

TEST_F(StopAtStepHookTest, StopsWhenTheGlobalStepJumpsPastTheLastStep) {
  m.g.set_global_step_value(5);
  auto hook = std::make_shared<th::StopAtStepHook>(th::StopAtStepHookOptions{.num_steps = 10});
  auto sess = th::testing::worker_session(m.g, {hook}, fe.env());
  sess->run(m.loss, m.feed());
  EXPECT_FALSE(sess->should_stop());
  m.g.set_global_step_value(15 + 100);
  sess->run(m.loss, m.feed());
  EXPECT_TRUE(sess->should_stop());
}

TEST_F(StopAtStepHookTest, ASessionAlreadyPastLastStepRunsOneStepBeforeStopping) {
  m.g.set_global_step_value(20);
  auto hook = std::make_shared<th::StopAtStepHook>(th::StopAtStepHookOptions{.last_step = 10});
  auto sess = th::testing::worker_session(m.g, {hook}, fe.env());
  EXPECT_FALSE(sess->should_stop());
  EXPECT_EQ(train_until_stop(*sess), 1);
  EXPECT_EQ(m.g.global_step_value(), 21);
}

TEST_F(StopAtStepHookTest, WithoutAGlobalStepFailsAtSessionCreation) {
  th::Graph g;
  auto x = g.placeholder("x", {.dtype = at::kFloat});
  g.op("y", [=](th::Run& r) { return r[x] + 1; });
  auto hook = std::make_shared<th::StopAtStepHook>(th::StopAtStepHookOptions{.num_steps = 3});
  try {
    th::testing::chief_session(g, {hook}, fe.env());
    FAIL() << "expected RuntimeError";
  } catch (const th::RuntimeError& e) {
    EXPECT_STREQ(e.what(), "Global step should be created to use StopAtStepHook.");
  }
}

TEST_F(StopAtStepHookTest, PublishesItsLastStepToTheOtherHooksOfItsSession) {
  auto none = th::testing::worker_session(m.g, {}, fe.env());
  EXPECT_EQ(none->services().stop_at_step(), std::nullopt);
  none->close();
  m.g.set_global_step_value(5);
  auto later = std::make_shared<th::StopAtStepHook>(th::StopAtStepHookOptions{.last_step = 40});
  auto sooner = std::make_shared<th::StopAtStepHook>(th::StopAtStepHookOptions{.num_steps = 10});
  auto sess = th::testing::worker_session(m.g, {later, sooner}, fe.env());
  // The earliest stop wins.
  EXPECT_EQ(sess->services().stop_at_step(), 15);
  sess->close();
  // A later session on the same graph publishes its own target, not the old one.
  auto again = std::make_shared<th::StopAtStepHook>(th::StopAtStepHookOptions{.last_step = 30});
  auto sess2 = th::testing::worker_session(m.g, {again}, fe.env());
  EXPECT_EQ(sess2->services().stop_at_step(), 30);
}

}  // namespace stop_at_step_hook_test
