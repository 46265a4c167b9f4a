// Inputs that work ahead (InputOptions::prefetch, num_workers, transform): the runs read the very
// batches, positions and end of data they read without threads, the transform draws the same
// numbers on any number of threads, a new position discards the work ahead, a worker's error is
// thrown by the run of its batch, and destroying the graph never waits on a queue.
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "test_util.h"
#include "trainhooks/data.h"
#include "trainhooks/errors.h"
#include "trainhooks/graph.h"
#include "trainhooks/input.h"
#include "trainhooks/session.h"

namespace th = trainhooks;

namespace input_prefetch_test {

std::vector<int64_t> values(const torch::Tensor& t) {
  auto c = t.to(torch::kLong).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

// What the runs of an input see, run by run until the end of data: each batch's first component,
// the position after it, and the end's error text.
struct Reading {
  std::vector<std::vector<int64_t>> batches;
  std::vector<th::InputPosition> positions;
  std::string end;
  bool operator==(const Reading&) const = default;
};

Reading read_all(int64_t n, const th::InputOptions& options, int64_t shards = 1,
                 int64_t shard = 0) {
  th::Graph g;
  auto xs = torch::arange(n);
  auto in = g.input("in", th::tensor_source({xs, xs * 10}, {"x", "y"}), options);
  g.shard_inputs(shards, shard);
  th::Session s(g);
  Reading r;
  for (int i = 0; i < 1000; ++i) {
    try {
      auto out = s.run({in[0], in[1]});
      EXPECT_EQ(values(out[in[1]]), values(out[in[0]] * 10));  // components stay together
      r.batches.push_back(values(out[in[0]]));
    } catch (const th::OutOfRangeError& e) {
      r.end = e.what();
      r.positions.push_back(g.input_position(in[0]));
      break;
    }
    r.positions.push_back(g.input_position(in[0]));
  }
  return r;
}

// Ways of working ahead, among them a queue shorter than the threads and a long one.
const std::vector<std::pair<int64_t, int64_t>> kAhead = {{1, 0}, {0, 1}, {2, 3}, {7, 3}, {0, 4}};

TEST(InputPrefetchTest, ReadsTheSameBatchesPositionsAndEndAsWithoutForThreeSeeds) {
  for (uint64_t seed : {1, 2, 3}) {
    for (bool drop_last : {false, true}) {
      for (int64_t shards : {1, 2}) {
        for (int64_t shard = 0; shard < shards; ++shard) {
          const th::InputOptions plain{.batch_size = 4,
                                       .shuffle = true,
                                       .seed = seed,
                                       .num_epochs = 3,
                                       .drop_last = drop_last};
          const Reading expected = read_all(23, plain, shards, shard);
          ASSERT_GE(expected.batches.size(), 6u);
          EXPECT_NE(expected.end, "");
          for (const auto& [prefetch, workers] : kAhead) {
            SCOPED_TRACE(::testing::Message()
                         << "seed " << seed << ", drop_last " << drop_last << ", shard " << shard
                         << " of " << shards << ", prefetch " << prefetch << ", workers "
                         << workers);
            th::InputOptions ahead = plain;
            ahead.prefetch = prefetch;
            ahead.num_workers = workers;
            EXPECT_EQ(read_all(23, ahead, shards, shard), expected);
          }
        }
      }
    }
  }
}

// Adds noise drawn from the generator: a different draw for every batch (and epoch).
void add_noise(std::vector<at::Tensor>& batch, at::Generator& generator) {
  batch[0] = batch[0].to(torch::kDouble) +
             torch::rand(batch[0].sizes(), generator, torch::TensorOptions(torch::kDouble));
}

std::vector<at::Tensor> transformed(int64_t workers, int64_t shards = 1, int64_t shard = 0) {
  th::Graph g;
  auto xs = torch::arange(12);
  auto in = g.input("in", th::tensor_source({xs}, {"x"}),
                    {.batch_size = 12,
                     .shuffle = true,
                     .seed = 5,
                     .num_epochs = 3,
                     .num_shards = shards,
                     .shard_index = shard,
                     .num_workers = workers,
                     .transform = add_noise});
  th::Session s(g);
  std::vector<at::Tensor> out;
  for (int i = 0; i < 3; ++i) out.push_back(s.run(in[0])[in[0]]);
  return out;
}

TEST(InputPrefetchTest, TheTransformDrawsTheSameNumbersOnZeroOneAndThreeWorkers) {
  const auto expected = transformed(0);
  ASSERT_EQ(expected.size(), 3u);
  for (int64_t workers : {1, 3}) {
    const auto got = transformed(workers);
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(at::equal(got[i], expected[i])) << workers << " workers, batch " << i;
  }
  // The draws depend on the batch's place: every epoch's noise differs (the same 12 examples).
  auto noise = [](const at::Tensor& t) { return t - t.floor(); };
  auto sorted = [&](const at::Tensor& t) { return std::get<0>(noise(t).sort()); };
  EXPECT_FALSE(at::equal(sorted(expected[0]), sorted(expected[1])));
  EXPECT_FALSE(at::equal(sorted(expected[1]), sorted(expected[2])));
  // So do two shards' batches of the same epoch.
  EXPECT_FALSE(at::equal(noise(transformed(2, 2, 0)[0]), noise(transformed(2, 2, 1)[0])));
  EXPECT_TRUE(at::equal(transformed(0, 2, 1)[2], transformed(3, 2, 1)[2]));
}

TEST(InputPrefetchTest, WorkersRunTheirOperationsOnOneIntraOpThread) {
  const int before = at::get_num_threads();
  at::set_num_threads(2);
  std::atomic<int> seen{0};
  {
    th::Graph g;
    auto in = g.input("in", th::tensor_source({torch::arange(64)}, {"x"}),
                      {.batch_size = 8,
                       .num_workers = 2,
                       .transform = [&](std::vector<at::Tensor>&, at::Generator&) {
                         // A parallel operation first: ATen's per-thread set-up must not undo it.
                         (void)torch::ones({1 << 20}).sum();
                         seen = at::get_num_threads();
                       }});
    th::Session s(g);
    s.run(in[0]);
  }
  EXPECT_EQ(at::get_num_threads(), 2);  // the training thread's count is untouched
  at::set_num_threads(before);
  EXPECT_EQ(seen.load(), 1);
}

TEST(InputPrefetchTest, ANewPositionOrShardDiscardsTheWorkAhead) {
  const th::InputOptions plain{.batch_size = 3, .shuffle = true, .seed = 11, .num_epochs = 0};
  th::InputOptions ahead = plain;
  ahead.num_workers = 2;
  ahead.prefetch = 5;
  th::Graph a, b;
  auto xs = torch::arange(20);
  auto in_a = a.input("in", th::tensor_source({xs}, {"x"}), plain);
  auto in_b = b.input("in", th::tensor_source({xs}, {"x"}), ahead);
  th::Session sa(a), sb(b);
  auto both = [&](const char* what, int runs) {
    for (int i = 0; i < runs; ++i) {
      SCOPED_TRACE(::testing::Message() << what << ", run " << i);
      EXPECT_EQ(values(sb.run(in_b[0])[in_b[0]]), values(sa.run(in_a[0])[in_a[0]]));
      EXPECT_EQ(b.input_position(in_b[0]), a.input_position(in_a[0]));
    }
  };
  both("start", 3);
  for (auto* g : {&a, &b}) g->set_input_position(g->inputs()[0], {.epoch = 2, .offset = 7});
  both("after set_input_position", 4);
  for (auto* g : {&a, &b}) g->shard_inputs(2, 1);
  both("after shard_inputs", 4);
  for (auto* g : {&a, &b}) g->initialize();
  EXPECT_EQ(b.input_position(in_b[0]), (th::InputPosition{}));
  both("after initialize", 3);
}

// Fails get_batch for any batch holding example `bad` while `failing` is set.
class FlakySource : public th::InputSource {
 public:
  FlakySource(int64_t n, int64_t bad) : n_(n), bad_(bad) {}
  size_t size() const override { return static_cast<size_t>(n_); }
  std::vector<std::string> component_names() const override { return {"x"}; }
  std::vector<at::Tensor> get_batch(const std::vector<int64_t>& indices) override {
    calls++;
    for (int64_t i : indices)
      if (i == bad_ && failing) throw th::DataLossError("example " + std::to_string(i) + " is bad");
    return {torch::tensor(indices)};
  }
  std::atomic<bool> failing{true};
  std::atomic<int> calls{0};

 private:
  int64_t n_, bad_;
};

TEST(InputPrefetchTest, AWorkerErrorIsThrownByTheRunOfThatBatchAndTheNextRunRetriesIt) {
  auto read = [](int64_t workers) {
    th::Graph g;
    auto source = std::make_shared<FlakySource>(20, 13);
    auto in = g.input("in", source,
                      {.batch_size = 4, .prefetch = workers > 0 ? 4 : 0, .num_workers = workers});
    th::Session s(g);
    std::vector<std::string> seen;
    for (int i = 0; i < 6; ++i) {
      if (i == 5) source->failing = false;
      try {
        seen.push_back(::testing::PrintToString(values(s.run(in[0])[in[0]])));
      } catch (const th::DataLossError& e) {
        seen.push_back(e.what());
      }
      const auto p = g.input_position(in[0]);
      seen.push_back(std::to_string(p.epoch) + ":" + std::to_string(p.offset));
    }
    return seen;
  };
  const auto expected = read(0);
  ASSERT_EQ(expected.size(), 12u);
  // Batches 0-2 read; the batch of examples 12-15 fails twice (the position stays), then reads.
  EXPECT_EQ(expected[6], "example 13 is bad [while evaluating in/x]");
  EXPECT_EQ(expected[7], "0:12");
  EXPECT_EQ(expected[8], expected[6]);
  EXPECT_EQ(expected[10], "{ 12, 13, 14, 15 }");
  EXPECT_EQ(read(1), expected);
  EXPECT_EQ(read(3), expected);
}

TEST(InputPrefetchTest, TheQueueIsBoundedAndDestroyingAFullOneDoesNotWait) {
  auto source = std::make_shared<FlakySource>(1000, -1);
  {
    th::Graph g;
    auto in = g.input("in", source, {.batch_size = 2, .prefetch = 3, .num_workers = 2});
    th::Session s(g);
    s.run(in[0]);
    // The batch read and 3 ahead are made, then the threads wait for room.
    for (int i = 0; i < 6000 && source->calls < 4; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_EQ(source->calls.load(), 4);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(source->calls.load(), 4);
    s.run(in[0]);  // one taken, one more made
    for (int i = 0; i < 6000 && source->calls < 5; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(source->calls.load(), 5);
  }                                  // the graph and its threads go with a full queue
  EXPECT_EQ(source.use_count(), 1);  // the threads are gone and hold no reference
}

// get_batch blocks until released: threads inside it when the graph goes.
class BlockingSource : public th::InputSource {
 public:
  size_t size() const override { return 100; }
  std::vector<std::string> component_names() const override { return {"x"}; }
  std::vector<at::Tensor> get_batch(const std::vector<int64_t>& indices) override {
    std::unique_lock lock(mutex);
    ++inside;
    changed.notify_all();
    changed.wait(lock, [&] { return released || indices.front() == 0; });
    return {torch::tensor(indices)};
  }
  std::mutex mutex;
  std::condition_variable changed;
  int inside = 0;
  bool released = false;
};

TEST(InputPrefetchTest, DestroyingWhileAThreadIsInASlowSourceWaitsForThatCallOnly) {
  auto source = std::make_shared<BlockingSource>();
  auto g = std::make_unique<th::Graph>();
  auto in = g->input("in", source, {.batch_size = 1, .prefetch = 4, .num_workers = 2});
  {
    th::Session s(*g);
    s.run(in[0]);  // the first batch returns at once
  }
  {
    std::unique_lock lock(source->mutex);
    ASSERT_TRUE(source->changed.wait_for(lock, std::chrono::seconds(60),
                                         [&] { return source->inside >= 3; }));
  }
  // Both threads are inside get_batch: destroying the graph waits for them, and for them only.
  auto destroyed = std::async(std::launch::async, [&] { g.reset(); });
  EXPECT_EQ(destroyed.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  {
    std::lock_guard lock(source->mutex);
    source->released = true;
  }
  source->changed.notify_all();
  ASSERT_EQ(destroyed.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  EXPECT_EQ(source.use_count(), 1);
}

TEST(InputPrefetchTest, BadValuesAreInvalidArgumentsNamingTheOptionAndDefaultsAreShown) {
  th::Graph g;
  auto src = th::tensor_source({torch::arange(4)}, {"x"});
  EXPECT_EQ(
      th::testing::error_message<th::InvalidArgument>([&] { g.input("a", src, {.prefetch = -1}); }),
      "input 'a': invalid prefetch -1");
  EXPECT_EQ(th::testing::error_message<th::InvalidArgument>(
                [&] { g.input("a", src, {.num_workers = -2}); }),
            "input 'a': invalid num_workers -2");
  auto workers = g.input("workers", src, {.num_workers = 3});
  EXPECT_EQ(g.input_options(workers[0]).prefetch, 6);
  auto queue = g.input("queue", src, {.prefetch = 3});
  EXPECT_EQ(g.input_options(queue[0]).num_workers, 1);
  auto inline_ = g.input("inline", src);
  EXPECT_EQ(g.input_options(inline_[0]).prefetch, 0);
  EXPECT_EQ(g.input_options(inline_[0]).num_workers, 0);
}

TEST(InputPrefetchTest, ATransformThatDropsAComponentIsAnErrorNamingTheInput) {
  th::Graph g;
  auto in =
      g.input("in", th::tensor_source({torch::arange(4), torch::arange(4)}, {"x", "y"}),
              {.batch_size = 2,
               .num_workers = 1,
               .transform = [](std::vector<at::Tensor>& b, at::Generator&) { b.pop_back(); }});
  th::Session s(g);
  EXPECT_EQ(th::testing::error_message<th::InternalError>([&] { s.run(in[0]); }),
            "input 'in': the source and transform returned 1 components, expected 2 [while "
            "evaluating in/x]");
}

// A torch::data dataset that notes how many threads are inside get() at once.
struct Watched : torch::data::datasets::Dataset<Watched> {
  struct Counts {
    std::atomic<int> inside{0}, most{0};
  };
  std::shared_ptr<Counts> counts = std::make_shared<Counts>();
  torch::data::Example<> get(size_t i) override {
    const int now = ++counts->inside;
    for (int m = counts->most; now > m && !counts->most.compare_exchange_weak(m, now);) {
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    --counts->inside;
    return {torch::tensor({static_cast<float>(i)}), torch::tensor(static_cast<int64_t>(i % 3))};
  }
  torch::optional<size_t> size() const override { return 40; }
};

TEST(InputPrefetchTest, ADatasetSourceGivesTheSameBatchesAndOneGetAtATimeByDefault) {
  auto read = [](Watched dataset, int64_t workers, th::DatasetSourceOptions options) {
    th::Graph g;
    auto in = g.input("d", th::dataset_source(std::move(dataset), options),
                      {.batch_size = 4,
                       .shuffle = true,
                       .seed = 3,
                       .num_epochs = 2,
                       .num_workers = workers,
                       .transform = add_noise});
    th::Session s(g);
    std::vector<at::Tensor> out;
    for (int i = 0; i < 20; ++i) out.push_back(s.run({in.data(), in.target()})[in.data()]);
    return out;
  };
  Watched plain, serialised, concurrent;
  const auto expected = read(plain, 0, {});
  const auto a = read(serialised, 3, {});
  const auto b = read(concurrent, 3, {.thread_safe = true});
  ASSERT_EQ(a.size(), expected.size());
  ASSERT_EQ(b.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_TRUE(at::equal(a[i], expected[i])) << i;
    EXPECT_TRUE(at::equal(b[i], expected[i])) << i;
  }
  EXPECT_EQ(serialised.counts->most.load(), 1);
}

}  // namespace input_prefetch_test
