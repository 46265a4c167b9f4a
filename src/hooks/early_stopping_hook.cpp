#include "trainhooks/hooks/early_stopping_hook.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <utility>

#include "hook_state_text.h"
#include "trainhooks/errors.h"
#include "trainhooks/hook_services.h"

namespace trainhooks {

namespace {

constexpr const char* kEarlyStopping = "EarlyStoppingHook";
constexpr const char* kEarlyStoppingState = "early_stopping 1";

const EarlyStoppingHookOptions& validated(const EarlyStoppingHookOptions& o) {
  if (o.monitor.empty() && !o.node) {
    throw InvalidArgument("EarlyStoppingHook: monitor must name a metric (or node must be set)");
  }
  if (o.baseline && !std::isfinite(*o.baseline)) {
    throw InvalidArgument(
        fmt::format("{}: baseline must be a finite number, got {}", kEarlyStopping, *o.baseline));
  }
  if (!o.node && (o.every_n_steps || o.every_n_secs)) {
    throw InvalidArgument(fmt::format(
        "{}: every_n_steps and every_n_secs apply to a node; the board's metrics are read when "
        "published",
        kEarlyStopping));
  }
  return o;
}

}  // namespace

EarlyStoppingHook::EarlyStoppingHook(EarlyStoppingHookOptions options)
    : options_(validated(options)),
      monitor_({.name = options_.monitor,
                .mode = options_.mode,
                .min_delta = options_.min_delta,
                .patience = options_.patience},
               kEarlyStopping) {
  if (options_.node) {
    timer_.emplace(TimerOptions{.every_secs = options_.every_n_secs,
                                .every_steps = options_.every_n_steps,
                                .owner = kEarlyStopping,
                                .secs_name = "every_n_secs",
                                .steps_name = "every_n_steps"});
  }
  reset();
}

void EarlyStoppingHook::reset() {
  monitor_.reset(options_.baseline);
  evaluations_ = 0;
  stopped_step_ = -1;
  best_variables_.clear();
  best_variables_step_ = -1;
}

std::string EarlyStoppingHook::state_key() const {
  return fmt::format("hooks/early_stopping/{}", name_);
}

void EarlyStoppingHook::begin() {
  if (options_.node) {
    node_ = graph().resolve(*options_.node);
    reset_timer(*timer_);
    name_ = options_.monitor.empty() ? graph().name(node_) : options_.monitor;
  } else {
    name_ = options_.monitor;
  }
  // A restore (after begin) loads the checkpointed state over this.
  reset();
  fetching_ = false;
}

void EarlyStoppingHook::after_create_session(Session&, Coordinator&) {
  // What the metrics hold now was measured before this session (or, after a restore, in a
  // timeline the restore went back from).
  if (!options_.node) monitor_.start(services().metrics());
  if (stopped_step_ >= 0) {
    env().info(fmt::format(
        "{}: training was stopped early at step {} (restored); stopping after this step.",
        kEarlyStopping, stopped_step_));
  }
}

SessionRunArgs EarlyStoppingHook::before_run(SessionRunContext& ctx) {
  if (!options_.node) {
    poll(ctx);
    return {};
  }
  fetch_step_ = graph().global_step_value();
  fetching_ = timer_->should_trigger_for_step(fetch_step_);
  if (!fetching_) return {};
  return {.fetches = {node_}};
}

void EarlyStoppingHook::after_run(SessionRunContext& ctx, const SessionRunValues& values) {
  if (stopped_step_ >= 0) {
    ctx.request_stop();
    return;
  }
  if (!options_.node) {
    poll(ctx);
    return;
  }
  if (!fetching_) return;
  fetching_ = false;
  const at::Tensor& t = values.results[node_];
  if (t.numel() != 1) {
    throw InvalidArgument(fmt::format("{}: node '{}' must be a scalar, got shape [{}]",
                                      kEarlyStopping, graph().name(node_),
                                      fmt::join(t.sizes(), ", ")));
  }
  timer_->update_last_triggered_step(fetch_step_);
  // The value belongs to the variables this run left, as an evaluation after the step would.
  consider(ctx, t.item<double>(), graph().global_step_value());
}

void EarlyStoppingHook::poll(SessionRunContext& ctx) {
  const auto m = monitor_.poll(services().metrics());
  if (!m || stopped_step_ >= 0) return;
  consider(ctx, m->value, m->step);
}

void EarlyStoppingHook::consider(SessionRunContext& ctx, double value, int64_t step) {
  ++evaluations_;
  if (monitor_.record(value, step)) {
    if (options_.restore_best) {
      // Host copies: the variables move on with training.
      const auto variables = graph().variables();
      best_variables_.resize(variables.size());
      for (size_t i = 0; i < variables.size(); ++i) {
        best_variables_[i] =
            graph().variable_value(variables[i]).detach().to(at::kCPU, false, true);
      }
      best_variables_step_ = step;
    }
    return;
  }
  if (!monitor_.patience_exhausted()) return;
  stopped_step_ = graph().global_step_value();
  ctx.request_stop();
  const int64_t wait = monitor_.wait();
  const std::string best =
      monitor_.best_step() >= 0
          ? fmt::format("best {:.4g} at step {}", monitor_.best(), monitor_.best_step())
          : fmt::format("baseline {:.4g} not beaten", monitor_.best());
  env().info(fmt::format("{}: {} did not improve for {} evaluation{} ({}); stopping at step {}.",
                         kEarlyStopping, name_, wait, wait == 1 ? "" : "s", best, stopped_step_));
}

void EarlyStoppingHook::end(Session&) {
  const int64_t best_step = monitor_.best_step();
  if (!options_.restore_best || best_step < 0) return;
  if (best_variables_step_ != best_step) {
    env().warning(fmt::format(
        "{}: the best evaluation ({} = {:.4g} at step {}) came before the session was restored; "
        "its variables are not in memory and are not restored.",
        kEarlyStopping, name_, monitor_.best(), best_step));
    return;
  }
  const auto variables = graph().variables();
  if (variables.size() != best_variables_.size()) return;  // a graph cannot gain variables
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < variables.size(); ++i) {
    graph().variable_value(variables[i]).copy_(best_variables_[i]);
  }
  env().info(
      fmt::format("{}: restored the variables of the best evaluation ({} = {:.4g} at step {}).",
                  kEarlyStopping, name_, monitor_.best(), best_step));
}

std::string EarlyStoppingHook::save_state() const {
  return fmt::format("{}\nbest {}\nbest_step {}\nwait {}\nevaluations {}\nstopped_step {}\n",
                     kEarlyStoppingState, monitor_.best(), monitor_.best_step(), monitor_.wait(),
                     evaluations_, stopped_step_);
}

void EarlyStoppingHook::load_state(std::string_view bytes) {
  const internal::HookStateFields state(kEarlyStopping, kEarlyStoppingState, bytes);
  const double best = state.number("best");
  const int64_t best_step = state.integer("best_step");
  const int64_t wait = state.integer("wait");
  const int64_t evaluations = state.integer("evaluations");
  const int64_t stopped_step = state.integer("stopped_step");
  // Assigned only once everything parsed: a bad state leaves the hook as it was.
  monitor_.restore(best, best_step, wait);
  evaluations_ = evaluations;
  stopped_step_ = stopped_step;
}

}  // namespace trainhooks
