// HParamsHook: writes a run's hyperparameters for TensorBoard's HParams dashboard
// (summary/hparams.h), as TensorBoard's own hp.hparams() does for a Keras run.
//
// Fetches nothing and does nothing per run:
//   begin()                 opens the event file of output_dir (summary::EventWriter::for_logdir)
//   after_create_session()  the first time only (not after a recovery): writes
//                           "_hparams_/experiment" (the names and types of the values, the
//                           metrics) and "_hparams_/session_start_info" (the values, group_name,
//                           model_uri, the start time) at step 0, and flushes
//   end()                   a clean close: writes "_hparams_/session_end_info" at the global step
//                           with status success (failure when another thread's error in the
//                           Coordinator stopped training), and flushes; after SIGTERM or SIGINT
//                           (PreemptionHandler::received_signal) none, logged: a stopped run goes
//                           on when run again, and TensorBoard keeps the first end status it reads
//   destructor              a session that started and never reached end() (it ended with an
//                           error, end() being skipped while the error unwinds): writes the end
//                           with status failure, and flushes
//
//   auto hook = std::make_shared<th::HParamsHook>(th::HParamsHookOptions{
//       .hparams = {.values = {{"lr", 0.01}, {"optimizer", "adam"}},
//                   .metrics = {{.tag = "accuracy", .group = "eval"}}},
//       .output_dir = "runs/exp1"});
//
// MonitoredTrainingSession adds one on the chief when its options declare hparams. Times are read
// from the hook's Env clock (wall time).
#pragma once

#include <memory>
#include <string>

#include "trainhooks/hook.h"
#include "trainhooks/summary/hparams.h"

namespace trainhooks {

namespace summary {
class EventWriter;
}

struct HParamsHookOptions {
  // The values and the metrics; not both empty (summary::validate_hparams checks the rest).
  summary::HParams hparams;
  // The run's directory: its event file gets the three summaries. Required.
  std::string output_dir;
};

class HParamsHook : public SessionRunHook {
 public:
  // InvalidArgument for an empty output_dir, empty hparams, or what validate_hparams() refuses.
  explicit HParamsHook(HParamsHookOptions options);
  ~HParamsHook() override;

  void begin() override;
  void after_create_session(Session& session, Coordinator& coord) override;
  void end(Session& session) override;

  const summary::HParams& hparams() const { return options_.hparams; }

 private:
  void write_end(summary::HParamsStatus status, int64_t step);

  HParamsHookOptions options_;
  std::shared_ptr<summary::EventWriter> writer_;
  bool started_ = false;
  bool ended_ = false;
  int64_t last_step_ = 0;         // the global step at the start, for a failure's end
  Coordinator* coord_ = nullptr;  // the current session's
};

}  // namespace trainhooks
