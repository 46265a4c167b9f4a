// The environment a session and its hooks read time from, sleep through and log to.
//
// TF's tests patch time.time, time.sleep and logging; trainhooks injects them instead. Every timed
// decision reads a Clock, every wait goes through a Sleeper, every log line goes to a LogSink.
// An Env whose members are null falls back to the session's Env, and that to Env::system()
// (real clocks, real sleep, INFO and above to stderr as `INFO:trainhooks:<text>`).
//
//   auto clock = std::make_shared<th::FakeClock>();
//   auto log = std::make_shared<th::CapturingLogSink>();
//   th::Env env{.clock = clock, .sleeper = std::make_shared<th::FakeSleeper>(clock), .log = log};
//
// Thread safety: the system implementations are thread-safe; the fakes are for one test thread
// plus the threads it joins.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace trainhooks {

class Clock {
 public:
  virtual ~Clock() = default;
  // Seconds since the Unix epoch (event and checkpoint time stamps).
  virtual double wall_seconds() const = 0;
  // Monotonic seconds (intervals, timers).
  virtual double steady_seconds() const = 0;
};

class Sleeper {
 public:
  virtual ~Sleeper() = default;
  virtual void sleep_for(double seconds) = 0;
};

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };
const char* log_level_name(LogLevel level);  // "DEBUG", "INFO", "WARNING", "ERROR"

class LogSink {
 public:
  virtual ~LogSink() = default;
  virtual void log(LogLevel level, std::string_view message) = 0;
};

class SystemClock final : public Clock {
 public:
  double wall_seconds() const override;
  double steady_seconds() const override;
};

class SystemSleeper final : public Sleeper {
 public:
  void sleep_for(double seconds) override;
};

// Writes `LEVEL:trainhooks:<message>` lines to stderr, dropping those below min_level.
class StderrLogSink final : public LogSink {
 public:
  explicit StderrLogSink(LogLevel min_level = LogLevel::kInfo) : min_level_(min_level) {}
  void log(LogLevel level, std::string_view message) override;

 private:
  LogLevel min_level_;
  std::mutex mu_;
};

// A clock that moves only when told; wall and steady time advance together.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(double start_wall_seconds = 1.0e9) : wall_(start_wall_seconds) {}
  double wall_seconds() const override;
  double steady_seconds() const override;
  void advance(double seconds);

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

struct Env {
  std::shared_ptr<Clock> clock;
  std::shared_ptr<Sleeper> sleeper;
  std::shared_ptr<LogSink> log;

  // Real clock, real sleep, stderr logging.
  static const Env& system();
  // This Env's members, with null ones taken from `fallback`.
  Env or_else(const Env& fallback) const;

  void info(std::string_view message) const { write(LogLevel::kInfo, message); }
  void warning(std::string_view message) const { write(LogLevel::kWarning, message); }
  void error(std::string_view message) const { write(LogLevel::kError, message); }
  void write(LogLevel level, std::string_view message) const;
};

}  // namespace trainhooks
