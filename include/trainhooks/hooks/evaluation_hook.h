// EvaluationHook: evaluates metric nodes over a validation input every N steps or seconds, and at
// the end of training.
//
// Each evaluation is one full pass over the validation input through the raw session: the
// training hooks do not fire, no gradients are recorded, and the training input and the global
// step do not move. The input is restarted before every pass (its first epoch is the pass; an input
// that repeats forever ends the pass when it wraps). Each metric node must evaluate to a scalar per
// batch (a batch mean); its value for the pass is the mean over batches weighted by batch size, so
// a last partial batch counts for what it holds. After a pass the hook
//   - logs `eval: accuracy = 0.9123, loss = 0.2511 (step 1200)` (values as %.4g, in option order),
//   - writes each mean as scalar summary `<metric>` at the global step to output_dir (use
//     `<summary_dir>/eval`, so TensorBoard shows a run "eval" beside the training run and overlays
//     curves of the same tag, e.g. `loss`) or to summary_writer,
//   - publishes `<name>/<metric>` (e.g. `eval/loss`) on the graph's LatestMetrics
//   (latest_metrics.h), where
//     ReduceLROnPlateauHook and early stopping read it.
//
// With moving_average (moving_average.h), each pass evaluates the averaged weights: they are
// swapped in before the pass and the trained ones back after it (Keras's use_ema), exactly.
//
// every_n_steps triggers at the global steps that are multiples of N (so a resumed run evaluates
// at the same steps as an uninterrupted one); every_n_secs after that many seconds of the Env
// clock since the session was created or last evaluated. Neither: evaluation at the end only
// (at_end must then be true). at_end evaluates in end() unless the last pass was at that step.
//
//   auto val = g.input("val", th::fashion_mnist_source(dir, th::FashionMnistSplit::kTest),
//                      {.batch_size = 500});
//   auto val_logits = g.op("val/logits", [=](th::Run& r) { return net->forward(r[val.data()]); });
//   ... val_loss, val_accuracy ops ...
//   hooks.push_back(std::make_shared<th::EvaluationHook>(th::EvaluationHookOptions{
//       .metrics = {{"accuracy", val_accuracy}, {"loss", val_loss}},
//       .input = val.data(), .every_n_steps = 1000, .output_dir = logdir + "/eval",
//       .set_training = [net](bool training) { net->train(training); }}));
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "trainhooks/hook.h"
#include "trainhooks/node.h"
#include "trainhooks/timer.h"

namespace trainhooks {

namespace summary {
class EventWriter;
}
class ExponentialMovingAverage;

struct EvaluationHookOptions {
  // (metric name, node), in the order they are logged. At least one; names unique, non-empty.
  std::vector<std::pair<std::string, NodeRef>> metrics;
  // Any component node of the validation input (the metrics must read that input). Required.
  NodeRef input = std::string();
  // At most one of the two; neither: only at_end.
  std::optional<int64_t> every_n_steps;
  std::optional<double> every_n_secs;
  bool at_end = true;
  // Prefix of the log line and of the names published on LatestMetrics.
  std::string name = "eval";
  // At most one: where the scalars go. Neither: no summaries.
  std::string output_dir;
  std::shared_ptr<summary::EventWriter> summary_writer;
  // Called with false before a pass and true after it (e.g. [net](bool t) { net->train(t); }), so
  // dropout and batch norm behave as in inference. Optional.
  std::function<void(bool training)> set_training;
  // > 0: at most this many batches per pass.
  int64_t max_batches = 0;
  // Evaluate with these averaged weights (swapped in for each pass). Optional.
  std::shared_ptr<ExponentialMovingAverage> moving_average;
};

class EvaluationHook : public SessionRunHook {
 public:
  explicit EvaluationHook(EvaluationHookOptions options);

  void begin() override;
  void after_create_session(Session& session, Coordinator& coord) override;
  SessionRunArgs before_run(SessionRunContext& run_context) override;
  void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) override;
  void end(Session& session) override;

  // Runs one pass now and returns the metrics' means by name (also logged, written, published).
  std::map<std::string, double> evaluate(Session& session);
  // The global step of the last pass, if any.
  std::optional<int64_t> last_evaluated_step() const { return last_step_; }

 private:
  EvaluationHookOptions options_;
  std::optional<SecondOrStepTimer> timer_;
  std::shared_ptr<summary::EventWriter> writer_;
  std::vector<Node> metric_nodes_;
  Node input_;
  std::optional<int64_t> last_step_;
  int64_t step_before_run_ = 0;
};

}  // namespace trainhooks
