// StepCounterHook: logs the training speed (TF's).
//
// Reads the global step (a host integer: nothing is fetched) after each run; before_run is not
// called (calls()), so the hook costs nothing before a step: the step a run started from is the
// one the previous run ended at (or the session was created at). The
// first trigger of its SecondOrStepTimer sets a baseline; every later trigger logs
// `global_step/sec: X` (X printed as C's %g). Warns, at most 5 times, when the global step did not
// advance between two runs. Needs a global step (RuntimeError in begin() otherwise).
//
//   sess_hooks.push_back(std::make_shared<th::StepCounterHook>(
//       th::StepCounterHookOptions{.every_n_steps = 100}));
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "trainhooks/hook.h"
#include "trainhooks/timer.h"

namespace trainhooks {

namespace summary {
class EventWriter;
}

struct StepCounterHookOptions {
  // Exactly one; neither: every 100 steps.
  std::optional<int64_t> every_n_steps;
  std::optional<double> every_n_secs;
  // At most one: where the `global_step/sec` summary goes (a directory's process-wide writer, or
  // a writer). Neither: the log line only.
  std::string output_dir;
  std::shared_ptr<summary::EventWriter> summary_writer;
};

class StepCounterHook : public SessionRunHook {
 public:
  explicit StepCounterHook(StepCounterHookOptions options = {});

  void begin() override;
  void after_create_session(Session& session, Coordinator& coord) override;
  void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) override;
  Calls calls() const override { return {.before_run = false}; }

 private:
  StepCounterHookOptions options_;
  SecondOrStepTimer timer_;
  std::shared_ptr<summary::EventWriter> writer_;
  int64_t step_before_run_ = 0;  // TF's stale global step: the step the next run starts from
  std::optional<int64_t> last_global_step_;
  int warnings_ = 0;
};

}  // namespace trainhooks
