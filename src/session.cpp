#include "trainhooks/session.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/scalar_tensor.h>
#include <c10/core/AutogradState.h>
#include <c10/util/Exception.h>

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "autograd_leaves.h"
#include "graph_internal.h"
#include "tensor_format.h"
#include "train_op.h"
#include "trainhooks/errors.h"
#include "trainhooks/malloc_tuning.h"

namespace trainhooks {

using internal::GraphInternal;
using internal::NodeEntry;

// ---- RunOptions -------------------------------------------------------------------------------

void RunOptions::merge_from(const RunOptions& other) {
  trace_level = std::max(trace_level, other.trace_level);
  timeout_in_ms = std::max(timeout_in_ms, other.timeout_in_ms);
  report_tensor_allocations_upon_oom =
      report_tensor_allocations_upon_oom || other.report_tensor_allocations_upon_oom;
}

// ---- RunResults -------------------------------------------------------------------------------

const at::Tensor& RunResults::operator[](Node node) const {
  for (const auto& [n, v] : values_)
    if (n == node) return v;
  std::string name = graph_ && node.index >= 0 && static_cast<size_t>(node.index) < graph_->size()
                         ? graph_->name(node)
                         : std::to_string(node.index);
  if (end_of_input_) {
    throw OutOfRangeError(fmt::format("No value for '{}': the run reached the end of input", name));
  }
  throw NotFoundError(fmt::format("'{}' was not fetched in this run", name));
}

const at::Tensor& RunResults::operator[](std::string_view name) const {
  if (graph_) {
    for (const auto& [n, v] : values_)
      if (graph_->name(n) == name) return v;
  }
  if (end_of_input_) {
    throw OutOfRangeError(fmt::format("No value for '{}': the run reached the end of input", name));
  }
  throw NotFoundError(fmt::format("'{}' was not fetched in this run", name));
}

const at::Tensor& RunResults::at(size_t i) const {
  if (i >= values_.size()) {
    throw InvalidArgument(
        fmt::format("RunResults::at: index {} out of range (size {})", i, values_.size()));
  }
  return values_[i].second;
}

bool RunResults::contains(Node node) const {
  for (const auto& kv : values_)
    if (kv.first == node) return true;
  return false;
}

// ---- Run --------------------------------------------------------------------------------------

const at::Tensor& Run::operator[](std::string_view name) {
  return session_->evaluate(session_->graph().find(name));
}
Graph& Run::graph() { return session_->graph(); }
int64_t Run::global_step() const { return session_->global_step(); }

// ---- Session ----------------------------------------------------------------------------------

// A node's value in the current run. Everything an evaluation reads is here, so that reading a
// node that is fed, a variable or already evaluated costs a compare and a load.
struct Session::Slot {
  // value is this run's iff stamp == run_id_, or always for stamp == kAlways (a variable or a
  // constant: value is the graph's live tensor). Null while the node is being evaluated (a node
  // reached again then is a cycle).
  static constexpr uint64_t kAlways = UINT64_MAX;
  uint64_t stamp = 0;
  // &memo, the caller's feed (Feeds outlive the run: a feed is not copied, no reference count
  // changes) or the variable's tensor in the graph.
  const at::Tensor* value = nullptr;
  at::Tensor memo;
};

struct Session::Scratch {
  std::vector<Slot> slots;
  std::vector<int32_t> evaluated;
  // The nodes an error passed through, innermost first: each evaluation the error leaves adds
  // itself, so that nothing is kept per node while no error is raised.
  std::vector<int32_t> error_path;
  RunMetadata* metadata = nullptr;
  bool tracing = false;
  bool watched = false;           // tracing or a timeout: the clock is read after each node
  bool inputs_evaluated = false;  // an input's batch to release at the end of the run
  int64_t timeout_ms = 0;
  double deadline = 0;
  // The global step when the run began: what fetching the global step gives in this run, before
  // a train op's increment (TF's hooks see 0 in the first step).
  int64_t global_step_at_start = 0;
  // record_trace(): asked for, and this run records. `reading`: the nodes being evaluated,
  // innermost last (the reader of the next read).
  bool record_requested = false;
  bool recording = false;
  std::vector<int32_t> reading;
};

namespace {

using internal::format_dtype;
using internal::format_shape;

void check_feed(const NodeEntry& e, const at::Tensor& value) {
  if (!value.defined())
    throw InvalidArgument(fmt::format("The value fed for '{}' is undefined", e.name));
  if (e.kind != NodeKind::kPlaceholder) return;
  const auto& spec = e.placeholder;
  if (spec.dtype && value.scalar_type() != *spec.dtype) {
    throw InvalidArgument(
        fmt::format("Cannot feed value of dtype {} for placeholder '{}', which has dtype {}",
                    format_dtype(value.scalar_type()), e.name, format_dtype(*spec.dtype)));
  }
  if (spec.shape.known()) {
    const auto& want = spec.shape.dims();
    const auto have = value.sizes();
    bool ok = have.size() == want.size();
    for (size_t i = 0; ok && i < want.size(); ++i) ok = want[i] == -1 || want[i] == have[i];
    if (!ok) {
      throw InvalidArgument(
          fmt::format("Cannot feed value of shape {} for placeholder '{}', which has shape {}",
                      format_shape(have), e.name, format_shape(want)));
    }
  }
}

}  // namespace

Session::Session(Graph& graph, Env env)
    : graph_(&graph), env_(env.or_else(Env::system())), scratch_(std::make_unique<Scratch>()) {
  // Before the first step allocates: LibTorch's per-step memory then stays in the heap.
  apply_malloc_tuning();
}

Session::~Session() = default;

RunResults Session::run(const Fetches& fetches, FeedsView feeds, const RunOptions& options,
                        RunMetadata* metadata) {
  RunResults out;
  run_into(fetches, feeds, options, metadata, out);
  return out;
}

// Inline: run_nodes() is its only caller, once per run.
[[gnu::always_inline]] inline void Session::begin_run(FeedsView feeds, const RunOptions& options,
                                                      RunMetadata* metadata) {
  auto& s = *scratch_;
  auto& gs = GraphInternal::state(*graph_);
  const size_t n = gs.nodes.size();
  if (num_slots_ != n) {  // new nodes, and the old ones moved: no slot's pointer is kept
    s.slots.assign(n, Slot{});
    slots_ = s.slots.data();
    num_slots_ = n;
    num_nodes_ = n;
    s.recording = s.record_requested;
    if (s.recording) {
      // Every read of this run then misses evaluate()'s bounds and reaches evaluate_slow(), which
      // records it; and the next run comes here again.
      num_slots_ = 0;
      s.reading.clear();
      gs.traces.resize(n);
    }
  }
  ++run_id_;
  ++gs.run_serial;
  s.global_step_at_start = gs.global_step_value;
  // evaluated and error_path are empty here: end_run and rethrow_with_path leave them so.
  s.metadata = metadata;
  s.tracing = options.trace_level >= RunOptions::SOFTWARE_TRACE && metadata != nullptr;
  if (metadata) metadata->clear();
  s.timeout_ms = options.timeout_in_ms;
  s.watched = s.tracing || s.timeout_ms > 0;
  if (s.timeout_ms > 0)
    s.deadline = env_.clock->steady_seconds() + static_cast<double>(s.timeout_ms) / 1000.0;

  for (const auto& feed : feeds) {
    Node node = graph_->resolve(feed.node);
    const auto& e = gs.nodes[node.index];
    Slot& slot = slots_[node.index];
    if (slot.stamp == run_id_) {
      throw InvalidArgument(fmt::format("Node '{}' is fed more than once in the same run", e.name));
    }
    check_feed(e, feed.value);
    slot.stamp = run_id_;
    slot.value = &feed.value;
  }
}

[[gnu::always_inline]] inline void Session::end_run() {
  auto& s = *scratch_;
  // Release this run's intermediate values (activations) and input batches now rather than at the
  // next run, so that nothing of a step outlives it (results keep their own references). This
  // did not measurably change the Fashion-MNIST step time (docs/benchmarks.md).
  auto& gs = GraphInternal::state(*graph_);
  for (int32_t i : s.evaluated) slots_[i].memo.reset();
  if (s.inputs_evaluated) {
    for (int32_t i : s.evaluated) {
      const auto& e = gs.nodes[static_cast<size_t>(i)];
      if (e.kind == NodeKind::kInput) gs.inputs[e.input_group].batch.clear();
    }
    s.inputs_evaluated = false;
  }
  s.evaluated.clear();
  s.metadata = nullptr;
}

std::span<const Node> Session::resolve_fetches(const Fetches& fetches) {
  const auto refs = fetches.refs();
  // The usual step, `run(train_op, ...)`: the one handle of last time.
  if (refs.size() == 1 && resolved_.size() == 1 && !refs[0].is_name() &&
      resolved_[0] == refs[0].node() && resolved_names_[0].empty()) [[likely]]
    return resolved_;
  // The same list as last time? Handles compare as integers, names as strings (no lookup).
  bool same = refs.size() == resolved_.size();
  for (size_t i = 0; same && i < refs.size(); ++i) {
    const NodeRef& ref = refs[i];
    same = ref.is_name() ? resolved_names_[i] == ref.name() && !ref.name().empty()
                         : resolved_names_[i].empty() && resolved_[i] == ref.node();
  }
  if (same) return resolved_;
  resolved_.clear();
  resolved_names_.clear();
  for (const auto& ref : refs) {
    resolved_.push_back(graph_->resolve(ref));
    resolved_names_.push_back(ref.is_name() ? ref.name() : std::string());
  }
  return resolved_;
}

void Session::run_into(const Fetches& fetches, FeedsView feeds, const RunOptions& options,
                       RunMetadata* metadata, RunResults& out) {
  run_nodes(resolve_fetches(fetches), feeds, options, metadata, out);
}

namespace {

// The thread's grad mode for one run, restored after it. The thread-local AutogradState is
// looked up once: each GradMode::is_enabled() / set_enabled() is a call into libc10 and a
// thread-local lookup (~40 instructions), and a guard made four of them per evaluation run.
class RunGradMode {
 public:
  explicit RunGradMode(bool enabled)
      : state_(c10::AutogradState::get_tls_state()), previous_(state_.get_grad_mode()) {
    if (previous_ != enabled) state_.set_grad_mode(enabled);
  }
  ~RunGradMode() {
    if (state_.get_grad_mode() != previous_) state_.set_grad_mode(previous_);
  }
  RunGradMode(const RunGradMode&) = delete;
  RunGradMode& operator=(const RunGradMode&) = delete;

 private:
  c10::AutogradState& state_;
  bool previous_;
};

}  // namespace

void Session::run_nodes(std::span<const Node> fetches, FeedsView feeds, const RunOptions& options,
                        RunMetadata* metadata, RunResults& out) {
  out.clear();
  out.set_graph(graph_);
  out.set_end_of_input(false);
  const auto& gs = GraphInternal::state(*graph_);
  const auto& nodes = gs.nodes;
  // Gradients only for runs that fetch a train op: evaluation runs keep no autograd graph.
  bool train = false;
  bool accumulates = false;
  for (Node n : fetches) {
    if (n.index < 0 || static_cast<size_t>(n.index) >= nodes.size()) {
      throw InvalidArgument(
          fmt::format("Invalid node handle {} (the graph has {} nodes)", n.index, nodes.size()));
    }
    if (nodes[n.index].kind == NodeKind::kTrainOp) {
      train = true;
      if (gs.train_ops[nodes[n.index].train_index].accumulate_steps > 1) accumulates = true;
    }
  }
  const RunGradMode grad_mode(train);
  try {
    begin_run(feeds, options, metadata);
    out.reserve(fetches.size());
    // An accumulating train op first, whatever the fetch order: the other fetches then see the
    // run's values after it (the loss's mean over the micro-batches), not its first micro-batch.
    if (accumulates) [[unlikely]] {
      for (Node n : fetches)
        if (nodes[n.index].kind == NodeKind::kTrainOp) evaluate(n);
    }
    for (Node n : fetches) {
      const at::Tensor& value = evaluate(n);
      // A fetched variable is a snapshot, as in TF: later steps must not change a kept result.
      // Ops still read the live tensor through the Run.
      bool live_variable =
          nodes[n.index].kind == NodeKind::kVariable && slots_[n.index].stamp != run_id_;
      out.add(n, live_variable ? value.detach().clone() : value);
    }
  } catch (...) {
    auto error = std::current_exception();
    end_run();
    out.clear();
    rethrow_with_path(error);
  }
  end_run();
}

void Session::rethrow_with_path(const std::exception_ptr& error) {
  auto& path = scratch_->error_path;
  if (path.empty()) std::rethrow_exception(error);
  std::string where;
  // Outermost (the fetch) first.
  for (auto it = path.rbegin(); it != path.rend(); ++it) {
    if (it != path.rbegin()) where += " <- ";
    where += GraphInternal::state(*graph_).nodes[*it].name;
  }
  path.clear();
  Code code = Code::kUnknown;
  std::string message;
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    code = e.code();
    message = e.what();
  } catch (const c10::Error& e) {
    code = Code::kInvalidArgument;
    message = e.what_without_backtrace();
  } catch (const std::exception& e) {
    message = e.what();
  } catch (...) {
    message = "unknown exception";
  }
  throw_error(code, fmt::format("{} [while evaluating {}]", message, where));
}

const at::Tensor& Session::evaluate(Node node) {
  const auto i = static_cast<size_t>(node.index);  // a negative index becomes a large one
  if (i < num_slots_) [[likely]] {
    const Slot& slot = slots_[i];
    if (slot.stamp < run_id_) return evaluate_node(i);
    if (slot.value) [[likely]]
      return *slot.value;  // this run's, or a variable's
  }
  return evaluate_slow(node);
}

const at::Tensor& Session::evaluate_slow(Node node) {
  if (node.index < 0 || static_cast<size_t>(node.index) >= num_nodes_) {
    throw InvalidArgument(
        fmt::format("Invalid node handle {} (the graph has {} nodes)", node.index, num_nodes_));
  }
  const auto i = static_cast<size_t>(node.index);
  if (scratch_->recording) return evaluate_recorded(i);
  scratch_->error_path.assign(1, node.index);
  throw InvalidArgument(fmt::format("Cycle detected: node '{}' depends on itself",
                                    GraphInternal::state(*graph_).nodes[node.index].name));
}

void Session::record_trace(bool on) {
  scratch_->record_requested = on;
  num_slots_ = 0;  // the next begin_run() looks at the request
}

bool Session::recording_trace() const { return scratch_->record_requested; }

namespace {

NodeTrace& trace_of(internal::GraphState& gs, size_t i) {
  auto& trace = gs.traces[i];
  if (!trace) trace.emplace();
  return *trace;
}

void add_input(NodeTrace& trace, int32_t input) {
  for (Node n : trace.inputs)
    if (n.index == input) return;
  trace.inputs.push_back(Node{input});
}

void note_value(NodeTrace& trace, const at::Tensor& value) {
  if (!value.defined()) return;
  trace.dtype = value.scalar_type();
  trace.shape.assign(value.sizes().begin(), value.sizes().end());
  trace.device = value.device().str();
}

}  // namespace

// A read of a recording run: evaluate() as usual, noting who read what and what it gave.
const at::Tensor& Session::evaluate_recorded(size_t i) {
  auto& s = *scratch_;
  auto& gs = GraphInternal::state(*graph_);
  const auto index = static_cast<int32_t>(i);
  if (!s.reading.empty()) add_input(trace_of(gs, static_cast<size_t>(s.reading.back())), index);
  NodeTrace& trace = trace_of(gs, i);
  const Slot& slot = slots_[i];
  if (slot.stamp >= run_id_) {
    if (!slot.value) {  // being evaluated: a cycle
      s.error_path.assign(1, index);
      throw InvalidArgument(
          fmt::format("Cycle detected: node '{}' depends on itself", gs.nodes[i].name));
    }
    note_value(trace, *slot.value);
    return *slot.value;
  }
  s.reading.push_back(index);
  const at::Tensor* value = nullptr;
  try {
    value = &evaluate_node(i);
  } catch (...) {
    s.reading.pop_back();
    throw;
  }
  s.reading.pop_back();
  note_value(trace, *value);  // traces is sized once per run: `trace` is still valid
  if (gs.nodes[i].kind == NodeKind::kOp && value->defined() && value->grad_fn()) {
    // The variables the op used without reading them through the Run (a module's parameters in
    // its forward): those its value's autograd graph reaches before reaching an input's.
    std::vector<const at::Tensor*> stop;
    for (Node n : trace.inputs) {
      const Slot& in = slots_[n.index];
      if (in.value && (in.stamp == run_id_ || in.stamp == Slot::kAlways)) stop.push_back(in.value);
    }
    const std::vector<const c10::TensorImpl*> leaves = internal::autograd_leaves(*value, stop);
    // In graph order, not the walk's: the same model gives the same inputs.
    for (size_t v = 0; v < gs.nodes.size(); ++v) {
      const NodeEntry& e = gs.nodes[v];
      if (e.kind == NodeKind::kVariable &&
          std::find(leaves.begin(), leaves.end(), e.value.unsafeGetTensorImpl()) != leaves.end()) {
        add_input(trace, static_cast<int32_t>(v));
      }
    }
  }
  return *value;
}

// Out of line: the try block and the tracing keep the lookup above small.
const at::Tensor& Session::evaluate_node(size_t i) {
  auto& s = *scratch_;
  auto& gs = GraphInternal::state(*graph_);
  const Node node{static_cast<int32_t>(i)};
  Slot& slot = slots_[i];
  NodeEntry& e = gs.nodes[i];
  // Variables and constants are read in place, from now on without coming here (until the graph
  // grows: begin_run resets the slots then).
  if (e.kind == NodeKind::kVariable || e.kind == NodeKind::kConstant) {
    slot.stamp = Slot::kAlways;
    slot.value = &e.value;
    return e.value;
  }
  slot.stamp = run_id_;
  slot.value = nullptr;
  double start = s.tracing ? env_.clock->steady_seconds() : 0;
  try {
    at::Tensor value;
    switch (e.kind) {
      case NodeKind::kPlaceholder: {
        const auto& spec = e.placeholder;
        std::string shape = spec.shape.known() ? format_shape(spec.shape.dims()) : "any";
        std::string dtype = spec.dtype ? format_dtype(*spec.dtype) : "any";
        throw InvalidArgument(
            fmt::format("You must feed a value for placeholder '{}' with dtype {} and shape {}",
                        e.name, dtype, shape));
      }
      case NodeKind::kOp: {
        Run run(this);
        value = e.fn(run);
        // Adding nodes moves the graph's nodes, which the slots point into (variables).
        if (gs.nodes.size() != num_nodes_) {
          throw FailedPreconditionError(fmt::format(
              "Op '{}' added nodes to the graph during a run: build the graph before running it",
              gs.nodes[i].name));
        }
        break;
      }
      case NodeKind::kInput: {
        s.inputs_evaluated = true;
        auto& group = gs.inputs[e.input_group];
        if (group.batch_serial != gs.run_serial) {
          internal::next_batch(group);
          group.batch_serial = gs.run_serial;
        }
        value = group.batch[e.component];
        break;
      }
      case NodeKind::kGlobalStep:
        value = at::scalar_tensor(s.global_step_at_start, at::kLong);
        break;
      case NodeKind::kTrainOp: {
        auto& t = gs.train_ops[e.train_index];
        if (t.accumulate_steps > 1) [[unlikely]] {
          run_accumulating_train_step(i);
          break;
        }
        const at::Tensor& loss = evaluate(t.loss);
        internal::run_train_step(t, loss, {.train_op = e.name, .loss = gs.nodes[t.loss.index].name},
                                 gs.global_step_value);
        break;
      }
      case NodeKind::kVariable:
      case NodeKind::kConstant:
        break;
    }
    slot.memo = std::move(value);
  } catch (...) {
    s.error_path.push_back(static_cast<int32_t>(i));
    throw;
  }
  slot.value = &slot.memo;
  s.evaluated.push_back(static_cast<int32_t>(i));
  if (!s.error_path.empty()) s.error_path.clear();  // an error caught inside an op is not ours
  if (s.watched) {
    if (s.tracing)
      s.metadata->step_stats.push_back({node, e.name, start, env_.clock->steady_seconds()});
    if (s.timeout_ms > 0 && env_.clock->steady_seconds() > s.deadline) {
      throw DeadlineExceededError(fmt::format(
          "Run exceeded its timeout of {} ms after evaluating '{}'", s.timeout_ms, e.name));
    }
  }
  return slot.memo;
}

// Each micro-batch after the first starts from a clean slate: every value this run computed so far
// is dropped (ops run again, the graph's inputs give their next batch), while fed values,
// variables and constants stay. Nodes still being evaluated (this train op, an op that evaluates
// it) are not in `evaluated` and keep their slots.
void Session::run_accumulating_train_step(size_t i) {
  auto& s = *scratch_;
  auto& gs = GraphInternal::state(*graph_);
  const NodeEntry& e = gs.nodes[i];
  auto& t = gs.train_ops[e.train_index];
  const Node loss_node = t.loss;
  auto micro_batch_loss = [&](int64_t k) -> const at::Tensor& {
    if (k > 0) {
      for (int32_t j : s.evaluated) {
        slots_[j].stamp = 0;
        slots_[j].memo.reset();
      }
      s.evaluated.clear();
      ++gs.run_serial;
    }
    return evaluate(loss_node);
  };
  at::Tensor mean = internal::run_accumulating_train_step(
      t, micro_batch_loss, {.train_op = e.name, .loss = gs.nodes[loss_node.index].name},
      gs.global_step_value);
  // What fetching the loss in this run gives: the mean over the window, as one batch of K*B.
  Slot& slot = slots_[loss_node.index];
  if (slot.stamp == run_id_ && slot.value == &slot.memo) slot.memo = std::move(mean);
}

}  // namespace trainhooks
