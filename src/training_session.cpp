#include "trainhooks/training_session.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "trainhooks/checkpoint/checkpoint_manager.h"
#include "trainhooks/distributed/agreed_stop_policy.h"
#include "trainhooks/distributed/broadcast_variables_hook.h"
#include "trainhooks/distributed/data_parallel.h"
#include "trainhooks/distributed/process_group.h"
#include "trainhooks/errors.h"
#include "trainhooks/graph.h"
#include "trainhooks/hooks/checkpoint_saver_hook.h"
#include "trainhooks/hooks/hparams_hook.h"
#include "trainhooks/hooks/preemption_hook.h"
#include "trainhooks/hooks/step_counter_hook.h"
#include "trainhooks/hooks/summary_saver_hook.h"

namespace trainhooks {

namespace {

void validate(const MonitoredTrainingSessionOptions& o) {
  const auto& c = o.checkpoints;
  const auto& s = o.summaries;
  // TF's texts, with TF's names.
  if (c.save_secs && c.save_steps) {
    throw InvalidArgument("Can not provide both save_checkpoint_secs and save_checkpoint_steps.");
  }
  if (s.save_secs && s.save_steps) {
    throw InvalidArgument("Can not provide both save_summaries_secs and save_summaries_steps.");
  }
  if (s.log_step_count_steps < 0) {
    throw InvalidArgument(
        fmt::format("Invalid summaries.log_step_count_steps: {}", s.log_step_count_steps));
  }
  if (!(o.distributed.max_wait_secs >= 0)) {
    throw InvalidArgument(
        fmt::format("Invalid distributed.max_wait_secs: {}", o.distributed.max_wait_secs));
  }
  // The manager's own options are checked by the manager; a change from their defaults without a
  // directory would be ignored silently.
  const CheckpointManagerOptions defaults;
  const bool manager_changed =
      c.manager.max_to_keep != defaults.max_to_keep ||
      c.manager.keep_checkpoint_every_n_hours != defaults.keep_checkpoint_every_n_hours ||
      c.manager.keep_best.n != 0 || c.manager.basename != defaults.basename;
  if (o.checkpoint_dir.empty() &&
      (c.save_secs || c.save_steps || c.async_save || manager_changed)) {
    throw InvalidArgument(
        "MonitoredTrainingSession: checkpoint options were given without checkpoint_dir");
  }
  if (c.save_steps && *c.save_steps < 0) {
    throw InvalidArgument(fmt::format("Invalid checkpoints.save_steps: {}", *c.save_steps));
  }
  if (c.save_secs && !(*c.save_secs >= 0)) {
    throw InvalidArgument(fmt::format("Invalid checkpoints.save_secs: {}", *c.save_secs));
  }
  if ((s.save_secs || s.save_steps) && o.summary_dir.empty() && o.checkpoint_dir.empty()) {
    throw InvalidArgument(
        "MonitoredTrainingSession: summary options were given without summary_dir or "
        "checkpoint_dir");
  }
  if (s.save_steps && *s.save_steps < 0) {
    throw InvalidArgument(fmt::format("Invalid summaries.save_steps: {}", *s.save_steps));
  }
  if (s.save_secs && !(*s.save_secs >= 0)) {
    throw InvalidArgument(fmt::format("Invalid summaries.save_secs: {}", *s.save_secs));
  }
  if (!o.hparams.empty()) {
    if (o.summary_dir.empty() && o.checkpoint_dir.empty()) {
      throw InvalidArgument(
          "MonitoredTrainingSession: hparams were given without summary_dir or checkpoint_dir");
    }
    summary::validate_hparams(o.hparams);
  }
}

bool is_preemption_hook(const std::shared_ptr<SessionRunHook>& h) {
  return dynamic_cast<const PreemptionHook*>(h.get()) != nullptr;
}

}  // namespace

ResolvedTrainingOptions resolve_training_options(const MonitoredTrainingSessionOptions& o) {
  validate(o);
  ResolvedTrainingOptions r;
  r.is_chief = o.distributed.process_group ? o.distributed.process_group->is_chief() : o.is_chief;
  // One PreemptionHook is enough: a program that passes its own keeps it where it put it.
  const bool has_own = std::any_of(o.hooks.begin(), o.hooks.end(), is_preemption_hook) ||
                       (r.is_chief && std::any_of(o.chief_only_hooks.begin(),
                                                  o.chief_only_hooks.end(), is_preemption_hook));
  r.add_preemption_hook = o.handle_preemption_signals && !has_own;
  if (!r.is_chief) return r;  // a worker restores nothing and runs only the user's hooks

  r.checkpoint_dir = o.checkpoint_dir;
  r.summary_dir = o.summary_dir.empty() ? o.checkpoint_dir : o.summary_dir;
  // Unlike TF, the step counter's log line does not need a summary directory: progress is
  // visible by default, and its summaries are written when a directory is configured.
  r.log_step_count_steps = o.summaries.log_step_count_steps;
  if (!r.summary_dir.empty()) {
    if (o.summaries.save_secs) {
      if (*o.summaries.save_secs > 0) r.save_summaries_secs = o.summaries.save_secs;
    } else {
      const int64_t steps = o.summaries.save_steps.value_or(100);
      if (steps > 0) r.save_summaries_steps = steps;
    }
  }
  r.write_hparams = !o.hparams.empty() && !r.summary_dir.empty();
  if (!o.checkpoint_dir.empty()) {
    if (o.checkpoints.save_steps) {
      if (*o.checkpoints.save_steps > 0) r.save_checkpoint_steps = o.checkpoints.save_steps;
    } else {
      const double secs = o.checkpoints.save_secs.value_or(600);
      if (secs > 0) r.save_checkpoint_secs = secs;
    }
  }
  return r;
}

struct MonitoredTrainingSession::Parts {
  std::unique_ptr<SessionCreator> creator;
  Hooks hooks;
  MonitoredSessionOptions options;
};

MonitoredTrainingSession::MonitoredTrainingSession(Graph& graph,
                                                   MonitoredTrainingSessionOptions options)
    : MonitoredTrainingSession(assemble(graph, options)) {}

MonitoredTrainingSession::MonitoredTrainingSession(Parts parts)
    : MonitoredSession(std::move(parts.creator), std::move(parts.hooks), std::move(parts.options)) {
}

int MonitoredTrainingSession::stopped_by_signal() const {
  for (const auto& h : hooks()) {
    if (const auto* p = dynamic_cast<const PreemptionHook*>(h.get())) {
      if (p->stopped_by_signal()) return p->stopped_by_signal();
    }
  }
  return 0;
}

MonitoredTrainingSession::Parts MonitoredTrainingSession::assemble(
    Graph& graph, const MonitoredTrainingSessionOptions& o) {
  const ResolvedTrainingOptions r = resolve_training_options(o);
  MonitoredTrainingSession::Parts parts;
  parts.options = MonitoredSessionOptions{.stop_grace_period_secs = o.stop_grace_period_secs,
                                          .env = o.env,
                                          .recovery = o.recovery,
                                          .stop_policy = o.stop_policy};
  const auto& pg = o.distributed.process_group;
  // Before any collective: a train op that does not average across the session's group (or
  // averages across another) would let the ranks drift apart silently.
  distributed::check_data_parallel(graph, pg, o.hooks);
  const bool distributed = pg && pg->world_size() > 1;
  if (distributed) {
    // A recovery would recreate this rank's session alone while the others wait in a collective.
    parts.options.recovery.enabled = false;
    if (!parts.options.stop_policy) parts.options.stop_policy = distributed::agreed_stop_policy(pg);
    // Each rank reads its own shard of every input that was not sharded by the program.
    graph.shard_inputs(pg->world_size(), pg->rank());
  }

  // The chief's checkpoints: one manager of checkpoint_dir, which restores at creation and which
  // the CheckpointSaverHook saves through, so that "already saved at this step" and retention
  // see one list.
  std::shared_ptr<CheckpointManager> manager;
  if (!r.checkpoint_dir.empty()) {
    CheckpointManagerOptions manager_options = o.checkpoints.manager;
    manager_options.env = manager_options.env.or_else(o.env);
    manager = std::make_shared<CheckpointManager>(r.checkpoint_dir, std::move(manager_options));
  }
  if (manager) {
    // The newest checkpoint listed, so that a failed close() names the steps it lost.
    parts.options.last_checkpoint_step = [manager]() -> std::optional<int64_t> {
      const std::vector<std::string> listed = manager->checkpoints();
      if (listed.empty()) return std::nullopt;
      return CheckpointManager::step_of(listed.back());
    };
  }
  if (r.is_chief) {
    SessionCreatorOptions creator_options{.env = o.env};
    if (manager) creator_options.restore = restore_latest_checkpoint(manager);
    parts.creator = std::make_unique<ChiefSessionCreator>(graph, std::move(creator_options));
  } else if (pg) {
    // A worker of a group initialises its graph (optimizers, inputs) like the chief; the
    // BroadcastVariablesHook then gives it the chief's state.
    parts.creator =
        std::make_unique<ChiefSessionCreator>(graph, SessionCreatorOptions{.env = o.env});
  } else {
    parts.creator =
        std::make_unique<WorkerSessionCreator>(graph, SessionCreatorOptions{.env = o.env});
  }

  Hooks& all = parts.hooks;
  if (pg) {
    // First, so that every other hook's after_create_session sees the chief's state (a
    // StopAtStepHook's num_steps counts from the chief's restored step).
    all.push_back(std::make_shared<distributed::BroadcastVariablesHook>(
        pg,
        distributed::BroadcastVariablesHookOptions{.timeout_secs = o.distributed.max_wait_secs}));
  }
  if (r.add_preemption_hook) all.push_back(std::make_shared<PreemptionHook>());
  if (!r.is_chief) {
    all.insert(all.end(), o.hooks.begin(), o.hooks.end());
    return parts;
  }
  all.insert(all.end(), o.chief_only_hooks.begin(), o.chief_only_hooks.end());
  if (r.log_step_count_steps > 0) {
    all.push_back(std::make_shared<StepCounterHook>(StepCounterHookOptions{
        .every_n_steps = r.log_step_count_steps, .output_dir = r.summary_dir}));
  }
  if (r.save_summaries_steps || r.save_summaries_secs) {
    all.push_back(std::make_shared<SummarySaverHook>(
        SummarySaverHookOptions{.save_steps = r.save_summaries_steps,
                                .save_secs = r.save_summaries_secs,
                                .output_dir = r.summary_dir}));
  }
  if (r.save_checkpoint_steps || r.save_checkpoint_secs) {
    all.push_back(std::make_shared<CheckpointSaverHook>(
        manager, CheckpointSaverHookOptions{.save_secs = r.save_checkpoint_secs,
                                            .save_steps = r.save_checkpoint_steps,
                                            .async_save = o.checkpoints.async_save,
                                            .graph_summary_dir = r.summary_dir}));
  }
  if (r.write_hparams) {
    summary::HParams hparams = o.hparams;
    if (hparams.model_uri.empty()) hparams.model_uri = r.checkpoint_dir;
    all.push_back(std::make_shared<HParamsHook>(
        HParamsHookOptions{.hparams = std::move(hparams), .output_dir = r.summary_dir}));
  }
  all.insert(all.end(), o.hooks.begin(), o.hooks.end());
  return parts;
}

}  // namespace trainhooks
