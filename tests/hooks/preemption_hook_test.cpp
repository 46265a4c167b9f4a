#include "trainhooks/hooks/preemption_hook.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>

#include "test_util.h"
#include "trainhooks/checkpoint/checkpoint_manager.h"
#include "trainhooks/checkpoint/saver.h"
#include "trainhooks/errors.h"
#include "trainhooks/preemption.h"
#include "trainhooks/training_session.h"

namespace th = trainhooks;
using ::testing::Contains;
using ::testing::ElementsAre;

namespace preemption_hook_test {

// Counts the signals that reach it: the disposition the tests expect to get back.
volatile sig_atomic_t sentinel_calls = 0;
void sentinel_handler(int) { sentinel_calls = sentinel_calls + 1; }

void (*current_handler(int sig))(int) {
  struct sigaction sa {};
  sigaction(sig, nullptr, &sa);
  return sa.sa_handler;
}

// Installs the sentinel for SIGTERM and SIGINT (so that a signal raised while no
// PreemptionHandler exists does not end the test binary, and a restored disposition can be
// recognised), and puts back the test binary's own dispositions afterwards.
class PreemptionTestBase : public ::testing::Test {
 protected:
  void SetUp() override {
    th::PreemptionHandler::clear();
    sentinel_calls = 0;
    struct sigaction sa {};
    sa.sa_handler = sentinel_handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, &old_term_);
    sigaction(SIGINT, &sa, &old_int_);
  }
  void TearDown() override {
    EXPECT_FALSE(th::PreemptionHandler::installed()) << "a handler outlived its test";
    sigaction(SIGTERM, &old_term_, nullptr);
    sigaction(SIGINT, &old_int_, nullptr);
    th::PreemptionHandler::clear();
  }

  struct sigaction old_term_ {};
  struct sigaction old_int_ {};
};

// ---- PreemptionHandler ------------------------------------------------------------------------

using PreemptionHandlerTest = PreemptionTestBase;

TEST_F(PreemptionHandlerTest, RecordsTheFirstSignalInsteadOfEndingTheProcess) {
  EXPECT_EQ(th::PreemptionHandler::received_signal(), 0);
  {
    th::PreemptionHandler handler;
    EXPECT_TRUE(th::PreemptionHandler::installed());
    EXPECT_NE(current_handler(SIGTERM), sentinel_handler);
    EXPECT_NE(current_handler(SIGINT), sentinel_handler);
    std::raise(SIGTERM);
    EXPECT_EQ(th::PreemptionHandler::received_signal(), SIGTERM);
  }
  EXPECT_EQ(sentinel_calls, 0);
  // The record outlives the handler: the process was asked to end.
  EXPECT_EQ(th::PreemptionHandler::received_signal(), SIGTERM);
  th::PreemptionHandler::clear();
  EXPECT_EQ(th::PreemptionHandler::received_signal(), 0);
}

TEST_F(PreemptionHandlerTest, RecordsSigint) {
  th::PreemptionHandler handler;
  std::raise(SIGINT);
  EXPECT_EQ(th::PreemptionHandler::received_signal(), SIGINT);
  EXPECT_EQ(th::signal_name(SIGINT), "SIGINT");
  EXPECT_EQ(th::signal_name(SIGTERM), "SIGTERM");
  EXPECT_EQ(th::signal_name(SIGHUP), "signal " + std::to_string(SIGHUP));
}

TEST_F(PreemptionHandlerTest, InstallationIsReferenceCountedAndRestoresThePreviousDisposition) {
  auto first = std::make_unique<th::PreemptionHandler>();
  auto second = std::make_unique<th::PreemptionHandler>();
  first.reset();
  // Still installed: the second owner keeps it.
  EXPECT_TRUE(th::PreemptionHandler::installed());
  EXPECT_NE(current_handler(SIGTERM), sentinel_handler);
  std::raise(SIGINT);
  EXPECT_EQ(th::PreemptionHandler::received_signal(), SIGINT);
  EXPECT_EQ(sentinel_calls, 0);

  second.reset();
  EXPECT_FALSE(th::PreemptionHandler::installed());
  EXPECT_EQ(current_handler(SIGTERM), sentinel_handler);
  EXPECT_EQ(current_handler(SIGINT), sentinel_handler);
  std::raise(SIGTERM);
  EXPECT_EQ(sentinel_calls, 1);

  // A later first owner installs again.
  th::PreemptionHandler::clear();
  th::PreemptionHandler again;
  EXPECT_NE(current_handler(SIGTERM), sentinel_handler);
  std::raise(SIGTERM);
  EXPECT_EQ(th::PreemptionHandler::received_signal(), SIGTERM);
  EXPECT_EQ(sentinel_calls, 1);
}

TEST_F(PreemptionHandlerTest, LeavesAnIgnoredSignalIgnored) {
  std::signal(SIGINT, SIG_IGN);
  {
    th::PreemptionHandler handler;
    EXPECT_EQ(current_handler(SIGINT), SIG_IGN);
    EXPECT_NE(current_handler(SIGTERM), sentinel_handler);
    std::raise(SIGINT);
    EXPECT_EQ(th::PreemptionHandler::received_signal(), 0);
  }
  EXPECT_EQ(current_handler(SIGINT), SIG_IGN);
  EXPECT_EQ(current_handler(SIGTERM), sentinel_handler);
}

// The second signal must end the process, so it runs in a death-test child.
using PreemptionHandlerDeathTest = PreemptionTestBase;

TEST_F(PreemptionHandlerDeathTest, SecondSignalEndsTheProcessWithThatSignal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        th::PreemptionHandler handler;
        std::raise(SIGTERM);
        std::raise(SIGTERM);
        std::_Exit(0);  // not reached
      },
      ::testing::KilledBySignal(SIGTERM), "");
  // The previous disposition (the sentinel) does not matter: the default action applies.
  EXPECT_EXIT(
      {
        th::PreemptionHandler handler;
        std::raise(SIGINT);
        std::raise(SIGTERM);
        std::_Exit(0);
      },
      ::testing::KilledBySignal(SIGTERM), "");
  EXPECT_EXIT(
      {
        th::PreemptionHandler handler;
        std::raise(SIGTERM);
        std::raise(SIGINT);
        std::_Exit(0);
      },
      ::testing::KilledBySignal(SIGINT), "");
}

// ---- PreemptionHook ---------------------------------------------------------------------------

class PreemptionHookTest : public PreemptionTestBase {
 protected:
  // An op that raises `sig` while it is evaluated in its `at`-th run (1-based).
  th::Node raising_op(th::Graph& g, th::Node input, int sig, int at) {
    auto runs = std::make_shared<int>(0);
    return g.op("raise", [=](th::Run& r) {
      if (++*runs == at) std::raise(sig);
      return r[input];
    });
  }

  th::testing::FakeEnv fe;
};

TEST_F(PreemptionHookTest, SigtermDuringARunStopsAfterThatRun) {
  th::testing::TinyModel m;
  const th::Node raising = raising_op(m.g, m.loss, SIGTERM, 3);
  auto hook = std::make_shared<th::PreemptionHook>();
  {
    auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
    EXPECT_TRUE(th::PreemptionHandler::installed());
    int runs = 0;
    while (!sess->should_stop()) {
      auto results = sess->run({m.train, raising}, m.feed());
      ++runs;
      // The run during which the signal arrived completes and returns its results.
      EXPECT_TRUE(results.contains(raising));
      ASSERT_LE(runs, 3);
    }
    EXPECT_EQ(runs, 3);
    EXPECT_EQ(m.g.global_step_value(), 3);
    EXPECT_EQ(hook->stopped_by_signal(), SIGTERM);
    EXPECT_THAT(
        fe.log->messages(),
        ElementsAre("Received SIGTERM: stopping after step 3 and saving a final checkpoint."));
    EXPECT_THROW(sess->run(m.train, m.feed()), th::RuntimeError);
    sess->close();
  }
  // end() released the handler: the previous disposition is back.
  EXPECT_FALSE(th::PreemptionHandler::installed());
  EXPECT_EQ(current_handler(SIGTERM), sentinel_handler);
  EXPECT_EQ(current_handler(SIGINT), sentinel_handler);
  EXPECT_EQ(sentinel_calls, 0);
}

TEST_F(PreemptionHookTest, SigintWithoutGlobalStepCountsRuns) {
  th::Graph g;
  const th::Node x = g.placeholder("x");
  const th::Node y = g.op("y", [=](th::Run& r) { return r[x] * 2; });
  const th::Node raising = raising_op(g, y, SIGINT, 2);
  auto hook = std::make_shared<th::PreemptionHook>();
  auto sess = th::testing::chief_session(g, {hook}, fe.env());
  int runs = 0;
  while (!sess->should_stop() && runs < 10) {
    sess->run(raising, {{x, at::ones({1})}});
    ++runs;
  }
  EXPECT_EQ(runs, 2);
  EXPECT_THAT(fe.log->messages(),
              ElementsAre("Received SIGINT: stopping after step 2 and saving a final checkpoint."));
  sess->close();
  EXPECT_EQ(current_handler(SIGINT), sentinel_handler);
}

// Raises a signal after the session was created, as if it arrived during a restore.
struct RaiseAfterCreateHook : th::SessionRunHook {
  void after_create_session(th::Session&, th::Coordinator&) override { std::raise(SIGTERM); }
};

TEST_F(PreemptionHookTest, SignalBeforeTheFirstStepStopsBeforeIt) {
  th::testing::TinyModel m;
  auto sess = th::testing::chief_session(
      m.g, {std::make_shared<RaiseAfterCreateHook>(), std::make_shared<th::PreemptionHook>()},
      fe.env());
  EXPECT_TRUE(sess->should_stop());
  EXPECT_EQ(m.g.global_step_value(), 0);
  EXPECT_THAT(
      fe.log->messages(),
      ElementsAre("Received SIGTERM: stopping after step 0 and saving a final checkpoint."));
  EXPECT_NO_THROW(sess->close());
}

TEST_F(PreemptionHookTest, FinalCheckpointIsSavedAtTheStepThatStopped) {
  th::testing::TempDir dir;
  th::testing::TinyModel m;
  const th::Node raising = raising_op(m.g, m.loss, SIGTERM, 5);
  {
    th::MonitoredTrainingSession sess(m.g,
                                      {.checkpoint_dir = dir.path(),
                                       .hooks = {std::make_shared<th::PreemptionHook>()},
                                       .checkpoints = {.save_steps = 100},
                                       .summaries = {.save_steps = 0, .log_step_count_steps = 0},
                                       .env = fe.env()});
    while (!sess.should_stop()) sess.run({m.train, raising}, m.feed());
  }
  EXPECT_EQ(m.g.global_step_value(), 5);
  EXPECT_EQ(th::latest_checkpoint(dir.path()), dir.file("model.ckpt-5"));
  const auto messages = fe.log->messages();
  EXPECT_THAT(messages,
              Contains("Received SIGTERM: stopping after step 5 and saving a final checkpoint."));
  EXPECT_THAT(messages, Contains("Saving checkpoints for 5 into " + dir.file("model.ckpt") + "."));
}

TEST_F(PreemptionHookTest, SeveralOwnersCoexist) {
  th::testing::TinyModel m;
  const th::Node raising = raising_op(m.g, m.loss, SIGTERM, 2);
  auto outer = std::make_unique<th::PreemptionHandler>();
  auto first = std::make_shared<th::PreemptionHook>();
  auto second = std::make_shared<th::PreemptionHook>();
  {
    auto sess = th::testing::chief_session(m.g, {first, second}, fe.env());
    while (!sess->should_stop()) sess->run({m.train, raising}, m.feed());
    EXPECT_EQ(m.g.global_step_value(), 2);
    EXPECT_EQ(first->stopped_by_signal(), SIGTERM);
    EXPECT_EQ(second->stopped_by_signal(), SIGTERM);
  }
  // The program's own handler still holds the installation.
  EXPECT_TRUE(th::PreemptionHandler::installed());
  EXPECT_NE(current_handler(SIGTERM), sentinel_handler);
  outer.reset();
  EXPECT_EQ(current_handler(SIGTERM), sentinel_handler);
}

struct ThrowingHook : th::SessionRunHook {
  void after_run(th::SessionRunContext&, const th::SessionRunValues&) override {
    throw std::runtime_error("boom");
  }
};

TEST_F(PreemptionHookTest, HandlerIsReleasedWithTheHookWhenEndIsSkipped) {
  th::testing::TinyModel m;
  auto hook = std::make_shared<th::PreemptionHook>();
  {
    auto sess = th::testing::chief_session(m.g, {hook, std::make_shared<ThrowingHook>()}, fe.env());
    EXPECT_THROW(
        {
          auto unwinding = std::move(sess);  // destroyed while the exception unwinds: no end()
          unwinding->run(m.train, m.feed());
        },
        std::runtime_error);
  }
  EXPECT_TRUE(th::PreemptionHandler::installed());
  hook.reset();
  EXPECT_FALSE(th::PreemptionHandler::installed());
  EXPECT_EQ(current_handler(SIGTERM), sentinel_handler);
}

}  // namespace preemption_hook_test
