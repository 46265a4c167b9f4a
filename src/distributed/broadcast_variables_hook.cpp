#include "trainhooks/distributed/broadcast_variables_hook.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/zeros.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>
#include <utility>

#include "trainhooks/checkpoint/checkpoint_format.h"
#include "trainhooks/distributed/process_group.h"
#include "trainhooks/errors.h"
#include "trainhooks/graph.h"
#include "trainhooks/session.h"
#include "trainhooks/training_state.h"

namespace trainhooks::distributed {

namespace {

// The root's training state, in the default checkpoint format's bytes, with each variable as a
// placeholder of its dtype and shape (one element, expanded): the values follow in place, by
// broadcast, without a copy. The RNG stays each rank's own, as it always has.
std::string encode_state(Graph& g) {
  TrainingSnapshot s = capture_training_state(g, /*copy=*/false);
  for (auto& [name, t] : s.variables)
    t = at::zeros({}, t.options().device(at::kCPU)).expand(t.sizes());
  s.cpu_rng.reset();
  return default_checkpoint_format().to_bytes(s);
}

// "" when this rank's variables have the root's names, dtypes and shapes, in order; else what
// differs first.
std::string compare_variables(const Graph& g, const TrainingSnapshot& root) {
  const std::vector<Node> mine = g.variables();
  if (mine.size() != root.variables.size()) {
    return fmt::format("the graph has {} variables, the root's {}", mine.size(),
                       root.variables.size());
  }
  for (size_t i = 0; i < mine.size(); ++i) {
    const auto& [name, theirs] = root.variables[i];
    const at::Tensor& t = g.variable_value(mine[i]);
    if (g.name(mine[i]) != name) {
      return fmt::format("variable {} is '{}' here, '{}' on the root", i, g.name(mine[i]), name);
    }
    if (t.scalar_type() != theirs.scalar_type() || t.sizes() != theirs.sizes()) {
      return fmt::format("variable '{}' is {} [{}] here, {} [{}] on the root", name,
                         at::toString(t.scalar_type()), fmt::join(t.sizes(), ", "),
                         at::toString(theirs.scalar_type()), fmt::join(theirs.sizes(), ", "));
    }
  }
  return "";
}

// Applies the root's global step, optimizers, input positions and hook state through the
// checkpoint restore's checks and steps (training_state.h); the variables, already broadcast,
// are this rank's own.
void apply_state(Graph& g, TrainingSnapshot root, const std::string& source, const Env& env) {
  root.variables.clear();
  for (Node v : g.variables()) root.variables.emplace_back(g.name(v), g.variable_value(v));
  root.world_size = g.num_shards();  // the root's positions, of the same group
  // Only the state this rank has: the chief runs hooks of its own (chief_only_hooks).
  std::set<std::string> registered;
  for (const auto& [key, provider] : g.state_providers()) registered.insert(key);
  std::erase_if(root.state, [&](const auto& kv) { return !registered.count(kv.first); });
  restore_training_state(g, root, source, env);
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
  const std::string source = fmt::format("the broadcast of rank {}", options_.root);
  TrainingSnapshot decoded;
  std::string mismatch;
  try {
    decoded = default_checkpoint_format().from_bytes(bytes, source);
    mismatch = compare_variables(g, decoded);
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
    apply_state(g, std::move(decoded), source, session.env());
  }
  if (root) {
    session.env().info(
        fmt::format("Broadcast {} variables and the training state at global step "
                    "{} to {} ranks.",
                    g.variables().size(), g.global_step_value(), group_->world_size() - 1));
  }
}

}  // namespace trainhooks::distributed
