// SecondOrStepTimer: "every N seconds or every N steps", the timing that every periodic hook uses.
//
// should_trigger_for_step(step) is true the first time; never twice for the same step; then once
// every_secs have passed since the last trigger, or step >= last triggered step + every_steps.
// update_last_triggered_step(step) records a trigger and returns the elapsed (seconds, steps)
// since the previous one (nullopt the first time).
//
//   th::SecondOrStepTimer timer({.every_steps = 100});
//   if (timer.should_trigger_for_step(step)) { auto elapsed = timer.update_last_triggered_step(step); }
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>

#include "trainhooks/env.h"

namespace trainhooks {

struct TimerOptions {
  std::optional<double> every_secs;
  std::optional<int64_t> every_steps;
};

class SecondOrStepTimer {
 public:
  struct Elapsed {
    double seconds;
    int64_t steps;
  };

  // Exactly one of every_secs and every_steps (InvalidArgument otherwise).
  explicit SecondOrStepTimer(TimerOptions options, std::shared_ptr<Clock> clock = nullptr);

  void reset();
  bool should_trigger_for_step(int64_t step) const;
  std::optional<Elapsed> update_last_triggered_step(int64_t step);
  std::optional<int64_t> last_triggered_step() const { return last_step_; }
  void set_clock(std::shared_ptr<Clock> clock);
  const TimerOptions& options() const { return options_; }

 private:
  TimerOptions options_;
  std::shared_ptr<Clock> clock_;
  std::optional<int64_t> last_step_;
  std::optional<double> last_time_;
};

}  // namespace trainhooks
