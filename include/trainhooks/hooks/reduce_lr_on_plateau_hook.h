// ReduceLROnPlateauHook: lowers a train op's learning rate when a metric stops improving (Keras's
// ReduceLROnPlateau callback, driven by the metrics board instead of epochs).
//
// Fetches nothing. It reads `monitor` on the graph's LatestMetrics (latest_metrics.h) in before_run
// and in after_run, and acts once per new value (a new publish, told by the value's version):
// checking in after_run catches a value that a hook listed earlier published in this step's
// after_run, checking in before_run catches one that a hook listed later published, so either way
// the new rate is in force for the very next step. Values published before the session was
// (re)created are not acted on: versions belong to one process, so after a restore the hook waits
// for the next evaluation, as an uninterrupted run would.
//
// For each new value, as Keras does per epoch (best starts at +inf for kMin, -inf for kMax):
//   - in cooldown (cooldown_counter > 0): the counter drops by one and wait resets to 0;
//   - improved (kMin: value < best - min_delta; kMax: value > best + min_delta): best = value,
//     wait = 0;
//   - otherwise, out of cooldown: wait += 1, and once wait >= patience, if a parameter group's
//     rate is above min_lr, each such group's rate becomes max(rate * factor, min_lr), wait = 0
//     and cooldown_counter = cooldown, and it logs (INFO)
//       ReduceLROnPlateauHook: eval/loss did not improve for 3 evaluations; learning rate 0.001
//       -> 0.0001 (step 1200)
//     (the first group's rates, the global step when it acts). At min_lr already, nothing changes
//     and wait keeps counting.
// A NaN value never improves. A monitor that is missing from the board while other metrics are
// on it is warned about once (the available names are listed), never an error.
//
// With a LearningRateScheduleHook on the same train op, the two combine: the plateau hook owns a
// multiplier (learning_rate_scale(), starting at 1 and multiplied by the ratio of each reduction),
// published as the session's services().learning_rate_scale(train_op) (hook_services.h), that
// the schedule hook applies to every rate it sets, so the schedule keeps its shape and each
// plateau scales it down (min_lr bounds each reduction when it happens; the schedule itself may
// later go lower). Hook order does not matter.
//
// Checkpointed state (state_key() "hooks/reduce_lr_on_plateau/<train op name>"): best, wait,
// cooldown counter, multiplier, number of reductions, the step of the last value acted on and the
// rates it last set. after_create_session re-applies those rates to the optimizer, so a resumed
// run trains with the rate an uninterrupted one would have. begin() resets the state, so a reused
// hook starts afresh unless a checkpoint is restored. One plateau hook per train op and session
// (a second one is an AlreadyExistsError at session creation).
//
//   hooks.push_back(std::make_shared<th::ReduceLROnPlateauHook>(
//       train_op, th::ReduceLROnPlateauOptions{.monitor = "eval/loss", .patience = 3}));
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "trainhooks/graph.h"
#include "trainhooks/hook.h"
#include "trainhooks/metric_monitor.h"

namespace trainhooks {

using PlateauMode = MetricMode;

struct ReduceLROnPlateauOptions {
  // The metric's name on LatestMetrics, e.g. "eval/loss". Required.
  std::string monitor;
  PlateauMode mode = PlateauMode::kMin;
  // new rate = rate * factor; 0 < factor < 1.
  double factor = 0.1;
  // New values without improvement before the rate is reduced; >= 0.
  int64_t patience = 10;
  // New values after a reduction during which no new reduction is counted; >= 0.
  int64_t cooldown = 0;
  // Lower bound on the rate; finite, >= 0.
  double min_lr = 0;
  // An improvement must beat best by more than this; finite, >= 0.
  double min_delta = 1e-4;
};

class ReduceLROnPlateauHook : public SessionRunHook, public StateProvider {
 public:
  // InvalidArgument naming the option when one is out of range; a train_op that is not a train op
  // is an InvalidArgument at begin().
  ReduceLROnPlateauHook(Node train_op, ReduceLROnPlateauOptions options);

  void begin() override;
  void after_create_session(Session& session, Coordinator& coord) override;
  SessionRunArgs before_run(SessionRunContext& run_context) override;
  void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) override;

  StateProvider* state() override { return this; }
  std::string state_key() const override;
  std::string save_state() const override;
  void load_state(std::string_view bytes) override;

  // The state key of the plateau hook of the train op named `train_op_name`.
  static std::string state_key_for(std::string_view train_op_name);

  // The multiplier a LearningRateScheduleHook on the same train op applies (1: no reduction yet).
  double learning_rate_scale() const { return scale_; }
  double best() const { return monitor_.best(); }
  int64_t wait() const { return monitor_.wait(); }
  int64_t cooldown_counter() const { return cooldown_counter_; }
  int64_t reductions() const { return reductions_; }
  const ReduceLROnPlateauOptions& options() const { return options_; }

 private:
  void reset();
  void poll();
  void consider(const MetricValue& value);
  void reduce();

  Node train_op_;
  ReduceLROnPlateauOptions options_;
  torch::optim::Optimizer* optimizer_ = nullptr;
  // Checkpointed: the monitor's best and wait, and these.
  MetricMonitor monitor_;
  int64_t cooldown_counter_ = 0;
  double scale_ = 1;
  int64_t reductions_ = 0;
  int64_t last_metric_step_ = -1;
  std::vector<double> learning_rates_;  // set by the last reduction; empty: none yet
  // Per session: whether there is nothing (more) to say about a missing monitored metric.
  bool warned_missing_ = false;
  bool begun_ = false;  // services() is bound: the scale is published there
};

}  // namespace trainhooks
