#include "trainhooks/timer.h"

#include <fmt/format.h>

#include "trainhooks/errors.h"

namespace trainhooks {

SecondOrStepTimer::SecondOrStepTimer(TimerOptions options, std::shared_ptr<Clock> clock)
    : options_(std::move(options)), clock_(clock ? std::move(clock) : Env::system().clock) {
  const auto& o = options_;
  if (o.every_secs.has_value() == o.every_steps.has_value()) {
    if (!o.exactly_one_message.empty()) throw InvalidArgument(o.exactly_one_message);
    if (o.every_secs) {
      throw InvalidArgument(
          fmt::format("Can not provide both {} and {}.", o.secs_name, o.steps_name));
    }
    throw InvalidArgument(
        fmt::format("Either {} or {} should be provided.", o.secs_name, o.steps_name));
  }
  if (o.every_secs) check_positive(o.owner, o.secs_name, *o.every_secs);
  if (o.every_steps) check_positive(o.owner, o.steps_name, *o.every_steps);
}

void SecondOrStepTimer::reset() {
  last_step_.reset();
  last_time_.reset();
}

void SecondOrStepTimer::set_clock(std::shared_ptr<Clock> clock) {
  if (clock) clock_ = std::move(clock);
}

bool SecondOrStepTimer::should_trigger_checking_clock(int64_t step) const {
  if (!last_step_) return true;
  if (*last_step_ == step) return false;
  if (options_.every_secs && clock_->steady_seconds() >= *last_time_ + *options_.every_secs)
    return true;
  if (options_.every_steps && step >= *last_step_ + *options_.every_steps) return true;
  return false;
}

std::optional<SecondOrStepTimer::Elapsed> SecondOrStepTimer::update_last_triggered_step(
    int64_t step) {
  double now = clock_->steady_seconds();
  std::optional<Elapsed> elapsed;
  if (last_time_) elapsed = Elapsed{now - *last_time_, step - *last_step_};
  last_time_ = now;
  last_step_ = step;
  return elapsed;
}

}  // namespace trainhooks
