#include "trainhooks/hooks/logging_tensor_hook.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "test_util.h"
#include "trainhooks/errors.h"

namespace th = trainhooks;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace logging_tensor_hook_test {

using Tags = std::map<std::string, th::NodeRef>;
using Names = std::vector<th::NodeRef>;

class LoggingTensorHookTest : public ::testing::Test {
 protected:
  void SetUp() override { foo = m.g.constant("foo", at::scalar_tensor(42.0, at::kFloat)); }

  std::vector<std::string> info() const { return fe.log->messages(th::LogLevel::kInfo); }

  // Runs the train op `n` times, advancing the fake clock by `secs` before each run; returns the
  // local iterations (0-based, counted from the first of these runs) after which a line appeared.
  std::vector<int> run_steps(th::MonitoredSession& sess, int n, double secs) {
    std::vector<int> logged_at;
    for (int i = 0; i < n; ++i) {
      fe.clock->advance(secs);
      const size_t before = info().size();
      sess.run(m.train, m.feed());
      if (info().size() > before) logged_at.push_back(i);
    }
    return logged_at;
  }

  th::testing::FakeEnv fe;
  th::testing::TinyModel m;
  th::Node foo;
};

TEST_F(LoggingTensorHookTest, EveryNIterLogsAtLocalIterations0_10_20WithElapsedAfterTheFirstLine) {
  auto hook = std::make_shared<th::LoggingTensorHook>(
      Names{"foo"}, th::LoggingTensorHookOptions{.every_n_iter = 10});
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());

  EXPECT_THAT(run_steps(*sess, 31, 0.25), ElementsAre(0, 10, 20, 30));
  // The first line has no elapsed time; later ones the seconds since the previous line.
  EXPECT_THAT(info(), ElementsAre("foo = 42.0", "foo = 42.0 (2.500 sec)", "foo = 42.0 (2.500 sec)",
                                  "foo = 42.0 (2.500 sec)"));
  // One more run after a trigger logs nothing, and without at_end neither does end().
  EXPECT_TRUE(run_steps(*sess, 1, 0.25).empty());
  sess->close();
  EXPECT_EQ(info().size(), 4u);
}

TEST_F(LoggingTensorHookTest, EveryNIterWithAtEndLogsOnceMoreInEnd) {
  auto hook = std::make_shared<th::LoggingTensorHook>(
      Names{"foo"}, th::LoggingTensorHookOptions{.every_n_iter = 10, .at_end = true});
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  EXPECT_THAT(run_steps(*sess, 32, 0.25), ElementsAre(0, 10, 20, 30));
  fe.clock->advance(0.25);
  sess->close();
  ASSERT_EQ(info().size(), 5u);
  EXPECT_EQ(info().back(), "foo = 42.0 (0.500 sec)");
  EXPECT_TRUE(fe.log->messages(th::LogLevel::kWarning).empty());
}

TEST_F(LoggingTensorHookTest, ResetsWhenReusedInANewSession) {
  auto hook = std::make_shared<th::LoggingTensorHook>(
      Names{"foo"}, th::LoggingTensorHookOptions{.every_n_iter = 10});
  {
    auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
    run_steps(*sess, 15, 0.25);
  }
  fe.log->clear();
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  EXPECT_THAT(run_steps(*sess, 11, 0.25), ElementsAre(0, 10));
  EXPECT_THAT(info(), ElementsAre("foo = 42.0", "foo = 42.0 (2.500 sec)"));
}

TEST_F(LoggingTensorHookTest, CountsLocalRunsNotTheGlobalStepAndSeesTheStepBeforeTheIncrement) {
  // A worker session keeps the graph's state: the global step starts at 100, not 0.
  m.g.set_global_step_value(100);
  auto hook = std::make_shared<th::LoggingTensorHook>(
      Names{"global_step"}, th::LoggingTensorHookOptions{.every_n_iter = 10});
  auto sess = th::testing::worker_session(m.g, {hook}, fe.env());
  EXPECT_THAT(run_steps(*sess, 11, 0.0), ElementsAre(0, 10));
  // The global step fetched with the train op is its value when the run began (TF's).
  EXPECT_THAT(info(), ElementsAre("global_step = 100", "global_step = 110 (0.000 sec)"));
  EXPECT_EQ(m.g.global_step_value(), 111);
}

TEST_F(LoggingTensorHookTest, FirstLineOfEveryIterationHasNoElapsedTime) {
  auto hook = std::make_shared<th::LoggingTensorHook>(
      Tags{{"foo", foo}}, th::LoggingTensorHookOptions{.every_n_iter = 1});
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  EXPECT_THAT(run_steps(*sess, 3, 0.5), ElementsAre(0, 1, 2));
  EXPECT_THAT(info(),
              ElementsAre("foo = 42.0", "foo = 42.0 (0.500 sec)", "foo = 42.0 (0.500 sec)"));
}

TEST_F(LoggingTensorHookTest, EveryNSecsTriggersByTheClock) {
  auto hook = std::make_shared<th::LoggingTensorHook>(
      Names{"foo"}, th::LoggingTensorHookOptions{.every_n_secs = 1.0});
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());

  sess->run(m.train, m.feed());
  EXPECT_THAT(info(), ElementsAre("foo = 42.0"));
  sess->run(m.train, m.feed());
  fe.clock->advance(0.5);
  sess->run(m.train, m.feed());
  EXPECT_EQ(info().size(), 1u);
  fe.clock->advance(0.5);
  sess->run(m.train, m.feed());
  EXPECT_THAT(info(), ElementsAre("foo = 42.0", "foo = 42.0 (1.000 sec)"));
  sess->close();
  EXPECT_EQ(info().size(), 2u);
}

TEST_F(LoggingTensorHookTest, EveryNSecsWithAtEndLogsOnceMoreInEnd) {
  auto hook = std::make_shared<th::LoggingTensorHook>(
      Names{"foo"}, th::LoggingTensorHookOptions{.every_n_secs = 1.0, .at_end = true});
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  sess->run(m.train, m.feed());
  sess->run(m.train, m.feed());
  fe.clock->advance(1.0);
  sess->run(m.train, m.feed());
  fe.clock->advance(0.25);
  sess->close();
  EXPECT_THAT(info(),
              ElementsAre("foo = 42.0", "foo = 42.0 (1.000 sec)", "foo = 42.0 (0.250 sec)"));
}

TEST_F(LoggingTensorHookTest, DictTagsAreLoggedInSortedOrder) {
  m.g.constant("a_const", at::scalar_tensor(1.5, at::kFloat));
  th::Node b = m.g.constant("b_const", at::scalar_tensor(3, at::kLong));
  auto hook =
      std::make_shared<th::LoggingTensorHook>(Tags{{"zeta", "a_const"}, {"alpha", b}, {"Mid", foo}},
                                              th::LoggingTensorHookOptions{.every_n_iter = 1});
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  sess->run(m.train, m.feed());
  EXPECT_THAT(info(), ElementsAre("Mid = 42.0, alpha = 3, zeta = 1.5"));
}

TEST_F(LoggingTensorHookTest, ListTagsAreNodeNamesInTheGivenOrder) {
  m.g.constant("a_const", at::scalar_tensor(1.5, at::kFloat));
  th::Node b = m.g.constant("b_const", at::scalar_tensor(3, at::kLong));
  auto hook = std::make_shared<th::LoggingTensorHook>(
      Names{b, "a_const", foo}, th::LoggingTensorHookOptions{.every_n_iter = 1});
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  sess->run(m.train, m.feed());
  EXPECT_THAT(info(), ElementsAre("b_const = 3, a_const = 1.5, foo = 42.0"));
}

TEST_F(LoggingTensorHookTest, AtEndOnlyLogsNothingWhileRunningAndOnceInEnd) {
  auto hook = std::make_shared<th::LoggingTensorHook>(Names{"foo"},
                                                      th::LoggingTensorHookOptions{.at_end = true});
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  EXPECT_TRUE(run_steps(*sess, 3, 1.0).empty());
  sess->close();
  EXPECT_THAT(info(), ElementsAre("foo = 42.0"));
  sess->close();  // idempotent: no second line
  EXPECT_EQ(info().size(), 1u);
}

TEST_F(LoggingTensorHookTest, AtEndRunsTheNodesAfterTraining) {
  auto hook = std::make_shared<th::LoggingTensorHook>(Names{m.w},
                                                      th::LoggingTensorHookOptions{.at_end = true});
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  sess->run(m.train, m.feed());  // w: 0 - 0.1 * d/dw (w - 2)^2 = 0.4
  sess->close();
  EXPECT_THAT(info(), ElementsAre("w = 0.4"));
}

TEST_F(LoggingTensorHookTest, NotRunInEndWhenTheSessionIsDestroyedByAnException) {
  auto hook = std::make_shared<th::LoggingTensorHook>(Names{"foo"},
                                                      th::LoggingTensorHookOptions{.at_end = true});
  try {
    auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
    sess->run(m.train, m.feed());
    throw std::runtime_error("user error");
  } catch (const std::runtime_error&) {
  }
  EXPECT_TRUE(info().empty());
}

TEST_F(LoggingTensorHookTest, FormatterReceivesTheValuesByTagAndTheElapsedSeconds) {
  std::vector<std::optional<double>> elapsed_seen;
  auto formatter = [&](const std::map<std::string, at::Tensor>& values,
                       std::optional<double> elapsed) {
    elapsed_seen.push_back(elapsed);
    std::string keys;
    for (const auto& [tag, value] : values) keys += tag + ";";
    return fmt::format("qqq={} keys={}", values.at("foo").item<float>(), keys);
  };
  auto hook = std::make_shared<th::LoggingTensorHook>(
      Names{"foo", "w"}, th::LoggingTensorHookOptions{.every_n_iter = 2, .formatter = formatter});
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  EXPECT_THAT(run_steps(*sess, 3, 0.75), ElementsAre(0, 2));
  EXPECT_THAT(info(), ElementsAre("qqq=42 keys=foo;w;", "qqq=42 keys=foo;w;"));
  ASSERT_EQ(elapsed_seen.size(), 2u);
  EXPECT_FALSE(elapsed_seen[0].has_value());
  ASSERT_TRUE(elapsed_seen[1].has_value());
  EXPECT_EQ(*elapsed_seen[1], 1.5);
}

TEST_F(LoggingTensorHookTest, FormatterAtEndOnlyGetsNoElapsedTime) {
  std::vector<std::optional<double>> elapsed_seen;
  auto formatter = [&](const std::map<std::string, at::Tensor>& values,
                       std::optional<double> elapsed) {
    elapsed_seen.push_back(elapsed);
    return fmt::format("end {}", values.at("loud").item<float>());
  };
  auto hook = std::make_shared<th::LoggingTensorHook>(
      Tags{{"loud", foo}}, th::LoggingTensorHookOptions{.at_end = true, .formatter = formatter});
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  run_steps(*sess, 2, 1.0);
  sess->close();
  EXPECT_THAT(info(), ElementsAre("end 42"));
  ASSERT_EQ(elapsed_seen.size(), 1u);
  EXPECT_FALSE(elapsed_seen[0].has_value());
}

// TF's basic_session_run_hooks_test.py LoggingTensorHookTest.test_illegal_args: every_n_iter of 0
// or less is invalid (it is not "no every_n_iter"), and exactly one of every_n_iter and
// every_n_secs is needed unless only at_end is given.
TEST_F(LoggingTensorHookTest, IllegalArgs) {
  EXPECT_THAT(th::testing::error_message<th::InvalidArgument>(
                  [] { th::LoggingTensorHook(Names{"t"}, {.every_n_iter = 0}); }),
              HasSubstr("every_n_iter"));
  EXPECT_THAT(th::testing::error_message<th::InvalidArgument>(
                  [] { th::LoggingTensorHook(Names{"t"}, {.every_n_iter = -10}); }),
              HasSubstr("every_n_iter"));
  // With at_end, 0 still counts as given (TF: only_log_at_end needs every_n_iter to be None).
  EXPECT_THAT(th::testing::error_message<th::InvalidArgument>(
                  [] { th::LoggingTensorHook(Names{"t"}, {.every_n_iter = 0, .at_end = true}); }),
              HasSubstr("every_n_iter"));
  EXPECT_THAT(th::testing::error_message<th::InvalidArgument>([] {
                th::LoggingTensorHook(Names{"t"}, {.every_n_iter = 5, .every_n_secs = 5});
              }),
              HasSubstr("xactly one of"));
  EXPECT_THAT(th::testing::error_message<th::InvalidArgument>(
                  [] { th::LoggingTensorHook(Names{"t"}, {}); }),
              HasSubstr("xactly one of"));
}

TEST_F(LoggingTensorHookTest, RejectsBadArgumentCombinationsWithTensorFlowsTexts) {
  const std::string exactly_one =
      "either at_end and/or exactly one of every_n_iter and every_n_secs must be provided.";
  EXPECT_EQ(th::testing::error_message<th::InvalidArgument>(
                [] { th::LoggingTensorHook(Names{"t"}, {}); }),
            exactly_one);
  EXPECT_EQ(th::testing::error_message<th::InvalidArgument>(
                [] { th::LoggingTensorHook(Names{"t"}, {.every_n_iter = 5, .every_n_secs = 5}); }),
            exactly_one);
  EXPECT_EQ(th::testing::error_message<th::InvalidArgument>([] {
              th::LoggingTensorHook(Tags{{"t", "t"}},
                                    {.every_n_iter = 5, .every_n_secs = 5, .at_end = true});
            }),
            exactly_one);
  EXPECT_EQ(th::testing::error_message<th::InvalidArgument>(
                [] { th::LoggingTensorHook(Names{"t"}, {.every_n_iter = 0}); }),
            "LoggingTensorHook: every_n_iter must be positive, got 0");
  EXPECT_EQ(th::testing::error_message<th::InvalidArgument>(
                [] { th::LoggingTensorHook(Names{"t"}, {.every_n_iter = -10}); }),
            "LoggingTensorHook: every_n_iter must be positive, got -10");
  EXPECT_EQ(th::testing::error_message<th::InvalidArgument>(
                [] { th::LoggingTensorHook(Names{"t"}, {.every_n_secs = 0, .at_end = true}); }),
            "LoggingTensorHook: every_n_secs must be positive, got 0");
  EXPECT_EQ(th::testing::error_message<th::InvalidArgument>(
                [] { th::LoggingTensorHook(Names{"t"}, {.at_end = true}); }),
            "");
}

TEST_F(LoggingTensorHookTest, UnknownNodeNameFailsAtSessionCreationNamingIt) {
  auto hook = std::make_shared<th::LoggingTensorHook>(
      Names{"foo", "no_such_node"}, th::LoggingTensorHookOptions{.every_n_iter = 1});
  try {
    th::testing::chief_session(m.g, {hook}, fe.env());
    FAIL() << "expected NotFoundError";
  } catch (const th::NotFoundError& e) {
    EXPECT_THAT(e.what(), HasSubstr("'no_such_node'"));
  }
}

TEST_F(LoggingTensorHookTest, FormatsValuesAsPythonAndNumpyPrintThem) {
  auto f = [](double v) { return at::scalar_tensor(v, at::kFloat); };
  m.g.constant("a", f(0.5));
  m.g.constant("b", f(2.0));
  m.g.constant("c", at::scalar_tensor(7, at::kLong));
  m.g.constant("d", at::scalar_tensor(-3, at::kInt));
  m.g.constant("e", at::arange(1, 4, at::kInt));
  m.g.constant("f", at::tensor({0.25f, 1.5f}));
  m.g.constant("g", at::scalar_tensor(0.1, at::kDouble));
  m.g.constant("h", f(0.1));
  m.g.constant("i", f(std::numeric_limits<double>::quiet_NaN()));
  // Integral floats inside arrays keep ".0" (numpy itself would print `[1.5 2. ]`).
  m.g.constant("j", at::tensor({1.5f, 2.0f}));
  auto hook = std::make_shared<th::LoggingTensorHook>(
      Names{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"},
      th::LoggingTensorHookOptions{.every_n_iter = 1});
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  sess->run(m.train, m.feed());
  EXPECT_THAT(
      info(),
      ElementsAre("a = 0.5, b = 2.0, c = 7, d = -3, e = [1 2 3], f = [0.25 1.5], g = 0.1, h = 0.1, "
                  "i = nan, j = [1.5 2.0]"));
}

}  // namespace logging_tensor_hook_test
