#include "recovery.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "trainhooks/coordinator.h"
#include "trainhooks/errors.h"
#include "trainhooks/testing/fake_env.h"

namespace th = trainhooks;

namespace recovery_test {

const std::string kRecovering =
    "An error was raised. This may be due to a preemption in a connected worker or parameter "
    "server. The current session will be closed and a new session will be created. Error: ";

struct Fixture {
  std::shared_ptr<th::FakeClock> clock = std::make_shared<th::FakeClock>();
  std::shared_ptr<th::FakeSleeper> sleeper = std::make_shared<th::FakeSleeper>(clock);
  std::shared_ptr<th::CapturingLogSink> log = std::make_shared<th::CapturingLogSink>();
  th::Env env{.clock = clock, .sleeper = sleeper, .log = log};
  th::Coordinator coord;
};

template <typename E>
std::exception_ptr error(const char* message) {
  return std::make_exception_ptr(E(message));
}

TEST(RecoveryTest, PreemptionsAreRecoveredFromAtMostMaxAttemptsInARow) {
  Fixture f;
  th::internal::Recovery recovery({.max_attempts = 2, .backoff_secs = 0}, f.env);
  auto aborted = error<th::AbortedError>("lost");
  EXPECT_TRUE(recovery.should_recover(aborted, f.coord, true, false));
  auto unavailable = error<th::UnavailableError>("peer");
  EXPECT_TRUE(recovery.should_recover(unavailable, f.coord, true, false));
  EXPECT_FALSE(recovery.should_recover(aborted, f.coord, true, false));
  EXPECT_EQ(f.log->messages(),
            (std::vector<std::string>{kRecovering + "lost", kRecovering + "peer"}));
  EXPECT_EQ(f.log->messages(th::LogLevel::kError),
            std::vector<std::string>{
                "Giving up after 2 consecutive attempts to recover the session. Error: lost"});
  recovery.succeeded();  // a run went through: the count starts again
  EXPECT_TRUE(recovery.should_recover(aborted, f.coord, true, false));
}

TEST(RecoveryTest, OtherErrorsAndRefusalsAreNotRecoveredFrom) {
  Fixture f;
  th::internal::Recovery recovery({}, f.env);
  auto failed = error<th::FailedPreconditionError>("disk");
  EXPECT_FALSE(recovery.should_recover(failed, f.coord, true, false));
  auto aborted = error<th::AbortedError>("lost");
  EXPECT_FALSE(recovery.should_recover(aborted, f.coord, /*allowed=*/false, false));
  EXPECT_TRUE(f.log->entries().empty());
  EXPECT_FALSE(recovery.should_recover(aborted, f.coord, true, /*stopping=*/true));
  EXPECT_EQ(
      f.log->messages(th::LogLevel::kError),
      std::vector<std::string>{"Not recovering the session: a stop was requested. Error: lost"});
  th::internal::Recovery off({.enabled = false}, f.env);
  EXPECT_FALSE(off.should_recover(aborted, f.coord, true, false));
}

TEST(RecoveryTest, ThePreemptionInTheCoordinatorIsTheRootCause) {
  // TF's _CoordinatedSession: a cancelled queue after a peer's preemption is that preemption.
  Fixture f;
  th::internal::Recovery recovery({}, f.env);
  f.coord.request_stop(error<th::AbortedError>("peer lost"));
  EXPECT_TRUE(recovery.recovers_from(f.coord));
  auto cancelled = error<th::CancelledError>("queue closed");
  EXPECT_TRUE(recovery.should_recover(cancelled, f.coord, true, false));
  EXPECT_EQ(f.log->messages(), std::vector<std::string>{kRecovering + "peer lost"});
  // Replaced also when the answer is no, so that the caller raises the root cause.
  auto again = error<th::CancelledError>("queue closed");
  EXPECT_FALSE(recovery.should_recover(again, f.coord, /*allowed=*/false, false));
  EXPECT_TRUE(th::internal::Recovery::is_preemption(again));
}

TEST(RecoveryTest, LaterAttemptsBackOffDoublingInOneSecondSlices) {
  Fixture f;
  th::internal::Recovery recovery({.max_attempts = 4, .backoff_secs = 0.5}, f.env);
  auto aborted = error<th::AbortedError>("lost");
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(recovery.should_recover(aborted, f.coord, true, false));
  // The first retry at once, then 0.5 s, 1 s, 2 s (two slices, so that a signal ends it early).
  EXPECT_EQ(f.sleeper->sleeps(), (std::vector<double>{0.5, 1.0, 1.0, 1.0}));
}

TEST(RecoveryTest, BadOptionsAreInvalidArgumentsNamingThem) {
  Fixture f;
  auto message = [&](th::RecoveryOptions o) {
    try {
      th::internal::Recovery recovery(o, f.env);
    } catch (const th::InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message({.max_attempts = -1}), "MonitoredSession: invalid recovery.max_attempts -1");
  EXPECT_EQ(message({.backoff_secs = -2}), "MonitoredSession: invalid recovery.backoff_secs -2");
}

}  // namespace recovery_test
