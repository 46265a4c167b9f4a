#include "trainhooks/hooks/stop_at_step_hook.h"

#include <fmt/format.h>

#include <algorithm>

#include "trainhooks/errors.h"
#include "trainhooks/hook_services.h"

namespace trainhooks {

StopAtStepHook::StopAtStepHook(StopAtStepHookOptions options)
    : num_steps_(options.num_steps), last_step_(options.last_step) {
  if (!num_steps_ && !last_step_)
    throw InvalidArgument("One of num_steps or last_step must be specified.");
  if (num_steps_ && last_step_)
    throw InvalidArgument("Only one of num_steps or last_step can be specified.");
  if (num_steps_ && *num_steps_ < 0)
    throw InvalidArgument(fmt::format("Invalid num_steps: {}", *num_steps_));
}

void StopAtStepHook::begin() {
  require_global_step("StopAtStepHook");
  published_ = false;
}

void StopAtStepHook::after_create_session(Session& session, Coordinator&) {
  if (!last_step_) last_step_ = session.global_step() + *num_steps_;
  // Several StopAtStepHooks: the first to stop is where training stops.
  const std::optional<int64_t> target = services().stop_at_step();
  services().set_stop_at_step(target ? std::min(*target, *last_step_) : *last_step_);
  published_ = true;
}

void StopAtStepHook::set_last_step(int64_t last_step) {
  // The published target follows when this hook's stop is the one it shows.
  if (published_) {
    const std::optional<int64_t> target = services().stop_at_step();
    if (!target || *target == *last_step_) services().set_stop_at_step(last_step);
  }
  last_step_ = last_step;
  num_steps_.reset();
}

void StopAtStepHook::after_run(SessionRunContext& ctx, const SessionRunValues&) {
  if (ctx.session().global_step() >= *last_step_) ctx.request_stop();
}

}  // namespace trainhooks
