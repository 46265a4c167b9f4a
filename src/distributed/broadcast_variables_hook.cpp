#include "trainhooks/distributed/broadcast_variables_hook.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <ATen/core/ivalue.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>

#include "checkpoint/checkpoint_file.h"
#include "checkpoint/training_state.h"
#include "trainhooks/distributed/process_group.h"
#include "trainhooks/errors.h"
#include "trainhooks/graph.h"
#include "trainhooks/session.h"

namespace trainhooks::distributed {

namespace {

using c10::IValue;

// The root's state but the variables' values, as one pickled tuple:
//   (variables: [(name, dtype, sizes)], global_step, optimizers: [(name, encoded, archive, lrs)],
//    inputs: [(name, epoch, offset)], state: [(key, bytes)])
std::string encode_state(Graph& g) {
  size_t bytes = 0;
  internal::CheckpointContents c = internal::capture_training_state(g, /*copy=*/false, bytes);
  c10::impl::GenericList variables(c10::AnyType::get());
  for (const auto& [name, t] : c.variables) {
    variables.push_back(c10::ivalue::Tuple::create(
        {IValue(name), IValue(static_cast<int64_t>(t.scalar_type())), IValue(t.sizes().vec())}));
  }
  c10::impl::GenericList optimizers(c10::AnyType::get());
  for (const auto& [name, s] : c.optimizers) {
    optimizers.push_back(
        c10::ivalue::Tuple::create({IValue(name), s.encoded, IValue(s.archive), IValue(s.lrs)}));
  }
  c10::impl::GenericList inputs(c10::AnyType::get());
  for (const auto& [name, p] : c.inputs) {
    inputs.push_back(c10::ivalue::Tuple::create({IValue(name), IValue(p.epoch), IValue(p.offset)}));
  }
  c10::impl::GenericList state(c10::AnyType::get());
  for (const auto& [key, value] : c.state)
    state.push_back(c10::ivalue::Tuple::create({IValue(key), IValue(value)}));
  const IValue all =
      c10::ivalue::Tuple::create({IValue(variables), IValue(c.global_step), IValue(optimizers),
                                  IValue(inputs), IValue(state)});
  const std::vector<char> pickled = internal::pickle_bytes(all);
  return std::string(pickled.begin(), pickled.end());
}

// "" when this rank's variables have the root's names, dtypes and shapes, in order; else what
// differs first.
std::string compare_variables(const Graph& g, const c10::impl::GenericList& root_variables) {
  const std::vector<Node> mine = g.variables();
  if (mine.size() != root_variables.size()) {
    return fmt::format("the graph has {} variables, the root's {}", mine.size(),
                       root_variables.size());
  }
  for (size_t i = 0; i < mine.size(); ++i) {
    const auto& e = root_variables.get(i).toTupleRef().elements();
    const std::string& name = e[0].toStringRef();
    const auto dtype = static_cast<at::ScalarType>(e[1].toInt());
    const std::vector<int64_t> sizes = e[2].toIntVector();
    const at::Tensor& t = g.variable_value(mine[i]);
    if (g.name(mine[i]) != name) {
      return fmt::format("variable {} is '{}' here, '{}' on the root", i, g.name(mine[i]), name);
    }
    if (t.scalar_type() != dtype || t.sizes().vec() != sizes) {
      return fmt::format("variable '{}' is {} [{}] here, {} [{}] on the root", name,
                         at::toString(t.scalar_type()), fmt::join(t.sizes(), ", "),
                         at::toString(dtype), fmt::join(sizes, ", "));
    }
  }
  return "";
}

// Applies the root's global step, optimizers, input positions and hook state through the
// checkpoint restore's checks and steps (checkpoint/training_state.h).
void apply_state(Graph& g, const c10::ivalue::Tuple& all, const std::string& source,
                 const Env& env) {
  // A vector, not the tuple's elements: GCC's -Warray-bounds takes an index past 3 into
  // TupleElements' inline array for out of bounds.
  const std::vector<IValue> e = all.elements().vec();
  internal::CheckpointContents c;
  c.path = source;
  for (Node v : g.variables()) c.variables.emplace_back(g.name(v), g.variable_value(v));
  c.global_step = e[1].toInt();
  for (const IValue& o : e[2].toListRef()) {
    const auto& f = o.toTupleRef().elements();
    internal::OptimizerState s;
    s.encoded = f[1];
    s.archive = f[2].toStringRef();
    s.lrs = f[3].toDoubleVector();
    c.optimizers.emplace(f[0].toStringRef(), std::move(s));
  }
  for (const IValue& i : e[3].toListRef()) {
    const auto& f = i.toTupleRef().elements();
    c.inputs.emplace(f[0].toStringRef(), InputPosition{f[1].toInt(), f[2].toInt()});
  }
  c.world_size = g.num_shards();  // the root's positions, of the same group
  // Only the state this rank has: the chief runs hooks of its own (chief_only_hooks).
  std::set<std::string> registered;
  for (const auto& [key, provider] : g.state_providers()) registered.insert(key);
  for (const IValue& s : e[4].toListRef()) {
    const auto& f = s.toTupleRef().elements();
    if (registered.count(f[0].toStringRef()))
      c.state.emplace(f[0].toStringRef(), f[1].toStringRef());
  }
  const internal::RestorePlan plan = internal::check_training_state(g, c);
  internal::apply_training_state(g, c, plan, env);
}

}  // namespace

BroadcastVariablesHook::BroadcastVariablesHook(std::shared_ptr<ProcessGroup> group,
                                               BroadcastVariablesHookOptions options)
    : group_(std::move(group)), options_(options) {
  if (!group_) throw InvalidArgument("BroadcastVariablesHook: the process group is null");
  if (options_.root < 0 || options_.root >= group_->world_size()) {
    throw InvalidArgument(fmt::format("BroadcastVariablesHook: root {} is not a rank of {}",
                                      options_.root, group_->describe()));
  }
}

void BroadcastVariablesHook::after_create_session(Session& session, Coordinator& /*coord*/) {
  ++broadcasts_;
  if (group_->world_size() == 1) return;
  Graph& g = session.graph();
  const bool root = group_->rank() == options_.root;
  const double timeout = options_.timeout_secs;

  // 1. The root's variable list and state; every rank checks its graph against it and all agree
  // before any variable moves, so a mismatch fails on every rank instead of leaving one waiting.
  const std::string bytes =
      group_->broadcast_bytes(root ? encode_state(g) : std::string(), options_.root, timeout);
  IValue decoded;
  std::string mismatch;
  try {
    decoded = internal::unpickle(bytes.data(), bytes.size());
    mismatch = compare_variables(g, decoded.toTupleRef().elements()[0].toList());
  } catch (const Error& e) {
    mismatch = fmt::format("the root's state could not be read: {}", e.what());
  }
  if (group_->any(!mismatch.empty(), timeout)) {
    throw InvalidArgument(fmt::format(
        "BroadcastVariablesHook: the graphs of the ranks differ ({}{})", group_->describe(),
        mismatch.empty()
            ? ": another rank's graph does not match rank " + std::to_string(options_.root) + "'s"
            : ": " + mismatch));
  }

  // 2. The variables, in place.
  {
    at::NoGradGuard no_grad;
    for (Node v : g.variables()) {
      at::Tensor& value = g.variable_value(v);
      if (value.is_contiguous()) {
        group_->broadcast(value, options_.root, timeout);
      } else {
        at::Tensor copy = value.contiguous();
        group_->broadcast(copy, options_.root, timeout);
        value.copy_(copy);
      }
    }
  }

  // 3. The rest of the training state.
  if (!root && options_.training_state) {
    apply_state(g, decoded.toTupleRef(), fmt::format("the broadcast of rank {}", options_.root),
                session.env());
  }
  if (root) {
    session.env().info(
        fmt::format("Broadcast {} variables and the training state at global step "
                    "{} to {} ranks.",
                    g.variables().size(), g.global_step_value(), group_->world_size() - 1));
  }
}

}  // namespace trainhooks::distributed
