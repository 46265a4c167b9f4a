#include "trainhooks/monitored_session.h"

#include <fmt/format.h>

#include <string>

#include "hook_runner.h"
#include "recovery.h"
#include "stop_decision.h"
#include "trainhooks/errors.h"
#include "util/error_message.h"

namespace trainhooks {

// ---- Session creators -------------------------------------------------------------------------

ChiefSessionCreator::ChiefSessionCreator(Graph& graph, SessionCreatorOptions options)
    : graph_(graph), options_(std::move(options)) {}

std::unique_ptr<Session> ChiefSessionCreator::create_session() {
  graph_.initialize();
  auto session = std::make_unique<Session>(graph_, options_.env);
  if (options_.restore) options_.restore(*session);
  return session;
}

WorkerSessionCreator::WorkerSessionCreator(Graph& graph, SessionCreatorOptions options)
    : graph_(graph), options_(std::move(options)) {}

std::unique_ptr<Session> WorkerSessionCreator::create_session() {
  return std::make_unique<Session>(graph_, options_.env);
}

// ---- StepContext ------------------------------------------------------------------------------

Session& StepContext::session() { return sess_.raw_session(); }

RunResults StepContext::run_with_hooks(const Fetches& fetches, FeedsView feeds,
                                       const RunOptions& options) {
  return sess_.run(fetches, feeds, options);
}

// ---- MonitoredSession -------------------------------------------------------------------------

MonitoredSession::MonitoredSession(std::unique_ptr<SessionCreator> creator, Hooks hooks,
                                   MonitoredSessionOptions options)
    : creator_(std::move(creator)),
      hooks_(std::move(hooks)),
      options_(std::move(options)),
      env_(options_.env.or_else(Env::system())),
      coord_(std::make_unique<Coordinator>()),
      uncaught_at_construction_(std::uncaught_exceptions()) {
  if (!creator_) throw InvalidArgument("MonitoredSession: session_creator is null");
  if (!(options_.stop_grace_period_secs >= 0)) {
    throw InvalidArgument(fmt::format("MonitoredSession: invalid stop_grace_period_secs {}",
                                      options_.stop_grace_period_secs));
  }
  recovery_ = std::make_unique<internal::Recovery>(options_.recovery, env_);
  stop_ = std::make_unique<internal::StopDecision>(options_.stop_policy);
  for (size_t i = 0; i < hooks_.size(); ++i) {
    if (!hooks_[i]) throw InvalidArgument(fmt::format("MonitoredSession: hooks[{}] is null", i));
  }
  Graph& g = creator_->graph();
  services_ = std::make_unique<HookServices>(g);
  for (auto& h : hooks_) h->bind(g, env_, *services_);
  for (auto& h : hooks_) h->begin();
  register_hook_states(g);
  g.finalize();
  runner_ = std::make_unique<internal::HookRunner>(hooks_);
  create_session_recovering();
}

MonitoredSession::~MonitoredSession() {
  try {
    close();
  } catch (...) {
    // A destructor cannot raise: the error is said here, with the work it lost, at ERROR.
    std::string error = internal::error_message(std::current_exception());
    std::string lost;
    try {
      lost = unsaved_steps();
    } catch (...) {
      // The checkpoint list could not be read: the error alone.
    }
    if (!lost.empty()) {
      if (error.ends_with('.')) error.pop_back();
      error += "; " + lost + ".";
    }
    env_.error(fmt::format("Error while closing the monitored session: {}", error));
  }
}

void MonitoredSession::register_hook_states(Graph& graph) {
  for (size_t i = 0; i < hooks_.size(); ++i) {
    StateProvider* state = hooks_[i]->state();
    if (!state) continue;
    std::string key = hooks_[i]->state_key();
    if (key.empty()) {
      throw InvalidArgument(fmt::format(
          "MonitoredSession: hooks[{}] declares a state() with an empty state_key()", i));
    }
    try {
      hook_states_.emplace_back(graph, std::move(key), state);
    } catch (const AlreadyExistsError& e) {
      // The usual causes: two hooks with one key, or a hook in two open sessions of one graph.
      throw AlreadyExistsError(fmt::format("MonitoredSession: hooks[{}]: {}", i, e.what()));
    }
  }
}

void MonitoredSession::create_session() {
  session_ = creator_->create_session();
  for (auto& h : hooks_) h->after_create_session(*session_, *coord_);
  // A stop requested while the session was made (a signal, a hook's Coordinator stop) counts
  // before the first run.
  decide_stop();
}

void MonitoredSession::create_session_recovering() {
  for (;;) {
    try {
      create_session();
      return;
    } catch (...) {
      std::exception_ptr error = std::current_exception();
      if (!should_recover(error)) std::rethrow_exception(error);
      reset_for_recovery();
    }
  }
}

Session& MonitoredSession::raw_session() {
  if (closed_ || !session_) throw RuntimeError("Attempted to use a closed MonitoredSession.");
  return *session_;
}

bool MonitoredSession::should_recover(std::exception_ptr& error) {
  return recovery_->should_recover(error, *coord_, !in_step_fn_ && !closed_, stop_->stopping());
}

void MonitoredSession::reset_for_recovery() {
  session_.reset();
  // TF makes a new Coordinator for the new session; the old one's threads are stopped and joined
  // first, and the error that brought us here is not raised again.
  coord_->request_stop();
  try {
    coord_->join(options_.stop_grace_period_secs);
  } catch (const AbortedError&) {
    // The error being recovered from (or another preemption): already logged.
  } catch (const UnavailableError&) {
    // Likewise.
  } catch (const std::exception& e) {
    env_.warning(fmt::format("While recovering the session: {}", e.what()));
  }
  coord_->clear_stop();
  stop_->reset();
}

void MonitoredSession::recover_or_rethrow(std::exception_ptr error) {
  if (!should_recover(error)) std::rethrow_exception(error);
  reset_for_recovery();
  create_session_recovering();
}

void MonitoredSession::decide_stop() {
  // A preemption stored in the Coordinator (even while this run was in its hooks' after_run) is
  // recovered from by the next should_stop() or run(), as one stored between runs: the stop that
  // storing it requested is not a reason to stop.
  stop_->decide(coord_->should_stop() && !recovery_->recovers_from(*coord_));
}

bool MonitoredSession::should_stop() {
  if (closed_) return true;
  if (coord_->has_error()) {
    std::exception_ptr error = coord_->requested_exception();
    if (error) {
      // TF's _RecoverableSession: any other error makes should_stop() true instead of raising;
      // close() raises it. A session that does not recover raises it here.
      if (recovery_->enabled() && !internal::Recovery::is_preemption(error)) return true;
      recover_or_rethrow(error);
      return false;  // recovered: a new session
    }
  }
  return stop_->should_stop(*coord_);
}

void MonitoredSession::check_not_stopped() {
  if (closed_) throw RuntimeError("Attempted to use a closed MonitoredSession.");
  // A preemption stored in the Coordinator recovers before the run. Other stored errors and a
  // Coordinator stop do not refuse the run (TF's hooked session checks only its hooks' stop
  // requests); should_stop() is true and close() raises the error.
  if (coord_->has_error()) {
    std::exception_ptr error = coord_->requested_exception();
    if (error && internal::Recovery::is_preemption(error)) recover_or_rethrow(error);
  }
  if (stop_->refuses_run()) throw RuntimeError("Run called even after should_stop requested.");
}

void MonitoredSession::finish_step_fn(bool stop_requested) {
  if (stop_requested) stop_->request();
  recovery_->succeeded();
  decide_stop();
}

RunResults MonitoredSession::run(const Fetches& fetches, FeedsView feeds, const RunOptions& options,
                                 RunMetadata* metadata) {
  RunResults out;
  run_into(fetches, feeds, options, metadata, out);
  return out;
}

void MonitoredSession::run_into(const Fetches& fetches, FeedsView feeds, const RunOptions& options,
                                RunMetadata* metadata, RunResults& out) {
  check_not_stopped();
  run_hooked(fetches, feeds, options, metadata, out);
}

void MonitoredSession::run_hooked(const Fetches& fetches, FeedsView feeds,
                                  const RunOptions& options, RunMetadata* metadata,
                                  RunResults& out) {
  // TF's _RecoverableSession: a lost peer or a preemption recreates the session and retries.
  for (;;) {
    try {
      if (!session_) create_session();
      try {
        if (runner_->run(*session_, fetches, feeds, options, metadata, out)) stop_->request();
      } catch (const OutOfRangeError& e) {
        // The end of input, from an input or a hook, is the end of training: stop cleanly, as
        // TF's `with` block does; the run returns empty results marked end_of_input().
        env_.info(fmt::format("Reached the end of input; stopping: {}", e.what()));
        stop_->reach_end_of_input();
        out.clear();
        out.set_graph(&session_->graph());
        out.set_end_of_input(true);
      }
      if (!in_step_fn_) recovery_->succeeded();
      decide_stop();
      return;
    } catch (...) {
      std::exception_ptr error = std::current_exception();
      if (!should_recover(error)) std::rethrow_exception(error);
      reset_for_recovery();
    }
  }
}

void MonitoredSession::close() {
  if (closed_) return;
  closed_ = true;
  const bool unwinding = std::uncaught_exceptions() > uncaught_at_construction_;
  std::exception_ptr first_error;
  if (!unwinding && session_) {
    // Every hook's end(), even after one failed: the final checkpoint is still written when a
    // summary flush fails. The first error is raised, later ones are logged.
    for (size_t i = 0; i < hooks_.size(); ++i) {
      try {
        hooks_[i]->end(*session_);
      } catch (...) {
        if (!first_error) {
          first_error = std::current_exception();
        } else {
          env_.error(fmt::format("hooks[{}].end() failed too: {}", i,
                                 internal::error_message(std::current_exception())));
        }
      }
    }
  }
  try {
    coord_->request_stop();
    coord_->join(options_.stop_grace_period_secs);
  } catch (...) {
    // The Coordinator's error is the root cause (a thread's failure that stopped training, as
    // TF's close() raises it): it wins over a hook's end() error, which is logged.
    if (first_error) {
      env_.error(
          fmt::format("A hook's end() failed too: {}", internal::error_message(first_error)));
    }
    first_error = std::current_exception();
  }
  session_.reset();
  if (runner_) runner_->clear();
  // After end(): a final checkpoint saved there still carries the hooks' state.
  hook_states_.clear();
  if (first_error) std::rethrow_exception(first_error);
}

std::string MonitoredSession::unsaved_steps() const {
  if (!options_.last_checkpoint_step) return "";
  Graph& g = creator_->graph();
  if (!g.has_global_step()) return "";
  const int64_t step = g.global_step_value();
  const std::optional<int64_t> saved = options_.last_checkpoint_step();
  if (!saved)
    return step > 0 ? fmt::format("steps 1..{} were not saved (no checkpoint)", step) : "";
  if (*saved >= step) return "";
  return fmt::format("steps {}..{} since the last checkpoint (step {}) were not saved", *saved + 1,
                     step, *saved);
}

// ---- SingularMonitoredSession -----------------------------------------------------------------

namespace {

// TF's SingularMonitoredSession does not recover: an Aborted error reaches the caller.
MonitoredSessionOptions singular(MonitoredSessionOptions options) {
  options.recovery.enabled = false;
  return options;
}

}  // namespace

SingularMonitoredSession::SingularMonitoredSession(Graph& graph, Hooks hooks,
                                                   MonitoredSessionOptions options)
    : MonitoredSession(
          std::make_unique<ChiefSessionCreator>(graph, SessionCreatorOptions{options.env}),
          std::move(hooks), singular(options)) {}

}  // namespace trainhooks
