// TimeLimitHook: stops training once a wall-clock budget is spent (Lightning's max_time, Keras's
// TimeStopping).
//
// Fetches nothing. begin() notes the Env clock's steady time; after each run it reads the clock
// again and, once `duration` has passed, requests a stop and logs (INFO) once
//   TimeLimitHook: time limit of 3600 s reached after 3600.2 s; stopping at global step 1234.
// The run in progress completes: a step is never cut short. The final checkpoint is the
// CheckpointSaverHook's, written when the session closes, so a stopped run resumes where it
// stopped. The budget counts from begin(), session creation (a restore) included, and covers
// this session only: a resumed run gets a new budget.
//
//   hooks.push_back(std::make_shared<th::TimeLimitHook>(std::chrono::minutes(30)));
#pragma once

#include <chrono>

#include "trainhooks/hook.h"

namespace trainhooks {

class TimeLimitHook : public SessionRunHook {
 public:
  // InvalidArgument naming `duration` unless it is positive and finite.
  explicit TimeLimitHook(std::chrono::duration<double> duration);

  void begin() override;
  void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) override;
  Calls calls() const override { return {.before_run = false}; }

  double duration_seconds() const { return duration_; }
  // Whether this hook stopped the session it runs in.
  bool stopped() const { return stopped_; }

 private:
  double duration_;
  double deadline_ = 0;  // steady seconds
  double start_ = 0;
  bool stopped_ = false;
};

}  // namespace trainhooks
