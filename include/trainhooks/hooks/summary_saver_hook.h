// SummarySaverHook: writes summaries to a TensorBoard event file every N steps or seconds (TF's).
//
// before_run: on the first run, and then when its SecondOrStepTimer triggers for the next step,
// it fetches its summary nodes (every summary of the graph unless `summaries` names some), so the
// nodes are evaluated only on the steps that are written. after_run: on the first run it writes
// SessionLog START at the global step (TensorBoard then drops points an earlier, interrupted run
// wrote beyond it); on a writing step it writes one event with every fetched value at the global
// step after the run. end(): flushes the writer. Needs a global step.
//
//   th::summary::scalar(g, "loss", loss);
//   hooks.push_back(std::make_shared<th::SummarySaverHook>(
//       th::SummarySaverHookOptions{.save_steps = 100, .output_dir = "runs/exp1"}));
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainhooks/hook.h"
#include "trainhooks/timer.h"

namespace trainhooks {

namespace summary {
class EventWriter;
}

struct SummarySaverHookOptions {
  // Exactly one.
  std::optional<int64_t> save_steps;
  std::optional<double> save_secs;
  // Exactly one: a directory (its process-wide writer is used) or a writer.
  std::string output_dir;
  std::shared_ptr<summary::EventWriter> summary_writer;
  // Summary nodes to write; empty: every summary node of the graph.
  std::vector<NodeRef> summaries;
};

class SummarySaverHook : public SessionRunHook {
 public:
  explicit SummarySaverHook(SummarySaverHookOptions options);

  void begin() override;
  SessionRunArgs before_run(SessionRunContext& run_context) override;
  void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) override;
  void end(Session& session) override;

  const std::shared_ptr<summary::EventWriter>& summary_writer() const { return writer_; }

 private:
  SummarySaverHookOptions options_;
  SecondOrStepTimer timer_;
  std::shared_ptr<summary::EventWriter> writer_;
  Fetches fetches_;
  std::vector<Node> nodes_;
  std::optional<int64_t> next_step_;
  bool request_summary_ = false;
};

}  // namespace trainhooks
