#include "trainhooks/hook.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "test_util.h"
#include "trainhooks/errors.h"
#include "trainhooks/graph.h"
#include "trainhooks/monitored_session.h"
#include "trainhooks/timer.h"

namespace th = trainhooks;

namespace hook_test {

// A periodic hook written with the helpers: it records the global steps at which its timer
// triggered.
struct PeriodicHook : th::SessionRunHook {
  th::SecondOrStepTimer timer{{.every_secs = 10.0}};
  std::vector<int64_t> fired;
  void begin() override {
    require_global_step("PeriodicHook");
    reset_timer(timer);
  }
  void after_run(th::SessionRunContext& ctx, const th::SessionRunValues&) override {
    const int64_t step = ctx.session().global_step();
    if (!timer.should_trigger_for_step(step)) return;
    timer.update_last_triggered_step(step);
    fired.push_back(step);
  }
};

TEST(SessionRunHookTest, RequireGlobalStepRaisesTensorFlowsTextNamingTheHook) {
  th::testing::FakeEnv fe;
  th::Graph g;
  auto x = g.placeholder("x", {.dtype = at::kFloat});
  g.op("y", [=](th::Run& r) { return r[x] + 1; });
  EXPECT_EQ(th::testing::error_message<th::RuntimeError>([&] {
              th::testing::chief_session(g, {std::make_shared<PeriodicHook>()}, fe.env());
            }),
            "Global step should be created to use PeriodicHook.");
}

TEST(SessionRunHookTest, ResetTimerBindsTheTimerToTheHooksClock) {
  th::testing::FakeEnv session_env, hook_env;
  th::testing::TinyModel m;
  auto hook = std::make_shared<PeriodicHook>();
  hook->set_env(hook_env.env());
  auto sess = th::testing::chief_session(m.g, {hook}, session_env.env());
  sess->run(m.train, m.feed());  // the first trigger
  session_env.clock->advance(100);
  sess->run(m.train, m.feed());  // the session's clock does not count
  hook_env.clock->advance(10);
  sess->run(m.train, m.feed());
  EXPECT_EQ(hook->fired, (std::vector<int64_t>{1, 3}));
}

TEST(SessionRunHookTest, ResetTimerMakesAReusedHookStartAfresh) {
  th::testing::FakeEnv fe;
  th::testing::TinyModel m;
  auto hook = std::make_shared<PeriodicHook>();
  th::testing::chief_session(m.g, {hook}, fe.env())->run(m.train, m.feed());
  // A new session (the chief initialises the global step to 0): its first run triggers again,
  // although no time has passed since the last trigger.
  th::testing::chief_session(m.g, {hook}, fe.env())->run(m.train, m.feed());
  EXPECT_EQ(hook->fired, (std::vector<int64_t>{1, 1}));
}

}  // namespace hook_test
