// LearningRateScheduleHook: sets a train op's learning rate from a schedule of the global step.
//
// Fetches nothing. In before_run it reads the global step s (a host integer) and sets every
// parameter group of the train op's optimizer to schedule(s), so the step that runs at global
// step s trains with schedule(s); after_create_session does the same, so the optimizer holds the
// right rate before the first step too (and after a restore, since the rate is a function of the
// restored global step). The rate set is schedule(s) * services().learning_rate_scale(train_op)
// (hook_services.h), which a ReduceLROnPlateauHook on the same train op lowers at each plateau
// (reduce_lr_on_plateau_hook.h); 1 without one.
//
// Writes the scalar summary `learning_rate` (the rate set for the run at step s, tagged with step
// s + 1, the step that run ends on: where SummarySaverHook puts the loss of the same run, as TF's
// does) on the first run and then every every_n_steps (default 100, SummarySaverHook's default)
// or every_n_secs, to output_dir's process-wide writer or to summary_writer; with neither, no
// summary. The value is written once its run is done, after SummarySaverHook's SessionLog START
// whatever the order of the hooks: in after_run, and for a session's first run in the next
// before_run or end(). TensorBoard drops the points written before a START at or after its step,
// so written before it the first point of every run (and of every restart) would be lost. Logs
// (INFO) the schedule and the starting rate once per session creation:
//   Learning rate of train: cosine_decay(learning_rate=0.1, decay_steps=1000, alpha=0); 0.1 at
//   step 0
// A steady step allocates nothing. set_schedule() replaces the schedule while training (a plan
// that changes: TimeBudgetHook and rescaled(), learning_rate_schedule.h). A rate that is negative
// or not finite (a custom schedule's) is an InvalidArgument naming the step. Needs a global step
// (RuntimeError in begin()).
//
//   hooks.push_back(std::make_shared<th::LearningRateScheduleHook>(
//       train_op, th::linear_warmup(500, th::cosine_decay(0.1, 10000)),
//       th::LearningRateScheduleHookOptions{.output_dir = "runs/exp1"}));
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "trainhooks/graph.h"
#include "trainhooks/hook.h"
#include "trainhooks/learning_rate_schedule.h"
#include "trainhooks/timer.h"

namespace trainhooks {

namespace summary {
class EventWriter;
}

struct LearningRateScheduleHookOptions {
  // At most one; neither: every 100 steps. When the `learning_rate` summary is written.
  std::optional<int64_t> every_n_steps;
  std::optional<double> every_n_secs;
  // At most one: where the summary goes (a directory's process-wide writer, or a writer).
  // Neither: no summary.
  std::string output_dir;
  std::shared_ptr<summary::EventWriter> summary_writer;
};

class LearningRateScheduleHook : public SessionRunHook {
 public:
  // InvalidArgument for bad options; a train_op that is not a train op is an InvalidArgument at
  // begin().
  LearningRateScheduleHook(Node train_op, LearningRateSchedule schedule,
                           LearningRateScheduleHookOptions options = {});

  void begin() override;
  void after_create_session(Session& session, Coordinator& coord) override;
  SessionRunArgs before_run(SessionRunContext& run_context) override;
  void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) override;
  void end(Session& session) override;

  const LearningRateSchedule& schedule() const { return schedule_; }
  // From the next rate set on (the next before_run or session creation), `schedule` instead. On
  // the training thread: from a hook, or between runs.
  void set_schedule(LearningRateSchedule schedule) { schedule_ = std::move(schedule); }

 private:
  struct Point {
    int64_t step = 0;
    float value = 0;
  };
  double apply(int64_t global_step);
  void write(const Point& point);

  Node train_op_;
  LearningRateSchedule schedule_;
  LearningRateScheduleHookOptions options_;
  SecondOrStepTimer timer_;
  std::shared_ptr<summary::EventWriter> writer_;
  torch::optim::Optimizer* optimizer_ = nullptr;
  std::optional<Point> pending_;  // this run's, written once the run is done
  std::optional<Point> held_;     // the session's first run's, written at the next run or end()
  bool first_run_ = true;
};

}  // namespace trainhooks
