// ModelAverageHook (local SGD): every every_n_steps global steps, after the run, each trainable
// variable becomes its mean over the ranks. Between averages each rank trains on its own (no
// gradient averaging in the train op), which needs fewer collectives than synchronous training.
//
// All ranks trigger at the same global steps (they start from the same step through the
// BroadcastVariablesHook and take one step per run). The chief's checkpoints hold its own
// variables: to make the final checkpoint the average, choose every_n_steps dividing the last step.
//
//   hooks.push_back(std::make_shared<th::distributed::ModelAverageHook>(pg, 10));
#pragma once

#include <cstdint>
#include <memory>

#include "trainhooks/hook.h"

namespace trainhooks::distributed {

class ProcessGroup;

class ModelAverageHook : public SessionRunHook {
 public:
  // InvalidArgument naming every_n_steps unless it is positive, or when `group` is null.
  ModelAverageHook(std::shared_ptr<ProcessGroup> group, int64_t every_n_steps);

  void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) override;
  Calls calls() const override { return {.before_run = false}; }

  // The global step of the last average (-1: none yet).
  int64_t last_averaged_step() const { return last_step_; }

 private:
  std::shared_ptr<ProcessGroup> group_;
  int64_t every_n_steps_;
  int64_t last_step_ = -1;
};

}  // namespace trainhooks::distributed
