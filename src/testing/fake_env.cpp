#include "trainhooks/testing/fake_env.h"

namespace trainhooks {

double FakeClock::wall_seconds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return wall_;
}

double FakeClock::steady_seconds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return steady_;
}

void FakeClock::set_wall_seconds(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  wall_ = seconds;
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

}  // namespace trainhooks
