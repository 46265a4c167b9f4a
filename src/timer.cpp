#include "trainhooks/timer.h"

#include <fmt/format.h>

#include "trainhooks/errors.h"

namespace trainhooks {

SecondOrStepTimer::SecondOrStepTimer(TimerOptions options, std::shared_ptr<Clock> clock)
    : options_(options), clock_(clock ? std::move(clock) : Env::system().clock) {
  if (options_.every_secs && options_.every_steps) {
    throw InvalidArgument("Can not provide both every_secs and every_steps.");
  }
  if (!options_.every_secs && !options_.every_steps) {
    throw InvalidArgument("Either every_secs or every_steps should be provided.");
  }
  if (options_.every_secs && !(*options_.every_secs >= 0)) {
    throw InvalidArgument(fmt::format("Invalid every_secs: {}", *options_.every_secs));
  }
  if (options_.every_steps && *options_.every_steps < 0) {
    throw InvalidArgument(fmt::format("Invalid every_steps: {}", *options_.every_steps));
  }
}

void SecondOrStepTimer::reset() {
  last_step_.reset();
  last_time_.reset();
}

void SecondOrStepTimer::set_clock(std::shared_ptr<Clock> clock) {
  if (clock) clock_ = std::move(clock);
}

bool SecondOrStepTimer::should_trigger_for_step(int64_t step) const {
  if (!last_step_) return true;
  if (*last_step_ == step) return false;
  if (options_.every_secs && clock_->steady_seconds() >= *last_time_ + *options_.every_secs) return true;
  if (options_.every_steps && step >= *last_step_ + *options_.every_steps) return true;
  return false;
}

std::optional<SecondOrStepTimer::Elapsed> SecondOrStepTimer::update_last_triggered_step(int64_t step) {
  double now = clock_->steady_seconds();
  std::optional<Elapsed> elapsed;
  if (last_time_) elapsed = Elapsed{now - *last_time_, step - *last_step_};
  last_time_ = now;
  last_step_ = step;
  return elapsed;
}

}  // namespace trainhooks
