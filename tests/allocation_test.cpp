// The steady per-step path allocates nothing: after warm-up, a session run and a monitored step
// with idle hooks make no operator new call.
//
// This file replaces the global operator new and delete (every form) for the whole test binary;
// they forward to malloc and free and count only while a thread's counting flag is set, so other
// tests and other threads are unaffected. Tensor storage comes from c10's allocator, not
// operator new, but a TensorImpl is made with new: the ops here return tensors made beforehand.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <new>
#include <string>

#include "test_util.h"
#include "trainhooks/graph.h"
#include "trainhooks/hook.h"
#include "trainhooks/monitored_session.h"
#include "trainhooks/session.h"

namespace {

thread_local bool t_counting = false;
thread_local uint64_t t_allocations = 0;

// Out of line so that a debugger can break here to see who allocates.
[[gnu::noinline]] void note_allocation(std::size_t size) {
  ++t_allocations;
  asm volatile("" : : "r"(size) : "memory");
}

void* allocate(std::size_t size) {
  if (t_counting) note_allocation(size);
  return std::malloc(size == 0 ? 1 : size);
}

void* allocate_aligned(std::size_t size, std::align_val_t alignment) {
  if (t_counting) note_allocation(size);
  const auto align = std::max(static_cast<std::size_t>(alignment), sizeof(void*));
  void* p = nullptr;
  if (::posix_memalign(&p, align, size == 0 ? 1 : size) != 0) return nullptr;
  return p;
}

// Out of line: inlined into a delete-expression, free() would look mismatched to the compiler.
[[gnu::noinline]] void deallocate(void* p) noexcept { std::free(p); }

}  // namespace

void* operator new(std::size_t size) {
  if (void* p = allocate(size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) {
  if (void* p = allocate(size)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept { return allocate(size); }
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept { return allocate(size); }
void* operator new(std::size_t size, std::align_val_t alignment) {
  if (void* p = allocate_aligned(size, alignment)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size, std::align_val_t alignment) {
  if (void* p = allocate_aligned(size, alignment)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t size, std::align_val_t alignment, const std::nothrow_t&) noexcept {
  return allocate_aligned(size, alignment);
}
void* operator new[](std::size_t size, std::align_val_t alignment, const std::nothrow_t&) noexcept {
  return allocate_aligned(size, alignment);
}

void operator delete(void* p) noexcept { deallocate(p); }
void operator delete[](void* p) noexcept { deallocate(p); }
void operator delete(void* p, std::size_t) noexcept { deallocate(p); }
void operator delete[](void* p, std::size_t) noexcept { deallocate(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { deallocate(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { deallocate(p); }
void operator delete(void* p, std::align_val_t) noexcept { deallocate(p); }
void operator delete[](void* p, std::align_val_t) noexcept { deallocate(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { deallocate(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { deallocate(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { deallocate(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { deallocate(p); }

namespace th = trainhooks;

namespace {

constexpr int kWarmUp = 10;
constexpr int kSteady = 1000;

// operator new calls made on this thread by `fn`.
template <typename Fn>
uint64_t allocations_of(Fn&& fn) {
  t_allocations = 0;
  t_counting = true;
  fn();
  t_counting = false;
  return t_allocations;
}

// node0 returns a tensor made beforehand; node k returns node k-1's value.
th::Node add_chain(th::Graph& g, int n) {
  const at::Tensor t = at::ones({1});
  th::Node last = g.op("n0", [t](th::Run&) { return t; });
  for (int k = 1; k < n; ++k) {
    const th::Node prev = last;
    last = g.op("n" + std::to_string(k), [prev](th::Run& r) { return r[prev]; });
  }
  return last;
}

struct IdleHook : th::SessionRunHook {
  th::SessionRunArgs before_run(th::SessionRunContext&) override { return {}; }
  void after_run(th::SessionRunContext&, const th::SessionRunValues&) override {}
};

TEST(AllocationTest, CountingOperatorNewSeesAllocations) {
  // Guards the tests below against a replacement that is not in effect.
  const uint64_t n = allocations_of([] {
    auto p = std::make_unique<int>(1);
    std::string s(100, 'x');
    // Keep the compiler from eliding the pair of new and delete.
    asm volatile("" : : "r"(p.get()), "r"(s.data()) : "memory");
  });
  EXPECT_EQ(n, 2u);
  // Inside LibTorch too: a new tensor's TensorImpl.
  EXPECT_GT(allocations_of([] { at::Tensor t = at::empty({1}); }), 0u);
}

TEST(AllocationTest, SessionRunIntoOnTenNodeChainAllocatesNothingWhenSteady) {
  th::Graph g;
  const th::Node last = add_chain(g, 10);
  g.finalize();
  th::Session sess(g);
  th::RunResults out;
  // Fetches, feeds and options are made per call, as a training loop writes them.
  for (int i = 0; i < kWarmUp; ++i) sess.run_into(last, {}, {}, nullptr, out);

  const uint64_t n = allocations_of([&] {
    for (int i = 0; i < kSteady; ++i) sess.run_into(last, {}, {}, nullptr, out);
  });
  EXPECT_EQ(n, 0u) << "operator new calls in " << kSteady << " steady runs";
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out.at(0).item<float>(), 1.0f);
}

TEST(AllocationTest, MonitoredRunIntoWithTenIdleHooksAllocatesNothingWhenSteady) {
  th::testing::FakeEnv fake;
  th::Graph g;
  const th::Node last = add_chain(g, 1);
  th::Hooks hooks;
  for (int i = 0; i < 10; ++i) hooks.push_back(std::make_shared<IdleHook>());
  auto sess = th::testing::chief_session(g, std::move(hooks), fake.env());
  th::RunResults out;
  for (int i = 0; i < kWarmUp; ++i) sess->run_into(last, {}, {}, nullptr, out);

  const uint64_t n = allocations_of([&] {
    for (int i = 0; i < kSteady; ++i) sess->run_into(last, {}, {}, nullptr, out);
  });
  EXPECT_EQ(n, 0u) << "operator new calls in " << kSteady << " steady monitored steps";
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out.at(0).item<float>(), 1.0f);
}

// Reported, not asserted: run() returns a fresh RunResults, whose vector is allocated per call.
TEST(AllocationTest, ReportsAllocationsOfMonitoredRunReturningByValue) {
  th::testing::FakeEnv fake;
  th::Graph g;
  const th::Node last = add_chain(g, 1);
  th::Hooks hooks;
  for (int i = 0; i < 10; ++i) hooks.push_back(std::make_shared<IdleHook>());
  auto sess = th::testing::chief_session(g, std::move(hooks), fake.env());
  for (int i = 0; i < kWarmUp; ++i) sess->run(last);

  const uint64_t n = allocations_of([&] {
    for (int i = 0; i < kSteady; ++i) {
      th::RunResults r = sess->run(last);
      ASSERT_EQ(r.size(), 1u);
    }
  });
  const double per_run = static_cast<double>(n) / kSteady;
  RecordProperty("allocations_per_run", std::to_string(per_run));
  std::cout << "[ INFO     ] MonitoredSession::run by value: " << per_run << " operator new calls per run\n";
}

}  // namespace
