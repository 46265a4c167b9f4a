#include "trainhooks/hooks/preemption_hook.h"

#include <fmt/format.h>

#include "trainhooks/coordinator.h"
#include "trainhooks/graph.h"
#include "trainhooks/preemption.h"

namespace trainhooks {

PreemptionHook::PreemptionHook() = default;

PreemptionHook::~PreemptionHook() = default;

void PreemptionHook::begin() {
  if (!handler_) handler_ = std::make_unique<PreemptionHandler>();
  runs_ = 0;
  stopped_by_ = 0;
}

void PreemptionHook::after_create_session(Session& session, Coordinator& coord) {
  if (check(session)) coord.request_stop();
}

void PreemptionHook::after_run(SessionRunContext& ctx, const SessionRunValues&) {
  ++runs_;
  if (check(ctx.session())) ctx.request_stop();
}

void PreemptionHook::end(Session&) { handler_.reset(); }

int PreemptionHook::check(const Session& session) {
  const int sig = PreemptionHandler::received_signal();
  if (sig == 0 || stopped_by_ != 0) return sig;
  stopped_by_ = sig;
  const int64_t step = graph().has_global_step() ? session.global_step() : runs_;
  env().info(fmt::format("Received {}: stopping after step {} and saving a final checkpoint.",
                         signal_name(sig), step));
  return sig;
}

}  // namespace trainhooks
