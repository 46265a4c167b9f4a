#include "trainhooks/graph.h"

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <fmt/format.h>

#include "graph_state.h"
#include "trainhooks/errors.h"

namespace trainhooks {

using internal::GraphState;
using internal::NodeEntry;

const char* node_kind_name(NodeKind kind) {
  switch (kind) {
    case NodeKind::kPlaceholder:
      return "placeholder";
    case NodeKind::kVariable:
      return "variable";
    case NodeKind::kConstant:
      return "constant";
    case NodeKind::kOp:
      return "op";
    case NodeKind::kInput:
      return "input";
    case NodeKind::kGlobalStep:
      return "global_step";
    case NodeKind::kTrainOp:
      return "train_op";
  }
  return "node";
}

Graph::Graph()
    : state_(std::make_unique<GraphState>()), global_step_value_(&state_->global_step_value) {}
Graph::~Graph() = default;

Node Graph::add_node(std::string name, NodeKind kind) {
  if (state_->finalized) {
    throw FailedPreconditionError(fmt::format(
        "Graph is finalized and cannot be modified (adding {} '{}')", node_kind_name(kind), name));
  }
  if (name.empty())
    throw InvalidArgument(fmt::format("{} name must not be empty", node_kind_name(kind)));
  if (state_->by_name.count(name)) {
    throw AlreadyExistsError(
        fmt::format("Duplicate node name '{}': a {} with that name exists", name,
                    node_kind_name(state_->nodes[state_->by_name.find(name)->second].kind)));
  }
  auto index = static_cast<int32_t>(state_->nodes.size());
  NodeEntry entry;
  entry.name = name;
  entry.kind = kind;
  state_->nodes.push_back(std::move(entry));
  num_nodes_ = state_->nodes.size();
  state_->by_name.emplace(std::move(name), index);
  return Node{index};
}

Node Graph::placeholder(std::string name, PlaceholderOptions options) {
  if (options.shape.known()) {
    for (int64_t d : options.shape.dims()) {
      if (d < -1) {
        throw InvalidArgument(fmt::format(
            "placeholder '{}': invalid dimension {} in shape (use -1 for any size)", name, d));
      }
    }
  }
  Node n = add_node(std::move(name), NodeKind::kPlaceholder);
  state_->nodes[n.index].placeholder = std::move(options);
  return n;
}

Node Graph::variable(std::string name, const at::Tensor& initial, VariableOptions options) {
  if (!initial.defined())
    throw InvalidArgument(fmt::format("variable '{}': initial value is undefined", name));
  if (options.trainable && !initial.is_floating_point() && !initial.is_complex()) {
    throw InvalidArgument(
        fmt::format("variable '{}': a trainable variable must have a floating-point dtype, got {}",
                    name, c10::toString(initial.scalar_type())));
  }
  Node n = add_node(std::move(name), NodeKind::kVariable);
  auto& e = state_->nodes[n.index];
  e.initial = initial.detach().clone();
  e.value = initial.detach().clone();
  if (options.trainable) e.value.requires_grad_(true);
  e.trainable = options.trainable;
  return n;
}

Node Graph::constant(std::string name, const at::Tensor& value) {
  if (!value.defined())
    throw InvalidArgument(fmt::format("constant '{}': value is undefined", name));
  Node n = add_node(std::move(name), NodeKind::kConstant);
  state_->nodes[n.index].value = value.detach();
  return n;
}

Node Graph::op(std::string name, OpFn fn) {
  if (!fn) throw InvalidArgument(fmt::format("op '{}': fn is empty", name));
  Node n = add_node(std::move(name), NodeKind::kOp);
  state_->nodes[n.index].fn = std::move(fn);
  return n;
}

std::vector<Node> Graph::add_module(std::string name, std::shared_ptr<torch::nn::Module> module) {
  if (!module) throw InvalidArgument(fmt::format("add_module '{}': module is null", name));
  // Check every name first so that a clash adds nothing.
  auto params = module->named_parameters(/*recurse=*/true);
  auto buffers = module->named_buffers(/*recurse=*/true);
  std::vector<std::pair<std::string, std::pair<at::Tensor, bool>>> vars;
  for (const auto& p : params) vars.push_back({name + "/" + p.key(), {p.value(), true}});
  for (const auto& b : buffers) vars.push_back({name + "/" + b.key(), {b.value(), false}});
  if (vars.empty())
    throw InvalidArgument(
        fmt::format("add_module '{}': the module has no parameters or buffers", name));
  for (const auto& v : vars) {
    if (state_->by_name.count(v.first))
      throw AlreadyExistsError(fmt::format("Duplicate node name '{}'", v.first));
  }
  std::vector<Node> out;
  for (auto& v : vars) {
    Node n = add_node(v.first, NodeKind::kVariable);
    auto& e = state_->nodes[n.index];
    e.value = v.second.first;  // shares the module's tensor
    e.initial = v.second.first.detach().clone();
    e.trainable = v.second.second && v.second.first.requires_grad();
    out.push_back(n);
  }
  state_->modules.push_back(std::move(module));
  return out;
}

// InvalidArgument when `group`'s global batch does not divide among `num_shards`.
static void check_global_batch(const internal::InputGroup& group, int64_t num_shards) {
  const int64_t global = group.options.global_batch_size;
  if (global > 0 && global % num_shards != 0) {
    throw InvalidArgument(
        fmt::format("input '{}': global_batch_size {} does not divide among {} shards", group.name,
                    global, num_shards));
  }
}

// Puts `group` in shard `index` of `num_shards`, its batch global_batch_size / num_shards where
// it sets one.
static void shard_input(internal::InputGroup& group, int64_t num_shards, int64_t index) {
  auto& o = group.options;
  check_global_batch(group, num_shards);
  if (o.global_batch_size > 0) o.batch_size = o.global_batch_size / num_shards;
  o.num_shards = num_shards;
  o.shard_index = index;
}

// Whether Graph::shard_inputs() shards `group`: the program left it unsharded, or it did so before.
static bool takes_graph_shard(const internal::InputGroup& group) {
  return group.sharded_by_graph ||
         (group.options.num_shards == 1 && group.options.shard_across_ranks);
}

InputNodes Graph::input(std::string name, std::shared_ptr<InputSource> source,
                        InputOptions options) {
  if (!source) throw InvalidArgument(fmt::format("input '{}': source is null", name));
  if (options.batch_size <= 0)
    throw InvalidArgument(
        fmt::format("input '{}': invalid batch_size {}", name, options.batch_size));
  if (options.num_shards <= 0)
    throw InvalidArgument(
        fmt::format("input '{}': invalid num_shards {}", name, options.num_shards));
  if (options.shard_index < 0 || options.shard_index >= options.num_shards) {
    throw InvalidArgument(fmt::format("input '{}': invalid shard_index {} for num_shards {}", name,
                                      options.shard_index, options.num_shards));
  }
  if (options.global_batch_size < 0) {
    throw InvalidArgument(
        fmt::format("input '{}': invalid global_batch_size {}", name, options.global_batch_size));
  }
  if (options.global_batch_size > 0 && options.batch_size != 1) {
    throw InvalidArgument(fmt::format(
        "input '{}': batch_size {} and global_batch_size {} are both set; set one of them", name,
        options.batch_size, options.global_batch_size));
  }
  if (options.prefetch < 0)
    throw InvalidArgument(fmt::format("input '{}': invalid prefetch {}", name, options.prefetch));
  if (options.num_workers < 0) {
    throw InvalidArgument(
        fmt::format("input '{}': invalid num_workers {}", name, options.num_workers));
  }
  // The values in effect (input.h): two batches ahead per worker, as the DataLoaders of
  // torch::data (max_jobs) and PyTorch (prefetch_factor); a queue needs a thread to fill it.
  if (options.num_workers > 0 && options.prefetch == 0) options.prefetch = 2 * options.num_workers;
  if (options.prefetch > 0 && options.num_workers == 0) options.num_workers = 1;
  auto names = source->component_names();
  if (names.empty())
    throw InvalidArgument(fmt::format("input '{}': the source has no components", name));
  for (const auto& c : names) {
    if (state_->by_name.count(name + "/" + c))
      throw AlreadyExistsError(fmt::format("Duplicate node name '{}/{}'", name, c));
  }
  auto group_index = static_cast<int32_t>(state_->inputs.size());
  internal::InputGroup group;
  group.name = name;
  group.source = std::move(source);
  group.options = options;
  shard_input(group, options.num_shards, options.shard_index);
  if (state_->num_shards > 1 && takes_graph_shard(group)) {
    shard_input(group, state_->num_shards, state_->shard_index);
    group.sharded_by_graph = true;
  }
  InputNodes out;
  for (size_t i = 0; i < names.size(); ++i) {
    Node n = add_node(name + "/" + names[i], NodeKind::kInput);
    state_->nodes[n.index].input_group = group_index;
    state_->nodes[n.index].component = static_cast<int32_t>(i);
    out.components.push_back(n);
  }
  group.nodes = out.components;
  state_->inputs.push_back(std::move(group));
  return out;
}

Node Graph::global_step() {
  if (state_->global_step >= 0) return Node{state_->global_step};
  Node n = add_node("global_step", NodeKind::kGlobalStep);
  state_->global_step = n.index;
  return n;
}

bool Graph::has_global_step() const { return state_->global_step >= 0; }
void Graph::set_global_step_value(int64_t step) {
  if (step < 0) throw InvalidArgument(fmt::format("set_global_step_value: invalid step {}", step));
  state_->global_step_value = step;
}

Node Graph::minimize(std::string name, NodeRef loss, OptimizerFactory optimizer,
                     MinimizeOptions options) {
  Node loss_node = resolve(loss);
  if (!optimizer.make)
    throw InvalidArgument(fmt::format("minimize '{}': optimizer factory is empty", name));
  if (options.clip_global_norm && !(*options.clip_global_norm > 0)) {
    throw InvalidArgument(
        fmt::format("minimize '{}': invalid clip_global_norm {}", name, *options.clip_global_norm));
  }
  if (options.accumulate_steps < 1) {
    throw InvalidArgument(fmt::format("minimize '{}': invalid accumulate_steps {} (must be >= 1)",
                                      name, options.accumulate_steps));
  }
  for (size_t i = 0; i < options.gradient_transforms.size(); ++i) {
    if (!options.gradient_transforms[i])
      throw InvalidArgument(
          fmt::format("minimize '{}': gradient_transforms[{}] is empty", name, i));
  }
  std::vector<Node> vars = options.var_list.empty() ? trainable_variables() : options.var_list;
  if (vars.empty())
    throw InvalidArgument(
        fmt::format("minimize '{}': there are no trainable variables to optimize", name));
  std::vector<at::Tensor> params;
  std::vector<std::string> var_names;
  for (Node v : vars) {
    if (v.index < 0 || v.index >= static_cast<int32_t>(state_->nodes.size()) ||
        state_->nodes[v.index].kind != NodeKind::kVariable) {
      throw InvalidArgument(
          fmt::format("minimize '{}': var_list entry {} is not a variable", name,
                      v.index >= 0 && v.index < static_cast<int32_t>(state_->nodes.size())
                          ? state_->nodes[v.index].name
                          : std::to_string(v.index)));
    }
    if (!state_->nodes[v.index].trainable) {
      throw InvalidArgument(fmt::format("minimize '{}': variable '{}' is not trainable", name,
                                        state_->nodes[v.index].name));
    }
    params.push_back(state_->nodes[v.index].value);
    var_names.push_back(state_->nodes[v.index].name);
  }
  global_step();
  Node n = add_node(std::move(name), NodeKind::kTrainOp);
  internal::TrainOp t;
  t.loss = loss_node;
  t.optimizer = optimizer.make(params);
  t.factory = std::move(optimizer);
  t.vars = std::move(vars);
  t.var_names = std::move(var_names);
  t.params = std::move(params);
  t.clips = options.clip_global_norm.has_value();
  if (t.clips) t.transforms.push_back(clip_by_global_norm(*options.clip_global_norm));
  for (auto& f : options.gradient_transforms) t.transforms.push_back(std::move(f));
  t.accumulate_steps = options.accumulate_steps;
  state_->nodes[n.index].train_index = static_cast<int32_t>(state_->train_ops.size());
  state_->train_ops.push_back(std::move(t));
  return n;
}

std::optional<Node> Graph::find_if_exists(std::string_view name) const {
  auto it = state_->by_name.find(name);
  if (it == state_->by_name.end()) return std::nullopt;
  return Node{it->second};
}

Node Graph::find(std::string_view name) const {
  auto n = find_if_exists(name);
  if (!n) throw NotFoundError(fmt::format("No node named '{}' in the graph", name));
  return *n;
}

Node Graph::resolve_other(const NodeRef& ref) const {
  if (ref.is_name()) return find(ref.name());
  if (ref.node().index >= static_cast<int32_t>(state_->nodes.size())) {
    throw InvalidArgument(fmt::format("Node handle {} does not belong to this graph ({} nodes)",
                                      ref.node().index, state_->nodes.size()));
  }
  return ref.node();
}

static const NodeEntry& entry_of(const GraphState& s, Node n) {
  if (n.index < 0 || n.index >= static_cast<int32_t>(s.nodes.size())) {
    throw InvalidArgument(
        fmt::format("Invalid node handle {} (the graph has {} nodes)", n.index, s.nodes.size()));
  }
  return s.nodes[n.index];
}

static const NodeEntry& entry_of_kind(const GraphState& s, Node n, NodeKind kind,
                                      const char* what) {
  const auto& e = entry_of(s, n);
  if (e.kind != kind) {
    throw InvalidArgument(fmt::format("{}: node '{}' is a {}, not a {}", what, e.name,
                                      node_kind_name(e.kind), node_kind_name(kind)));
  }
  return e;
}

const std::string& Graph::name(Node node) const { return entry_of(*state_, node).name; }
NodeKind Graph::kind(Node node) const { return entry_of(*state_, node).kind; }
size_t Graph::size() const { return state_->nodes.size(); }

std::vector<Node> Graph::nodes() const {
  std::vector<Node> out;
  for (size_t i = 0; i < state_->nodes.size(); ++i) out.push_back(Node{static_cast<int32_t>(i)});
  return out;
}

std::vector<Node> Graph::nodes(NodeKind kind) const {
  std::vector<Node> out;
  for (size_t i = 0; i < state_->nodes.size(); ++i)
    if (state_->nodes[i].kind == kind) out.push_back(Node{static_cast<int32_t>(i)});
  return out;
}

std::vector<Node> Graph::variables() const { return nodes(NodeKind::kVariable); }
std::vector<Node> Graph::train_ops() const { return nodes(NodeKind::kTrainOp); }

std::vector<Node> Graph::trainable_variables() const {
  std::vector<Node> out;
  for (size_t i = 0; i < state_->nodes.size(); ++i) {
    const auto& e = state_->nodes[i];
    if (e.kind == NodeKind::kVariable && e.trainable) out.push_back(Node{static_cast<int32_t>(i)});
  }
  return out;
}

std::vector<Node> Graph::inputs() const {
  std::vector<Node> out;
  for (const auto& g : state_->inputs) out.push_back(g.nodes.front());
  return out;
}

const PlaceholderOptions& Graph::placeholder_options(Node n) const {
  return entry_of_kind(*state_, n, NodeKind::kPlaceholder, "placeholder_options").placeholder;
}

at::Tensor& Graph::variable_value(Node n) {
  return const_cast<NodeEntry&>(entry_of_kind(*state_, n, NodeKind::kVariable, "variable_value"))
      .value;
}
const at::Tensor& Graph::variable_value(Node n) const {
  return entry_of_kind(*state_, n, NodeKind::kVariable, "variable_value").value;
}
bool Graph::is_trainable(Node n) const {
  return entry_of_kind(*state_, n, NodeKind::kVariable, "is_trainable").trainable;
}

torch::optim::Optimizer& Graph::optimizer(Node n) {
  const auto& e = entry_of_kind(*state_, n, NodeKind::kTrainOp, "optimizer");
  return *state_->train_ops[e.train_index].optimizer;
}

std::unique_ptr<torch::optim::Optimizer> Graph::make_optimizer(Node n) const {
  const auto& e = entry_of_kind(*state_, n, NodeKind::kTrainOp, "make_optimizer");
  const auto& t = state_->train_ops[e.train_index];
  return t.factory.make(t.params);
}

const std::string& Graph::optimizer_name(Node n) const {
  const auto& e = entry_of_kind(*state_, n, NodeKind::kTrainOp, "optimizer_name");
  return state_->train_ops[e.train_index].factory.name;
}

Node Graph::train_op_loss(Node n) const {
  const auto& e = entry_of_kind(*state_, n, NodeKind::kTrainOp, "train_op_loss");
  return state_->train_ops[e.train_index].loss;
}

std::vector<Node> Graph::train_op_variables(Node n) const {
  const auto& e = entry_of_kind(*state_, n, NodeKind::kTrainOp, "train_op_variables");
  return state_->train_ops[e.train_index].vars;
}

const NodeTrace* Graph::trace(Node n) const {
  entry_of(*state_, n);
  const auto i = static_cast<size_t>(n.index);
  if (i >= state_->traces.size() || !state_->traces[i]) return nullptr;
  return &*state_->traces[i];
}

void Graph::clear_traces() { state_->traces.clear(); }

std::span<const GradientTransform> Graph::gradient_transforms(Node n) const {
  const auto& e = entry_of_kind(*state_, n, NodeKind::kTrainOp, "gradient_transforms");
  const auto& op = state_->train_ops[e.train_index];
  return std::span<const GradientTransform>(op.transforms).subspan(op.clips ? 1 : 0);
}

int64_t Graph::accumulate_steps(Node n) const {
  const auto& e = entry_of_kind(*state_, n, NodeKind::kTrainOp, "accumulate_steps");
  return state_->train_ops[e.train_index].accumulate_steps;
}

InputPosition Graph::input_position(Node n) const {
  const auto& e = entry_of_kind(*state_, n, NodeKind::kInput, "input_position");
  return state_->inputs[e.input_group].position;
}

const InputOptions& Graph::input_options(Node n) const {
  const auto& e = entry_of_kind(*state_, n, NodeKind::kInput, "input_options");
  return state_->inputs[e.input_group].options;
}

std::optional<int64_t> Graph::input_batches_left(Node n) const {
  const auto& e = entry_of_kind(*state_, n, NodeKind::kInput, "input_batches_left");
  return internal::batches_left(state_->inputs[e.input_group]);
}

void Graph::set_input_position(Node n, const InputPosition& position) {
  const auto& e = entry_of_kind(*state_, n, NodeKind::kInput, "set_input_position");
  if (position.epoch < 0 || position.offset < 0 ||
      position.offset > static_cast<int64_t>(state_->inputs[e.input_group].source->size())) {
    throw InvalidArgument(
        fmt::format("set_input_position: invalid position (epoch {}, offset {}) for input '{}'",
                    position.epoch, position.offset, state_->inputs[e.input_group].name));
  }
  auto& g = state_->inputs[e.input_group];
  g.position = position;
  g.batch_serial = 0;
  internal::discard_ahead(g);
}

void Graph::shard_inputs(int64_t num_shards, int64_t index) {
  if (num_shards <= 0 || index < 0 || index >= num_shards) {
    throw InvalidArgument(
        fmt::format("shard_inputs: invalid shard index {} of {} shards", index, num_shards));
  }
  // Checked before any input changes.
  for (const auto& group : state_->inputs)
    if (takes_graph_shard(group)) check_global_batch(group, num_shards);
  for (auto& group : state_->inputs) {
    if (!takes_graph_shard(group)) continue;
    shard_input(group, num_shards, index);
    group.sharded_by_graph = num_shards > 1;
    internal::discard_ahead(group);
  }
  state_->num_shards = num_shards;
  state_->shard_index = index;
}

int64_t Graph::num_shards() const { return state_->num_shards; }

void Graph::initialize() {
  at::NoGradGuard no_grad;
  for (auto& e : state_->nodes) {
    if (e.kind == NodeKind::kVariable) e.value.copy_(e.initial);
  }
  state_->global_step_value = 0;
  for (auto& t : state_->train_ops) t.optimizer = t.factory.make(t.params);
  for (auto& g : state_->inputs) {
    g.position = {};
    g.batch_serial = 0;
    g.order_epoch = -1;
    internal::discard_ahead(g);
  }
}

void Graph::register_state(std::string key, StateProvider* provider) {
  if (key.empty()) throw InvalidArgument("register_state: key must not be empty");
  if (!provider) throw InvalidArgument(fmt::format("register_state '{}': provider is null", key));
  if (state_->state_providers.count(key)) {
    throw AlreadyExistsError(fmt::format("register_state: state '{}' is already registered", key));
  }
  state_->state_providers.emplace(std::move(key), provider);
}

void Graph::unregister_state(std::string_view key) {
  auto it = state_->state_providers.find(key);
  if (it != state_->state_providers.end()) state_->state_providers.erase(it);
}

std::vector<std::pair<std::string, StateProvider*>> Graph::state_providers() const {
  return {state_->state_providers.begin(), state_->state_providers.end()};
}

StateRegistration::StateRegistration(Graph& graph, std::string key, StateProvider* provider)
    : key_(std::move(key)) {
  graph.register_state(key_, provider);
  graph_ = &graph;
}

StateRegistration::StateRegistration(StateRegistration&& other) noexcept
    : graph_(std::exchange(other.graph_, nullptr)), key_(std::move(other.key_)) {}

StateRegistration& StateRegistration::operator=(StateRegistration&& other) noexcept {
  if (this != &other) {
    reset();
    graph_ = std::exchange(other.graph_, nullptr);
    key_ = std::move(other.key_);
  }
  return *this;
}

void StateRegistration::reset() noexcept {
  if (graph_) std::exchange(graph_, nullptr)->unregister_state(key_);
}

std::shared_ptr<void>& Graph::extension_slot(std::type_index type) {
  return state_->extensions[type];
}

void Graph::finalize() { state_->finalized = true; }
bool Graph::finalized() const { return state_->finalized; }

}  // namespace trainhooks
