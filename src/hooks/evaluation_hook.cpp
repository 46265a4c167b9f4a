#include "trainhooks/hooks/evaluation_hook.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>

#include <cmath>
#include <set>

#include "trainhooks/errors.h"
#include "trainhooks/graph.h"
#include "trainhooks/hook_services.h"
#include "trainhooks/moving_average.h"
#include "trainhooks/session.h"
#include "trainhooks/summary/event_writer.h"

namespace trainhooks {

namespace {

void validate(const EvaluationHookOptions& o) {
  if (o.metrics.empty()) throw InvalidArgument("EvaluationHook: metrics must not be empty.");
  std::set<std::string, std::less<>> names;
  for (const auto& [name, node] : o.metrics) {
    if (name.empty()) throw InvalidArgument("EvaluationHook: a metric name is empty.");
    if (!names.insert(name).second)
      throw InvalidArgument(fmt::format("EvaluationHook: metric '{}' is given twice.", name));
  }
  if (o.input.is_name() && o.input.name().empty())
    throw InvalidArgument("EvaluationHook: input (a node of the validation input) is required.");
  if (o.every_n_steps && o.every_n_secs)
    throw InvalidArgument(
        "EvaluationHook: at most one of every_n_steps and every_n_secs may be provided.");
  if (o.every_n_steps && *o.every_n_steps <= 0)
    throw InvalidArgument(
        fmt::format("EvaluationHook: every_n_steps must be positive, got {}", *o.every_n_steps));
  if (o.every_n_secs && !(*o.every_n_secs > 0))
    throw InvalidArgument(
        fmt::format("EvaluationHook: every_n_secs must be positive, got {}", *o.every_n_secs));
  if (!o.every_n_steps && !o.every_n_secs && !o.at_end)
    throw InvalidArgument(
        "EvaluationHook: nothing would trigger an evaluation: give every_n_steps or every_n_secs, "
        "or keep at_end.");
  if (!o.output_dir.empty() && o.summary_writer)
    throw InvalidArgument(
        "EvaluationHook: at most one of output_dir and summary_writer may be provided.");
  if (o.max_batches < 0)
    throw InvalidArgument(
        fmt::format("EvaluationHook: max_batches must be >= 0, got {}", o.max_batches));
}

// Calls set_training(false) now and set_training(true) when the pass ends, however it ends.
class InferenceScope {
 public:
  explicit InferenceScope(const std::function<void(bool)>& set_training)
      : set_training_(set_training) {
    if (set_training_) set_training_(false);
  }
  ~InferenceScope() {
    if (set_training_) set_training_(true);
  }
  InferenceScope(const InferenceScope&) = delete;
  InferenceScope& operator=(const InferenceScope&) = delete;

 private:
  const std::function<void(bool)>& set_training_;
  at::NoGradGuard no_grad_;
};

}  // namespace

EvaluationHook::EvaluationHook(EvaluationHookOptions options) : options_(std::move(options)) {
  validate(options_);
  if (options_.every_n_secs) {
    timer_.emplace(TimerOptions{.every_secs = options_.every_n_secs,
                                .owner = "EvaluationHook",
                                .secs_name = "every_n_secs",
                                .steps_name = "every_n_steps"});
  }
}

void EvaluationHook::begin() {
  auto& g = graph();
  metric_nodes_.clear();
  for (const auto& [name, ref] : options_.metrics) metric_nodes_.push_back(g.resolve(ref));
  input_ = g.resolve(options_.input);
  if (g.kind(input_) != NodeKind::kInput) {
    throw InvalidArgument(fmt::format("EvaluationHook: input '{}' is a {}, not an input node.",
                                      g.name(input_), node_kind_name(g.kind(input_))));
  }
  writer_ = options_.summary_writer;
  if (!writer_ && !options_.output_dir.empty())
    writer_ = summary::EventWriter::for_logdir(options_.output_dir);
  if (timer_) reset_timer(*timer_);
  last_step_.reset();
}

void EvaluationHook::after_create_session(Session& session, Coordinator&) {
  // every_n_secs counts from the (re)creation, not from the first step.
  if (timer_) {
    timer_->reset();
    timer_->update_last_triggered_step(session.global_step());
  }
}

SessionRunArgs EvaluationHook::before_run(SessionRunContext& ctx) {
  step_before_run_ = ctx.session().global_step();
  return {};
}

void EvaluationHook::after_run(SessionRunContext& ctx, const SessionRunValues&) {
  const int64_t step = ctx.session().global_step();
  if (last_step_ == step) return;
  bool due = false;
  if (options_.every_n_steps) {
    // A multiple of N was reached by this run: the same steps after a resume.
    const int64_t n = *options_.every_n_steps;
    due = step / n > step_before_run_ / n;
  } else if (timer_) {
    due = timer_->should_trigger_for_step(step);
  }
  if (!due) return;
  evaluate(ctx.session());
}

void EvaluationHook::end(Session& session) {
  if (options_.at_end && last_step_ != session.global_step()) evaluate(session);
}

std::map<std::string, double> EvaluationHook::evaluate(Session& session) {
  auto& g = session.graph();
  const int64_t step = session.global_step();
  std::vector<double> sums(metric_nodes_.size(), 0.0);
  double examples = 0;
  int64_t batches = 0;
  {
    InferenceScope scope(options_.set_training);
    AveragedWeightsScope averaged(options_.moving_average.get());
    g.set_input_position(input_, {});
    std::vector<Node> fetches = metric_nodes_;
    fetches.push_back(input_);
    RunResults out;
    while (options_.max_batches == 0 || batches < options_.max_batches) {
      try {
        session.run_nodes(fetches, {}, {}, nullptr, out);
      } catch (const OutOfRangeError&) {
        break;
      }
      // An input that repeats forever has wrapped into its next epoch: that batch is not part
      // of the pass.
      if (g.input_position(input_).epoch > 0) break;
      const double n = static_cast<double>(out.at(fetches.size() - 1).size(0));
      for (size_t i = 0; i < metric_nodes_.size(); ++i) {
        const at::Tensor& v = out.at(i);
        if (v.numel() != 1) {
          throw InvalidArgument(fmt::format(
              "EvaluationHook: metric '{}' ({}) must be a scalar per batch, got shape {}",
              options_.metrics[i].first, g.name(metric_nodes_[i]), fmt::join(v.sizes(), "x")));
        }
        sums[i] += v.item<double>() * n;
      }
      examples += n;
      ++batches;
    }
  }
  if (examples == 0) {
    throw OutOfRangeError(
        fmt::format("EvaluationHook: the validation input '{}' gave no examples", g.name(input_)));
  }
  std::map<std::string, double> means;
  std::string line = options_.name + ":";
  const double wall = env().clock->wall_seconds();
  LatestMetrics& metrics = services().metrics();
  for (size_t i = 0; i < metric_nodes_.size(); ++i) {
    const auto& name = options_.metrics[i].first;
    const double mean = sums[i] / examples;
    means[name] = mean;
    line += fmt::format("{} {} = {:.4g}", i == 0 ? "" : ",", name, mean);
    metrics.publish(options_.name + "/" + name, mean, step, wall);
    if (writer_) writer_->add_scalar(name, static_cast<float>(mean), step);
  }
  if (writer_) writer_->flush();
  env().info(fmt::format("{} (step {})", line, step));
  last_step_ = step;
  if (timer_) timer_->update_last_triggered_step(step);
  return means;
}

}  // namespace trainhooks
