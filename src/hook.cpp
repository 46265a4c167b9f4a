#include "trainhooks/hook.h"

#include "trainhooks/errors.h"

namespace trainhooks {

void SessionRunHook::bind(Graph& graph, const Env& session_env) {
  graph_ = &graph;
  env_ = own_env_.or_else(session_env).or_else(Env::system());
}

Graph& SessionRunHook::graph() const {
  if (!graph_) throw FailedPreconditionError("This hook is not attached to a session: graph() is available from begin() on");
  return *graph_;
}

}  // namespace trainhooks
