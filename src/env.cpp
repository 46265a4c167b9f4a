#include "trainhooks/env.h"

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "util/terminal_line.h"

namespace trainhooks {

const char* log_level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "DEBUG";
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kWarning:
      return "WARNING";
    case LogLevel::kError:
      return "ERROR";
  }
  return "INFO";
}

double SystemClock::wall_seconds() const {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

double SystemClock::steady_seconds() const {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

void SystemSleeper::sleep_for(double seconds) {
  if (seconds > 0) std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

void StderrLogSink::log(LogLevel level, std::string_view message) {
  if (level < min_level_) return;
  std::string line;
  line.reserve(message.size() + 24);
  line.append(log_level_name(level)).append(":trainhooks:").append(message).push_back('\n');
  std::lock_guard<std::mutex> lock(mu_);
  // A progress bar's line in the making: erase it rather than append to it.
  if (internal::take_partial_line(2)) line.insert(0, "\r\x1b[K");
  std::fwrite(line.data(), 1, line.size(), stderr);
}

const Env& Env::system() {
  static const Env env{std::make_shared<SystemClock>(), std::make_shared<SystemSleeper>(),
                       std::make_shared<StderrLogSink>()};
  return env;
}

Env Env::or_else(const Env& fallback) const {
  return Env{clock ? clock : fallback.clock, sleeper ? sleeper : fallback.sleeper,
             log ? log : fallback.log};
}

void Env::write(LogLevel level, std::string_view message) const {
  if (log) {
    log->log(level, message);
  } else {
    system().log->log(level, message);
  }
}

}  // namespace trainhooks
