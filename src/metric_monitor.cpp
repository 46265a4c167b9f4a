#include "trainhooks/metric_monitor.h"

#include <fmt/format.h>

#include <cmath>
#include <utility>

#include "trainhooks/errors.h"

namespace trainhooks {

namespace {

MetricMonitorOptions checked(MetricMonitorOptions o, const char* owner) {
  if (o.mode != MetricMode::kMin && o.mode != MetricMode::kMax) {
    throw InvalidArgument(
        fmt::format("{}: mode must be kMin or kMax, got {}", owner, static_cast<int>(o.mode)));
  }
  if (!std::isfinite(o.min_delta) || o.min_delta < 0) {
    throw InvalidArgument(fmt::format("{}: min_delta must be a finite, non-negative number, got {}",
                                      owner, o.min_delta));
  }
  if (o.patience < 0) {
    throw InvalidArgument(
        fmt::format("{}: patience must be non-negative, got {}", owner, o.patience));
  }
  return o;
}

}  // namespace

MetricMonitor::MetricMonitor(MetricMonitorOptions options, const char* owner)
    : options_(checked(std::move(options), owner)) {
  reset();
}

void MetricMonitor::start(const LatestMetrics& metrics) {
  // Versions count publishes within this process: what is there now was measured before (or,
  // after a restore, in a timeline the restore went back from).
  const auto current = metrics.latest(options_.name);
  seen_version_ = current ? current->version : 0;
  seen_step_ = current ? current->step : std::numeric_limits<int64_t>::min();
}

std::optional<MetricValue> MetricMonitor::poll(const LatestMetrics& metrics) {
  const auto m = metrics.latest(options_.name);
  if (!m || (m->version == seen_version_ && m->step == seen_step_)) return std::nullopt;
  seen_version_ = m->version;
  seen_step_ = m->step;
  return m;
}

bool MetricMonitor::improves(double value) const {
  return trainhooks::improves(options_.mode, value, best_, options_.min_delta);
}

bool MetricMonitor::record(double value, int64_t step) {
  if (improves(value)) {
    best_ = value;
    best_step_ = step;
    wait_ = 0;
    return true;
  }
  ++wait_;
  return false;
}

void MetricMonitor::reset(std::optional<double> baseline) {
  const double inf = std::numeric_limits<double>::infinity();
  best_ = baseline ? *baseline : options_.mode == MetricMode::kMin ? inf : -inf;
  best_step_ = -1;
  wait_ = 0;
}

void MetricMonitor::restore(double best, int64_t best_step, int64_t wait) {
  best_ = best;
  best_step_ = best_step;
  wait_ = wait;
}

}  // namespace trainhooks
