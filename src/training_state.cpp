#include "trainhooks/training_state.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <torch/optim/optimizer.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <mutex>
#include <set>
#include <string_view>

#include "optimizer_state.h"
#include "tensor_format.h"
#include "trainhooks/errors.h"
#include "trainhooks/graph.h"
#include "util/first_line.h"

namespace trainhooks {

using internal::describe_tensor;
using internal::first_line;
using internal::host_tensor;

namespace {

// What a restore will apply, checked against the graph; refers into the snapshot it was made of.
struct RestorePlan {
  std::vector<std::pair<Node, at::Tensor>> variables;
  std::vector<std::pair<Node, const OptimizerSnapshot*>> optimizers;
  std::vector<std::pair<Node, InputPosition>> inputs;
  std::vector<std::pair<std::string, StateProvider*>> providers;
  std::vector<const std::string*> provider_bytes;
  std::vector<std::string> notes;  // logged as INFO
  std::vector<std::string> warnings;
};

std::vector<double> learning_rates(const torch::optim::Optimizer& opt) {
  std::vector<double> lrs;
  try {
    for (const auto& group : opt.param_groups()) lrs.push_back(group.options().get_lr());
  } catch (const std::exception&) {
    lrs.clear();  // an optimizer without a learning rate
  }
  return lrs;
}

// The optimizer's state: as tensors for LibTorch's built-in optimizers (cloned when `copy`), else
// as the archive of Optimizer::save, made now. Adds the bytes it holds to `bytes`.
OptimizerSnapshot capture_optimizer(torch::optim::Optimizer& opt, bool copy, size_t& bytes) {
  OptimizerSnapshot s;
  s.lrs = learning_rates(opt);
  if (auto encoded = internal::encode_optimizer(opt, copy, bytes)) {
    s.encoded = std::move(*encoded);
    return s;
  }
  s.archive = internal::optimizer_archive(opt);
  bytes += s.archive.size();
  return s;
}

}  // namespace

const at::Tensor* TrainingSnapshot::find_variable(const std::string& name) const {
  for (const auto& [n, t] : variables)
    if (n == name) return &t;
  return nullptr;
}

TrainingSnapshot capture_training_state(Graph& g, bool copy, size_t* bytes_out) {
  size_t scratch = 0;
  size_t& bytes = bytes_out ? *bytes_out : scratch;
  TrainingSnapshot c;
  // Variables: copied when the write happens later, while training changes them in place.
  for (Node v : g.variables()) {
    at::Tensor t = host_tensor(g.variable_value(v), copy);
    bytes += t.nbytes();
    c.variables.emplace_back(g.name(v), std::move(t));
  }
  c.global_step = g.global_step_value();
  for (Node t : g.train_ops())
    c.optimizers.emplace(g.name(t), capture_optimizer(g.optimizer(t), copy, bytes));
  {
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    c.cpu_rng = gen.get_state();
  }
  for (Node n : g.inputs()) c.inputs.emplace(g.name(n), g.input_position(n));
  c.world_size = g.num_shards();
  for (const auto& [key, provider] : g.state_providers())
    c.state.emplace(key, provider->save_state());
  return c;
}

namespace {

RestorePlan plan_restore(Graph& g, const TrainingSnapshot& cp, const std::string& path) {
  RestorePlan plan;
  std::map<std::string_view, const at::Tensor*> saved;
  for (const auto& [name, t] : cp.variables) saved.emplace(name, &t);
  for (Node v : g.variables()) {
    const auto& name = g.name(v);
    auto it = saved.find(name);
    if (it == saved.end()) {
      throw NotFoundError(fmt::format("Variable '{}' is not in the checkpoint '{}'", name, path));
    }
    const at::Tensor& t = *it->second;
    const at::Tensor& current = g.variable_value(v);
    if (t.sizes() != current.sizes() || t.scalar_type() != current.scalar_type()) {
      throw InvalidArgument(
          fmt::format("Variable '{}' in the checkpoint '{}' has {}, the graph's has {}", name, path,
                      describe_tensor(t), describe_tensor(current)));
    }
    plan.variables.emplace_back(v, t);
  }
  if (cp.variables_only) return plan;  // a weights file: the rest stays, and is not warned about

  std::set<std::string> used;
  for (Node t : g.train_ops()) {
    const auto& name = g.name(t);
    auto it = cp.optimizers.find(name);
    if (it == cp.optimizers.end()) {
      plan.warnings.push_back(fmt::format(
          "The checkpoint '{}' has no optimizer state for train op '{}'; it is left as it is", path,
          name));
      continue;
    }
    used.insert(name);
    // A state that does not fit fails here, before anything changed: an archive is loaded into
    // a scratch optimizer over the same variables.
    try {
      const OptimizerSnapshot& s = it->second;
      size_t groups = 0;
      if (s.is_encoded()) {
        internal::check_encoded_optimizer(s.encoded, g.optimizer(t));
        groups = g.optimizer(t).param_groups().size();
      } else {
        auto scratch = g.make_optimizer(t);
        internal::load_optimizer_archive(s.archive, *scratch);
        groups = scratch->param_groups().size();
      }
      if (!s.lrs.empty() && s.lrs.size() != groups) {
        throw InvalidArgument(
            fmt::format("{} learning rates for {} parameter groups", s.lrs.size(), groups));
      }
    } catch (const std::exception& e) {
      throw InvalidArgument(
          fmt::format("The optimizer state of train op '{}' in the checkpoint '{}' does not fit "
                      "its {} optimizer: {}",
                      name, path, g.optimizer_name(t), first_line(e)));
    }
    plan.optimizers.emplace_back(t, &it->second);
  }
  for (const auto& [name, s] : cp.optimizers) {
    if (!used.count(name))
      plan.warnings.push_back(
          fmt::format("Ignoring the optimizer state of train op '{}' in the checkpoint '{}': the "
                      "graph has no such train op",
                      name, path));
  }

  if (cp.cpu_rng) {
    try {
      at::Generator scratch = at::detail::createCPUGenerator();
      scratch.set_state(*cp.cpu_rng);
    } catch (const std::exception& e) {
      throw InvalidArgument(fmt::format(
          "The CPU RNG state in the checkpoint '{}' cannot be used: {}", path, first_line(e)));
    }
  }

  used.clear();
  std::vector<std::string> positions;  // for the line on a change of world size
  for (Node n : g.inputs()) {
    const auto& name = g.name(n);
    auto it = cp.inputs.find(name);
    if (it == cp.inputs.end()) {
      plan.warnings.push_back(fmt::format(
          "The checkpoint '{}' has no position for input '{}'; it is left as it is", path, name));
      continue;
    }
    used.insert(name);
    InputPosition p = it->second;
    // A file of an earlier version counts one shard's examples; it was written by as many ranks
    // as read it now (no resume on another number of ranks was possible then).
    if (!cp.world_size) p.offset *= g.input_options(n).num_shards;
    plan.inputs.emplace_back(n, p);
    positions.push_back(fmt::format("'{}' at example {} of epoch {}", name, p.offset, p.epoch));
  }
  if (cp.world_size && *cp.world_size != g.num_shards()) {
    const auto ranks = [](int64_t n) { return fmt::format("{} rank{}", n, n == 1 ? "" : "s"); };
    plan.notes.push_back(fmt::format(
        "Resuming a {}-rank checkpoint on {}: every input continues its epoch's order where the "
        "{} left it ({}), each example of the epoch read once; the global batch changes with the "
        "number of ranks (each rank's batch stays; InputOptions::global_batch_size keeps the "
        "global one instead)",
        *cp.world_size, ranks(g.num_shards()), ranks(*cp.world_size),
        positions.empty() ? std::string("no inputs")
                          : fmt::format("{}", fmt::join(positions, ", "))));
  }
  for (const auto& [name, p] : cp.inputs) {
    if (!used.count(name))
      plan.warnings.push_back(fmt::format(
          "Ignoring the position of input '{}' in the checkpoint '{}': the graph has no such input",
          name, path));
  }

  used.clear();
  for (const auto& [key, provider] : g.state_providers()) {
    auto it = cp.state.find(key);
    if (it == cp.state.end()) continue;  // registered after the checkpoint was written
    used.insert(key);
    plan.providers.emplace_back(key, provider);
    plan.provider_bytes.push_back(&it->second);
  }
  for (const auto& [key, bytes] : cp.state) {
    if (!used.count(key))
      plan.warnings.push_back(fmt::format(
          "Ignoring state '{}' in the checkpoint '{}': nothing is registered under that key", key,
          path));
  }
  return plan;
}

void apply_plan(Graph& g, const TrainingSnapshot& cp, const RestorePlan& plan,
                const std::string& path, const Env& env) {
  // State providers first: they are the only part that may reject its bytes, and are rolled back
  // from a snapshot if one does.
  std::vector<std::string> before;
  for (const auto& [key, provider] : plan.providers) before.push_back(provider->save_state());
  for (size_t i = 0; i < plan.providers.size(); ++i) {
    try {
      plan.providers[i].second->load_state(*plan.provider_bytes[i]);
    } catch (const std::exception& e) {
      for (size_t j = 0; j <= i; ++j) {
        try {
          plan.providers[j].second->load_state(before[j]);
        } catch (const std::exception&) {
        }
      }
      const auto* err = dynamic_cast<const Error*>(&e);
      throw_error(err ? err->code() : Code::kInvalidArgument,
                  fmt::format("Cannot restore state '{}' from the checkpoint '{}': {}",
                              plan.providers[i].first, path, e.what()));
    }
  }
  {
    at::NoGradGuard no_grad;
    for (const auto& [v, t] : plan.variables) g.variable_value(v).copy_(t);
  }
  if (cp.variables_only) return;
  for (const auto& [t, s] : plan.optimizers) {
    auto& opt = g.optimizer(t);
    // LibTorch's load only adds entries: clear first so that a parameter without saved state
    // (no step taken yet) does not keep a newer one.
    if (s->is_encoded()) {
      internal::load_encoded_optimizer(s->encoded, opt);
    } else {
      opt.state().clear();
      internal::load_optimizer_archive(s->archive, opt);
    }
    // LibTorch's load keeps the current options; PyTorch's load_state_dict restores the learning
    // rate, and schedules that changed it rely on that.
    for (size_t i = 0; i < s->lrs.size(); ++i) opt.param_groups()[i].options().set_lr(s->lrs[i]);
  }
  g.set_global_step_value(cp.global_step);
  if (cp.cpu_rng) {
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(*cp.cpu_rng);
  }
  for (const auto& [n, p] : plan.inputs) g.set_input_position(n, p);
  for (const auto& n : plan.notes) env.info(n);
  for (const auto& w : plan.warnings) env.warning(w);
}

}  // namespace

void check_training_state(Graph& graph, const TrainingSnapshot& snapshot,
                          const std::string& source) {
  plan_restore(graph, snapshot, source);
}

void restore_training_state(Graph& graph, const TrainingSnapshot& snapshot,
                            const std::string& source, const Env& env) {
  const RestorePlan plan = plan_restore(graph, snapshot, source);
  apply_plan(graph, snapshot, plan, source, env);
}

}  // namespace trainhooks
