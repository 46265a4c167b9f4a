#include "trainhooks/hooks/logging_tensor_hook.h"

#include <fmt/format.h>

#include "tensor_format.h"
#include "trainhooks/errors.h"
#include "trainhooks/graph.h"

namespace trainhooks {

LoggingTensorHook::LoggingTensorHook(std::map<std::string, NodeRef> tensors,
                                     LoggingTensorHookOptions options)
    : options_(std::move(options)) {
  for (auto& [tag, ref] : tensors) tags_.emplace_back(tag, ref);
  validate();
}

LoggingTensorHook::LoggingTensorHook(std::vector<NodeRef> tensors, LoggingTensorHookOptions options)
    : names_as_tags_(true), options_(std::move(options)) {
  for (auto& ref : tensors) tags_.emplace_back(ref.is_name() ? ref.name() : std::string(), ref);
  validate();
}

void LoggingTensorHook::validate() {
  if (tags_.empty()) throw InvalidArgument("LoggingTensorHook: tensors is empty");
  const auto& o = options_;
  only_log_at_end_ = o.at_end && !o.every_n_iter && !o.every_n_secs;
  if (only_log_at_end_) {
    timer_.reset();  // never triggers before end()
    return;
  }
  timer_.emplace(TimerOptions{.every_secs = o.every_n_secs,
                              .every_steps = o.every_n_iter,
                              .owner = "LoggingTensorHook",
                              .secs_name = "every_n_secs",
                              .steps_name = "every_n_iter",
                              .exactly_one_message = "either at_end and/or exactly one of "
                                                     "every_n_iter and every_n_secs must be "
                                                     "provided."});
}

void LoggingTensorHook::begin() {
  if (timer_) reset_timer(*timer_);
  iter_count_ = 0;
  nodes_.clear();
  fetches_.clear();
  for (auto& [tag, ref] : tags_) {
    Node n = graph().resolve(ref);
    if (names_as_tags_ && tag.empty()) tag = graph().name(n);
    nodes_.push_back(n);
    fetches_.push_back(n);
  }
}

SessionRunArgs LoggingTensorHook::before_run(SessionRunContext&) {
  should_trigger_ = timer_ && timer_->should_trigger_for_step(iter_count_);
  if (!should_trigger_) return {};
  return {fetches_};
}

void LoggingTensorHook::after_run(SessionRunContext&, const SessionRunValues& values) {
  if (should_trigger_) log_values(values.results);
  ++iter_count_;
}

void LoggingTensorHook::end(Session& session) {
  if (!options_.at_end) return;
  log_values(session.run(fetches_));
}

void LoggingTensorHook::log_values(const RunResults& results) {
  std::optional<double> elapsed;
  if (timer_) {
    if (auto e = timer_->update_last_triggered_step(iter_count_)) elapsed = e->seconds;
  } else {
    // at_end only: the first and only line has no previous one to measure from.
  }
  if (options_.formatter) {
    std::map<std::string, at::Tensor> by_tag;
    for (size_t i = 0; i < tags_.size(); ++i) by_tag[tags_[i].first] = results[nodes_[i]];
    env().info(options_.formatter(by_tag, elapsed));
    return;
  }
  std::string line;
  for (size_t i = 0; i < tags_.size(); ++i) {
    if (i) line += ", ";
    line += tags_[i].first;
    line += " = ";
    line += internal::format_tensor(results[nodes_[i]]);
  }
  if (elapsed) line += fmt::format(" ({:.3f} sec)", *elapsed);
  env().info(line);
}

}  // namespace trainhooks
