#include "trainhooks/hooks/reduce_lr_on_plateau_hook.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/optim/optimizer.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <utility>

#include "hook_state_text.h"
#include "trainhooks/errors.h"
#include "trainhooks/hook_services.h"

namespace trainhooks {

namespace {

constexpr const char* kReduceLrOnPlateau = "ReduceLROnPlateauHook";
constexpr const char* kReduceLrOnPlateauState = "reduce_lr_on_plateau 1";

void check_non_negative(const char* option, int64_t value) {
  if (value >= 0) return;
  throw InvalidArgument(
      fmt::format("{}: {} must be non-negative, got {}", kReduceLrOnPlateau, option, value));
}

void check_finite_non_negative(const char* option, double value) {
  if (std::isfinite(value) && value >= 0) return;
  throw InvalidArgument(fmt::format("{}: {} must be a finite, non-negative number, got {}",
                                    kReduceLrOnPlateau, option, value));
}

const ReduceLROnPlateauOptions& validated(const ReduceLROnPlateauOptions& o) {
  if (o.monitor.empty()) throw InvalidArgument("ReduceLROnPlateauHook: monitor must name a metric");
  // mode, patience and min_delta: MetricMonitor's checks.
  if (!(o.factor > 0 && o.factor < 1)) {
    throw InvalidArgument(
        fmt::format("{}: factor must be in (0, 1), got {}", kReduceLrOnPlateau, o.factor));
  }
  check_non_negative("cooldown", o.cooldown);
  check_finite_non_negative("min_lr", o.min_lr);
  return o;
}

}  // namespace

ReduceLROnPlateauHook::ReduceLROnPlateauHook(Node train_op, ReduceLROnPlateauOptions options)
    : train_op_(train_op),
      options_(validated(options)),
      monitor_({.name = options_.monitor,
                .mode = options_.mode,
                .min_delta = options_.min_delta,
                .patience = options_.patience},
               kReduceLrOnPlateau) {
  if (!train_op_.valid()) throw InvalidArgument("ReduceLROnPlateauHook: train_op is not a node");
  reset();
}

std::string ReduceLROnPlateauHook::state_key_for(std::string_view train_op_name) {
  return fmt::format("hooks/reduce_lr_on_plateau/{}", train_op_name);
}

std::string ReduceLROnPlateauHook::state_key() const {
  return state_key_for(graph().name(train_op_));
}

void ReduceLROnPlateauHook::reset() {
  monitor_.reset();
  cooldown_counter_ = 0;
  scale_ = 1;
  reductions_ = 0;
  last_metric_step_ = -1;
  learning_rates_.clear();
}

void ReduceLROnPlateauHook::begin() {
  if (graph().kind(train_op_) != NodeKind::kTrainOp) {
    throw InvalidArgument(fmt::format("{}: train_op '{}' is not a train op", kReduceLrOnPlateau,
                                      graph().name(train_op_)));
  }
  // A restore (after begin) loads the checkpointed state over this.
  reset();
  begun_ = true;  // a restore publishes its scale; the session's services start at 1
  optimizer_ = nullptr;
  warned_missing_ = false;
}

void ReduceLROnPlateauHook::after_create_session(Session&, Coordinator&) {
  optimizer_ = &graph().optimizer(train_op_);
  auto& groups = optimizer_->param_groups();
  if (!learning_rates_.empty()) {
    if (learning_rates_.size() == groups.size()) {
      for (size_t i = 0; i < groups.size(); ++i) groups[i].options().set_lr(learning_rates_[i]);
    } else {
      env().warning(fmt::format(
          "{}: not re-applying its learning rates: {} were saved for {} parameter groups",
          kReduceLrOnPlateau, learning_rates_.size(), groups.size()));
    }
  }
  // What the metrics hold now was measured before this session (or, after a restore, in a
  // timeline the restore went back from).
  monitor_.start(services().metrics());
}

SessionRunArgs ReduceLROnPlateauHook::before_run(SessionRunContext&) {
  poll();
  return {};
}

void ReduceLROnPlateauHook::after_run(SessionRunContext&, const SessionRunValues&) { poll(); }

void ReduceLROnPlateauHook::poll() {
  const LatestMetrics& metrics = services().metrics();
  const auto m = monitor_.poll(metrics);
  if (!m) {
    // Once the metric exists (or its absence was told) there is nothing more to say.
    if (warned_missing_) return;
    if (metrics.latest(options_.monitor)) {
      warned_missing_ = true;
      return;
    }
    const auto names = metrics.names();  // no allocation while there are none
    if (names.empty()) return;
    warned_missing_ = true;
    env().warning(fmt::format(
        "{}: the monitored metric '{}' has not been published; the learning rate is not "
        "reduced until it is published. Available metrics: {}",
        kReduceLrOnPlateau, options_.monitor, fmt::join(names, ", ")));
    return;
  }
  consider(*m);
}

void ReduceLROnPlateauHook::consider(const MetricValue& m) {
  last_metric_step_ = m.step;
  if (cooldown_counter_ > 0) {
    --cooldown_counter_;
    monitor_.reset_wait();
  }
  // In cooldown, values that do not improve do not count (Keras).
  if (monitor_.improves(m.value) || cooldown_counter_ == 0) {
    if (!monitor_.record(m.value, m.step) && monitor_.patience_exhausted()) reduce();
  }
}

void ReduceLROnPlateauHook::reduce() {
  auto& groups = optimizer_->param_groups();
  if (groups.empty()) return;
  const bool above_min = std::any_of(groups.begin(), groups.end(), [&](auto& g) {
    return g.options().get_lr() > options_.min_lr;
  });
  // Already at min_lr: as Keras, nothing changes and wait keeps counting.
  if (!above_min) return;
  const double old_lr = groups[0].options().get_lr();
  learning_rates_.clear();
  for (auto& g : groups) {
    const double lr = g.options().get_lr();
    if (lr > options_.min_lr) g.options().set_lr(std::max(lr * options_.factor, options_.min_lr));
    learning_rates_.push_back(g.options().get_lr());
  }
  const double new_lr = learning_rates_[0];
  if (old_lr > 0) scale_ *= new_lr / old_lr;
  services().set_learning_rate_scale(train_op_, scale_);
  ++reductions_;
  env().info(
      fmt::format("{}: {} did not improve for {} evaluation{}; learning rate {:g} -> {:g} "
                  "(step {})",
                  kReduceLrOnPlateau, options_.monitor, monitor_.wait(),
                  monitor_.wait() == 1 ? "" : "s", old_lr, new_lr, graph().global_step_value()));
  cooldown_counter_ = options_.cooldown;
  monitor_.reset_wait();
}

std::string ReduceLROnPlateauHook::save_state() const {
  return fmt::format(
      "{}\nbest {}\nwait {}\ncooldown_counter {}\nscale {}\nreductions {}\n"
      "last_metric_step {}\nlearning_rates {}\n",
      kReduceLrOnPlateauState, monitor_.best(), monitor_.wait(), cooldown_counter_, scale_,
      reductions_, last_metric_step_, fmt::join(learning_rates_, ","));
}

void ReduceLROnPlateauHook::load_state(std::string_view bytes) {
  const internal::HookStateFields state(kReduceLrOnPlateau, kReduceLrOnPlateauState, bytes);
  const double best = state.number("best");
  const int64_t wait = state.integer("wait");
  const int64_t cooldown_counter = state.integer("cooldown_counter");
  const double scale = state.number("scale");
  const int64_t reductions = state.integer("reductions");
  const int64_t last_metric_step = state.integer("last_metric_step");
  std::vector<double> rates;
  std::istringstream list(state.text("learning_rates"));
  for (std::string item; std::getline(list, item, ',');)
    rates.push_back(internal::parse_hook_state_double(state.hook(), "learning_rates", item));
  // Assigned only once everything parsed: a bad state leaves the hook as it was.
  if (begun_) services().set_learning_rate_scale(train_op_, scale);
  monitor_.restore(best, /*best_step=*/-1, wait);
  cooldown_counter_ = cooldown_counter;
  scale_ = scale;
  reductions_ = reductions;
  last_metric_step_ = last_metric_step;
  learning_rates_ = std::move(rates);
}

}  // namespace trainhooks
