// StopAtStepHook: requests a stop at a global step (TF's).
//
// Exactly one of num_steps (relative to the global step when the first session is created) and
// last_step (absolute). After each run it reads the global step (a host integer) and requests a
// stop once it is >= last_step; the run that reaches it completes. As in TF, a session restored
// at or past last_step still runs one step before stopping. Needs a global step.
//
// Other hooks read the target through services().stop_at_step() (hook_services.h; a progress
// bar's 100%).
// set_last_step() moves it while training.
//
//   hooks.push_back(std::make_shared<th::StopAtStepHook>(th::StopAtStepHookOptions{.last_step =
//   1000}));
#pragma once

#include <cstdint>
#include <optional>

#include "trainhooks/hook.h"

namespace trainhooks {

class Graph;

struct StopAtStepHookOptions {
  std::optional<int64_t> num_steps;
  std::optional<int64_t> last_step;
};

class StopAtStepHook : public SessionRunHook {
 public:
  explicit StopAtStepHook(StopAtStepHookOptions options);

  void begin() override;
  void after_create_session(Session& session, Coordinator& coord) override;
  void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) override;
  Calls calls() const override { return {.before_run = false}; }

  // The step at which training stops (known after the first session was created).
  std::optional<int64_t> last_step() const { return last_step_; }
  // Moves the stop to `last_step` while training (a re-planned run, TimeBudgetHook); other hooks
  // see it through services().stop_at_step() from their next run on.
  void set_last_step(int64_t last_step);

 private:
  std::optional<int64_t> num_steps_;
  std::optional<int64_t> last_step_;
  bool published_ = false;  // last_step_ is the session's target (after_create_session ran)
};

}  // namespace trainhooks
