#include "hook_overrides.h"

#include <gtest/gtest.h>

#include <optional>

#include "trainhooks/hook.h"
#include "trainhooks/hooks/stop_at_step_hook.h"

namespace th = trainhooks;

namespace hook_overrides_test {

struct Idle : th::SessionRunHook {
  void begin() override {}
  void end(th::Session&) override {}
};
struct Before : th::SessionRunHook {
  th::SessionRunArgs before_run(th::SessionRunContext&) override {
    ++n;
    return {};
  }
  int n = 0;
};
struct BeforeAndAfter : Before {
  void after_run(th::SessionRunContext&, const th::SessionRunValues&) override { ++n; }
};
// SessionRunHook as a second base, behind a class with virtual functions of its own.
struct Named {
  virtual ~Named() = default;
  virtual const char* name() const { return "named"; }
};
struct SecondBase final : Named, th::SessionRunHook {
  const char* name() const override { return "second"; }
  void after_run(th::SessionRunContext&, const th::SessionRunValues&) override { ++n; }
  int n = 0;
};
// calls() says nothing about what is overridden.
struct DeclaresNone : Before {
  Calls calls() const override { return {false, false}; }
};
// Deriving from a library hook keeps its overrides.
struct MyStop : th::StopAtStepHook {
  using th::StopAtStepHook::StopAtStepHook;
};

std::pair<bool, bool> read(const th::SessionRunHook& h) {
  const std::optional<th::internal::HookOverrides> o = th::internal::overrides(h);
  EXPECT_TRUE(o.has_value()) << "the overrides cannot be read with this compiler";
  if (!o) return {true, true};
  return {o->before_run, o->after_run};
}

TEST(HookOverridesTest, TheClassDecidesWhichPerRunCallsAreMade) {
  EXPECT_EQ(read(th::SessionRunHook()), std::make_pair(false, false));
  EXPECT_EQ(read(Idle()), std::make_pair(false, false));
  EXPECT_EQ(read(Before()), std::make_pair(true, false));
  EXPECT_EQ(read(BeforeAndAfter()), std::make_pair(true, true));
  EXPECT_EQ(read(SecondBase()), std::make_pair(false, true));
  EXPECT_EQ(read(DeclaresNone()), std::make_pair(true, false));
  const MyStop stop(th::StopAtStepHookOptions{.num_steps = 3});
  EXPECT_EQ(read(stop), std::make_pair(false, true));
}

}  // namespace hook_overrides_test
