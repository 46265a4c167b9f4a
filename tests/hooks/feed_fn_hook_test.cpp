#include "trainhooks/hooks/feed_fn_hook.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "test_util.h"
#include "trainhooks/errors.h"

namespace th = trainhooks;

namespace feed_fn_hook_test {

at::Tensor scalar(double value) { return at::scalar_tensor(value, at::kFloat); }

class FeedFnHookTest : public ::testing::Test {
 protected:
  FeedFnHookTest() {
    x = g.placeholder("x", {.dtype = at::kFloat, .shape = th::Shape::scalar()});
    z = g.placeholder("z", {.dtype = at::kFloat, .shape = th::Shape::scalar()});
    y = g.op("y", [x = x](th::Run& r) { return r[x] + 1; });
    sum = g.op("sum", [x = x, z = z](th::Run& r) { return r[x] + r[z]; });
  }

  // The message of the RuntimeError thrown by `fn`, or "" if it throws nothing.
  template <typename Fn>
  static std::string runtime_error_message(Fn&& fn) {
    try {
      fn();
    } catch (const th::RuntimeError& e) {
      return e.what();
    }
    return "";
  }

  th::testing::FakeEnv fe;
  th::Graph g;
  th::Node x, z, y, sum;
};

TEST_F(FeedFnHookTest, ItsFeedsReachTheRun) {
  auto hook = std::make_shared<th::FeedFnHook>([&] { return th::Feeds{{x, scalar(1.0)}}; });
  auto sess = th::testing::chief_session(g, {hook}, fe.env());
  EXPECT_EQ(sess->run(y)[y].item<float>(), 2.0f);
}

TEST_F(FeedFnHookTest, CallsTheFeedFunctionBeforeEveryRun) {
  int calls = 0;
  auto hook = std::make_shared<th::FeedFnHook>([&] {
    ++calls;
    return th::Feeds{{"x", scalar(10.0 * calls)}};  // by name
  });
  auto sess = th::testing::chief_session(g, {hook}, fe.env());
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(sess->run(y)[y].item<float>(), 11.0f);
  EXPECT_EQ(sess->run(y)[y].item<float>(), 21.0f);
  EXPECT_EQ(sess->run(y)[y].item<float>(), 31.0f);
  EXPECT_EQ(calls, 3);
}

TEST_F(FeedFnHookTest, CombinesWithTheCallersFeedsOfOtherNodes) {
  auto hook = std::make_shared<th::FeedFnHook>([&] { return th::Feeds{{x, scalar(1.0)}}; });
  auto sess = th::testing::chief_session(g, {hook}, fe.env());
  EXPECT_EQ(sess->run(sum, {{z, scalar(5.0)}})[sum].item<float>(), 6.0f);
}

TEST_F(FeedFnHookTest, TwoHooksFeedingDifferentNodesBothApply) {
  auto feeds_x = std::make_shared<th::FeedFnHook>([&] { return th::Feeds{{x, scalar(1.0)}}; });
  auto feeds_z = std::make_shared<th::FeedFnHook>([&] { return th::Feeds{{z, scalar(2.5)}}; });
  auto sess = th::testing::chief_session(g, {feeds_x, feeds_z}, fe.env());
  EXPECT_EQ(sess->run(sum)[sum].item<float>(), 3.5f);
}

TEST_F(FeedFnHookTest, ConflictWithTheCallersFeedIsARuntimeError) {
  auto hook = std::make_shared<th::FeedFnHook>([&] { return th::Feeds{{x, scalar(1.0)}}; });
  auto sess = th::testing::chief_session(g, {hook}, fe.env());
  EXPECT_EQ(runtime_error_message([&] {
              sess->run(y, {{x, scalar(3.0)}});
            }),
            "Same tensor is fed by a SessionRunHook and user. Conflict(s): [x]");
}

TEST_F(FeedFnHookTest, TwoHooksFeedingTheSameNodeIsARuntimeError) {
  auto first = std::make_shared<th::FeedFnHook>([&] { return th::Feeds{{x, scalar(1.0)}}; });
  auto second = std::make_shared<th::FeedFnHook>([&] { return th::Feeds{{"x", scalar(2.0)}}; });
  auto sess = th::testing::chief_session(g, {first, second}, fe.env());
  EXPECT_EQ(runtime_error_message([&] { sess->run(y); }),
            "Same tensor is fed by two hooks. Conflict(s): [x]");
}

TEST_F(FeedFnHookTest, EmptyFeedFunctionIsRejected) {
  EXPECT_THROW(th::FeedFnHook(std::function<th::Feeds()>{}), th::InvalidArgument);
}

}  // namespace feed_fn_hook_test
