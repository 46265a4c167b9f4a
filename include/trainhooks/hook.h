// The SessionRunHook protocol (TF's, exactly).
//
// A MonitoredSession calls, for every hook in order:
//   begin()                               once, before the session exists (graph() is usable)
//   after_create_session(session, coord)  after every (re)creation of the session
//   before_run(ctx) -> SessionRunArgs      before each run: extra fetches, feeds, run options
//   -- one combined run of the caller's and every hook's fetches --
//   after_run(ctx, values)                 with the hook's own fetched values
//   end(session)                           on a clean close only (not while an exception unwinds)
//
// Hooks may add feeds but never override the caller's or another hook's (a RuntimeError names
// the nodes). ctx.request_stop() makes should_stop() true after the current run, whose results
// are still returned.
//
//   struct LossPrinter : th::SessionRunHook {
//     th::Node loss;
//     th::SessionRunArgs before_run(th::SessionRunContext&) override { return {{loss}}; }
//     void after_run(th::SessionRunContext&, const th::SessionRunValues& v) override {
//       std::cout << v.results[loss].item<float>() << "\n";
//     }
//   };
//
// Hooks read time, sleep and log through env() (the session's Env unless set_env() gave one).
//
// Hooks do not find each other: what they share is services() (hook_services.h), one object per
// session from begin() on: the graph's latest metrics (an evaluation publishes, plateau, early
// stopping and keep-best read), the step at which training stops, the learning-rate scales.
//
// What most hooks repeat is offered once: require_global_step("MyHook") in begin() raises TF's
// "Global step should be created to use MyHook."; a SecondOrStepTimer built in the constructor
// (which validates the options, timer.h) is bound to env()'s clock and restarted by
// reset_timer(timer_) in begin(), so a hook reused by another session starts afresh.
//
// State that checkpoints carry (a patience counter, the best metric so far) is declared, not
// registered: a hook whose state() is non-null has it registered on the session's graph under
// state_key() after every hook's begin() and before the session is created (so a restore loads
// it), and unregistered when the session closes, however it closes (an exception, the
// destructor). The same hook object may then serve another session, on any graph.
//
//   struct Patience : th::SessionRunHook, th::StateProvider {
//     int64_t bad_epochs = 0;
//     th::StateProvider* state() override { return this; }
//     std::string state_key() const override { return "hooks/patience"; }
//     std::string save_state() const override { return std::to_string(bad_epochs); }
//     void load_state(std::string_view b) override { bad_epochs = std::stoll(std::string(b)); }
//   };
#pragma once

#include <string>
#include <string_view>

#include "trainhooks/env.h"
#include "trainhooks/node.h"
#include "trainhooks/session.h"

namespace trainhooks {

class Coordinator;
class Graph;
class HookServices;
class SecondOrStepTimer;
class StateProvider;

struct SessionRunArgs {
  Fetches fetches;
  Feeds feeds;
  RunOptions options;
};

struct SessionRunValues {
  RunResults results;
  RunOptions options;
  RunMetadata run_metadata;
};

class SessionRunContext {
 public:
  SessionRunContext(const Fetches& fetches, FeedsView feeds, Session& session)
      : fetches_(&fetches), feeds_(feeds), session_(&session) {}
  // The caller's fetches and feeds for this run.
  const Fetches& original_fetches() const { return *fetches_; }
  FeedsView original_feeds() const { return feeds_; }
  Session& session() const { return *session_; }
  void request_stop() { stop_requested_ = true; }
  bool stop_requested() const { return stop_requested_; }

 private:
  const Fetches* fetches_;
  FeedsView feeds_;
  Session* session_;
  bool stop_requested_ = false;
};

class SessionRunHook {
 public:
  virtual ~SessionRunHook() = default;

  virtual void begin() {}
  virtual void after_create_session(Session& session, Coordinator& coord) {}
  virtual SessionRunArgs before_run(SessionRunContext& run_context) { return {}; }
  virtual void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) {}
  virtual void end(Session& session) {}

  // Not needed: the monitored session calls before_run and after_run only on the hooks whose
  // class overrides them (read once per session from the class; docs/guide.md), so a hook
  // that acts only in begin, after_create_session or end costs nothing per run, and an
  // overridden call is always made. Where that cannot be read (a compiler with another C++ ABI,
  // found by a check at start), this hint decides instead: a call declared false is then not
  // made. Read once, after begin().
  struct Calls {
    bool before_run = true;
    bool after_run = true;
  };
  virtual Calls calls() const { return {}; }

  // This hook's checkpointed state (see above); null: none. Both are read once per session, after
  // begin(). A non-null state() needs a state_key() unique among the session's hooks and the
  // graph's other registrations (AlreadyExistsError otherwise).
  virtual StateProvider* state() { return nullptr; }
  virtual std::string state_key() const { return {}; }

  // Overrides the session's Env for this hook (members left null keep the session's).
  void set_env(Env env) { own_env_ = std::move(env); }

  // Called by the monitored session before begin(); hooks need not call it.
  void bind(Graph& graph, const Env& session_env, HookServices& services);

 protected:
  // The graph of the session that runs this hook; valid from begin() on.
  Graph& graph() const;
  const Env& env() const { return env_; }
  // What the session's hooks share (hook_services.h); valid from begin() on.
  HookServices& services() const;

  // TF's RuntimeError "Global step should be created to use <hook_name>." when the graph has no
  // global step. From begin() on.
  void require_global_step(std::string_view hook_name) const;
  // Binds `timer` to env()'s clock and forgets its last trigger. From begin() on.
  void reset_timer(SecondOrStepTimer& timer) const;

 private:
  Graph* graph_ = nullptr;
  HookServices* services_ = nullptr;
  Env own_env_;
  Env env_ = Env::system();
};

}  // namespace trainhooks
