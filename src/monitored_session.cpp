#include "trainhooks/monitored_session.h"

#include <fmt/format.h>

#include <algorithm>

#include "trainhooks/errors.h"
#include "trainhooks/checkpoint/saver.h"
#include "trainhooks/hooks/checkpoint_saver_hook.h"
#include "trainhooks/hooks/preemption_hook.h"
#include "trainhooks/hooks/step_counter_hook.h"
#include "trainhooks/hooks/summary_saver_hook.h"

namespace trainhooks {

// ---- Session creators -------------------------------------------------------------------------

ChiefSessionCreator::ChiefSessionCreator(Graph& graph, SessionCreatorOptions options)
    : graph_(graph), options_(std::move(options)) {}

std::unique_ptr<Session> ChiefSessionCreator::create_session() {
  graph_.initialize();
  auto session = std::make_unique<Session>(graph_, options_.env);
  if (options_.checkpoint_filename_with_path.empty() && options_.checkpoint_dir.empty()) return session;
  if (!saver_) saver_ = options_.saver ? options_.saver : std::make_shared<Saver>(graph_, SaverOptions{.env = options_.env});
  if (!options_.checkpoint_filename_with_path.empty()) {
    saver_->restore(*session, options_.checkpoint_filename_with_path);
  } else {
    saver_->restore_latest(*session, options_.checkpoint_dir);
  }
  return session;
}

WorkerSessionCreator::WorkerSessionCreator(Graph& graph, SessionCreatorOptions options)
    : graph_(graph), options_(std::move(options)) {}

std::unique_ptr<Session> WorkerSessionCreator::create_session() {
  return std::make_unique<Session>(graph_, options_.env);
}

// ---- StepContext ------------------------------------------------------------------------------

Session& StepContext::session() { return sess_.raw_session(); }

RunResults StepContext::run_with_hooks(const Fetches& fetches, const Feeds& feeds, const RunOptions& options) {
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
    throw InvalidArgument(fmt::format("MonitoredSession: invalid stop_grace_period_secs {}", options_.stop_grace_period_secs));
  }
  for (size_t i = 0; i < hooks_.size(); ++i) {
    if (!hooks_[i]) throw InvalidArgument(fmt::format("MonitoredSession: hooks[{}] is null", i));
  }
  Graph& g = creator_->graph();
  for (auto& h : hooks_) h->bind(g, env_);
  for (auto& h : hooks_) h->begin();
  g.finalize();
  hook_args_.resize(hooks_.size());
  hook_values_.resize(hooks_.size());
  hook_fetch_begin_.resize(hooks_.size() + 1);
  create_session();
}

MonitoredSession::~MonitoredSession() {
  try {
    close();
  } catch (const std::exception& e) {
    env_.error(fmt::format("Error while closing the monitored session: {}", e.what()));
  } catch (...) {
    env_.error("Error while closing the monitored session");
  }
}

void MonitoredSession::create_session() {
  session_ = creator_->create_session();
  for (auto& h : hooks_) h->after_create_session(*session_, *coord_);
}

Session& MonitoredSession::raw_session() {
  if (closed_ || !session_) throw RuntimeError("Attempted to use a closed MonitoredSession.");
  return *session_;
}

bool MonitoredSession::should_stop() const {
  return closed_ || stop_requested_ || end_of_input_ || coord_->should_stop();
}

void MonitoredSession::check_not_stopped() const {
  if (closed_) throw RuntimeError("Attempted to use a closed MonitoredSession.");
  if (should_stop()) throw RuntimeError("Run called even after should_stop requested.");
}

RunResults MonitoredSession::run(const Fetches& fetches, const Feeds& feeds, const RunOptions& options,
                                 RunMetadata* metadata) {
  RunResults out;
  run_into(fetches, feeds, options, metadata, out);
  return out;
}

void MonitoredSession::run_into(const Fetches& fetches, const Feeds& feeds, const RunOptions& options,
                                RunMetadata* metadata, RunResults& out) {
  check_not_stopped();
  run_hooked(fetches, feeds, options, metadata, out);
}

void MonitoredSession::run_hooked(const Fetches& fetches, const Feeds& feeds, const RunOptions& options,
                                  RunMetadata* metadata, RunResults& out) {
  // TF's _RecoverableSession: a lost peer or a preemption recreates the session and retries.
  for (;;) {
    std::string reason;
    try {
      if (!session_) create_session();
      run_once(fetches, feeds, options, metadata, out);
      return;
    } catch (const AbortedError& e) {
      reason = e.what();
    } catch (const UnavailableError& e) {
      reason = e.what();
    }
    env_.info(fmt::format(
        "An error was raised. This may be due to a preemption in a connected worker or parameter "
        "server. The current session will be closed and a new session will be created. Error: {}",
        reason));
    session_.reset();
  }
}

namespace {

std::string conflict_message(const char* what, const Graph& g, const std::vector<Node>& conflicts) {
  std::string names;
  for (size_t i = 0; i < conflicts.size(); ++i) {
    if (i) names += ", ";
    names += g.name(conflicts[i]);
  }
  return fmt::format("{} Conflict(s): [{}]", what, names);
}

}  // namespace

void MonitoredSession::run_once(const Fetches& fetches, const Feeds& feeds, const RunOptions& options,
                                RunMetadata* metadata, RunResults& out) {
  Session& sess = *session_;
  Graph& g = sess.graph();
  SessionRunContext ctx(fetches, feeds, sess);

  combined_fetches_.clear();
  for (const auto& ref : fetches.refs()) combined_fetches_.push_back(g.resolve(ref));
  const size_t num_user_fetches = combined_fetches_.size();

  if (user_feed_stamp_.size() != g.size()) {
    user_feed_stamp_.assign(g.size(), 0);
    hook_feed_stamp_.assign(g.size(), 0);
  }
  ++feed_stamp_;
  for (const auto& f : feeds) user_feed_stamp_[g.resolve(f.node).index] = feed_stamp_;

  RunOptions merged = options;
  bool hook_feeds = false;
  std::vector<Node> conflicts;  // allocated only when there is a conflict to report
  for (size_t i = 0; i < hooks_.size(); ++i) {
    hook_args_[i] = hooks_[i]->before_run(ctx);
    const SessionRunArgs& args = hook_args_[i];
    hook_fetch_begin_[i] = combined_fetches_.size();
    for (const auto& ref : args.fetches.refs()) combined_fetches_.push_back(g.resolve(ref));
    for (const auto& f : args.feeds) {
      Node n = g.resolve(f.node);
      if (hook_feed_stamp_[n.index] == feed_stamp_) conflicts.push_back(n);
    }
    if (!conflicts.empty()) throw RuntimeError(conflict_message("Same tensor is fed by two hooks.", g, conflicts));
    for (const auto& f : args.feeds) hook_feed_stamp_[g.resolve(f.node).index] = feed_stamp_;
    hook_feeds = hook_feeds || !args.feeds.empty();
    merged.merge_from(args.options);
  }
  hook_fetch_begin_[hooks_.size()] = combined_fetches_.size();

  const Feeds* run_feeds = &feeds;
  if (hook_feeds) {
    for (const auto& args : hook_args_) {
      for (const auto& f : args.feeds) {
        Node n = g.resolve(f.node);
        if (user_feed_stamp_[n.index] == feed_stamp_) conflicts.push_back(n);
      }
    }
    if (!conflicts.empty()) {
      throw RuntimeError(conflict_message("Same tensor is fed by a SessionRunHook and user.", g, conflicts));
    }
    combined_feeds_.clear();
    combined_feeds_.insert(combined_feeds_.end(), feeds.begin(), feeds.end());
    for (const auto& args : hook_args_) combined_feeds_.insert(combined_feeds_.end(), args.feeds.begin(), args.feeds.end());
    run_feeds = &combined_feeds_;
  }

  RunMetadata* run_metadata = metadata;
  RunMetadata local_metadata;
  if (!run_metadata && merged.trace_level > RunOptions::NO_TRACE) run_metadata = &local_metadata;

  try {
    sess.run_nodes(combined_fetches_, *run_feeds, merged, run_metadata, combined_results_);
  } catch (const OutOfRangeError& e) {
    // The end of input is the end of training: stop cleanly, as TF's `with` block does.
    env_.info(fmt::format("Reached the end of input; stopping: {}", e.what()));
    end_of_input_ = true;
    out.clear();
    out.set_graph(&g);
    out.set_end_of_input(true);
    return;
  }

  const auto& values = combined_results_.values();
  out.clear();
  out.set_graph(&g);
  out.set_end_of_input(false);
  out.reserve(num_user_fetches);
  for (size_t k = 0; k < num_user_fetches; ++k) out.add(values[k].first, values[k].second);
  for (size_t i = 0; i < hooks_.size(); ++i) {
    auto& hv = hook_values_[i];
    hv.results.clear();
    hv.results.set_graph(&g);
    for (size_t k = hook_fetch_begin_[i]; k < hook_fetch_begin_[i + 1]; ++k) hv.results.add(values[k].first, values[k].second);
    hv.options = merged;
    if (run_metadata) hv.run_metadata = *run_metadata;
  }
  combined_results_.clear();
  for (size_t i = 0; i < hooks_.size(); ++i) hooks_[i]->after_run(ctx, hook_values_[i]);
  if (ctx.stop_requested()) stop_requested_ = true;
}

void MonitoredSession::close() {
  if (closed_) return;
  closed_ = true;
  const bool unwinding = std::uncaught_exceptions() > uncaught_at_construction_;
  std::exception_ptr first_error;
  if (!unwinding && session_) {
    try {
      for (auto& h : hooks_) h->end(*session_);
    } catch (...) {
      first_error = std::current_exception();
    }
  }
  try {
    coord_->request_stop();
    coord_->join(options_.stop_grace_period_secs);
  } catch (...) {
    if (!first_error) first_error = std::current_exception();
  }
  session_.reset();
  for (auto& v : hook_values_) v.results.clear();
  if (first_error) std::rethrow_exception(first_error);
}

// ---- SingularMonitoredSession -----------------------------------------------------------------

SingularMonitoredSession::SingularMonitoredSession(Graph& graph, Hooks hooks, MonitoredSessionOptions options)
    : MonitoredSession(std::make_unique<ChiefSessionCreator>(graph, SessionCreatorOptions{options.env}),
                       std::move(hooks), options) {}

// ---- MonitoredTrainingSession -----------------------------------------------------------------

namespace {

const MonitoredTrainingSessionOptions& validate(const MonitoredTrainingSessionOptions& o) {
  if (o.save_checkpoint_secs && o.save_checkpoint_steps) {
    throw InvalidArgument("Can not provide both save_checkpoint_secs and save_checkpoint_steps.");
  }
  if (o.save_summaries_secs && o.save_summaries_steps) {
    throw InvalidArgument("Can not provide both save_summaries_secs and save_summaries_steps.");
  }
  if (o.log_step_count_steps < 0) {
    throw InvalidArgument(fmt::format("Invalid log_step_count_steps: {}", o.log_step_count_steps));
  }
  if (!(o.max_wait_secs >= 0)) throw InvalidArgument(fmt::format("Invalid max_wait_secs: {}", o.max_wait_secs));
  if (o.max_to_keep && *o.max_to_keep < 0) throw InvalidArgument(fmt::format("Invalid max_to_keep: {}", *o.max_to_keep));
  if (o.checkpoint_dir.empty() &&
      (o.save_checkpoint_secs || o.save_checkpoint_steps || o.max_to_keep || o.keep_checkpoint_every_n_hours)) {
    throw InvalidArgument("MonitoredTrainingSession: checkpoint options were given without checkpoint_dir");
  }
  if (o.save_checkpoint_steps && *o.save_checkpoint_steps < 0) {
    throw InvalidArgument(fmt::format("Invalid save_checkpoint_steps: {}", *o.save_checkpoint_steps));
  }
  if (o.save_checkpoint_secs && *o.save_checkpoint_secs < 0) {
    throw InvalidArgument(fmt::format("Invalid save_checkpoint_secs: {}", *o.save_checkpoint_secs));
  }
  if ((o.save_summaries_secs || o.save_summaries_steps) && o.summary_dir.empty() && o.checkpoint_dir.empty()) {
    throw InvalidArgument("MonitoredTrainingSession: summary options were given without summary_dir or checkpoint_dir");
  }
  if (o.save_summaries_steps && *o.save_summaries_steps < 0) {
    throw InvalidArgument(fmt::format("Invalid save_summaries_steps: {}", *o.save_summaries_steps));
  }
  if (o.save_summaries_secs && *o.save_summaries_secs < 0) {
    throw InvalidArgument(fmt::format("Invalid save_summaries_secs: {}", *o.save_summaries_secs));
  }
  return o;
}

// The chief's Saver, shared by the session creator (restore) and the CheckpointSaverHook (save)
// so that retention has one list.
std::shared_ptr<Saver> training_saver(Graph& graph, const MonitoredTrainingSessionOptions& o) {
  if (!o.is_chief || o.checkpoint_dir.empty()) return nullptr;
  SaverOptions options{.env = o.env};
  if (o.max_to_keep) options.max_to_keep = *o.max_to_keep;
  if (o.keep_checkpoint_every_n_hours) options.keep_checkpoint_every_n_hours = *o.keep_checkpoint_every_n_hours;
  return std::make_shared<Saver>(graph, options);
}

Hooks training_hooks(const MonitoredTrainingSessionOptions& o, const std::shared_ptr<Saver>& saver) {
  Hooks all;
  // One PreemptionHook is enough: a program that passes its own keeps it where it put it.
  auto is_preemption = [](const std::shared_ptr<SessionRunHook>& h) {
    return dynamic_cast<const PreemptionHook*>(h.get()) != nullptr;
  };
  const bool has_own = std::any_of(o.hooks.begin(), o.hooks.end(), is_preemption) ||
                       (o.is_chief && std::any_of(o.chief_only_hooks.begin(),
                                                  o.chief_only_hooks.end(), is_preemption));
  if (o.handle_preemption_signals && !has_own) all.push_back(std::make_shared<PreemptionHook>());
  if (!o.is_chief) {
    all.insert(all.end(), o.hooks.begin(), o.hooks.end());
    return all;
  }
  all.insert(all.end(), o.chief_only_hooks.begin(), o.chief_only_hooks.end());
  const std::string& summary_dir = o.summary_dir.empty() ? o.checkpoint_dir : o.summary_dir;
  // Unlike TF, the step counter's log line does not need a summary directory: progress is
  // visible by default, and its summaries are written when a directory is configured.
  if (o.log_step_count_steps > 0) {
    all.push_back(std::make_shared<StepCounterHook>(
        StepCounterHookOptions{.every_n_steps = o.log_step_count_steps, .output_dir = summary_dir}));
  }
  if (!summary_dir.empty()) {
    std::optional<int64_t> steps = o.save_summaries_steps;
    if (!steps && !o.save_summaries_secs) steps = 100;
    if ((steps && *steps > 0) || (o.save_summaries_secs && *o.save_summaries_secs > 0)) {
      all.push_back(std::make_shared<SummarySaverHook>(SummarySaverHookOptions{
          .save_steps = steps, .save_secs = o.save_summaries_secs, .output_dir = summary_dir}));
    }
  }
  if (!o.checkpoint_dir.empty()) {
    std::optional<double> secs = o.save_checkpoint_secs;
    if (!secs && !o.save_checkpoint_steps) secs = 600;
    if ((secs && *secs > 0) || (o.save_checkpoint_steps && *o.save_checkpoint_steps > 0)) {
      all.push_back(std::make_shared<CheckpointSaverHook>(
          o.checkpoint_dir,
          CheckpointSaverHookOptions{.save_secs = secs,
                                     .save_steps = o.save_checkpoint_steps,
                                     .saver = saver,
                                     .async_save = o.async_checkpoints}));
    }
  }
  all.insert(all.end(), o.hooks.begin(), o.hooks.end());
  return all;
}

std::unique_ptr<SessionCreator> training_creator(Graph& graph, const MonitoredTrainingSessionOptions& o,
                                                 const std::shared_ptr<Saver>& saver) {
  if (o.is_chief) {
    return std::make_unique<ChiefSessionCreator>(
        graph, SessionCreatorOptions{.env = o.env, .checkpoint_dir = o.checkpoint_dir, .saver = saver});
  }
  return std::make_unique<WorkerSessionCreator>(graph, SessionCreatorOptions{.env = o.env});
}

}  // namespace

MonitoredTrainingSession::MonitoredTrainingSession(Graph& graph, MonitoredTrainingSessionOptions options)
    : MonitoredTrainingSession(graph, options, training_saver(graph, validate(options))) {}

MonitoredTrainingSession::MonitoredTrainingSession(Graph& graph, const MonitoredTrainingSessionOptions& options,
                                                   std::shared_ptr<Saver> saver)
    : MonitoredSession(training_creator(graph, options, saver), training_hooks(options, saver),
                       MonitoredSessionOptions{options.stop_grace_period_secs, options.env}) {}

}  // namespace trainhooks
