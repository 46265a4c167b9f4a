#include "trainhooks/hooks/hparams_hook.h"

#include <fmt/format.h>

#include <exception>
#include <utility>

#include "trainhooks/coordinator.h"
#include "trainhooks/errors.h"
#include "trainhooks/graph.h"
#include "trainhooks/preemption.h"
#include "trainhooks/summary/event_writer.h"
#include "trainhooks/summary/summary.h"

namespace trainhooks {

namespace {

HParamsHookOptions checked(HParamsHookOptions options) {
  if (options.output_dir.empty())
    throw InvalidArgument("HParamsHook: output_dir must not be empty");
  if (options.hparams.empty()) {
    throw InvalidArgument("HParamsHook: hparams has neither values nor metrics");
  }
  summary::validate_hparams(options.hparams);
  return options;
}

}  // namespace

HParamsHook::HParamsHook(HParamsHookOptions options) : options_(checked(std::move(options))) {}

HParamsHook::~HParamsHook() {
  // end() was skipped: the session ended with an error. A destructor raises nothing.
  if (!started_ || ended_ || !writer_) return;
  try {
    write_end(summary::HParamsStatus::kFailure, last_step_);
  } catch (const std::exception& e) {
    env().warning(fmt::format("HParamsHook: cannot write the session's end: {}", e.what()));
  }
}

void HParamsHook::begin() {
  // Reused by another session after one that ended with an error: that one failed.
  if (started_ && !ended_ && writer_) write_end(summary::HParamsStatus::kFailure, last_step_);
  try {
    writer_ = summary::EventWriter::for_logdir(options_.output_dir);
  } catch (const std::exception& e) {
    throw FileError(fmt::format("HParamsHook: cannot open the event file in '{}': {}",
                                options_.output_dir, e.what()));
  }
  started_ = ended_ = false;
}

void HParamsHook::after_create_session(Session& session, Coordinator& coord) {
  coord_ = &coord;
  last_step_ = session.global_step();
  if (started_) return;  // a recovered session: the run goes on
  started_ = true;
  const double now = env().clock->wall_seconds();
  summary::Summary s;
  s.add_hparams_experiment(options_.hparams, now);
  s.add_hparams_session_start(options_.hparams, now);
  // Step 0, as TensorBoard's writer: a resumed run's SessionLog START does not purge it.
  writer_->add_summary(std::move(s), 0);
  writer_->flush();
}

void HParamsHook::end(Session& session) {
  if (!started_ || ended_) return;
  ended_ = true;
  if (const int sig = PreemptionHandler::received_signal()) {
    env().info(fmt::format(
        "HParamsHook: stopped by {}: no session end written, so that the run, continued, can "
        "still end with its status.",
        signal_name(sig)));
    return;
  }
  // Another thread's error stopped training: close() raises it after the hooks' end().
  const bool failed = coord_ && coord_->has_error();
  write_end(failed ? summary::HParamsStatus::kFailure : summary::HParamsStatus::kSuccess,
            session.global_step());
}

void HParamsHook::write_end(summary::HParamsStatus status, int64_t step) {
  ended_ = true;
  summary::Summary s;
  s.add_hparams_session_end(status, env().clock->wall_seconds());
  writer_->add_summary(std::move(s), step);
  writer_->flush();
}

}  // namespace trainhooks
