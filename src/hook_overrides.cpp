#include "hook_overrides.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace trainhooks::internal {

namespace {

// The vtable slot of a virtual member function, from its pointer-to-member representation:
// {ptr, adj}; Itanium marks a virtual function by ptr = 1 + the slot's byte offset, ARM by the
// low bit of adj with ptr = the offset. nullopt: not a virtual function, or another layout.
template <typename Pmf>
std::optional<size_t> vtable_slot(Pmf pmf) {
  struct Representation {
    std::uintptr_t ptr;
    std::ptrdiff_t adj;
  };
  if constexpr (sizeof(Pmf) != sizeof(Representation)) {
    return std::nullopt;
  } else {
    Representation r;
    std::memcpy(&r, &pmf, sizeof r);
#if defined(__arm__) || defined(__aarch64__)
    if (!(r.adj & 1)) return std::nullopt;
    return r.ptr / sizeof(void*);
#else
    if (!(r.ptr & 1)) return std::nullopt;
    return (r.ptr - 1) / sizeof(void*);
#endif
  }
}

// The function in `slot` of the vtable of `hook`'s SessionRunHook subobject (its vptr comes
// first, also when SessionRunHook is not the class's first base).
const void* vtable_entry(const SessionRunHook& hook, size_t slot) {
  const void* const* vtable;
  std::memcpy(&vtable, static_cast<const void*>(&hook), sizeof vtable);
  return vtable[slot];
}

struct Slots {
  size_t before_run;
  size_t after_run;
};

HookOverrides read(const SessionRunHook& hook, const Slots& slots) {
  static const SessionRunHook base;
  return {vtable_entry(hook, slots.before_run) != vtable_entry(base, slots.before_run),
          vtable_entry(hook, slots.after_run) != vtable_entry(base, slots.after_run)};
}

// Classes whose answers are known: the reading is used only when it gets all of them right.
struct OverridesNothing : SessionRunHook {
  void begin() override {}
};
struct OverridesBeforeRun : SessionRunHook {
  // Not the base's body: identical functions may be folded into one.
  SessionRunArgs before_run(SessionRunContext&) override {
    ++runs;
    return {};
  }
  int runs = 0;
};
struct AnotherBase {
  virtual ~AnotherBase() = default;
  virtual int f() { return 1; }
};
struct OverridesAfterRunAsSecondBase : AnotherBase, SessionRunHook {
  int f() override { return 2; }
  void after_run(SessionRunContext&, const SessionRunValues&) override { ++runs; }
  int runs = 0;
};
struct Inherits : OverridesAfterRunAsSecondBase {};

std::optional<Slots> checked_slots() {
  const std::optional<size_t> before = vtable_slot(&SessionRunHook::before_run);
  const std::optional<size_t> after = vtable_slot(&SessionRunHook::after_run);
  if (!before || !after || *before == *after) return std::nullopt;
  const Slots slots{*before, *after};
  auto is = [&](const SessionRunHook& h, bool b, bool a) {
    const HookOverrides o = read(h, slots);
    return o.before_run == b && o.after_run == a;
  };
  const OverridesNothing nothing;
  const OverridesBeforeRun before_run;
  const OverridesAfterRunAsSecondBase after_run;
  const Inherits inherits;
  const bool right = is(nothing, false, false) && is(before_run, true, false) &&
                     is(after_run, false, true) && is(inherits, false, true);
  if (!right) return std::nullopt;
  return slots;
}

}  // namespace

std::optional<HookOverrides> overrides(const SessionRunHook& hook) {
#if defined(__GXX_ABI_VERSION)
  static const std::optional<Slots> slots = checked_slots();
  if (!slots) return std::nullopt;
  return read(hook, *slots);
#else
  return std::nullopt;
#endif
}

}  // namespace trainhooks::internal
