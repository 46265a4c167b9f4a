#include "trainhooks/hooks/final_ops_hook.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_util.h"
#include "trainhooks/errors.h"

namespace th = trainhooks;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace final_ops_hook_test {

std::vector<float> as_vector(const at::Tensor& t) {
  at::Tensor c = t.to(at::kFloat).contiguous();
  return {c.data_ptr<float>(), c.data_ptr<float>() + c.numel()};
}

class FinalOpsHookTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const th::Node w = m.w;
    final_op = m.g.op("final", [this, w](th::Run& r) {
      ++final_evaluations;
      return r[w] * 10;
    });
  }

  th::testing::FakeEnv fe;
  th::testing::TinyModel m;
  th::Node final_op;
  int final_evaluations = 0;
};

TEST_F(FinalOpsHookTest, ValuesAreComputedOnceInEndAndAvailableAfterClose) {
  auto hook = std::make_shared<th::FinalOpsHook>(th::Fetches{final_op});
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  sess->run(m.train, m.feed());  // w = 0.4
  EXPECT_TRUE(hook->final_ops_values().empty());
  EXPECT_EQ(final_evaluations, 0);

  sess->close();
  EXPECT_EQ(final_evaluations, 1);
  ASSERT_EQ(hook->final_ops_values().size(), 1u);
  EXPECT_FLOAT_EQ(hook->final_ops_values()[final_op].item<float>(), 4.0f);
  EXPECT_FLOAT_EQ(hook->final_ops_values()["final"].item<float>(), 4.0f);

  sess->close();
  sess.reset();
  EXPECT_EQ(final_evaluations, 1);
}

TEST_F(FinalOpsHookTest, TheDestructorRunsThemOnACleanExit) {
  auto hook = std::make_shared<th::FinalOpsHook>(th::Fetches{final_op});
  {
    auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
    sess->run(m.train, m.feed());
  }
  EXPECT_EQ(final_evaluations, 1);
  EXPECT_FLOAT_EQ(hook->final_ops_values()[final_op].item<float>(), 4.0f);
}

TEST_F(FinalOpsHookTest, ScalarAndTensorConstants) {
  auto scalar = m.g.constant("four", at::scalar_tensor(4, at::kLong));
  auto vector = m.g.constant("values", at::tensor({1, 6, 3, 5, 2, 4}));
  auto hook = std::make_shared<th::FinalOpsHook>(th::Fetches{scalar, "values"});
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  sess->close();
  EXPECT_EQ(hook->final_ops_values().at(0).item<int64_t>(), 4);
  EXPECT_THAT(as_vector(hook->final_ops_values()[vector]), ElementsAre(1, 6, 3, 5, 2, 4));
}

TEST_F(FinalOpsHookTest, RunsWithItsFeeds) {
  auto p = m.g.placeholder("p", {.dtype = at::kFloat});
  auto doubled = m.g.op("doubled", [p](th::Run& r) { return r[p] * 2; });
  auto hook = std::make_shared<th::FinalOpsHook>(th::Fetches{p, doubled},
                                                 th::Feeds{{p, at::tensor({4.0f, -3.0f})}});
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  sess->run(m.train, m.feed());
  sess->close();
  EXPECT_THAT(as_vector(hook->final_ops_values()[p]), ElementsAre(4.0f, -3.0f));
  EXPECT_THAT(as_vector(hook->final_ops_values()[doubled]), ElementsAre(8.0f, -6.0f));
}

TEST_F(FinalOpsHookTest, NotRunWhenTheSessionIsDestroyedDuringExceptionUnwinding) {
  auto hook = std::make_shared<th::FinalOpsHook>(th::Fetches{final_op});
  try {
    auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
    sess->run(m.train, m.feed());
    throw std::runtime_error("user error");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(final_evaluations, 0);
  EXPECT_TRUE(hook->final_ops_values().empty());
}

TEST_F(FinalOpsHookTest, EmptyFinalOpsAreRejected) {
  EXPECT_THROW(th::FinalOpsHook(th::Fetches{}), th::InvalidArgument);
}

// TF keeps copies: a final variable's value is the one computed in end(), whatever happens to the
// graph afterwards.
TEST_F(FinalOpsHookTest, ValuesOfVariablesAreSnapshotsTakenInEnd) {
  auto hook = std::make_shared<th::FinalOpsHook>(th::Fetches{m.w});
  {
    auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
    sess->run(m.train, m.feed());  // w = 0.4
  }
  ASSERT_FLOAT_EQ(hook->final_ops_values()[m.w].item<float>(), 0.4f);
  // A new chief session re-initialises w to 0 and trains it further.
  auto sess = th::testing::chief_session(m.g, {}, fe.env());
  sess->run(m.train, m.feed(3.0f));
  EXPECT_FLOAT_EQ(hook->final_ops_values()[m.w].item<float>(), 0.4f);
}

// A final node that reads an input: the input is exhausted when training ends.
class FinalOpsHookInputTest : public ::testing::Test {
 protected:
  FinalOpsHookInputTest() {
    batch =
        g.input("data", th::tensor_source({at::arange(2, at::kFloat)}, {"v"}), {.batch_size = 1});
    total = g.op("total", [v = batch[0]](th::Run& r) { return r[v].sum(); });
  }

  // Runs `total` until the end of input; the session is then ready to close.
  void consume_all(th::MonitoredSession& sess) {
    int runs = 0;
    while (!sess.should_stop() && runs < 10) {
      sess.run(total);
      ++runs;
    }
    ASSERT_EQ(runs, 3);  // two batches, then the run that reaches the end
  }

  th::testing::FakeEnv fe;
  th::Graph g;
  th::InputNodes batch;
  th::Node total;
};

TEST_F(FinalOpsHookInputTest, OutOfRangeFromAnInputIsLoggedAsAWarningAndRethrown) {
  auto hook = std::make_shared<th::FinalOpsHook>(th::Fetches{total});
  auto sess = th::testing::chief_session(g, {hook}, fe.env());
  consume_all(*sess);
  EXPECT_THROW(sess->close(), th::OutOfRangeError);
  auto warnings = fe.log->messages(th::LogLevel::kWarning);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], AllOf(HasSubstr("OutOfRangeError"), HasSubstr("FinalOpsHook")));
  EXPECT_TRUE(hook->final_ops_values().empty());
}

// TF's warning for this case explains that the final ops "have a dependency back to some input
// source" (TF's test matches that phrase); users grep for it.
TEST_F(FinalOpsHookInputTest, OutOfRangeWarningUsesTensorFlowsText) {
  auto hook = std::make_shared<th::FinalOpsHook>(th::Fetches{total});
  auto sess = th::testing::chief_session(g, {hook}, fe.env());
  consume_all(*sess);
  EXPECT_THROW(sess->close(), th::OutOfRangeError);
  auto warnings = fe.log->messages(th::LogLevel::kWarning);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("dependency back to some input source"));
}

}  // namespace final_ops_hook_test
