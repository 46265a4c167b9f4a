// MetricsLoggerHook: appends one row of values per logged step to a CSV or JSON Lines file, for
// pandas, a spreadsheet or jq (Keras's CSVLogger, Lightning's CSVLogger).
//
// A row is logged for each run that produces a global step that is a multiple of every_n_steps
// (the step after the run, as SummarySaverHook and EvaluationHook count). On those runs only,
// before_run fetches `nodes`; after_run appends the row: step, wall time (the Env clock's seconds
// since the epoch), the nodes' values in order (columns named by the node names), then each of
// `metrics` read on the graph's LatestMetrics (what an EvaluationHook published, e.g. "eval/loss")
// when it was published since the previous row, else empty (CSV) or null (JSONL), so an evaluation
// shows once, as in Lightning's metrics.csv. NaN and infinities are null in JSONL.
//   csv:    step,wall_time,loss,eval/loss          (the header, written once, when the file is new)
//           200,1700000000.5,0.3125,0.2986
//           300,1700000030.5,0.2875,
//   jsonl:  {"step":200,"wall_time":1700000000.5,"loss":0.3125,"eval/loss":0.2986}
// Each row is written with one write() and not synced: after a kill at most the rows since the
// last checkpoint are lost or torn, and the next session drops them anyway.
//
// Resuming continues the same file. after_create_session (after every restore) keeps the rows
// whose step is at most the session's global step and drops the rest, with a torn last line:
// those rows belong to steps after the restored checkpoint, which the resumed run logs again. So
// the file has every logged step once, as an uninterrupted run's. Dropping rewrites the file
// crash-safely (a temporary file, fsync, rename, fsync of the directory): a kill during it leaves
// the old file or the new one. A fresh run (global step 0) therefore starts the file anew. An
// existing CSV file whose header differs from this hook's columns is a FailedPreconditionError
// (nothing is dropped).
//
// Node values must be scalars; a node's shape is known only once it ran, so another shape is an
// InvalidArgument at the first fetch, naming the node. Options are checked in the constructor.
//
//   hooks.push_back(std::make_shared<th::MetricsLoggerHook>(th::MetricsLoggerHookOptions{
//       .nodes = {loss}, .metrics = {"eval/accuracy", "eval/loss"}, .every_n_steps = 100,
//       .path = logdir + "/metrics.csv"}));
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "trainhooks/hook.h"
#include "trainhooks/node.h"

namespace trainhooks {

class LatestMetrics;

enum class MetricsFormat { kCsv, kJsonl };

struct MetricsLoggerHookOptions {
  // Scalar nodes fetched on logged steps; columns named by the node names.
  std::vector<NodeRef> nodes;
  // Names on LatestMetrics. At least one node or metric; column names unique.
  std::vector<std::string> metrics;
  // > 0.
  int64_t every_n_steps = 100;
  // The file; its directory must exist. Required.
  std::string path;
  MetricsFormat format = MetricsFormat::kCsv;
};

class MetricsLoggerHook : public SessionRunHook {
 public:
  explicit MetricsLoggerHook(MetricsLoggerHookOptions options);
  ~MetricsLoggerHook() override;
  MetricsLoggerHook(const MetricsLoggerHook&) = delete;
  MetricsLoggerHook& operator=(const MetricsLoggerHook&) = delete;

  void begin() override;
  void after_create_session(Session& session, Coordinator& coord) override;
  SessionRunArgs before_run(SessionRunContext& run_context) override;
  void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) override;
  void end(Session& session) override;

  // The column names: step, wall_time, the nodes', the metrics'.
  const std::vector<std::string>& columns() const { return columns_; }
  // Rows dropped by the last after_create_session.
  int64_t dropped_rows() const { return dropped_rows_; }

 private:
  void close_file();
  void write_row(int64_t step, const SessionRunValues& values);

  MetricsLoggerHookOptions options_;
  std::vector<Node> nodes_;
  std::vector<std::string> columns_;
  LatestMetrics* metrics_ = nullptr;
  int fd_ = -1;
  bool logging_ = false;  // this run logs a row
  int64_t dropped_rows_ = 0;
  std::vector<std::pair<uint64_t, int64_t>> seen_;  // per metric: the last publish logged
  std::string line_;                                // reused: no allocation per row once warm
};

}  // namespace trainhooks
