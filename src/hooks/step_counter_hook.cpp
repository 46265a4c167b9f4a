#include "trainhooks/hooks/step_counter_hook.h"

#include <fmt/format.h>

#include "trainhooks/errors.h"
#include "trainhooks/summary/event_writer.h"

namespace trainhooks {

namespace {
TimerOptions step_counter_timer(const StepCounterHookOptions& o) {
  if (!o.output_dir.empty() && o.summary_writer) {
    throw InvalidArgument(
        "StepCounterHook: at most one of output_dir and summary_writer may be provided.");
  }
  return {
      .every_secs = o.every_n_secs,
      // Neither: TF's default of every 100 steps.
      .every_steps = o.every_n_secs ? o.every_n_steps : o.every_n_steps.value_or(100),
      .owner = "StepCounterHook",
      .secs_name = "every_n_secs",
      .steps_name = "every_n_steps",
      .exactly_one_message = "exactly one of every_n_steps and every_n_secs should be provided."};
}
}  // namespace

StepCounterHook::StepCounterHook(StepCounterHookOptions options)
    : options_(std::move(options)), timer_(step_counter_timer(options_)) {}

void StepCounterHook::begin() {
  require_global_step("StepCounterHook");
  reset_timer(timer_);
  last_global_step_.reset();
  writer_ = options_.summary_writer;
  if (!writer_ && !options_.output_dir.empty())
    writer_ = summary::EventWriter::for_logdir(options_.output_dir);
}

void StepCounterHook::after_create_session(Session& session, Coordinator&) {
  step_before_run_ = session.global_step();
}

void StepCounterHook::after_run(SessionRunContext& ctx, const SessionRunValues&) {
  const int64_t global_step = ctx.session().global_step();
  if (timer_.should_trigger_for_step(global_step)) {
    auto elapsed = timer_.update_last_triggered_step(global_step);
    if (elapsed && elapsed->seconds > 0) {
      double steps_per_sec = static_cast<double>(elapsed->steps) / elapsed->seconds;
      if (writer_)
        writer_->add_scalar("global_step/sec", static_cast<float>(steps_per_sec), global_step);
      env().info(fmt::format("global_step/sec: {:g}", steps_per_sec));
    }
  }
  // As TF: the step this run started from against the one the previous run started from.
  const int64_t stale_global_step = step_before_run_;
  step_before_run_ = global_step;
  if (last_global_step_ && stale_global_step == *last_global_step_ && warnings_ < 5) {
    ++warnings_;
    env().warning(fmt::format(
        "It seems that global step has not been increased. Current value (could be stable): {} vs "
        "previous value: {}. You could increase the global step by running a train op made by "
        "Graph::minimize.",
        stale_global_step, *last_global_step_));
  }
  last_global_step_ = stale_global_step;
}

}  // namespace trainhooks
