// PreemptionHook: stops training cleanly on SIGTERM or SIGINT, so that the final checkpoint is
// written and the program returns normally.
//
// Fetches nothing.
//   begin()                 installs a PreemptionHandler (preemption.h): from here on the first
//                           SIGTERM or SIGINT is recorded instead of ending the process
//   after_create_session()  a signal received before or while the session was created (during a
//                           restore) stops training before its first step: the hook cannot
//                           request a stop through a run context here, so it asks the session's
//                           Coordinator, which should_stop() also reads
//   after_run()             a signal received before the end of this run requests a stop: the
//                           run completes, its results are returned, should_stop() becomes true
//   end()                   releases the handler (the previous dispositions come back)
// When it stops training it logs, once per session:
//   Received SIGTERM: stopping after step N and saving a final checkpoint.
// with SIGINT likewise; N is the global step when the graph has one, else the number of runs of
// this session. The final checkpoint is CheckpointSaverHook's save in end(), when the session
// closes. A second signal ends the process at once (PreemptionHandler's two-signal rule).
//
//   th::MonitoredTrainingSession sess(g, {.checkpoint_dir = "runs/exp1",
//                                         .hooks = {std::make_shared<th::PreemptionHook>()}});
//   while (!sess.should_stop()) sess.run(train_op);   // a SIGTERM ends this loop cleanly
//
// The handler is reference-counted: several PreemptionHooks, or a hook and the program's own
// PreemptionHandler, may coexist.
#pragma once

#include <cstdint>
#include <memory>

#include "trainhooks/hook.h"

namespace trainhooks {

class PreemptionHandler;

class PreemptionHook : public SessionRunHook {
 public:
  PreemptionHook();
  ~PreemptionHook() override;

  void begin() override;
  void after_create_session(Session& session, Coordinator& coord) override;
  void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) override;
  Calls calls() const override { return {.before_run = false}; }
  void end(Session& session) override;

  // The signal that made this hook stop training (SIGTERM or SIGINT); 0 if none did.
  int stopped_by_signal() const { return stopped_by_; }

 private:
  // The signal received, if any, after logging it once.
  int check(const Session& session);

  std::unique_ptr<PreemptionHandler> handler_;
  int64_t runs_ = 0;
  int stopped_by_ = 0;
};

}  // namespace trainhooks
