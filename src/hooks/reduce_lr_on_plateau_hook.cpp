#include "trainhooks/hooks/reduce_lr_on_plateau_hook.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/optim/optimizer.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <sstream>
#include <utility>

#include "hook_state_text.h"
#include "trainhooks/errors.h"
#include "trainhooks/metrics_board.h"

namespace trainhooks {

namespace {

constexpr const char* kName = "ReduceLROnPlateauHook";
constexpr const char* kStateHeader = "reduce_lr_on_plateau 1";

void check_non_negative(const char* option, int64_t value) {
  if (value >= 0) return;
  throw InvalidArgument(fmt::format("{}: {} must be non-negative, got {}", kName, option, value));
}

void check_finite_non_negative(const char* option, double value) {
  if (std::isfinite(value) && value >= 0) return;
  throw InvalidArgument(
      fmt::format("{}: {} must be a finite, non-negative number, got {}", kName, option, value));
}

const ReduceLROnPlateauOptions& validated(const ReduceLROnPlateauOptions& o) {
  if (o.monitor.empty()) throw InvalidArgument("ReduceLROnPlateauHook: monitor must name a metric");
  if (o.mode != PlateauMode::kMin && o.mode != PlateauMode::kMax) {
    throw InvalidArgument(
        fmt::format("{}: mode must be kMin or kMax, got {}", kName, static_cast<int>(o.mode)));
  }
  if (!(o.factor > 0 && o.factor < 1)) {
    throw InvalidArgument(fmt::format("{}: factor must be in (0, 1), got {}", kName, o.factor));
  }
  check_non_negative("patience", o.patience);
  check_non_negative("cooldown", o.cooldown);
  check_finite_non_negative("min_lr", o.min_lr);
  check_finite_non_negative("min_delta", o.min_delta);
  return o;
}

[[noreturn]] void bad_state(const std::string& why) { internal::bad_hook_state(kName, why); }

double parse_double(const std::string& key, const std::string& text) {
  return internal::parse_hook_state_double(kName, key, text);
}

int64_t parse_int(const std::string& key, const std::string& text) {
  return internal::parse_hook_state_int(kName, key, text);
}

}  // namespace

ReduceLROnPlateauHook::ReduceLROnPlateauHook(Node train_op, ReduceLROnPlateauOptions options)
    : train_op_(train_op), options_(validated(options)) {
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
  best_ = options_.mode == PlateauMode::kMin ? std::numeric_limits<double>::infinity()
                                             : -std::numeric_limits<double>::infinity();
  wait_ = 0;
  cooldown_counter_ = 0;
  scale_ = 1;
  reductions_ = 0;
  last_metric_step_ = -1;
  learning_rates_.clear();
}

void ReduceLROnPlateauHook::begin() {
  if (graph().kind(train_op_) != NodeKind::kTrainOp) {
    throw InvalidArgument(
        fmt::format("{}: train_op '{}' is not a train op", kName, graph().name(train_op_)));
  }
  // A restore (after begin) loads the checkpointed state over this.
  reset();
  board_ = &metrics_board(graph());
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
          "{}: not re-applying its learning rates: {} were saved for {} parameter groups", kName,
          learning_rates_.size(), groups.size()));
    }
  }
  // Versions count publishes within this process: what is on the board now was measured before
  // this session (or, after a restore, in a timeline the restore went back from).
  const auto current = board_->latest(options_.monitor);
  seen_version_ = current ? current->version : 0;
  seen_step_ = current ? current->step : std::numeric_limits<int64_t>::min();
}

SessionRunArgs ReduceLROnPlateauHook::before_run(SessionRunContext&) {
  poll();
  return {};
}

void ReduceLROnPlateauHook::after_run(SessionRunContext&, const SessionRunValues&) { poll(); }

void ReduceLROnPlateauHook::poll() {
  const auto m = board_->latest(options_.monitor);
  if (!m) {
    if (warned_missing_) return;
    const auto names = board_->names();  // no allocation while the board is empty
    if (names.empty()) return;
    warned_missing_ = true;
    env().warning(fmt::format(
        "{}: the monitored metric '{}' is not on the metrics board; the learning rate is not "
        "reduced until it is published. Available metrics: {}",
        kName, options_.monitor, fmt::join(names, ", ")));
    return;
  }
  if (m->version == seen_version_ && m->step == seen_step_) return;
  seen_version_ = m->version;
  seen_step_ = m->step;
  consider(*m);
}

void ReduceLROnPlateauHook::consider(const MetricValue& m) {
  last_metric_step_ = m.step;
  if (cooldown_counter_ > 0) {
    --cooldown_counter_;
    wait_ = 0;
  }
  const bool improved = options_.mode == PlateauMode::kMin ? m.value < best_ - options_.min_delta
                                                           : m.value > best_ + options_.min_delta;
  if (improved) {
    best_ = m.value;
    wait_ = 0;
  } else if (cooldown_counter_ == 0) {
    ++wait_;
    if (wait_ >= options_.patience) reduce();
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
  ++reductions_;
  env().info(
      fmt::format("{}: {} did not improve for {} evaluation{}; learning rate {:g} -> {:g} "
                  "(step {})",
                  kName, options_.monitor, wait_, wait_ == 1 ? "" : "s", old_lr, new_lr,
                  graph().global_step_value()));
  cooldown_counter_ = options_.cooldown;
  wait_ = 0;
}

std::string ReduceLROnPlateauHook::save_state() const {
  return fmt::format(
      "{}\nbest {}\nwait {}\ncooldown_counter {}\nscale {}\nreductions {}\n"
      "last_metric_step {}\nlearning_rates {}\n",
      kStateHeader, best_, wait_, cooldown_counter_, scale_, reductions_, last_metric_step_,
      fmt::join(learning_rates_, ","));
}

void ReduceLROnPlateauHook::load_state(std::string_view bytes) {
  std::istringstream in{std::string(bytes)};
  std::string line;
  if (!std::getline(in, line) || line != kStateHeader) bad_state("unknown format '" + line + "'");
  std::map<std::string, std::string> fields;
  while (std::getline(in, line)) {
    const auto space = line.find(' ');
    if (space == std::string::npos) {
      fields[line] = "";
    } else {
      fields[line.substr(0, space)] = line.substr(space + 1);
    }
  }
  auto field = [&](const char* key) -> const std::string& {
    auto it = fields.find(key);
    if (it == fields.end()) bad_state(std::string("missing ") + key);
    return it->second;
  };
  const double best = parse_double("best", field("best"));
  const int64_t wait = parse_int("wait", field("wait"));
  const int64_t cooldown_counter = parse_int("cooldown_counter", field("cooldown_counter"));
  const double scale = parse_double("scale", field("scale"));
  const int64_t reductions = parse_int("reductions", field("reductions"));
  const int64_t last_metric_step = parse_int("last_metric_step", field("last_metric_step"));
  std::vector<double> rates;
  std::istringstream list(field("learning_rates"));
  for (std::string item; std::getline(list, item, ',');)
    rates.push_back(parse_double("learning_rates", item));
  // Assigned only once everything parsed: a bad state leaves the hook as it was.
  best_ = best;
  wait_ = wait;
  cooldown_counter_ = cooldown_counter;
  scale_ = scale;
  reductions_ = reductions;
  last_metric_step_ = last_metric_step;
  learning_rates_ = std::move(rates);
}

}  // namespace trainhooks
