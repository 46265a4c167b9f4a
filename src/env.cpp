#include "trainhooks/env.h"

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

namespace trainhooks {

const char* log_level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "DEBUG";
    case LogLevel::kInfo: return "INFO";
    case LogLevel::kWarning: return "WARNING";
    case LogLevel::kError: return "ERROR";
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
  std::fwrite(line.data(), 1, line.size(), stderr);
}

double FakeClock::wall_seconds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return wall_;
}

double FakeClock::steady_seconds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return steady_;
}

void FakeClock::advance(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  wall_ += seconds;
  steady_ += seconds;
}

void FakeSleeper::sleep_for(double seconds) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    sleeps_.push_back(seconds);
  }
  if (clock_) clock_->advance(seconds);
}

std::vector<double> FakeSleeper::sleeps() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sleeps_;
}

void CapturingLogSink::log(LogLevel level, std::string_view message) {
  std::lock_guard<std::mutex> lock(mu_);
  entries_.push_back({level, std::string(message)});
}

std::vector<CapturingLogSink::Entry> CapturingLogSink::entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_;
}

std::vector<std::string> CapturingLogSink::messages(LogLevel level) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& e : entries_)
    if (e.level == level) out.push_back(e.message);
  return out;
}

void CapturingLogSink::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  entries_.clear();
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
