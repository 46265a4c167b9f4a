#include "trainhooks/malloc_tuning.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace trainhooks {

namespace {

std::atomic<bool> enabled{true};
std::atomic<MallocTuning> outcome{MallocTuning::kNotYet};
std::once_flag once;

bool env_set(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0';
}

// Whether glibc's own settings name either threshold: they are the user's, and stay.
bool user_thresholds() {
  if (env_set("MALLOC_MMAP_THRESHOLD_") || env_set("MALLOC_TRIM_THRESHOLD_")) return true;
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables == nullptr) return false;
  const std::string_view t(tunables);
  return t.find("glibc.malloc.mmap_threshold") != std::string_view::npos ||
         t.find("glibc.malloc.trim_threshold") != std::string_view::npos;
}

MallocTuning decide_and_apply() {
  const char* opt = std::getenv("TRAINHOOKS_MALLOC_TUNING");
  if (opt != nullptr && std::strcmp(opt, "0") == 0) return MallocTuning::kOffByEnv;
  if (!enabled.load()) return MallocTuning::kOffByCall;
  if (user_thresholds()) return MallocTuning::kUserSettings;
#if defined(__GLIBC__)
  // mallopt returns 1 on success; setting the mmap threshold also stops glibc from raising it
  // on its own, which is what makes the heap reuse large blocks.
  if (mallopt(M_MMAP_THRESHOLD, static_cast<int>(kMallocMmapThreshold)) == 1 &&
      mallopt(M_TRIM_THRESHOLD, static_cast<int>(kMallocTrimThreshold)) == 1) {
    return MallocTuning::kApplied;
  }
#endif
  return MallocTuning::kUnsupported;
}

}  // namespace

void set_malloc_tuning(bool on) { enabled.store(on); }

MallocTuning apply_malloc_tuning() {
  std::call_once(once, [] { outcome.store(decide_and_apply()); });
  return outcome.load();
}

MallocTuning malloc_tuning() { return outcome.load(); }

std::string describe(MallocTuning tuning) {
  switch (tuning) {
    case MallocTuning::kNotYet:
      return "not yet applied (no Session created)";
    case MallocTuning::kApplied:
      return "applied (mmap threshold 128 MiB, trim threshold 256 MiB)";
    case MallocTuning::kOffByEnv:
      return "off (TRAINHOOKS_MALLOC_TUNING=0)";
    case MallocTuning::kOffByCall:
      return "off (set_malloc_tuning(false))";
    case MallocTuning::kUserSettings:
      return "off (the environment sets glibc's malloc thresholds)";
    case MallocTuning::kUnsupported:
      return "off (not glibc)";
  }
  return "unknown";
}

}  // namespace trainhooks
