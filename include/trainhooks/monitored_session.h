// The engine of TF's monitored sessions: MonitoredSession, SingularMonitoredSession, the session
// creators and StepContext. The training assembly with its default hooks is
// MonitoredTrainingSession (training_session.h).
//
// Construction: every hook's begin(), the hooks' declared state (SessionRunHook::state()) is
// registered on the graph, Graph::finalize(), the session creator makes a Session (the chief
// initialises the state, then restores it, hook state included, when given a restore function),
// every hook's after_create_session().
// run(fetches, feeds): every hook's before_run, one combined run (the caller's fetches first,
// then each hook's), every hook's after_run, in hook order.
//
// Stopping. After every run the session combines its reasons to stop (a hook or a step function
// requested it, the Coordinator was told to stop, an input ran out of data, or a hook raised
// OutOfRangeError) and hands them to the StopPolicy (stop_policy.h) in one place; should_stop()
// reports the decision. The run that hit the end of input returns empty results marked
// end_of_input(), and the loop ends cleanly; a run after a stop is a RuntimeError.
//
// Recovery (TF's _RecoverableSession) is for a lost session, not for a failing disk.
// AbortedError and UnavailableError raised by a run, a hook or stored in the Coordinator by another
// thread (checked by should_stop() and run()) close the session, make a new Coordinator and
// session (the chief restores the latest checkpoint) and retry the same call, logging each attempt
// once; a CancelledError or other error whose root cause in the Coordinator is one of those
// recovers the same way. A preemption stored while a run is in its hooks' after_run recovers
// like one stored between runs. run_step_fn re-runs the whole step function. Every other error,
// file errors included (FileError, ResourceExhaustedError, FailedPreconditionError), ends
// training: a run raises it to the caller. Other errors stored in the Coordinator (another
// thread's failure) stop training as TF does: should_stop() returns true, and close() raises the
// error (leaving the session's scope logs it); a run() meanwhile still runs, as TF's does.
// SingularMonitoredSession, which does not recover, raises them from should_stop(). Recovery is
// bounded: recovery.max_attempts consecutive attempts, the later ones after
// a backoff through the Env's sleeper; a SIGTERM or SIGINT recorded by a PreemptionHandler
// (preemption.h) or a stop already requested ends it, before an attempt and during the backoff,
// and the error is raised. SingularMonitoredSession does not recover.
//
// close() is idempotent: end() of every hook on a clean close (each one, even after another's
// failed, so a failing summary flush does not skip the final checkpoint), then the Coordinator's
// threads are joined, the hooks' state is unregistered from the graph (on every path, also when
// construction fails) and the error re-raised: the Coordinator's stored error first (the root
// cause, as TF's close() raises it), else the first hook's. The destructor closes, skipping end()
// while an exception unwinds; as it cannot throw, it logs what close() raised at ERROR with the
// steps that were lost:
//   Error while closing the monitored session: <error>; steps 51..100 since the last checkpoint
//   (step 50) were not saved.
// A program calls close() itself to see the error (and exit with a failure):
//
//   th::MonitoredSession sess(std::make_unique<th::ChiefSessionCreator>(g), {hook});
//   while (!sess.should_stop()) sess.run(train_op, {{x, xs}, {y, ys}});
//   sess.close();  // the final checkpoint is written here; its errors are raised here
//
// Not thread-safe: run from one thread; other threads may use the Coordinator.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "trainhooks/coordinator.h"
#include "trainhooks/env.h"
#include "trainhooks/graph.h"
#include "trainhooks/hook.h"
#include "trainhooks/hook_services.h"
#include "trainhooks/recovery_options.h"
#include "trainhooks/session.h"
#include "trainhooks/stop_policy.h"

namespace trainhooks {

namespace internal {
class HookRunner;
class Recovery;
class StopDecision;
}  // namespace internal

using Hooks = std::vector<std::shared_ptr<SessionRunHook>>;

class SessionCreator {
 public:
  virtual ~SessionCreator() = default;
  virtual Graph& graph() = 0;
  virtual std::unique_ptr<Session> create_session() = 0;
};

// Brings a new session's state back, e.g. from the newest checkpoint of a directory
// (checkpoint/checkpoint_manager.h: restore_latest_checkpoint; checkpoint/saver.h:
// restore_checkpoint).
using RestoreFn = std::function<void(Session& session)>;

struct SessionCreatorOptions {
  Env env;
  // Chief only: called on every new session after the state is initialised (null: no restore).
  RestoreFn restore;
};

// Initialises the graph's state (variables, global step, optimizers, inputs) for each new session,
// then calls options.restore, so training continues where it stopped.
class ChiefSessionCreator : public SessionCreator {
 public:
  explicit ChiefSessionCreator(Graph& graph, SessionCreatorOptions options = {});
  Graph& graph() override { return graph_; }
  std::unique_ptr<Session> create_session() override;

 private:
  Graph& graph_;
  SessionCreatorOptions options_;
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
  RecoveryOptions recovery;
  // The global step of the newest checkpoint on disk (nullopt: none), read when close() fails so
  // that the error names the steps lost (unsaved_steps()); MonitoredTrainingSession sets it from
  // its CheckpointManager. Null: the session does not know of checkpoints.
  std::function<std::optional<int64_t>()> last_checkpoint_step;
  // Turns this process's reasons to stop into the decision (null: this process decides alone).
  std::shared_ptr<StopPolicy> stop_policy;
};

class MonitoredSession;

// What run_step_fn gives the step function.
class StepContext {
 public:
  // The raw session: its runs fire no hooks.
  Session& session();
  // A run that fires the hooks, as MonitoredSession::run.
  RunResults run_with_hooks(const Fetches& fetches, FeedsView feeds = {},
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

  RunResults run(const Fetches& fetches, FeedsView feeds = {}, const RunOptions& options = {},
                 RunMetadata* metadata = nullptr);
  // As run(), into `out`, whose capacity is reused: a steady loop allocates nothing here.
  void run_into(const Fetches& fetches, FeedsView feeds, const RunOptions& options,
                RunMetadata* metadata, RunResults& out);

  // Runs `fn(StepContext&)` once, TF's run_step_fn: an AbortedError reaching it (from fn itself
  // or from a hook inside run_with_hooks) recovers and runs the whole of fn again.
  template <typename Fn>
  auto run_step_fn(Fn&& fn) -> std::invoke_result_t<Fn, StepContext&> {
    using Result = std::invoke_result_t<Fn, StepContext&>;
    check_not_stopped();
    for (;;) {
      StepContext ctx(*this);
      StepScope scope(*this);
      try {
        if constexpr (std::is_void_v<Result>) {
          fn(ctx);
          finish_step_fn(ctx.stop_requested());
          return;
        } else {
          Result result = fn(ctx);
          finish_step_fn(ctx.stop_requested());
          return result;
        }
      } catch (...) {
        scope.release();
        recover_or_rethrow(std::current_exception());
      }
    }
  }

  // Whether training should stop. Raises an error another thread stored in the Coordinator, or
  // recovers from it (Aborted, Unavailable) and returns false.
  bool should_stop();
  // Ends the session (see above); raises the first error of the hooks' end() or of the
  // Coordinator's threads. The destructor only logs it.
  void close();
  bool closed() const { return closed_; }
  // The steps whose training is not in a checkpoint, as the destructor's ERROR line says them:
  // "steps 51..100 since the last checkpoint (step 50) were not saved", "steps 1..100 were not
  // saved (no checkpoint)"; "" when the newest checkpoint holds the current global step, or
  // without last_checkpoint_step or a global step. For a program's message after close() failed.
  std::string unsaved_steps() const;

  Graph& graph() { return creator_->graph(); }
  Coordinator& coordinator() { return *coord_; }
  const Hooks& hooks() const { return hooks_; }
  // What this session's hooks share (hook_services.h): the latest metrics, where training stops.
  const HookServices& services() const { return *services_; }
  const Env& env() const { return env_; }
  // The current raw session (runs on it fire no hooks).
  Session& raw_session();

 private:
  friend class StepContext;
  // Marks the run_step_fn in progress: runs inside it do not recover (the step function does).
  class StepScope {
   public:
    explicit StepScope(MonitoredSession& s) : s_(&s) { s_->in_step_fn_ = true; }
    ~StepScope() { release(); }
    void release() {
      if (s_) s_->in_step_fn_ = false;
      s_ = nullptr;
    }

   private:
    MonitoredSession* s_;
  };

  // Registers every hook's declared state on `graph` (into hook_states_).
  void register_hook_states(Graph& graph);
  void create_session();
  void create_session_recovering();
  void check_not_stopped();
  // Whether `error` is recovered from (src/recovery.h); false: the caller rethrows `error`, which
  // may have been replaced by its root cause in the Coordinator.
  bool should_recover(std::exception_ptr& error);
  // Closes the session and clears the Coordinator and the stop for a new session.
  void reset_for_recovery();
  // Rethrows `error` unless this session recovers from it; then a new session exists on return.
  void recover_or_rethrow(std::exception_ptr error);
  void finish_step_fn(bool stop_requested);
  // The one place where the reasons to stop become the decision (src/stop_decision.h).
  void decide_stop();
  void run_hooked(const Fetches& fetches, FeedsView feeds, const RunOptions& options,
                  RunMetadata* metadata, RunResults& out);

  std::unique_ptr<SessionCreator> creator_;
  std::unique_ptr<HookServices> services_;  // one per session, shared by its hooks
  Hooks hooks_;
  // Declared after hooks_: unregistered before the hooks (and their providers) may be destroyed.
  std::vector<StateRegistration> hook_states_;
  MonitoredSessionOptions options_;
  Env env_;
  std::unique_ptr<Coordinator> coord_;
  std::unique_ptr<Session> session_;
  bool in_step_fn_ = false;
  bool closed_ = false;
  int uncaught_at_construction_;
  // The three private units of TF's session wrappers: running the hooks around each run (with
  // its per-run scratch), the stop decision, and recovery (src/hook_runner.h, stop_decision.h,
  // recovery.h).
  std::unique_ptr<internal::HookRunner> runner_;
  std::unique_ptr<internal::StopDecision> stop_;
  std::unique_ptr<internal::Recovery> recovery_;
};

// A MonitoredSession with a ChiefSessionCreator, whose raw session is reachable.
class SingularMonitoredSession : public MonitoredSession {
 public:
  explicit SingularMonitoredSession(Graph& graph, Hooks hooks = {},
                                    MonitoredSessionOptions options = {});
};

}  // namespace trainhooks
