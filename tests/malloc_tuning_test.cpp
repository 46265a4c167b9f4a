// The library tunes glibc's malloc in its first Session so that LibTorch's per-step memory stays
// in the heap, unless the user said otherwise (malloc_tuning.h).
#include "trainhooks/malloc_tuning.h"

#include <gtest/gtest.h>
#include <malloc.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/child_process.h"
#include "test_util.h"
#include "trainhooks/session.h"

namespace th = trainhooks;

namespace malloc_tuning_test {

// A block above glibc's largest dynamic mmap threshold (32 MiB) and below the library's (128 MiB),
// and larger than the free memory already in the heap (the process's start-up may leave some):
// glibc's defaults map it, the tuned heap grows to serve it. 0 when no such size exists.
size_t block_size() {
  static const size_t size = [] {
    const size_t in_heap = mallinfo2().fordblks;
    const size_t s = std::max(size_t{40} << 20, in_heap + (size_t{4} << 20));
    return s < (size_t{60} << 20) ? s : 0;
  }();
  return size;
}

// Whether a block of block_size() bytes came from mmap (glibc counts mapped chunks in hblks).
bool block_is_mapped() {
  const size_t before = mallinfo2().hblks;
  void* p = std::malloc(block_size());
  // The pointer escapes, or the compiler may drop the malloc/free pair altogether.
  asm volatile("" : : "r"(p) : "memory");
  const bool mapped = mallinfo2().hblks > before;
  std::free(p);
  return mapped;
}

// Names as the child prints them.
const char* name(th::MallocTuning t) {
  switch (t) {
    case th::MallocTuning::kNotYet:
      return "not-yet";
    case th::MallocTuning::kApplied:
      return "applied";
    case th::MallocTuning::kOffByEnv:
      return "off-by-env";
    case th::MallocTuning::kOffByCall:
      return "off-by-call";
    case th::MallocTuning::kUserSettings:
      return "user-settings";
    case th::MallocTuning::kUnsupported:
      return "unsupported";
  }
  return "?";
}

// The outcome in a new process of this binary with `env` set (NAME=VALUE each): the child runs
// MallocTuningChild below and prints "<state> <mapped|heap>"; call_set_false calls
// set_malloc_tuning(false) before its Session.
std::string outcome_in_child(const std::vector<std::pair<std::string, std::string>>& env,
                             bool call_set_false = false) {
  std::vector<std::optional<std::string>> saved;
  for (const auto& [k, v] : env) {
    const char* old = std::getenv(k.c_str());
    saved.push_back(old ? std::optional<std::string>(old) : std::nullopt);
    setenv(k.c_str(), v.c_str(), 1);
  }
  setenv("TRAINHOOKS_MALLOC_CHILD", call_set_false ? "set-false" : "plain", 1);
  std::string line;
  {
    th::testing::ChildProcess child(
        {"/proc/self/exe", "--gtest_filter=MallocTuningChild.*", "--gtest_brief=1"});
    if (auto l = child.wait_for_line(
            [](const std::string& s) { return s.rfind("tuning ", 0) == 0; }, 60)) {
      line = l->substr(7);
    }
    child.wait(60);
  }
  unsetenv("TRAINHOOKS_MALLOC_CHILD");
  for (size_t i = 0; i < env.size(); ++i) {
    if (saved[i]) {
      setenv(env[i].first.c_str(), saved[i]->c_str(), 1);
    } else {
      unsetenv(env[i].first.c_str());
    }
  }
  return line;
}

TEST(MallocTuningTest, TheFirstSessionKeepsLargeBlocksInTheHeap) {
  if (std::getenv("TRAINHOOKS_MALLOC_TUNING") || std::getenv("GLIBC_TUNABLES")) {
    GTEST_SKIP() << "the environment sets malloc tuning itself";
  }
  th::testing::TinyModel m;
  th::Session sess(m.g);
  if (block_size() == 0) GTEST_SKIP() << "the heap already holds 56 MiB free";
  ASSERT_EQ(th::malloc_tuning(), th::MallocTuning::kApplied) << th::describe(th::malloc_tuning());
  EXPECT_FALSE(block_is_mapped());
  EXPECT_EQ(th::describe(th::malloc_tuning()),
            "applied (mmap threshold 128 MiB, trim threshold 256 MiB)");
}

TEST(MallocTuningTest, ANewProcessWithGlibcDefaultsIsTunedByItsFirstSession) {
  EXPECT_EQ(outcome_in_child({}), "not-yet mapped, then applied heap");
}

TEST(MallocTuningTest, TheUserTurnsItOff) {
  EXPECT_EQ(outcome_in_child({{"TRAINHOOKS_MALLOC_TUNING", "0"}}),
            "not-yet mapped, then off-by-env mapped");
  EXPECT_EQ(outcome_in_child({}, /*call_set_false=*/true),
            "not-yet mapped, then off-by-call mapped");
}

TEST(MallocTuningTest, GlibcSettingsOfTheUserStay) {
  // The user's thresholds (1 MiB: the block is mapped) stay in force.
  EXPECT_EQ(outcome_in_child({{"GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=1048576"}}),
            "not-yet mapped, then user-settings mapped");
  EXPECT_EQ(outcome_in_child({{"MALLOC_TRIM_THRESHOLD_", "1000000"}}),
            "not-yet mapped, then user-settings mapped");
}

// Run by the tests above in a new process; skipped otherwise.
TEST(MallocTuningChild, PrintsTheOutcome) {
  const char* mode = std::getenv("TRAINHOOKS_MALLOC_CHILD");
  if (!mode) GTEST_SKIP() << "run by MallocTuningTest in a new process";
  if (block_size() == 0) {
    std::printf("tuning unknown: %zu bytes free in the heap at start\n", mallinfo2().fordblks);
    std::fflush(stdout);
    return;
  }
  std::string out = std::string(name(th::malloc_tuning())) +
                    (block_is_mapped() ? " mapped" : " heap") + ", then ";
  if (std::strcmp(mode, "set-false") == 0) th::set_malloc_tuning(false);
  th::testing::TinyModel m;
  th::Session sess(m.g);
  out += std::string(name(th::malloc_tuning())) + (block_is_mapped() ? " mapped" : " heap");
  std::printf("tuning %s\n", out.c_str());
  std::fflush(stdout);
}

}  // namespace malloc_tuning_test
