// MonitoredTrainingSession (TF's): a MonitoredSession assembled for training, with the default
// hooks and checkpoint restore of TF's function of the same name.
//
// The chief (is_chief, the default; rank 0 of a process_group) restores the newest checkpoint of
// checkpoint_dir at creation and after every recovery, and runs, in TF's order: chief_only_hooks,
// StepCounterHook, SummarySaverHook, CheckpointSaverHook (which also writes the graph:
// graph.pbtxt and a graph event, after the first run), an HParamsHook when hparams are declared,
// then `hooks`. A worker restores nothing
// and runs only `hooks`. Both put a PreemptionHook first unless handle_preemption_signals is false.
// Which default hooks run, and with which periods, is decided once by
// resolve_training_options(), which a program can call to see what it gets.
//
//   th::MonitoredTrainingSession sess(g, {.checkpoint_dir = "runs/exp1",
//                                         .hooks = {std::make_shared<MyHook>(loss)}});
//   while (!sess.should_stop()) sess.run(train_op, {{x, xs}, {y, ys}});
//   sess.close();  // the final checkpoint: a failure is raised here (the destructor only logs)
//
// When close() fails, the error the destructor logs (or unsaved_steps()) names the steps since
// the newest checkpoint of checkpoint_dir.
//
// The engine's contract (hook order within a run, stopping, recovery, close) is
// monitored_session.h's.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "trainhooks/checkpoint/checkpoint_manager.h"
#include "trainhooks/env.h"
#include "trainhooks/monitored_session.h"
#include "trainhooks/recovery_options.h"
#include "trainhooks/stop_policy.h"
#include "trainhooks/summary/hparams.h"

namespace trainhooks {

class Graph;
namespace distributed {
class ProcessGroup;
}

// TF's options, with the periods and retention grouped by what they configure; TF's names for
// the directories and hooks stay at the top:
//   {.checkpoint_dir = "runs/exp1",
//    .hooks = {hook},
//    .checkpoints = {.save_steps = 500, .manager = {.max_to_keep = 3}},
//    .summaries = {.save_steps = 50}}
struct MonitoredTrainingSessionOptions {
  // Ignored when distributed.process_group is set: the chief is its rank 0.
  bool is_chief = true;
  // Checkpoints: the chief restores the newest one at creation and after a recovery, and its
  // CheckpointSaverHook saves `model.ckpt-<step>` here (see hooks/checkpoint_saver_hook.h), both
  // through one CheckpointManager of this directory (checkpoint/checkpoint_manager.h).
  std::string checkpoint_dir;
  // Event files (SummarySaverHook, StepCounterHook's global_step/sec); empty: checkpoint_dir.
  std::string summary_dir;
  Hooks hooks;
  Hooks chief_only_hooks;

  // The chief's checkpoints of checkpoint_dir (given without one: InvalidArgument).
  struct Checkpoints {
    // TF's save_checkpoint_secs: default 600 seconds when save_steps is not given.
    std::optional<double> save_secs;
    // TF's save_checkpoint_steps. 0 (either): no CheckpointSaverHook.
    std::optional<int64_t> save_steps;
    // Write checkpoints on a background thread (CheckpointSaverHookOptions::async_save).
    bool async_save = false;
    // The CheckpointManager of checkpoint_dir that restores and saves: retention (max_to_keep,
    // keep_checkpoint_every_n_hours), keep-best (keep_best: the keep_best.n checkpoints with the
    // best values of keep_best.metric, e.g. an EvaluationHook's "eval/loss", are never deleted
    // by max_to_keep), the basename. Its env's null members are the session's.
    CheckpointManagerOptions manager;
  } checkpoints;

  // The chief's summaries.
  struct Summaries {
    // TF's save_summaries_steps / save_summaries_secs: how often the SummarySaverHook writes the
    // graph's summaries (summary/ops.h) to summary_dir; default 100 steps when neither is given;
    // 0 disables it.
    std::optional<int64_t> save_steps;
    std::optional<double> save_secs;
    // TF's log_step_count_steps: every this many steps the chief logs `global_step/sec: X`
    // (and writes it to summary_dir when there is one); 0 disables it.
    int64_t log_step_count_steps = 100;
  } summaries;

  // The run's hyperparameters and the metrics to compare runs by (summary/hparams.h), for
  // TensorBoard's HParams dashboard: the chief's HParamsHook (hooks/hparams_hook.h) writes them
  // to summary_dir at the start and the run's status at the end. Empty: none. model_uri defaults
  // to checkpoint_dir. Given without a summary_dir or checkpoint_dir: InvalidArgument.
  //   .hparams = {.values = {{"optimizer", "adam"}, {"lr", 2e-3}},
  //               .metrics = {{.tag = "accuracy", .group = "eval"}}}
  summary::HParams hparams;

  // Recovery from a lost session (monitored_session.h). Off with a group of several ranks.
  RecoveryOptions recovery;

  // Data-parallel training over a process group (distributed/process_group.h,
  // docs/distributed.md): rank 0 is the chief (it alone restores and runs the chief-only default
  // hooks); every rank initialises its graph and a distributed::BroadcastVariablesHook, first of
  // all hooks, gives the workers the chief's state after each session creation; the stop
  // decision is agreed across the ranks (distributed/agreed_stop_policy.h) unless stop_policy is
  // given; inputs left at num_shards 1 read the shard of this rank; and a failed run is not
  // recovered when the group has several processes. The gradients are averaged by the train op,
  // not here: give both the same distributed::data_parallel(pg) (distributed/data_parallel.h).
  // A group of several ranks whose train op does not average across it (nor a ModelAverageHook
  // in `hooks`), or a train op averaging across a group not given here, is an InvalidArgument
  // at construction (distributed::check_data_parallel).
  struct Distributed {
    std::shared_ptr<distributed::ProcessGroup> process_group;
    // TF's max_wait_secs: how long a worker waits for the chief's state at session creation.
    double max_wait_secs = 7200;
  } distributed;

  // How long close() waits for the Coordinator's threads.
  double stop_grace_period_secs = 120;
  // Turns this process's reasons to stop into the decision (stop_policy.h).
  std::shared_ptr<StopPolicy> stop_policy;
  // A PreemptionHook (hooks/preemption_hook.h), first of all hooks, on the chief and the workers:
  // SIGTERM or SIGINT stops training after the current step, and the chief's final checkpoint is
  // written when the session closes. Not added when `hooks` (or the chief's chief_only_hooks)
  // already hold one. false leaves the signals to the program.
  bool handle_preemption_signals = true;
  Env env;
};

// The options with every default that depends on other options filled in: what
// MonitoredTrainingSession builds. Validates first (InvalidArgument naming the option; TF's text
// for both of two exclusive options).
struct ResolvedTrainingOptions {
  bool is_chief = true;
  std::string checkpoint_dir;  // "" : no restore, no CheckpointSaverHook
  std::string summary_dir;     // "" : no event files
  // StepCounterHook every this many steps (chief; 0: none).
  int64_t log_step_count_steps = 0;
  // SummarySaverHook (chief, with a summary_dir): at most one of the two is set; neither: none.
  std::optional<int64_t> save_summaries_steps;
  std::optional<double> save_summaries_secs;
  // CheckpointSaverHook (chief, with a checkpoint_dir): at most one is set; neither: none.
  std::optional<int64_t> save_checkpoint_steps;
  std::optional<double> save_checkpoint_secs;
  // A PreemptionHook is put first.
  bool add_preemption_hook = false;
  // An HParamsHook writes the options' hparams to summary_dir (chief, with hparams).
  bool write_hparams = false;
};
ResolvedTrainingOptions resolve_training_options(const MonitoredTrainingSessionOptions& options);

class MonitoredTrainingSession : public MonitoredSession {
 public:
  MonitoredTrainingSession(Graph& graph, MonitoredTrainingSessionOptions options = {});

  // The signal (SIGTERM, SIGINT) that stopped training through a PreemptionHook of this session,
  // the default one or the program's; 0 when training stopped for another reason. A program
  // exits with a status a scheduler can tell from a finished run, e.g.
  //   return sess.stopped_by_signal() ? th::exit_status_for_signal(sess.stopped_by_signal()) : 0;
  int stopped_by_signal() const;

 private:
  struct Parts;  // the creator, hooks and engine options, built together (training_session.cpp)
  explicit MonitoredTrainingSession(Parts parts);
  static Parts assemble(Graph& graph, const MonitoredTrainingSessionOptions& options);
};

}  // namespace trainhooks
