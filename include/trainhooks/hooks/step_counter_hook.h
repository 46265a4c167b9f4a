// StepCounterHook: logs the training speed (TF's).
//
// Reads the global step (a host integer: nothing is fetched) in before_run and after_run. The
// first trigger of its SecondOrStepTimer sets a baseline; every later trigger logs
// `global_step/sec: X` (X printed as C's %g). Warns, at most 5 times, when the global step did not
// advance between two runs. Needs a global step (RuntimeError in begin() otherwise).
//
//   sess_hooks.push_back(std::make_shared<th::StepCounterHook>(
//       th::StepCounterHookOptions{.every_n_steps = 100}));
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "trainhooks/hook.h"
#include "trainhooks/timer.h"

namespace trainhooks {

struct StepCounterHookOptions {
  // Exactly one; neither: every 100 steps.
  std::optional<int64_t> every_n_steps;
  std::optional<double> every_n_secs;
  // Summary output (global_step/sec); not available in this version: non-empty is an error.
  std::string output_dir;
};

class StepCounterHook : public SessionRunHook {
 public:
  explicit StepCounterHook(StepCounterHookOptions options = {});

  void begin() override;
  SessionRunArgs before_run(SessionRunContext& run_context) override;
  void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) override;

 private:
  SecondOrStepTimer timer_;
  int64_t stale_global_step_ = 0;
  std::optional<int64_t> last_global_step_;
  int warnings_ = 0;
};

}  // namespace trainhooks
