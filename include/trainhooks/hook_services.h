// HookServices: what the hooks of one session share, offered through the hook protocol instead of
// found by hooks in each other (hook.h: services(), from begin() on; one object per
// MonitoredSession, the same for all its hooks, new for the next session).
//
//   metrics()                  the latest value of each metric of the graph (latest_metrics.h):
//                              EvaluationHook publishes, ReduceLROnPlateauHook, EarlyStoppingHook,
//                              MetricsLoggerHook and CheckpointSaverHook's keep-best read
//   stop_at_step()             the global step at which training stops: StopAtStepHook sets it,
//                              ProgressBarHook shows it as 100%
//   learning_rate_scale(op)    a factor on the scheduled learning rate of a train op:
//                              ReduceLROnPlateauHook sets it, LearningRateScheduleHook applies it
//
// A hook of one's own uses them the same way:
//   void begin() override { metrics_ = &services().metrics(); }
//   void after_run(...) override { metrics_->publish("val/f1", f1, step, wall_time); }
//
// Not thread-safe: hooks run on the training thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

#include "trainhooks/latest_metrics.h"
#include "trainhooks/node.h"

namespace trainhooks {

class Graph;

class HookServices {
 public:
  explicit HookServices(Graph& graph);

  LatestMetrics& metrics() const { return *metrics_; }

  // nullopt until a hook sets it (after_create_session, so others read it from their first
  // before_run on). Several StopAtStepHooks: the smallest, as they decide.
  std::optional<int64_t> stop_at_step() const { return stop_at_step_; }
  void set_stop_at_step(std::optional<int64_t> step) { stop_at_step_ = step; }

  // 1 until a hook sets it; finite, >= 0 (InvalidArgument naming the train op otherwise).
  double learning_rate_scale(Node train_op) const;
  void set_learning_rate_scale(Node train_op, double scale);

 private:
  Graph* graph_;
  LatestMetrics* metrics_;
  std::optional<int64_t> stop_at_step_;
  std::map<int32_t, double> learning_rate_scales_;  // by train op index
};

}  // namespace trainhooks
