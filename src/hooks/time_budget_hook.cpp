#include "trainhooks/hooks/time_budget_hook.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "trainhooks/errors.h"
#include "trainhooks/graph.h"
#include "trainhooks/session.h"

namespace trainhooks {

namespace {

void check(bool ok, const char* option, double value, const char* range) {
  if (!ok) {
    throw InvalidArgument(
        fmt::format("TimeBudgetHook: {} must be {}, got {:g}", option, range, value));
  }
}

}  // namespace

TimeBudgetHook::TimeBudgetHook(TimeBudgetHookOptions options)
    : options_(std::move(options)), last_step_(options_.last_step) {
  const auto& o = options_;
  check(std::isfinite(o.budget_secs) && o.budget_secs > 0, "budget_secs", o.budget_secs,
        "a positive, finite number of seconds");
  check(o.last_step > 0, "last_step", static_cast<double>(o.last_step), "positive");
  check(std::isfinite(o.reserve_secs) && o.reserve_secs >= 0, "reserve_secs", o.reserve_secs,
        "a non-negative, finite number of seconds");
  check(o.every_n_steps > 0, "every_n_steps", static_cast<double>(o.every_n_steps), "positive");
  check(o.min_steps_measured > 0, "min_steps_measured", static_cast<double>(o.min_steps_measured),
        "positive");
  check(o.round_to > 0, "round_to", static_cast<double>(o.round_to), "positive");
  check(o.slack >= 0 && o.slack < 1, "slack", o.slack, "in [0, 1)");
}

void TimeBudgetHook::begin() {
  require_global_step("TimeBudgetHook");
  deadline_ = env().clock->steady_seconds() + options_.budget_secs;
}

void TimeBudgetHook::after_create_session(Session&, Coordinator&) {
  // A new (or recovered) session measures afresh: its first step pays for warm-up.
  first_time_ = -1;
  runs_ = 0;
  recent_.clear();
}

double TimeBudgetHook::recent_seconds_per_step() const {
  // The median of the last three intervals; of two, the smaller: an interval that held an
  // evaluation or a checkpoint is not taken for the new rate.
  // No copy: this runs on the training thread (erase and push_back keep recent_'s capacity).
  const auto& r = recent_;
  if (r.size() == 1) return r[0];
  if (r.size() == 2) return std::min(r[0], r[1]);
  return std::max(std::min(r[0], r[1]), std::min(std::max(r[0], r[1]), r[2]));
}

void TimeBudgetHook::after_run(SessionRunContext& ctx, const SessionRunValues&) {
  const int64_t step = ctx.session().global_step();
  if (step >= last_step_) {
    ctx.request_stop();
    return;
  }
  ++runs_;
  if (first_time_ < 0) {
    first_time_ = window_time_ = env().clock->steady_seconds();
    first_step_ = window_step_ = step;
    return;
  }
  if (runs_ % options_.every_n_steps != 0) return;
  const double now = env().clock->steady_seconds();
  if (step > window_step_) {
    if (recent_.size() == 3) recent_.erase(recent_.begin());
    recent_.push_back((now - window_time_) / static_cast<double>(step - window_step_));
  }
  window_time_ = now;
  window_step_ = step;
  if (runs_ <= options_.min_steps_measured || recent_.empty()) return;
  const int64_t measured = step - first_step_;
  if (measured <= 0) return;
  // The whole session's rate counts what recurs (evaluations, checkpoints) at its rate; the
  // recent intervals' see a slow-down at once, where the whole session's lags behind it.
  const double per_step =
      std::max((now - first_time_) / static_cast<double>(measured), recent_seconds_per_step());
  const double left = deadline_ - now;
  const double projected =
      static_cast<double>(last_step_ - step) * per_step + options_.reserve_secs;
  if (projected <= left + options_.slack * options_.budget_secs) return;
  // Aim a little short of the end, so that a rate that keeps drifting does not re-plan each check.
  const double usable = left - options_.reserve_secs - options_.slack / 2 * options_.budget_secs;
  int64_t fit = usable > 0 ? static_cast<int64_t>(std::floor(usable / per_step)) : 0;
  fit = fit / options_.round_to * options_.round_to;
  const int64_t new_last = std::max(step + 1, step + fit);
  if (new_last >= last_step_) return;
  const Replan replan{.at_step = step,
                      .previous_last_step = last_step_,
                      .last_step = new_last,
                      .seconds_per_step = per_step,
                      .seconds_left = left};
  env().info(fmt::format(
      "TimeBudgetHook: {:.1f} ms per step, {} steps left would end {:.1f} s past the budget; "
      "re-planned at step {} to end at step {} instead of {}.",
      per_step * 1e3, last_step_ - step, projected - left, step, new_last, last_step_));
  last_step_ = new_last;
  replans_.push_back(replan);
  if (options_.on_replan) options_.on_replan(replan);
}

}  // namespace trainhooks
