// Graph: the named nodes of a model and the training state they own.
//
// A node is a named, lazily evaluated value: a placeholder (fed per run), a variable (state that
// persists across runs), a constant, an op (a closure that reads other nodes through a Run), an
// input batch (pulled from a dataset once per run that needs it), the global step, or a train op
// (made by minimize()). Nodes are evaluated by a Session; the Graph owns their state: variable
// tensors, optimizer state, the global step and input positions, so that a checkpoint of the
// graph is a checkpoint of training.
//
//   th::Graph g;
//   auto x = g.placeholder("x", {.dtype = torch::kFloat, .shape = {-1}});
//   auto W = g.variable("W", torch::zeros({1}));
//   auto y = g.op("y", [=](th::Run& r) { return r[x] * r[W]; });
//   auto train = g.minimize("train", loss, th::sgd(0.01));
//
// finalize() (done by the monitored sessions) forbids adding nodes. A Graph is neither copyable
// nor movable: sessions and hooks hold references to it. Not thread-safe: build it on one thread.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <typeindex>
#include <typeinfo>
#include <utility>
#include <vector>

#include "trainhooks/gradient_transforms.h"
#include "trainhooks/input.h"
#include "trainhooks/node.h"
#include "trainhooks/optimizers.h"

namespace torch::nn {
class Module;
}

namespace trainhooks {

class Run;

namespace internal {
struct GraphState;
class GraphInternal;
}  // namespace internal

enum class NodeKind { kPlaceholder, kVariable, kConstant, kOp, kInput, kGlobalStep, kTrainOp };
const char* node_kind_name(NodeKind kind);  // "placeholder", "variable", ...

// A placeholder's shape: `{-1, 28, 28}` (-1: any size in that dimension), `{}` or unset: any
// shape, Shape::scalar(): rank 0.
class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims), known_(true) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)), known_(true) {}
  static Shape scalar() { return Shape(std::vector<int64_t>{}); }

  bool known() const { return known_; }
  const std::vector<int64_t>& dims() const { return dims_; }

 private:
  std::vector<int64_t> dims_;
  bool known_ = false;
};

struct PlaceholderOptions {
  std::optional<c10::ScalarType> dtype;  // unset: any dtype
  Shape shape;
};

struct VariableOptions {
  bool trainable = true;
};

struct MinimizeOptions {
  // Clip the gradients' global L2 norm to this value before the optimizer step: the first
  // gradient transform, clip_by_global_norm(*clip_global_norm).
  std::optional<double> clip_global_norm;
  // Applied in this order after clip_global_norm, between backward and the optimizer step
  // (gradient_transforms.h). Empty: the gradients reach the optimizer as backward made them.
  std::vector<GradientTransform> gradient_transforms;
  // Variables to train; empty: every trainable variable that exists when minimize() is called.
  // The transforms' gradients are in this order.
  std::vector<Node> var_list;
  // Gradient accumulation: each run of the train op evaluates the loss this many times (K
  // micro-batches: the graph's inputs give a new batch each time, fed values stay the same),
  // adds up the gradients of loss / K, then runs the gradient transforms (clipping, averaging
  // across ranks) and the optimizer once: one step on a batch K times as large. The global step
  // counts optimizer steps. In that run the loss's value is the mean of the K losses; the other
  // nodes have their last micro-batch's values.
  int64_t accumulate_steps = 1;
};

using OpFn = std::function<at::Tensor(Run&)>;

// What recording runs (Session::record_trace) saw of a node: its edges and its value's type.
// Ops read other nodes inside their closures, so a node's inputs are known only once a recording
// run has evaluated it.
struct NodeTrace {
  // The nodes it read, in the order of their first read: through the Run (`r[x]`), a train op's
  // loss, and the variables its value's autograd graph reaches directly, before any input's
  // value (a module's parameters used in the op's forward pass). Union over recording runs.
  std::vector<Node> inputs;
  // Its value in the last recording run that evaluated or read it (unset for an undefined value,
  // a train op's): dtype, sizes, device ("cpu", "cuda:0").
  std::optional<c10::ScalarType> dtype;
  std::vector<int64_t> shape;
  std::string device;
};

// State that checkpoints save beside the variables (a hook's counters, a timer). Registered with
// Graph::register_state under a unique key; the bytes are the provider's own encoding.
class StateProvider {
 public:
  virtual ~StateProvider() = default;
  virtual std::string save_state() const = 0;
  virtual void load_state(std::string_view bytes) = 0;
};

class Graph;

// A StateProvider registered with a Graph for the lifetime of this object: registered on
// construction (as Graph::register_state), unregistered by reset() or the destructor, so the
// graph never keeps a pointer to a provider whose owner has gone. MonitoredSession keeps one per
// hook that declares state (SessionRunHook::state()). Movable, not copyable; the Graph must
// outlive it.
class StateRegistration {
 public:
  StateRegistration() = default;
  StateRegistration(Graph& graph, std::string key, StateProvider* provider);
  ~StateRegistration() { reset(); }
  StateRegistration(StateRegistration&& other) noexcept;
  StateRegistration& operator=(StateRegistration&& other) noexcept;
  StateRegistration(const StateRegistration&) = delete;
  StateRegistration& operator=(const StateRegistration&) = delete;

  // Unregisters now; does nothing when empty.
  void reset() noexcept;
  const std::string& key() const { return key_; }

 private:
  Graph* graph_ = nullptr;
  std::string key_;
};

class Graph {
 public:
  Graph();
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  Node placeholder(std::string name, PlaceholderOptions options = {});
  // The variable starts as a copy of `initial`; re-initialisation restores that copy.
  Node variable(std::string name, const at::Tensor& initial, VariableOptions options = {});
  Node constant(std::string name, const at::Tensor& value);
  Node op(std::string name, OpFn fn);

  // Every parameter and buffer of `module` becomes a variable `name/<path>` (parameters trainable,
  // buffers not) that shares the module's tensor, so `module->forward()` inside an op uses the
  // graph's state. Returns the new variables in the module's order.
  std::vector<Node> add_module(std::string name, std::shared_ptr<torch::nn::Module> module);
  template <typename Holder>
  requires requires(const Holder& h) { h.ptr(); }
  std::vector<Node> add_module(std::string name, const Holder& module) {
    return add_module(std::move(name), std::shared_ptr<torch::nn::Module>(module.ptr()));
  }

  // A batch input over `source`: one node per component (`name/<component>`), all advancing
  // together, once per run that evaluates any of them. At the end of data they raise
  // OutOfRangeError. See input.h for a torch::data dataset adapter.
  InputNodes input(std::string name, std::shared_ptr<InputSource> source,
                   InputOptions options = {});

  // The global step: get-or-create, an int64 scalar, not trainable. Kept as a host integer;
  // fetching it materialises a tensor.
  Node global_step();
  bool has_global_step() const;
  int64_t global_step_value() const { return *global_step_value_; }
  void set_global_step_value(int64_t step);

  // A train op: drops the gradients (not zeroed: docs/guide.md), back-propagates `loss`, applies
  // the gradient transforms (clip_global_norm, then gradient_transforms), steps the optimizer and
  // increments the global step (created if missing). Its value is undefined.
  Node minimize(std::string name, NodeRef loss, OptimizerFactory optimizer,
                MinimizeOptions options = {});

  // Lookup. find() throws NotFoundError naming the unknown name.
  Node find(std::string_view name) const;
  std::optional<Node> find_if_exists(std::string_view name) const;
  Node resolve(const NodeRef& ref) const {
    // Inline for the common case of every step: a handle of this graph.
    if (!ref.is_name() && static_cast<size_t>(ref.node().index) < num_nodes_) return ref.node();
    return resolve_other(ref);
  }
  const std::string& name(Node node) const;
  NodeKind kind(Node node) const;
  size_t size() const;
  std::vector<Node> nodes() const;
  std::vector<Node> nodes(NodeKind kind) const;
  std::vector<Node> variables() const;
  std::vector<Node> trainable_variables() const;
  std::vector<Node> train_ops() const;
  std::vector<Node> inputs() const;  // one node per input (its first component)

  // State access.
  const PlaceholderOptions& placeholder_options(Node placeholder) const;
  // The variable's live tensor (module parameters share storage with the module).
  at::Tensor& variable_value(Node variable);
  const at::Tensor& variable_value(Node variable) const;
  bool is_trainable(Node variable) const;
  // The optimizer of a train op (for learning-rate changes and checkpoints).
  torch::optim::Optimizer& optimizer(Node train_op);
  // A new optimizer of the same kind over the same variables, with fresh state, made by the train
  // op's factory: for checking a saved optimizer state without touching the live one.
  std::unique_ptr<torch::optim::Optimizer> make_optimizer(Node train_op) const;
  // The name of the train op's optimizer factory ("sgd", "adam", ...), for messages.
  const std::string& optimizer_name(Node train_op) const;
  Node train_op_loss(Node train_op) const;
  // The variables the train op updates, in its optimizer's order.
  std::vector<Node> train_op_variables(Node train_op) const;
  // The train op's MinimizeOptions::gradient_transforms, in order (clip_global_norm's is not
  // among them): what MonitoredTrainingSession inspects to check that a data-parallel train op
  // averages its gradients (distributed/data_parallel.h).
  std::span<const GradientTransform> gradient_transforms(Node train_op) const;
  // The train op's MinimizeOptions::accumulate_steps: micro-batches per optimizer step.
  int64_t accumulate_steps(Node train_op) const;
  // Position of an input (any of its component nodes).
  InputPosition input_position(Node input) const;
  // The options an input reads with: as given, with the shard and batch of shard_inputs().
  const InputOptions& input_options(Node input) const;
  void set_input_position(Node input, const InputPosition& position);
  // The batches an input (any of its component nodes) yields from its position until the end of
  // its data (num_epochs, batch_size, drop_last and its shard): the length of the rest of
  // training when one step takes one batch. nullopt when it repeats forever (num_epochs <= 0).
  std::optional<int64_t> input_batches_left(Node input) const;
  // Data-parallel shards: every input that leaves num_shards at 1 and shard_across_ranks true
  // (and every such input added later) reads shard `index` of `num_shards` (input.h), its batch
  // made global_batch_size / num_shards where it sets one. MonitoredTrainingSession calls it with
  // the process group's size and rank; calling it again reshards those inputs (1: unsharded).
  // Positions are global (InputPosition), so they stay valid. InvalidArgument for an index out of
  // range or a global batch that does not divide.
  void shard_inputs(int64_t num_shards, int64_t index);
  // The shards of shard_inputs() (1 until it is called): the world size checkpoints record.
  int64_t num_shards() const;

  // Restores every variable to its initial value, the global step to 0, fresh optimizer state
  // and every input to its start. Done by the chief when a session is created without a restore.
  void initialize();

  void finalize();
  bool finalized() const;

  // What recording runs saw of `node` (NodeTrace), or null when none evaluated or read it.
  const NodeTrace* trace(Node node) const;
  // Forgets every trace.
  void clear_traces();

  // Extra training state saved in checkpoints. The provider must outlive its registration
  // (StateRegistration ends it with an object's lifetime); AlreadyExistsError for a key in use.
  void register_state(std::string key, StateProvider* provider);
  void unregister_state(std::string_view key);
  std::vector<std::pair<std::string, StateProvider*>> state_providers() const;

  // Per-graph data of other components (summary collections, ...): one T per graph, created on
  // first use.
  template <typename T>
  T& extension() {
    auto& slot = extension_slot(std::type_index(typeid(T)));
    if (!slot) slot = std::make_shared<T>();
    return *static_cast<T*>(slot.get());
  }

 private:
  // The evaluator's access to the representation (src/graph_internal.h).
  friend class internal::GraphInternal;
  Node add_node(std::string name, NodeKind kind);
  // A name, or a handle of another graph (an error).
  Node resolve_other(const NodeRef& ref) const;
  std::shared_ptr<void>& extension_slot(std::type_index type);
  std::unique_ptr<internal::GraphState> state_;
  size_t num_nodes_ = 0;  // state_->nodes.size(), for the inline resolve()
  // &state_->global_step_value, for the inline read.
  const int64_t* global_step_value_;
};

}  // namespace trainhooks
