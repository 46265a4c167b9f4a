// The steady per-step path allocates nothing: after warm-up, a session run and a monitored step
// with idle hooks make no operator new call.
//
// This file replaces the global operator new and delete (every form) for the whole test binary;
// they forward to malloc and free and count only while a thread's counting flag is set, so other
// tests and other threads are unaffected. Tensor storage comes from c10's allocator, not
// operator new, but a TensorImpl is made with new: the ops here return tensors made beforehand.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/ones.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>

#include "test_util.h"
#include "trainhooks/graph.h"
#include "trainhooks/hook.h"
#include "trainhooks/monitored_session.h"
#include "trainhooks/moving_average.h"
#include "trainhooks/session.h"

namespace allocation_test {

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

}  // namespace allocation_test

void* operator new(std::size_t size) {
  if (void* p = allocation_test::allocate(size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) {
  if (void* p = allocation_test::allocate(size)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  return allocation_test::allocate(size);
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  return allocation_test::allocate(size);
}
void* operator new(std::size_t size, std::align_val_t alignment) {
  if (void* p = allocation_test::allocate_aligned(size, alignment)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size, std::align_val_t alignment) {
  if (void* p = allocation_test::allocate_aligned(size, alignment)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t size, std::align_val_t alignment, const std::nothrow_t&) noexcept {
  return allocation_test::allocate_aligned(size, alignment);
}
void* operator new[](std::size_t size, std::align_val_t alignment, const std::nothrow_t&) noexcept {
  return allocation_test::allocate_aligned(size, alignment);
}

void operator delete(void* p) noexcept { allocation_test::deallocate(p); }
void operator delete[](void* p) noexcept { allocation_test::deallocate(p); }
void operator delete(void* p, std::size_t) noexcept { allocation_test::deallocate(p); }
void operator delete[](void* p, std::size_t) noexcept { allocation_test::deallocate(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { allocation_test::deallocate(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { allocation_test::deallocate(p); }
void operator delete(void* p, std::align_val_t) noexcept { allocation_test::deallocate(p); }
void operator delete[](void* p, std::align_val_t) noexcept { allocation_test::deallocate(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  allocation_test::deallocate(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  allocation_test::deallocate(p);
}
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  allocation_test::deallocate(p);
}
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  allocation_test::deallocate(p);
}

namespace th = trainhooks;

namespace allocation_test {

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

// As the README's loop writes it: `sess.run(train_op, {{x, xs}, {y, ys}})`, the feeds built and
// the results returned by value each step, with hooks that ask for nothing.
TEST(AllocationTest, MonitoredRunByValueWithFeedsAllocatesNothingWhenSteady) {
  th::testing::FakeEnv fake;
  th::Graph g;
  const th::Node x = g.placeholder("x", {.dtype = at::kFloat, .shape = {1}});
  const th::Node y = g.placeholder("y", {.dtype = at::kFloat, .shape = {1}});
  const th::Node sum = g.op("sum", [x, y](th::Run& r) {
    // Returns a tensor made beforehand: the op itself allocates nothing.
    static const at::Tensor kResult = at::ones({1});
    (void)r[x];
    (void)r[y];
    return kResult;
  });
  th::Hooks hooks;
  for (int i = 0; i < 10; ++i) hooks.push_back(std::make_shared<IdleHook>());
  auto sess = th::testing::chief_session(g, std::move(hooks), fake.env());
  const at::Tensor xs = at::ones({1}), ys = at::ones({1});
  for (int i = 0; i < kWarmUp; ++i) sess->run(sum, {{x, xs}, {y, ys}});

  const uint64_t n = allocations_of([&] {
    for (int i = 0; i < kSteady && !sess->should_stop(); ++i) {
      th::RunResults r = sess->run(sum, {{x, xs}, {y, ys}});
      ASSERT_EQ(r.size(), 1u);
    }
  });
  EXPECT_EQ(n, 0u) << "operator new calls in " << kSteady << " steady runs by value";
}

// An idle hook, alone: its empty SessionRunArgs and its values cost no allocation either.
TEST(AllocationTest, IdleHookAllocatesNothing) {
  th::testing::FakeEnv fake;
  th::Graph g;
  const th::Node last = add_chain(g, 1);
  auto sess = th::testing::chief_session(g, {std::make_shared<IdleHook>()}, fake.env());
  th::RunResults out;
  for (int i = 0; i < kWarmUp; ++i) sess->run_into(last, {}, {}, nullptr, out);
  const uint64_t n = allocations_of([&] {
    for (int i = 0; i < kSteady; ++i) sess->run_into(last, {}, {}, nullptr, out);
  });
  EXPECT_EQ(n, 0u);
}

// An exponential moving average's update after each step: in place, no allocation.
TEST(AllocationTest, MovingAverageUpdateAllocatesNothing) {
  th::Graph g;
  g.variable("w", at::ones({64, 32}));
  g.variable("b", at::ones({32}));
  th::ExponentialMovingAverage ema(g, {.decay = 0.99, .num_updates_warmup = true});
  for (int64_t step = 1; step <= kWarmUp; ++step) ema.update(step);
  const uint64_t n = allocations_of([&] {
    for (int64_t step = kWarmUp + 1; step <= kWarmUp + kSteady; ++step) ema.update(step);
  });
  EXPECT_EQ(n, 0u);
}

// Past four feeds or values, the storage moves to the heap once and is reused.
TEST(AllocationTest, FeedsAndResultsHoldFourInline) {
  const at::Tensor t = at::ones({1});
  EXPECT_EQ(
      allocations_of([&] {
        th::Feeds feeds{{th::Node{0}, t}, {th::Node{1}, t}, {th::Node{2}, t}, {th::Node{3}, t}};
        ASSERT_EQ(feeds.size(), 4u);
      }),
      0u);
  EXPECT_EQ(allocations_of([&] {
              th::Feeds feeds{{th::Node{0}, t},
                              {th::Node{1}, t},
                              {th::Node{2}, t},
                              {th::Node{3}, t},
                              {th::Node{4}, t}};
              ASSERT_EQ(feeds.size(), 5u);
            }),
            1u);
  th::RunResults results;
  EXPECT_EQ(allocations_of([&] {
              for (int i = 0; i < 4; ++i) results.add(th::Node{i}, t);
            }),
            0u);
}

}  // namespace allocation_test
