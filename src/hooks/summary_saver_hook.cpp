#include "trainhooks/hooks/summary_saver_hook.h"

#include "trainhooks/errors.h"
#include "trainhooks/graph.h"
#include "trainhooks/summary/event_writer.h"
#include "trainhooks/summary_ops.h"

namespace trainhooks {

namespace {
const SummarySaverHookOptions& validate(const SummarySaverHookOptions& o) {
  if (o.output_dir.empty() == (o.summary_writer == nullptr)) {
    throw InvalidArgument(
        "SummarySaverHook: exactly one of output_dir and summary_writer must be provided.");
  }
  return o;
}
}  // namespace

SummarySaverHook::SummarySaverHook(SummarySaverHookOptions options)
    : options_(validate(options)),
      timer_({.every_secs = options_.save_secs,
              .every_steps = options_.save_steps,
              .owner = "SummarySaverHook",
              .secs_name = "save_secs",
              .steps_name = "save_steps"}) {}

void SummarySaverHook::begin() {
  require_global_step("SummarySaverHook");
  reset_timer(timer_);
  writer_ = options_.summary_writer ? options_.summary_writer
                                    : summary::EventWriter::for_logdir(options_.output_dir);
  nodes_.clear();
  fetches_.clear();
  if (options_.summaries.empty()) {
    nodes_ = summary::merge_all(graph());
  } else {
    for (const auto& ref : options_.summaries) {
      Node n = graph().resolve(ref);
      summary::spec(graph(), n);  // rejects nodes that are not summaries, now rather than later
      nodes_.push_back(n);
    }
  }
  for (Node n : nodes_) fetches_.push_back(n);
  next_step_.reset();
}

SessionRunArgs SummarySaverHook::before_run(SessionRunContext&) {
  request_summary_ = !next_step_ || timer_.should_trigger_for_step(*next_step_);
  if (!request_summary_ || fetches_.empty()) return {};
  return {fetches_};
}

void SummarySaverHook::after_run(SessionRunContext& ctx, const SessionRunValues& values) {
  const int64_t global_step = ctx.session().global_step();
  if (!next_step_) writer_->add_session_log(summary::SessionStatus::kStart, "", "", global_step);
  if (request_summary_) {
    timer_.update_last_triggered_step(global_step);
    if (!nodes_.empty()) {
      summary::Summary s;
      for (Node n : nodes_) summary::add_value(graph(), n, values.results[n], s);
      writer_->add_summary(std::move(s), global_step);
    }
  }
  next_step_ = global_step + 1;
}

void SummarySaverHook::end(Session&) {
  if (writer_) writer_->flush();
}

}  // namespace trainhooks
