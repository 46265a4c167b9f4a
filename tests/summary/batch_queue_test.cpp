#include "summary/batch_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace trainhooks::summary {
namespace batch_queue_test {

using namespace std::chrono_literals;

auto soon() { return std::chrono::steady_clock::now() + 10ms; }

TEST(BatchQueueTest, ConsumerTakesEverythingQueuedInOrder) {
  BatchQueue<int> q(4);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(q.push([&](int& slot) { slot = i; }));
  auto batch = q.take(soon());
  EXPECT_EQ(std::vector<int>(batch.items.begin(), batch.items.end()), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(batch.flush_ticket, 0u);
  EXPECT_FALSE(batch.closed);
}

TEST(BatchQueueTest, TakeReturnsAnEmptyBatchAtTheDeadline) {
  BatchQueue<int> q(4);
  auto batch = q.take(soon());
  EXPECT_TRUE(batch.items.empty());
}

TEST(BatchQueueTest, ProducerBlocksWhileFullUntilTheConsumerTakes) {
  BatchQueue<int> q(2);
  q.push([](int& s) { s = 1; });
  q.push([](int& s) { s = 2; });
  std::atomic<bool> pushed{false};
  std::thread producer([&] {
    q.push([](int& s) { s = 3; });
    pushed = true;
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(pushed) << "a push into a full queue must wait";
  auto batch = q.take(soon());
  EXPECT_EQ(batch.items.size(), 2u);
  producer.join();
  EXPECT_TRUE(pushed);
  EXPECT_EQ(q.take(soon()).items[0], 3);
}

TEST(BatchQueueTest, FlushWaitsUntilTheConsumerReportsTheBatchFlushed) {
  BatchQueue<int> q(4);
  q.push([](int& s) { s = 1; });
  std::atomic<bool> flushed{false};
  std::thread flusher([&] {
    q.flush();
    flushed = true;
  });
  auto batch = q.take(std::chrono::steady_clock::now() + 5s);
  // The flush request may arrive with the item or in a later batch.
  while (batch.flush_ticket == 0) batch = q.take(std::chrono::steady_clock::now() + 5s);
  EXPECT_FALSE(flushed);
  q.flushed(batch.flush_ticket);
  flusher.join();
  EXPECT_TRUE(flushed);
}

TEST(BatchQueueTest, ClosedQueueRefusesPushesAndReleasesBlockedProducers) {
  BatchQueue<int> q(1);
  q.push([](int& s) { s = 1; });
  std::atomic<int> result{-1};
  std::thread producer([&] { result = q.push([](int& s) { s = 2; }) ? 1 : 0; });
  std::this_thread::sleep_for(20ms);
  q.close();
  producer.join();
  EXPECT_EQ(result, 0);
  auto batch = q.take(soon());
  EXPECT_TRUE(batch.closed);
  EXPECT_EQ(batch.items.size(), 1u);  // queued before close: still delivered
  q.finished();
  EXPECT_FALSE(q.push([](int&) {}));
  q.flush();  // returns at once when closed
}

TEST(BatchQueueTest, ReopenAcceptsPushesAgain) {
  BatchQueue<int> q(1);
  q.close();
  q.take(soon());
  q.finished();
  q.reopen();
  EXPECT_TRUE(q.push([](int& s) { s = 5; }));
  EXPECT_EQ(q.take(soon()).items[0], 5);
}

}  // namespace batch_queue_test
}  // namespace trainhooks::summary
