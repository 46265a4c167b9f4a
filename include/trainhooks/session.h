// Session: evaluates nodes of a Graph, TF-style, eagerly.
//
// run(fetches, feeds, options, metadata) evaluates each fetch and, lazily, whatever its ops read
// through the Run; every node is evaluated at most once per run (memoised). Feeds replace any
// node for this run; a placeholder's feed is checked against its dtype and shape. Errors name the
// node path from the fetch to the failing node (`loss <- y_pred <- x`) and keep their type, so an
// OutOfRangeError from an input stays an OutOfRangeError. A run that fails before a train op ran
// leaves every variable untouched.
//
//   th::Session sess(g);
//   auto r = sess.run({loss, W}, {{x, xs}, {y, ys}});
//   float l = r[loss].item<float>();
//
// Gradients are recorded only in runs that fetch a train op; other runs evaluate under
// no-grad. A fetched variable is a copy taken when it was evaluated (ops read the live tensor).
//
// record_trace(true) makes the following runs also record what they evaluate into the graph
// (Graph::trace): which nodes each node read and the dtype, shape and device of its value, so
// that the graph can be exported with its edges (graph_export.h). Ops read their inputs through
// closures, so the edges are only known once a run has evaluated them. A recording run costs
// more than a plain one; a plain run costs nothing for the feature (the check is on a branch every
// run already takes when the graph has grown). Off by default; CheckpointSaverHook records one
// run per session.
// Not thread-safe: one run at a time.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trainhooks/env.h"
#include "trainhooks/graph.h"
#include "trainhooks/node.h"
#include "trainhooks/small_vector.h"

namespace trainhooks {

class Session;

struct RunOptions {
  enum TraceLevel { NO_TRACE = 0, SOFTWARE_TRACE = 1, HARDWARE_TRACE = 2, FULL_TRACE = 3 };
  TraceLevel trace_level = NO_TRACE;
  // > 0: the run fails with DeadlineExceededError once it has taken longer (checked between nodes).
  int64_t timeout_in_ms = 0;
  bool report_tensor_allocations_upon_oom = false;

  // TF's merge of hook options: maximum trace level and timeout, OR of flags.
  void merge_from(const RunOptions& other);
  bool operator==(const RunOptions&) const = default;
  bool is_default() const {
    return trace_level == NO_TRACE && timeout_in_ms == 0 && !report_tensor_allocations_upon_oom;
  }
};

// Per-node timings of a traced run (trace_level >= SOFTWARE_TRACE), in evaluation-end order.
struct NodeStats {
  Node node;
  std::string name;
  double start_seconds = 0;  // steady clock of the session's Env
  double end_seconds = 0;
};

struct RunMetadata {
  std::vector<NodeStats> step_stats;
  void clear() { step_stats.clear(); }
};

// The values of one run's fetches, by Node, by name or by position. Up to four values are held
// inline, so that returning a step's results by value allocates nothing.
class RunResults {
 public:
  RunResults() = default;

  const at::Tensor& operator[](Node node) const;
  const at::Tensor& operator[](std::string_view name) const;
  const at::Tensor& at(size_t i) const;
  bool contains(Node node) const;
  size_t size() const { return values_.size(); }
  bool empty() const { return values_.empty(); }
  std::span<const std::pair<Node, at::Tensor>> values() const { return values_; }

  // Building (used by sessions).
  void clear() { values_.clear(); }
  void reserve(size_t n) { values_.reserve(n); }
  void add(Node node, at::Tensor value) { values_.emplace_back(node, std::move(value)); }
  void set_graph(const Graph* graph) { graph_ = graph; }
  // Set when the run stopped at the end of input instead of producing values.
  void set_end_of_input(bool end) { end_of_input_ = end; }
  bool end_of_input() const { return end_of_input_; }

 private:
  const Graph* graph_ = nullptr;
  SmallVector<std::pair<Node, at::Tensor>, 4> values_;
  bool end_of_input_ = false;
};

// What an op's closure reads other nodes through; evaluation is lazy and memoised.
class Run {
 public:
  const at::Tensor& operator[](Node node);
  const at::Tensor& operator[](std::string_view name);
  Session& session() { return *session_; }
  Graph& graph();
  // The global step's host value (no tensor is created).
  int64_t global_step() const;

 private:
  friend class Session;
  explicit Run(Session* session) : session_(session) {}
  Session* session_;
};

class Session {
 public:
  explicit Session(Graph& graph, Env env = {});
  virtual ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  RunResults run(const Fetches& fetches, FeedsView feeds = {}, const RunOptions& options = {},
                 RunMetadata* metadata = nullptr);
  // As run(), into `out` (its capacity is reused: no allocation on a steady loop).
  void run_into(const Fetches& fetches, FeedsView feeds, const RunOptions& options,
                RunMetadata* metadata, RunResults& out);
  // The fast path: fetches already resolved to nodes of this graph.
  void run_nodes(std::span<const Node> fetches, FeedsView feeds, const RunOptions& options,
                 RunMetadata* metadata, RunResults& out);

  // `fetches` as nodes of this graph. Resolved once per distinct fetch list: a loop that asks for
  // the same names every step looks them up once. Valid until the next call.
  std::span<const Node> resolve_fetches(const Fetches& fetches);

  Graph& graph() { return *graph_; }
  const Graph& graph() const { return *graph_; }
  const Env& env() const { return env_; }
  int64_t global_step() const { return graph_->global_step_value(); }
  // Runs completed or attempted by this session.
  uint64_t run_count() const { return run_id_; }

  // From the next run on, until called with false: record each run's evaluation into the graph's
  // traces (Graph::trace), adding to what earlier recording runs found.
  void record_trace(bool on);
  bool recording_trace() const;

 private:
  friend class Run;
  struct Scratch;
  struct Slot;
  // A node's value in this run: the memo, the feed or the live variable, else evaluate_node().
  const at::Tensor& evaluate(Node node);
  const at::Tensor& evaluate_node(size_t i);
  // What evaluate() does not handle: an invalid handle, a cycle, or any read of a recording run.
  const at::Tensor& evaluate_slow(Node node);
  const at::Tensor& evaluate_recorded(size_t i);
  // A train op with MinimizeOptions::accumulate_steps > 1 (node index i).
  void run_accumulating_train_step(size_t i);
  void begin_run(FeedsView feeds, const RunOptions& options, RunMetadata* metadata);
  void end_run();
  [[noreturn]] void rethrow_with_path(const std::exception_ptr& error);

  Graph* graph_;
  Env env_;
  uint64_t run_id_ = 0;
  // One per graph node (scratch_->slots), read on every evaluation without going through scratch_.
  Slot* slots_ = nullptr;
  // 0 during a recording run, so that evaluate() sends every read to evaluate_slow() (and the next
  // run's begin_run() sees a new size and looks at the recording again).
  size_t num_slots_ = 0;
  size_t num_nodes_ = 0;  // the graph's size at the start of the run
  std::unique_ptr<Scratch> scratch_;
  // The last fetch list by name and what it resolved to (resolve_fetches).
  std::vector<std::string> resolved_names_;
  std::vector<Node> resolved_;
};

inline const at::Tensor& Run::operator[](Node node) { return session_->evaluate(node); }

}  // namespace trainhooks
