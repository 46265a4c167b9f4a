#include "trainhooks/coordinator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "trainhooks/errors.h"

namespace th = trainhooks;

namespace coordinator_test {

TEST(CoordinatorTest, StopRequestIsSeenByEveryone) {
  th::Coordinator coord;
  EXPECT_FALSE(coord.should_stop());
  EXPECT_FALSE(coord.wait_for_stop(0.01));
  coord.request_stop();
  EXPECT_TRUE(coord.should_stop());
  EXPECT_TRUE(coord.wait_for_stop(0));
  coord.clear_stop();
  EXPECT_FALSE(coord.should_stop());
}

TEST(CoordinatorTest, JoinWaitsForThreadsThatStopOnRequest) {
  th::Coordinator coord;
  std::atomic<int> iterations{0};
  for (int i = 0; i < 3; ++i) {
    coord.start_thread("loop" + std::to_string(i), [&] {
      while (!coord.should_stop()) {
        ++iterations;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
  }
  EXPECT_EQ(coord.num_threads(), 3u);
  coord.request_stop();
  EXPECT_NO_THROW(coord.join(10));
  EXPECT_TRUE(coord.joined());
  EXPECT_EQ(coord.num_threads(), 0u);
}

TEST(CoordinatorTest, ThreadExceptionStopsAndIsReraisedByJoin) {
  th::Coordinator coord;
  coord.start_thread("writer", [] { throw th::DataLossError("checksum mismatch"); });
  EXPECT_TRUE(coord.wait_for_stop(10));
  EXPECT_THROW(coord.raise_requested_exception(), th::DataLossError);
  try {
    coord.join(10);
    FAIL();
  } catch (const th::DataLossError& e) {
    EXPECT_STREQ(e.what(), "checksum mismatch");
  }
}

TEST(CoordinatorTest, FirstErrorWinsAndOutOfRangeIsACleanStop) {
  th::Coordinator coord;
  coord.request_stop(std::make_exception_ptr(th::OutOfRangeError("end of data")));
  EXPECT_NO_THROW(coord.raise_requested_exception());
  coord.request_stop(std::make_exception_ptr(th::AbortedError("first")));
  coord.request_stop(std::make_exception_ptr(th::InternalError("second")));
  EXPECT_THROW(coord.join(1), th::AbortedError);
}

TEST(CoordinatorTest, ThreadsStillRunningAfterTheGracePeriodAreNamed) {
  th::Coordinator coord;
  std::atomic<bool> release{false};
  coord.start_thread("stubborn", [&] {
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  coord.start_thread("polite", [&] { coord.wait_for_stop(); });
  coord.request_stop();
  try {
    coord.join(0.05);
    FAIL();
  } catch (const th::RuntimeError& e) {
    EXPECT_STREQ(e.what(), "Coordinator stopped with threads still running: stubborn");
  }
  release = true;  // the destructor joins it
}

TEST(CoordinatorTest, JoinReturnsWhenAllThreadsFinishWithoutAStopRequest) {
  th::Coordinator coord;
  coord.start_thread("short", [] {});
  EXPECT_NO_THROW(coord.join(1));
  EXPECT_FALSE(coord.should_stop());
}

}  // namespace coordinator_test
