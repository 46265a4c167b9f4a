// MonitoredSession, SingularMonitoredSession and MonitoredTrainingSession (TF's).
//
// Construction: every hook's begin(), Graph::finalize(), the session creator makes a Session
// (the chief initialises or restores the state), every hook's after_create_session().
// run(fetches, feeds): every hook's before_run, one combined run (the caller's fetches first,
// then each hook's), every hook's after_run, in hook order. should_stop() is true once a hook or
// a step function requested a stop, the Coordinator was told to stop, or an input ran out of
// data: the run that hit the end of input returns empty results marked end_of_input(), and the
// loop ends cleanly. A run after that is a RuntimeError. AbortedError and UnavailableError close
// the session, recreate it and retry the same call (logged). close() is idempotent: end() of every
// hook on a clean close, then the Coordinator's threads are joined and a stored error re-raised.
// The destructor closes, skipping end() while an exception unwinds.
//
//   auto sess = th::MonitoredTrainingSession(g, {.hooks = {std::make_shared<MyHook>(loss)}});
//   while (!sess.should_stop()) sess.run(train_op, {{x, xs}, {y, ys}});
//
// Not thread-safe: run from one thread; other threads may use the Coordinator.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "trainhooks/coordinator.h"
#include "trainhooks/env.h"
#include "trainhooks/graph.h"
#include "trainhooks/hook.h"
#include "trainhooks/session.h"

namespace trainhooks {

using Hooks = std::vector<std::shared_ptr<SessionRunHook>>;

class SessionCreator {
 public:
  virtual ~SessionCreator() = default;
  virtual Graph& graph() = 0;
  virtual std::unique_ptr<Session> create_session() = 0;
};

class Saver;

struct SessionCreatorOptions {
  Env env;
  // Chief only: restore the newest checkpoint listed in this directory, if any (a corrupt one
  // falls back to the previous one; none usable while some are listed is a DataLossError).
  std::string checkpoint_dir;
  // Chief only: restore exactly this checkpoint (takes precedence over checkpoint_dir).
  std::string checkpoint_filename_with_path;
  // The Saver that restores; null: one made on the graph when needed.
  std::shared_ptr<Saver> saver;
};

// Initialises the graph's state (variables, global step, optimizers, inputs) for each new session,
// then restores a checkpoint when one is configured and exists, so training continues where it
// stopped.
class ChiefSessionCreator : public SessionCreator {
 public:
  explicit ChiefSessionCreator(Graph& graph, SessionCreatorOptions options = {});
  Graph& graph() override { return graph_; }
  std::unique_ptr<Session> create_session() override;

 private:
  Graph& graph_;
  SessionCreatorOptions options_;
  std::shared_ptr<Saver> saver_;
};

// A worker's session: the state is not initialised by the worker (the chief's state reaches it
// through a broadcast hook in distributed training; a single process keeps the graph's state).
class WorkerSessionCreator : public SessionCreator {
 public:
  explicit WorkerSessionCreator(Graph& graph, SessionCreatorOptions options = {});
  Graph& graph() override { return graph_; }
  std::unique_ptr<Session> create_session() override;

 private:
  Graph& graph_;
  SessionCreatorOptions options_;
};

struct MonitoredSessionOptions {
  double stop_grace_period_secs = 120;
  Env env;  // null members: Env::system()
};

class MonitoredSession;

// What run_step_fn gives the step function.
class StepContext {
 public:
  // The raw session: its runs fire no hooks.
  Session& session();
  // A run that fires the hooks, as MonitoredSession::run.
  RunResults run_with_hooks(const Fetches& fetches, const Feeds& feeds = {},
                            const RunOptions& options = {});
  // should_stop() becomes true when the step function returns.
  void request_stop() { stop_requested_ = true; }
  bool stop_requested() const { return stop_requested_; }

 private:
  friend class MonitoredSession;
  explicit StepContext(MonitoredSession& sess) : sess_(sess) {}
  MonitoredSession& sess_;
  bool stop_requested_ = false;
};

class MonitoredSession {
 public:
  MonitoredSession(std::unique_ptr<SessionCreator> creator, Hooks hooks = {},
                   MonitoredSessionOptions options = {});
  virtual ~MonitoredSession();
  MonitoredSession(const MonitoredSession&) = delete;
  MonitoredSession& operator=(const MonitoredSession&) = delete;

  RunResults run(const Fetches& fetches, const Feeds& feeds = {}, const RunOptions& options = {},
                 RunMetadata* metadata = nullptr);
  // As run(), into `out`, whose capacity is reused: a steady loop allocates nothing here.
  void run_into(const Fetches& fetches, const Feeds& feeds, const RunOptions& options,
                RunMetadata* metadata, RunResults& out);

  template <typename Fn>
  auto run_step_fn(Fn&& fn) -> std::invoke_result_t<Fn, StepContext&> {
    check_not_stopped();
    StepContext ctx(*this);
    if constexpr (std::is_void_v<std::invoke_result_t<Fn, StepContext&>>) {
      fn(ctx);
      if (ctx.stop_requested()) stop_requested_ = true;
    } else {
      auto result = fn(ctx);
      if (ctx.stop_requested()) stop_requested_ = true;
      return result;
    }
  }

  bool should_stop() const;
  void close();
  bool closed() const { return closed_; }

  Graph& graph() { return creator_->graph(); }
  Coordinator& coordinator() { return *coord_; }
  const Hooks& hooks() const { return hooks_; }
  const Env& env() const { return env_; }
  // The current raw session (runs on it fire no hooks).
  Session& raw_session();

 private:
  friend class StepContext;
  void create_session();
  void check_not_stopped() const;
  void run_hooked(const Fetches& fetches, const Feeds& feeds, const RunOptions& options,
                  RunMetadata* metadata, RunResults& out);
  void run_once(const Fetches& fetches, const Feeds& feeds, const RunOptions& options,
                RunMetadata* metadata, RunResults& out);

  std::unique_ptr<SessionCreator> creator_;
  Hooks hooks_;
  MonitoredSessionOptions options_;
  Env env_;
  std::unique_ptr<Coordinator> coord_;
  std::unique_ptr<Session> session_;
  bool stop_requested_ = false;
  bool end_of_input_ = false;
  bool closed_ = false;
  int uncaught_at_construction_;

  // Per-run scratch, reused so that a steady loop allocates nothing here.
  std::vector<SessionRunArgs> hook_args_;
  std::vector<SessionRunValues> hook_values_;
  std::vector<size_t> hook_fetch_begin_;
  std::vector<Node> combined_fetches_;
  Feeds combined_feeds_;
  RunResults combined_results_;
  std::vector<uint64_t> user_feed_stamp_;
  std::vector<uint64_t> hook_feed_stamp_;
  uint64_t feed_stamp_ = 0;
};

// A MonitoredSession with a ChiefSessionCreator, whose raw session is reachable.
class SingularMonitoredSession : public MonitoredSession {
 public:
  explicit SingularMonitoredSession(Graph& graph, Hooks hooks = {},
                                    MonitoredSessionOptions options = {});
};

struct MonitoredTrainingSessionOptions {
  bool is_chief = true;
  // Checkpoints: the chief restores the newest one at creation and after a recovery, and its
  // CheckpointSaverHook saves `model.ckpt-<step>` here (see hooks/checkpoint_saver_hook.h).
  std::string checkpoint_dir;
  Hooks hooks;
  Hooks chief_only_hooks;
  // Default 600 seconds when checkpoint_dir is set and save_checkpoint_steps is not.
  std::optional<double> save_checkpoint_secs;
  std::optional<int64_t> save_checkpoint_steps;
  // Summaries of the graph (summary_ops.h) written to summary_dir; default 100 steps when neither
  // is given; 0 disables them.
  std::optional<int64_t> save_summaries_steps;
  std::optional<double> save_summaries_secs;
  // Every this many steps the chief logs `global_step/sec: X`; 0 disables it.
  int64_t log_step_count_steps = 100;
  double stop_grace_period_secs = 120;
  double max_wait_secs = 7200;
  // Event files (SummarySaverHook, StepCounterHook's global_step/sec); empty: checkpoint_dir.
  std::string summary_dir;
  std::optional<int> max_to_keep;
  std::optional<double> keep_checkpoint_every_n_hours;
  // Write checkpoints on a background thread (CheckpointSaverHookOptions::async_save).
  bool async_checkpoints = false;
  // A PreemptionHook (hooks/preemption_hook.h), first of all hooks, on the chief and the workers:
  // SIGTERM or SIGINT stops training after the current step, and the chief's final checkpoint is
  // written when the session closes. Not added when `hooks` (or the chief's chief_only_hooks)
  // already hold one. false leaves the signals to the program.
  bool handle_preemption_signals = true;
  Env env;
};

// TF's MonitoredTrainingSession: the chief adds the default hooks in TF's order
// (chief_only_hooks, StepCounterHook, SummarySaverHook, CheckpointSaverHook, then hooks);
// a worker runs only `hooks`. Both put a PreemptionHook first unless handle_preemption_signals
// is false.
class MonitoredTrainingSession : public MonitoredSession {
 public:
  MonitoredTrainingSession(Graph& graph, MonitoredTrainingSessionOptions options = {});

 private:
  MonitoredTrainingSession(Graph& graph, const MonitoredTrainingSessionOptions& options,
                           std::shared_ptr<Saver> saver);
};

}  // namespace trainhooks
