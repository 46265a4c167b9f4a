// The stopping part of MonitoredSession: this process's reasons to stop (a hook or a step
// function requested it, an input ran out of data, the Coordinator was told to stop) and the
// decision made from them after every run and session creation, in one place, through the
// session's StopPolicy (stop_policy.h). The public header shows none of this state.
#pragma once

#include <memory>
#include <utility>

#include "trainhooks/coordinator.h"
#include "trainhooks/stop_policy.h"

namespace trainhooks::internal {

class StopDecision {
 public:
  explicit StopDecision(std::shared_ptr<StopPolicy> policy) : policy_(std::move(policy)) {}

  // A hook or a step function asked to stop.
  void request() { requested_ = true; }
  // An input (or a hook) raised OutOfRangeError: the end of training.
  void reach_end_of_input() { end_of_input_ = true; }

  // Combines the reasons (`coordinator_stop`: the Coordinator was told to stop, other than by a
  // preemption that the session recovers from) and hands them to the policy once. A decision
  // to stop stays until reset().
  void decide(bool coordinator_stop) {
    const bool local = requested_ || end_of_input_ || coordinator_stop;
    const bool decided = policy_ ? policy_->decide(local) : local;
    decided_ = decided_ || decided;
  }

  // The policy's (or, alone, this process's) decision to stop, since the last reset().
  bool decided() const { return decided_; }
  // should_stop() when no error is stored: the decision, or, deciding alone, a Coordinator stop
  // requested since (TF's should_stop() sees it between runs).
  bool should_stop(const Coordinator& coord) const {
    return decided_ || (!policy_ && coord.should_stop());
  }
  // A run now is an error. A stop agreed with other processes is final: a run would wait for
  // peers that stopped.
  bool refuses_run() const { return requested_ || end_of_input_ || (policy_ && decided_); }
  // Training was going to stop anyway (recovery ends rather than make a new session).
  bool stopping() const { return requested_ || decided_; }
  // A new session after a recovery starts with no reason to stop.
  void reset() { requested_ = end_of_input_ = decided_ = false; }

 private:
  std::shared_ptr<StopPolicy> policy_;
  bool requested_ = false;
  bool end_of_input_ = false;
  bool decided_ = false;
};

}  // namespace trainhooks::internal
