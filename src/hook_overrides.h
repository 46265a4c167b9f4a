// Which of the per-run calls a hook's class overrides, so that the session calls before_run and
// after_run only on the hooks that define them: a hook that overrides neither costs nothing per
// run, whatever its calls() says, and an overridden call is always made.
//
// Read from the hook's virtual table (the Itanium C++ ABI of GCC and Clang, with ARM's variant of
// member pointers), once per session. A self-check on known classes runs first; where it fails
// (another ABI), overrides() returns nullopt and calls() decides, as before.
#pragma once

#include <optional>

#include "trainhooks/hook.h"

namespace trainhooks::internal {

struct HookOverrides {
  bool before_run = true;
  bool after_run = true;
};

std::optional<HookOverrides> overrides(const SessionRunHook& hook);

}  // namespace trainhooks::internal
