// SecondOrStepTimer: "every N seconds or every N steps", the timing that every periodic hook uses.
//
// should_trigger_for_step(step) is true the first time; never twice for the same step; then once
// every_secs have passed since the last trigger, or step >= last triggered step + every_steps.
// update_last_triggered_step(step) records a trigger and returns the elapsed (seconds, steps)
// since the previous one (nullopt the first time).
//
// The timer owns the rule "exactly one of them, and it is positive" and its error texts, for every
// periodic hook: a hook passes its own argument names, so its user reads TF's texts in the hook's
// terms ("Can not provide both save_secs and save_steps.").
//
//   th::SecondOrStepTimer timer({.every_steps = 100});
//   if (timer.should_trigger_for_step(step)) {
//     auto elapsed = timer.update_last_triggered_step(step);
//   }
//
//   // In a hook: validated in its constructor, bound to its Env clock in begin() (hook.h).
//   timer_({.every_secs = o.save_secs, .every_steps = o.save_steps,
//           .owner = "CheckpointSaverHook", .secs_name = "save_secs", .steps_name = "save_steps"})
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "trainhooks/env.h"

namespace trainhooks {

struct TimerOptions {
  std::optional<double> every_secs;
  std::optional<int64_t> every_steps;
  // How errors name things: the component that uses the timer and its arguments for every_secs
  // and every_steps.
  std::string owner = "SecondOrStepTimer";
  std::string secs_name = "every_secs";
  std::string steps_name = "every_steps";
  // The text for "not exactly one of them" where TF words it for the owner (StepCounterHook,
  // LoggingTensorHook); empty: TF's SecondOrStepTimer texts with the names above.
  std::string exactly_one_message;
};

class SecondOrStepTimer {
 public:
  struct Elapsed {
    double seconds;
    int64_t steps;
  };

  // Exactly one of every_secs and every_steps, and it must be positive. InvalidArgument otherwise:
  //   "Can not provide both <secs_name> and <steps_name>."           (or exactly_one_message)
  //   "Either <secs_name> or <steps_name> should be provided."        (or exactly_one_message)
  //   "<owner>: <steps_name> must be positive, got 0"
  explicit SecondOrStepTimer(TimerOptions options, std::shared_ptr<Clock> clock = nullptr);

  void reset();
  bool should_trigger_for_step(int64_t step) const {
    // A step-based timer is checked inline: hooks call this after every run.
    if (last_step_ && !options_.every_secs)
      return step != *last_step_ && step >= *last_step_ + options_.every_steps.value_or(0);
    return should_trigger_checking_clock(step);
  }
  std::optional<Elapsed> update_last_triggered_step(int64_t step);
  std::optional<int64_t> last_triggered_step() const { return last_step_; }
  void set_clock(std::shared_ptr<Clock> clock);
  const TimerOptions& options() const { return options_; }

 private:
  bool should_trigger_checking_clock(int64_t step) const;
  TimerOptions options_;
  std::shared_ptr<Clock> clock_;
  std::optional<int64_t> last_step_;
  std::optional<double> last_time_;
};

}  // namespace trainhooks
