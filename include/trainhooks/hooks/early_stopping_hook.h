// EarlyStoppingHook: stops training when a metric has stopped improving (Keras's EarlyStopping
// callback, counted in evaluations instead of epochs).
//
// Where the values come from:
//   - monitor alone: the metric of that name on the graph's LatestMetrics (latest_metrics.h), where
//     an EvaluationHook publishes `eval/loss`. Nothing is fetched; it checks the board in
//     after_run and in before_run and acts once per new publish (told by its version), as
//     ReduceLROnPlateauHook does. Values on the board before the session was created are not
//     acted on. Listed after the publishing hook, it acts in the step of the evaluation;
//     listed before it, in the next step's before_run (the stop then comes one step later).
//   - node: a scalar node fetched on the steps its SecondOrStepTimer triggers (exactly one of
//     every_n_steps and every_n_secs, on the global step), each fetched value one evaluation.
//     A value that is not a scalar is an InvalidArgument at that first fetch (a node's shape is
//     only known once it ran).
//
// For each value (best starts at `baseline` when given, else +inf for kMin, -inf for kMax): an
// improvement (kMin: value < best - min_delta; kMax: value > best + min_delta; NaN never
// improves) sets best and resets wait; any other value adds one to wait, and once wait >=
// patience the hook requests a stop (the run in progress completes) and logs (INFO)
//   EarlyStoppingHook: eval/loss did not improve for 3 evaluations (best 0.2511 at step 1200);
//   stopping at step 1800.
// With restore_best, each improvement copies every variable of the graph into host memory, and
// end() copies the best ones back and logs so. The final checkpoint, which the chief's
// CheckpointSaverHook writes in its end() before the hooks in `hooks` end, keeps the variables
// of the last step, so a resumed run continues training; the restored ones are for what the
// program does with the graph after close() (export, a final test).
//
// Checkpointed state (state_key() "hooks/early_stopping/<monitor>"): best, its step, wait, the
// number of evaluations and the step it stopped at. A resumed run therefore stops at the step an
// uninterrupted one would; one resumed after the hook stopped training stops again after its
// first step. A checkpoint holds the state the hook had when it was written: the chief's
// CheckpointSaverHook saves in its after_run, before the hooks in `hooks` run theirs, so a value
// published at a checkpoint's own step is only in the next checkpoint, and a run resumed from
// the first one does not see it again (evaluation steps that are not checkpoint steps avoid it).
// The copy of the best variables is not checkpointed: when the best evaluation came before a
// restore, end() warns instead of restoring. begin() resets the state.
//
//   hooks.push_back(std::make_shared<th::EarlyStoppingHook>(th::EarlyStoppingHookOptions{
//       .monitor = "eval/loss", .patience = 3, .min_delta = 1e-3, .restore_best = true}));
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trainhooks/graph.h"
#include "trainhooks/hook.h"
#include "trainhooks/metric_monitor.h"
#include "trainhooks/node.h"
#include "trainhooks/timer.h"

namespace trainhooks {

struct EarlyStoppingHookOptions {
  // The metric's name on LatestMetrics, e.g. "eval/loss". With `node`: the name in log lines
  // and the state key (default: the node's name).
  std::string monitor;
  // Instead of the board: a scalar node to fetch, with exactly one of the two periods.
  std::optional<NodeRef> node;
  std::optional<int64_t> every_n_steps;
  std::optional<double> every_n_secs;
  MetricMode mode = MetricMode::kMin;
  // Evaluations without improvement before stopping; >= 0.
  int64_t patience = 0;
  // An improvement must beat best by more than this; finite, >= 0.
  double min_delta = 0;
  // A value to beat before anything counts as an improvement; finite.
  std::optional<double> baseline;
  // Copy the variables back to those of the best evaluation in end().
  bool restore_best = false;
};

class EarlyStoppingHook : public SessionRunHook, public StateProvider {
 public:
  // InvalidArgument naming the option when one is out of range or missing.
  explicit EarlyStoppingHook(EarlyStoppingHookOptions options);

  void begin() override;
  void after_create_session(Session& session, Coordinator& coord) override;
  SessionRunArgs before_run(SessionRunContext& run_context) override;
  void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) override;
  void end(Session& session) override;

  StateProvider* state() override { return this; }
  std::string state_key() const override;
  std::string save_state() const override;
  void load_state(std::string_view bytes) override;

  double best() const { return monitor_.best(); }
  // The global step of the best value; -1 while nothing improved.
  int64_t best_step() const { return monitor_.best_step(); }
  int64_t wait() const { return monitor_.wait(); }
  int64_t evaluations() const { return evaluations_; }
  // The global step it requested the stop at; -1 while it has not.
  int64_t stopped_step() const { return stopped_step_; }
  const EarlyStoppingHookOptions& options() const { return options_; }

 private:
  void reset();
  void poll(SessionRunContext& ctx);
  void consider(SessionRunContext& ctx, double value, int64_t step);

  EarlyStoppingHookOptions options_;
  std::optional<SecondOrStepTimer> timer_;  // with a node only
  std::string name_;                        // options_.monitor, or the node's name
  Node node_;
  bool fetching_ = false;   // this run fetches node_
  int64_t fetch_step_ = 0;  // the global step before that run, the timer's step
  // Checkpointed: the monitor's best, best step and wait, and these.
  MetricMonitor monitor_;
  int64_t evaluations_ = 0;
  int64_t stopped_step_ = -1;
  // Per process: the variables at best_step_ (restore_best), empty when not taken here.
  std::vector<at::Tensor> best_variables_;
  int64_t best_variables_step_ = -1;
};

}  // namespace trainhooks
