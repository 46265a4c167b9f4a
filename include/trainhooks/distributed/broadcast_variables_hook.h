// BroadcastVariablesHook (Horovod's BroadcastGlobalVariablesHook): when a session is created,
// every rank receives the root's training state, so that all ranks start (and, after a restore or
// a recovery, continue) from the same model.
//
// In after_create_session, on every rank, in this order: every variable of the graph (in place,
// one broadcast each), then in one message the global step, every train op's optimizer state and
// learning rates, every input's position and the bytes of every StateProvider (hook state) that
// the receiving rank has too. The root's session was restored before its hooks'
// after_create_session run, so the workers wait here for the chief's restore, bounded by
// timeout_secs.
//
// Optimizer state travels as in a checkpoint (LibTorch's built-in optimizers as tensors, others as
// their Optimizer::save archive). MonitoredTrainingSession puts one first when a process group is
// given; add one yourself to a MonitoredSession:
//
//   hooks.insert(hooks.begin(), std::make_shared<th::distributed::BroadcastVariablesHook>(pg));
#pragma once

#include <memory>

#include "trainhooks/hook.h"

namespace trainhooks::distributed {

class ProcessGroup;

struct BroadcastVariablesHookOptions {
  int root = 0;
  // The training state beyond the variables (global step, optimizers, inputs, hook state).
  bool training_state = true;
  // Each wait for the root; <= 0: the process group's timeout.
  double timeout_secs = 0;
};

class BroadcastVariablesHook : public SessionRunHook {
 public:
  // InvalidArgument when `group` is null or root is not one of its ranks.
  explicit BroadcastVariablesHook(std::shared_ptr<ProcessGroup> group,
                                  BroadcastVariablesHookOptions options = {});

  void after_create_session(Session& session, Coordinator& coord) override;
  Calls calls() const override { return {.before_run = false, .after_run = false}; }

  // How many times the state was broadcast (sessions created).
  int broadcasts() const { return broadcasts_; }

 private:
  std::shared_ptr<ProcessGroup> group_;
  BroadcastVariablesHookOptions options_;
  int broadcasts_ = 0;
};

}  // namespace trainhooks::distributed
