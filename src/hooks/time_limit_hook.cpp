#include "trainhooks/hooks/time_limit_hook.h"

#include <fmt/format.h>

#include <cmath>

#include "trainhooks/errors.h"
#include "trainhooks/graph.h"

namespace trainhooks {

TimeLimitHook::TimeLimitHook(std::chrono::duration<double> duration) : duration_(duration.count()) {
  if (!(std::isfinite(duration_) && duration_ > 0)) {
    throw InvalidArgument(fmt::format(
        "TimeLimitHook: duration must be a positive, finite number of seconds, got {}", duration_));
  }
}

void TimeLimitHook::begin() {
  start_ = env().clock->steady_seconds();
  deadline_ = start_ + duration_;
  stopped_ = false;
}

void TimeLimitHook::after_run(SessionRunContext& ctx, const SessionRunValues&) {
  // One clock read per run: the only cost of an idle step.
  const double now = env().clock->steady_seconds();
  if (now < deadline_) return;
  ctx.request_stop();
  if (stopped_) return;
  stopped_ = true;
  const std::string where = graph().has_global_step()
                                ? fmt::format("global step {}", graph().global_step_value())
                                : std::string("this step");
  env().info(
      fmt::format("TimeLimitHook: time limit of {:g} s reached after {:.1f} s; stopping at {}.",
                  duration_, now - start_, where));
}

}  // namespace trainhooks
