#include "trainhooks/hooks/global_step_waiter_hook.h"

#include <fmt/format.h>

namespace trainhooks {

GlobalStepWaiterHook::GlobalStepWaiterHook(int64_t wait_until_step)
    : wait_until_step_(wait_until_step) {}

void GlobalStepWaiterHook::begin() {
  worker_is_started_ = false;
  require_global_step("GlobalStepWaiterHook");
}

SessionRunArgs GlobalStepWaiterHook::before_run(SessionRunContext& ctx) {
  if (worker_is_started_) return {};
  if (wait_until_step_ <= 0) {
    worker_is_started_ = true;
    return {};
  }
  env().info(fmt::format("Waiting for global step {} before starting training.", wait_until_step_));
  int64_t last_logged_step = 0;
  for (;;) {
    int64_t current = ctx.session().global_step();
    if (current >= wait_until_step_) {
      worker_is_started_ = true;
      return {};
    }
    if (current - last_logged_step > 1000) {
      env().info(
          fmt::format("Waiting for global step {} before starting training. Current step is {}.",
                      wait_until_step_, current));
      last_logged_step = current;
    }
    env().sleeper->sleep_for(0.5);
  }
}

}  // namespace trainhooks
