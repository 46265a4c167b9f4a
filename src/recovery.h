// The recovery part of MonitoredSession (TF's _RecoverableSession): which errors a new session
// is made for (AbortedError, UnavailableError, or an error whose root cause in the Coordinator is
// one), the bound on consecutive attempts, the backoff between them and the log lines. Making
// the new session stays with the session, which owns it.
#pragma once

#include <exception>
#include <string>

#include "trainhooks/coordinator.h"
#include "trainhooks/env.h"
#include "trainhooks/recovery_options.h"

namespace trainhooks::internal {

class Recovery {
 public:
  // InvalidArgument naming the option for a negative max_attempts or backoff_secs. `env`
  // outlives the recovery.
  Recovery(RecoveryOptions options, const Env& env);

  bool enabled() const { return options_.enabled; }
  // AbortedError or UnavailableError.
  static bool is_preemption(const std::exception_ptr& error);

  // Whether to make a new session for `error`, which is first replaced by its root cause when
  // the Coordinator holds a preemption that caused it. `allowed`: the session may recover now
  // (not inside a step function, not closed); `stopping`: training was going to stop anyway.
  // Logs the attempt and backs off (the second and later attempts); false: the caller raises
  // `error`.
  bool should_recover(std::exception_ptr& error, const Coordinator& coord, bool allowed,
                      bool stopping);
  // Whether the Coordinator holds a preemption that is recovered from.
  bool recovers_from(const Coordinator& coord) const;
  // A run succeeded: the consecutive attempts are counted from zero again.
  void succeeded() { attempts_ = 0; }

 private:
  // Why recovery must end now (a signal, a stop requested); "" to go on.
  std::string reason_not_to_recover(const Coordinator& coord, bool stopping) const;
  // Waits `seconds` through the Env's sleeper, in slices, so that a signal ends the wait early.
  void backoff(double seconds) const;

  RecoveryOptions options_;
  const Env& env_;
  int attempts_ = 0;  // consecutive, reset by a successful run
};

}  // namespace trainhooks::internal
