// LoggingTensorHook: logs the values of nodes every N local runs, every N seconds, and/or at the
// end (TF's).
//
// Counts this hook's runs (not the global step). On a triggering run it fetches its nodes and logs
// `tag1 = v1, tag2 = v2 (0.123 sec)`, the seconds since the previous line (omitted on the first
// line). Tags given as a map are logged in sorted order, nodes given as a list in their order with
// their node names as tags. With at_end it also runs the nodes in end() and logs once more.
// A formatter replaces the line; it receives the values by tag and the elapsed seconds.
//
//   auto hook = std::make_shared<th::LoggingTensorHook>(
//       std::map<std::string, th::NodeRef>{{"loss", loss}, {"step", "global_step"}},
//       th::LoggingTensorHookOptions{.every_n_iter = 100});
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "trainhooks/hook.h"
#include "trainhooks/timer.h"

namespace trainhooks {

using TensorFormatter = std::function<std::string(const std::map<std::string, at::Tensor>& values,
                                                  std::optional<double> elapsed_secs)>;

struct LoggingTensorHookOptions {
  std::optional<int64_t> every_n_iter;
  std::optional<double> every_n_secs;
  bool at_end = false;
  TensorFormatter formatter;
};

class LoggingTensorHook : public SessionRunHook {
 public:
  LoggingTensorHook(std::map<std::string, NodeRef> tensors, LoggingTensorHookOptions options);
  LoggingTensorHook(std::vector<NodeRef> tensors, LoggingTensorHookOptions options);

  void begin() override;
  SessionRunArgs before_run(SessionRunContext& run_context) override;
  void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) override;
  void end(Session& session) override;

 private:
  void validate();
  void log_values(const RunResults& results);

  std::vector<std::pair<std::string, NodeRef>> tags_;  // in logging order
  bool names_as_tags_ = false;
  LoggingTensorHookOptions options_;
  bool only_log_at_end_ = false;
  std::optional<SecondOrStepTimer> timer_;
  Fetches fetches_;
  std::vector<Node> nodes_;
  int64_t iter_count_ = 0;
  bool should_trigger_ = false;
};

}  // namespace trainhooks
