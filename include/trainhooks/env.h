// The environment a session and its hooks read time from, sleep through and log to.
//
// TF's tests patch time.time, time.sleep and logging; trainhooks injects them instead. Every timed
// decision reads a Clock, every wait goes through a Sleeper, every log line goes to a LogSink.
// An Env whose members are null falls back to the session's Env, and that to Env::system()
// (real clocks, real sleep, INFO and above to stderr as `INFO:trainhooks:<text>`).
//
//   th::Env env{.log = std::make_shared<MyLogSink>()};   // clock and sleeper: the system's
//
// Test doubles (FakeClock, FakeSleeper, CapturingLogSink) are in trainhooks/testing/fake_env.h.
// Thread safety: the system implementations are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

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
