// TimeBudgetHook: keeps a planned run inside its wall-clock budget by re-planning while it trains.
//
// A run planned as N steps, with a learning-rate schedule that ends at step N, on a machine that
// turns out slower than when it was planned (a busier machine), either overruns its budget or is
// cut by a time limit before its schedule ends: a high learning rate, a poor model. This hook
// measures the real time per step as the run goes and, when the planned last step no longer fits,
// moves it to the last step that does, so that the run ends within its budget *and* its schedule
// ends. It only ever moves the end earlier.
//
// It fetches nothing. Every every_n_steps runs (from min_steps_measured on) it reads the clock
// once and projects the end: now + (last_step - step) * seconds_per_step + reserve_secs, where
// seconds_per_step is the larger of this session's wall time per step since its first step (so
// evaluations and checkpoints that recur are counted at their rate, and the first step's warm-up
// is not) and the median of the last three check intervals' (so that a slow-down is seen at once,
// while one interval that held an evaluation is not taken for the new rate). When the
// projection overruns begin() + budget_secs by more than slack * budget_secs, it picks the new
// last step: the current step plus the steps that fit in what is left (aiming slack / 2 short of
// the end, rounded down to a multiple of round_to past the current step, at least one more step),
// logs (INFO)
//   TimeBudgetHook: 31.2 ms per step, 2300 steps left would end 41.0 s past the budget;
//   re-planned at step 1200 to end at step 3100 instead of 3500.
// and calls on_replan on the training thread, before the next run. That is where the program
// moves its StopAtStepHook (set_last_step) and its learning-rate schedule (rescaled(), in
// learning_rate_schedule.h, with LearningRateScheduleHook::set_schedule), and records the new plan
// so that a resumed run rebuilds the same schedule: the hook keeps no state of its own in
// checkpoints. The hook also requests a stop once the global step reaches its last step, so that
// it ends the run at the re-planned step by itself. The budget counts from begin() and covers
// this session, as TimeLimitHook's does (keep one as a backstop: a step that hangs is not
// re-planned away).
//
//   auto budget = std::make_shared<th::TimeBudgetHook>(th::TimeBudgetHookOptions{
//       .budget_secs = 180, .last_step = plan.last_step, .reserve_secs = 5,
//       .on_replan = [&](const th::Replan& r) {
//         stop->set_last_step(r.last_step);
//         lr_hook->set_schedule(th::rescaled(schedule, r.at_step, r.previous_last_step,
//                                            r.last_step));
//         save_plan(r);
//       }});
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "trainhooks/hook.h"

namespace trainhooks {

// One re-planning: at global step at_step the run's end moved from previous_last_step to
// last_step (< previous_last_step), measured at seconds_per_step with seconds_left of the budget.
struct Replan {
  int64_t at_step = 0;
  int64_t previous_last_step = 0;
  int64_t last_step = 0;
  double seconds_per_step = 0;
  double seconds_left = 0;
};

struct TimeBudgetHookOptions {
  double budget_secs = 0;           // wall-clock seconds from begin(); > 0
  int64_t last_step = 0;            // the planned last global step; > 0
  double reserve_secs = 0;          // kept for what follows the last step (final evaluation...)
  int64_t every_n_steps = 100;      // how often the projection is checked; > 0
  int64_t min_steps_measured = 50;  // steps of this session before the first check; > 0
  int64_t round_to = 1;             // the new last step's granularity; > 0
  double slack = 0.02;              // tolerated overrun, as a fraction of the budget; in [0, 1)
  std::function<void(const Replan&)> on_replan;  // may be empty
};

class TimeBudgetHook : public SessionRunHook {
 public:
  // InvalidArgument naming the option that is out of range.
  explicit TimeBudgetHook(TimeBudgetHookOptions options);

  void begin() override;
  void after_create_session(Session& session, Coordinator& coord) override;
  void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) override;
  Calls calls() const override { return {.before_run = false}; }

  // The planned last step, as re-planned so far.
  int64_t last_step() const { return last_step_; }
  // The re-plannings of this hook's sessions, oldest first.
  const std::vector<Replan>& replans() const { return replans_; }

 private:
  TimeBudgetHookOptions options_;
  int64_t last_step_;
  double deadline_ = 0;     // steady seconds
  double first_time_ = -1;  // after this session's first step
  int64_t first_step_ = 0;
  double window_time_ = 0;  // at the last check
  int64_t window_step_ = 0;
  std::vector<double> recent_;  // seconds per step of the last (up to) three check intervals

  double recent_seconds_per_step() const;
  int64_t runs_ = 0;
  std::vector<Replan> replans_;
};

}  // namespace trainhooks
