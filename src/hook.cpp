#include "trainhooks/hook.h"

#include <fmt/format.h>

#include "trainhooks/errors.h"
#include "trainhooks/graph.h"
#include "trainhooks/timer.h"

namespace trainhooks {

void SessionRunHook::bind(Graph& graph, const Env& session_env, HookServices& services) {
  graph_ = &graph;
  services_ = &services;
  env_ = own_env_.or_else(session_env).or_else(Env::system());
}

Graph& SessionRunHook::graph() const {
  if (!graph_)
    throw FailedPreconditionError(
        "This hook is not attached to a session: graph() is available from begin() on");
  return *graph_;
}

HookServices& SessionRunHook::services() const {
  if (!services_)
    throw FailedPreconditionError(
        "This hook is not attached to a session: services() are available from begin() on");
  return *services_;
}

void SessionRunHook::require_global_step(std::string_view hook_name) const {
  if (!graph().has_global_step()) {
    throw RuntimeError(fmt::format("Global step should be created to use {}.", hook_name));
  }
}

void SessionRunHook::reset_timer(SecondOrStepTimer& timer) const {
  timer.set_clock(env().clock);
  timer.reset();
}

}  // namespace trainhooks
