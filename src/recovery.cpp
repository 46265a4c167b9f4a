#include "recovery.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "trainhooks/errors.h"
#include "trainhooks/preemption.h"
#include "util/error_message.h"

namespace trainhooks::internal {

namespace {

constexpr double kMaxBackoffSecs = 60;
// A signal is seen within this long during a backoff (the Env's sleeper is not interruptible).
constexpr double kBackoffSliceSecs = 1;

}  // namespace

Recovery::Recovery(RecoveryOptions options, const Env& env) : options_(options), env_(env) {
  if (options_.max_attempts < 0) {
    throw InvalidArgument(
        fmt::format("MonitoredSession: invalid recovery.max_attempts {}", options_.max_attempts));
  }
  if (!(options_.backoff_secs >= 0)) {
    throw InvalidArgument(
        fmt::format("MonitoredSession: invalid recovery.backoff_secs {}", options_.backoff_secs));
  }
}

bool Recovery::is_preemption(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const AbortedError&) {
    return true;
  } catch (const UnavailableError&) {
    return true;
  } catch (...) {
    return false;
  }
}

bool Recovery::should_recover(std::exception_ptr& error, const Coordinator& coord, bool allowed,
                              bool stopping) {
  // TF's _CoordinatedSession: an error that another thread's preemption caused (a cancelled
  // queue, a closed peer) is raised as that preemption, its root cause.
  if (!is_preemption(error)) {
    std::exception_ptr root = coord.requested_exception();
    if (root && is_preemption(root)) error = root;
  }
  if (!options_.enabled || !allowed || !is_preemption(error)) return false;
  if (std::string reason = reason_not_to_recover(coord, stopping); !reason.empty()) {
    env_.error(
        fmt::format("Not recovering the session: {}. Error: {}", reason, error_message(error)));
    return false;
  }
  if (attempts_ >= options_.max_attempts) {
    env_.error(
        fmt::format("Giving up after {} consecutive attempts to recover the session. Error: {}",
                    attempts_, error_message(error)));
    return false;
  }
  ++attempts_;
  env_.info(fmt::format(
      "An error was raised. This may be due to a preemption in a connected worker or parameter "
      "server. The current session will be closed and a new session will be created. Error: {}",
      error_message(error)));
  if (attempts_ > 1 && options_.backoff_secs > 0) {
    backoff(std::min(kMaxBackoffSecs, options_.backoff_secs * std::ldexp(1.0, attempts_ - 2)));
    if (std::string reason = reason_not_to_recover(coord, stopping); !reason.empty()) {
      env_.error(
          fmt::format("Not recovering the session: {}. Error: {}", reason, error_message(error)));
      return false;
    }
  }
  return true;
}

bool Recovery::recovers_from(const Coordinator& coord) const {
  if (!options_.enabled || !coord.has_error()) return false;
  const std::exception_ptr error = coord.requested_exception();
  return error && is_preemption(error);
}

std::string Recovery::reason_not_to_recover(const Coordinator& coord, bool stopping) const {
  // The process was asked to end: a new session would only be closed again, and a retry loop
  // must not keep a preempted job alive.
  if (const int sig = PreemptionHandler::received_signal()) {
    return fmt::format("received {}", signal_name(sig));
  }
  // Training was going to stop anyway (a hook, a step function or a thread asked for it).
  if (stopping || (coord.should_stop() && !coord.requested_exception())) {
    return "a stop was requested";
  }
  return "";
}

void Recovery::backoff(double seconds) const {
  while (seconds > 0 && PreemptionHandler::received_signal() == 0) {
    const double slice = std::min(seconds, kBackoffSliceSecs);
    env_.sleeper->sleep_for(slice);
    seconds -= slice;
  }
}

}  // namespace trainhooks::internal
