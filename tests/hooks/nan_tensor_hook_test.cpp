#include "trainhooks/hooks/nan_tensor_hook.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "test_util.h"
#include "trainhooks/errors.h"

namespace th = trainhooks;
using ::testing::ElementsAre;

namespace nan_tensor_hook_test {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// A "loss" that is whatever is fed to `v`.
class NanTensorHookTest : public ::testing::Test {
 protected:
  NanTensorHookTest() {
    v = g.placeholder("v", {.dtype = at::kFloat});
    loss = g.op("loss", [v = v](th::Run& r) { return r[v] * 1; });
  }

  th::Feeds feed(double value) const { return {{v, at::scalar_tensor(value, at::kFloat)}}; }
  std::vector<std::string> messages(th::LogLevel level) const { return fe.log->messages(level); }

  th::testing::FakeEnv fe;
  th::Graph g;
  th::Node v, loss;
};

TEST_F(NanTensorHookTest, FiniteLossDoesNothing) {
  auto hook = std::make_shared<th::NanTensorHook>(loss);
  auto sess = th::testing::chief_session(g, {hook}, fe.env());
  for (double value : {0.0, 1.5, -3.0, 1e30}) sess->run(loss, feed(value));
  EXPECT_FALSE(sess->should_stop());
  EXPECT_TRUE(fe.log->entries().empty());
}

TEST_F(NanTensorHookTest, NanLossRaisesNanLossDuringTrainingErrorAndLogsAnError) {
  auto hook = std::make_shared<th::NanTensorHook>(loss);
  auto sess = th::testing::chief_session(g, {hook}, fe.env());
  sess->run(loss, feed(1.0));
  try {
    sess->run(loss, feed(kNaN));
    FAIL() << "expected NanLossDuringTrainingError";
  } catch (const th::NanLossDuringTrainingError& e) {
    EXPECT_STREQ(e.what(), "NaN loss during training.");
  }
  EXPECT_THAT(fe.log->entries(), ElementsAre(th::CapturingLogSink::Entry{
                                     th::LogLevel::kError, "Model diverged with loss = NaN."}));
}

TEST_F(NanTensorHookTest, NanLossFromATrainingStepRaises) {
  th::testing::TinyModel m;
  auto hook = std::make_shared<th::NanTensorHook>("loss");  // by name
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  sess->run(m.train, m.feed(1.0f));
  EXPECT_THROW(sess->run(m.train, m.feed(static_cast<float>(kNaN))),
               th::NanLossDuringTrainingError);
  EXPECT_THAT(messages(th::LogLevel::kError), ElementsAre("Model diverged with loss = NaN."));
}

TEST_F(NanTensorHookTest, WithoutFailOnNanLossWarnsAndStopsAfterThatRun) {
  auto hook = std::make_shared<th::NanTensorHook>(
      loss, th::NanTensorHookOptions{.fail_on_nan_loss = false});
  auto sess = th::testing::chief_session(g, {hook}, fe.env());
  sess->run(loss, feed(2.0));
  EXPECT_FALSE(sess->should_stop());
  // The run's results are still returned.
  auto results = sess->run(loss, feed(kNaN));
  EXPECT_TRUE(std::isnan(results[loss].item<float>()));
  EXPECT_TRUE(sess->should_stop());
  EXPECT_THAT(fe.log->entries(), ElementsAre(th::CapturingLogSink::Entry{
                                     th::LogLevel::kWarning, "Model diverged with loss = NaN."}));
  EXPECT_THROW(sess->run(loss, feed(2.0)), th::RuntimeError);
}

TEST_F(NanTensorHookTest, InfinityIsIgnoredUnlessFailOnInf) {
  auto hook = std::make_shared<th::NanTensorHook>(loss);
  auto sess = th::testing::chief_session(g, {hook}, fe.env());
  sess->run(loss, feed(kInf));
  sess->run(loss, feed(-kInf));
  EXPECT_FALSE(sess->should_stop());
  EXPECT_TRUE(fe.log->entries().empty());
}

TEST_F(NanTensorHookTest, FailOnInfRaisesOnInfinity) {
  auto hook =
      std::make_shared<th::NanTensorHook>(loss, th::NanTensorHookOptions{.fail_on_inf = true});
  auto sess = th::testing::chief_session(g, {hook}, fe.env());
  sess->run(loss, feed(1.0));
  try {
    sess->run(loss, feed(-kInf));
    FAIL() << "expected NanLossDuringTrainingError";
  } catch (const th::NanLossDuringTrainingError& e) {
    EXPECT_STREQ(e.what(), "Inf loss during training.");
  }
  EXPECT_THAT(messages(th::LogLevel::kError), ElementsAre("Model diverged with loss = Inf."));
}

TEST_F(NanTensorHookTest, FailOnInfStillRaisesOnNan) {
  auto hook =
      std::make_shared<th::NanTensorHook>(loss, th::NanTensorHookOptions{.fail_on_inf = true});
  auto sess = th::testing::chief_session(g, {hook}, fe.env());
  EXPECT_THROW(sess->run(loss, feed(kNaN)), th::NanLossDuringTrainingError);
  EXPECT_THAT(messages(th::LogLevel::kError), ElementsAre("Model diverged with loss = NaN."));
}

TEST_F(NanTensorHookTest, FailOnInfWithoutFailOnNanLossWarnsAndStops) {
  auto hook = std::make_shared<th::NanTensorHook>(
      loss, th::NanTensorHookOptions{.fail_on_nan_loss = false, .fail_on_inf = true});
  auto sess = th::testing::chief_session(g, {hook}, fe.env());
  sess->run(loss, feed(kInf));
  EXPECT_TRUE(sess->should_stop());
  EXPECT_THAT(fe.log->entries(), ElementsAre(th::CapturingLogSink::Entry{
                                     th::LogLevel::kWarning, "Model diverged with loss = Inf."}));
}

TEST_F(NanTensorHookTest, ANanElementOfANonScalarLossCounts) {
  auto hook = std::make_shared<th::NanTensorHook>(loss);
  auto sess = th::testing::chief_session(g, {hook}, fe.env());
  sess->run(loss, {{v, at::tensor({1.0f, 2.0f})}});
  EXPECT_THROW(sess->run(loss, {{v, at::tensor({1.0f, static_cast<float>(kNaN)})}}),
               th::NanLossDuringTrainingError);
}

TEST_F(NanTensorHookTest, UnknownLossNameFailsAtSessionCreation) {
  auto hook = std::make_shared<th::NanTensorHook>("no_such_loss");
  EXPECT_THROW(th::testing::chief_session(g, {hook}, fe.env()), th::NotFoundError);
}

}  // namespace nan_tensor_hook_test
