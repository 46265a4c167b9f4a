// Test doubles for Env (env.h): a clock that moves only when told, a sleeper that advances it
// instead of sleeping, and a log sink that keeps every line. TF's tests patch time.time,
// time.sleep and logging; tests of trainhooks and of users' hooks inject these instead, and
// assert exact fire steps and log lines without sleeping.
//
//   auto clock = std::make_shared<th::FakeClock>();
//   auto log = std::make_shared<th::CapturingLogSink>();
//   th::Env env{.clock = clock, .sleeper = std::make_shared<th::FakeSleeper>(clock), .log = log};
//   ... run a session with {.env = env} ...
//   EXPECT_EQ(log->messages(), (std::vector<std::string>{"loss = 0.5"}));
//
// Library trainhooks::testing (link it in test programs only). Thread safety: every method may be
// called from any thread; tests usually drive them from one test thread plus the threads it joins.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "trainhooks/env.h"

namespace trainhooks {

// A clock that moves only when told; advance() moves wall and steady time together.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(double start_wall_seconds = 1.0e9) : wall_(start_wall_seconds) {}
  double wall_seconds() const override;
  double steady_seconds() const override;
  void advance(double seconds);
  // Sets the wall time alone (a clock stepped by NTP, or a file name's time stamp in a test).
  void set_wall_seconds(double seconds);

 private:
  mutable std::mutex mu_;
  double wall_;
  double steady_ = 0;
};

// Sleeping advances the fake clock instantly and records the request.
class FakeSleeper final : public Sleeper {
 public:
  explicit FakeSleeper(std::shared_ptr<FakeClock> clock) : clock_(std::move(clock)) {}
  void sleep_for(double seconds) override;
  std::vector<double> sleeps() const;

 private:
  std::shared_ptr<FakeClock> clock_;
  mutable std::mutex mu_;
  std::vector<double> sleeps_;
};

// Keeps every line (level and exact text) for tests to assert.
class CapturingLogSink final : public LogSink {
 public:
  struct Entry {
    LogLevel level;
    std::string message;
    bool operator==(const Entry&) const = default;
  };
  void log(LogLevel level, std::string_view message) override;
  std::vector<Entry> entries() const;
  // The messages at `level` only, in order.
  std::vector<std::string> messages(LogLevel level = LogLevel::kInfo) const;
  void clear();

 private:
  mutable std::mutex mu_;
  std::vector<Entry> entries_;
};

}  // namespace trainhooks
