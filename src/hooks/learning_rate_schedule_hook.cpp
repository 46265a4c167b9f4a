#include "trainhooks/hooks/learning_rate_schedule_hook.h"

#include <fmt/format.h>
#include <torch/optim/optimizer.h>

#include <cmath>
#include <utility>

#include "trainhooks/errors.h"
#include "trainhooks/hook_services.h"
#include "trainhooks/summary/event_writer.h"

namespace trainhooks {

namespace {
TimerOptions learning_rate_timer(const LearningRateScheduleHookOptions& o) {
  if (!o.output_dir.empty() && o.summary_writer) {
    throw InvalidArgument(
        "LearningRateScheduleHook: at most one of output_dir and summary_writer may be provided.");
  }
  return {.every_secs = o.every_n_secs,
          // Neither: SummarySaverHook's default of every 100 steps.
          .every_steps = o.every_n_secs ? o.every_n_steps : o.every_n_steps.value_or(100),
          .owner = "LearningRateScheduleHook",
          .secs_name = "every_n_secs",
          .steps_name = "every_n_steps"};
}
}  // namespace

LearningRateScheduleHook::LearningRateScheduleHook(Node train_op, LearningRateSchedule schedule,
                                                   LearningRateScheduleHookOptions options)
    : train_op_(train_op),
      schedule_(std::move(schedule)),
      options_(std::move(options)),
      timer_(learning_rate_timer(options_)) {
  if (!train_op_.valid()) throw InvalidArgument("LearningRateScheduleHook: train_op is not a node");
}

void LearningRateScheduleHook::begin() {
  require_global_step("LearningRateScheduleHook");
  if (graph().kind(train_op_) != NodeKind::kTrainOp) {
    throw InvalidArgument(fmt::format("LearningRateScheduleHook: train_op '{}' is not a train op",
                                      graph().name(train_op_)));
  }
  reset_timer(timer_);
  writer_ = options_.summary_writer;
  if (!writer_ && !options_.output_dir.empty())
    writer_ = summary::EventWriter::for_logdir(options_.output_dir);
  optimizer_ = nullptr;
  pending_.reset();
  held_.reset();
}

void LearningRateScheduleHook::after_create_session(Session&, Coordinator&) {
  // A chief's fresh start makes a new optimizer: look it up for every session.
  optimizer_ = &graph().optimizer(train_op_);
  // A value held from the previous session's first run: its run was done.
  if (held_) write(*std::exchange(held_, std::nullopt));
  pending_.reset();
  first_run_ = true;
  const int64_t step = graph().global_step_value();
  const double lr = apply(step);
  env().info(fmt::format("Learning rate of {}: {}; {:g} at step {}", graph().name(train_op_),
                         schedule_.describe(), lr, step));
}

SessionRunArgs LearningRateScheduleHook::before_run(SessionRunContext&) {
  // The session's first run is done, and with it SummarySaverHook's SessionLog START.
  if (held_) write(*std::exchange(held_, std::nullopt));
  const int64_t step = graph().global_step_value();
  const double lr = apply(step);
  // Tagged with the step this run ends on, as SummarySaverHook writes what a run computed (TF's
  // stale global step + 1): the rate lines up with the loss of the same run in TensorBoard.
  pending_.reset();
  if (writer_ && timer_.should_trigger_for_step(step + 1)) {
    timer_.update_last_triggered_step(step + 1);
    pending_ = Point{step + 1, static_cast<float>(lr)};
  }
  return {};
}

void LearningRateScheduleHook::after_run(SessionRunContext&, const SessionRunValues&) {
  // SummarySaverHook writes SessionLog START in the first run's after_run, which may come after
  // this hook's: the first run's value waits for the next run.
  const bool first = std::exchange(first_run_, false);
  if (!pending_) return;
  if (first) {
    held_ = pending_;
  } else {
    write(*pending_);
  }
  pending_.reset();
}

void LearningRateScheduleHook::end(Session&) {
  if (held_) write(*std::exchange(held_, std::nullopt));
}

void LearningRateScheduleHook::write(const Point& point) {
  writer_->add_scalar("learning_rate", point.value, point.step);
}

double LearningRateScheduleHook::apply(int64_t global_step) {
  double lr = schedule_(global_step);
  // A ReduceLROnPlateauHook of this train op sets the scale (1 without one).
  lr *= services().learning_rate_scale(train_op_);
  if (!(std::isfinite(lr) && lr >= 0)) {
    throw InvalidArgument(fmt::format(
        "LearningRateScheduleHook: the schedule {} gave the learning rate {} for step {}",
        schedule_.describe(), lr, global_step));
  }
  for (auto& group : optimizer_->param_groups()) group.options().set_lr(lr);
  return lr;
}

}  // namespace trainhooks
