#include "trainhooks/summary/restart_filter.h"

#include <algorithm>
#include <cstdlib>
#include <unordered_set>

#include <fmt/format.h>

namespace trainhooks::summary {

double parse_file_version(const std::string& file_version) {
  const size_t colon = file_version.rfind(':');
  if (colon == std::string::npos || colon + 1 == file_version.size()) return -1;
  const char* begin = file_version.c_str() + colon + 1;
  char* end = nullptr;
  const double v = std::strtod(begin, &end);
  return end == file_version.c_str() + file_version.size() ? v : -1;
}

std::string describe_purge(const Purge& p) {
  const char* s = p.values == 1 ? "" : "s";
  if (p.restart) {
    return fmt::format(
        "restart at step {} (SessionLog START): {} earlier value{} with step >= {} "
        "discarded",
        p.step, p.values, s, p.step);
  }
  std::string tags;
  for (const std::string& t : p.tags) tags += (tags.empty() ? "" : ", ") + t;
  return fmt::format(
      "step {} after step {} ({}): {} earlier value{} of {} with step >= {} discarded", p.step,
      p.previous_step, tags, p.values, s, p.tags.size() == 1 ? "this tag" : "these tags", p.step);
}

PurgeDecision RestartDetector::add(const Event& event) {
  if (!event.file_version.empty()) file_version_ = parse_file_version(event.file_version);
  const bool summary = !event.values.empty();
  PurgeDecision d{.step = event.step, .previous_step = most_recent_step_};
  if (file_version_ >= 2) {
    if (event.session_log && event.session_log->status == SessionStatus::kStart) {
      // The run's first START marks its beginning, not a restart.
      d.purge = seen_start_;
      seen_start_ = true;
    }
  } else if (summary && event.step < most_recent_step_) {
    d.purge = true;
    d.by_tags = true;
  }
  if (summary) most_recent_step_ = event.step;
  return d;
}

void RestartFilter::add(Event event) {
  const PurgeDecision d = detector_.add(event);
  if (d.purge) purge(event, d);
  events_.push_back(std::move(event));
}

void RestartFilter::purge(const Event& by, const PurgeDecision& d) {
  const bool by_tags = d.by_tags;
  std::unordered_set<std::string> tags;
  if (by_tags) {
    for (const EventValue& v : by.values) tags.insert(v.tag);
  }
  Purge p{.restart = !by_tags, .step = d.step, .previous_step = d.previous_step};
  size_t kept = 0;
  for (size_t i = 0; i < events_.size(); ++i) {
    Event& e = events_[i];
    if (e.step >= d.step && !e.values.empty()) {
      const size_t before = e.values.size();
      std::erase_if(e.values, [&](const EventValue& v) { return !by_tags || tags.count(v.tag); });
      p.values += static_cast<int64_t>(before - e.values.size());
      if (e.values.empty()) continue;  // a summary event with nothing left
    }
    if (kept != i) events_[kept] = std::move(e);
    ++kept;
  }
  events_.resize(kept);
  if (p.values == 0) return;
  if (by_tags) {
    p.tags.assign(tags.begin(), tags.end());
    std::sort(p.tags.begin(), p.tags.end());
  }
  purges_.push_back(std::move(p));
}

}  // namespace trainhooks::summary
