#include "trainhooks/hooks/checkpoint_saver_hook.h"

#include <cxxabi.h>

#include <fmt/format.h>

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <typeinfo>
#include <utility>

#include "trainhooks/coordinator.h"
#include "trainhooks/errors.h"
#include "trainhooks/graph.h"
#include "trainhooks/graph_export.h"
#include "trainhooks/hook_services.h"
#include "trainhooks/summary/event_writer.h"
#include "util/atomic_file.h"
#include "util/path.h"

namespace trainhooks {

namespace fs = std::filesystem;

namespace {

// Keep-best's score of a save: the latest value of the manager's keep_best.metric (the manager
// reads no metric itself).
std::optional<CheckpointScore> best_score_of(const CheckpointManager& manager,
                                             const LatestMetrics& metrics) {
  const CheckpointManagerOptions& o = manager.options();
  if (o.keep_best.n <= 0) return std::nullopt;
  const auto m = metrics.latest(o.keep_best.metric);
  if (!m) return std::nullopt;
  return CheckpointScore{m->step, m->value};
}

TimerOptions saver_timer(const CheckpointSaverHookOptions& o) {
  for (size_t i = 0; i < o.listeners.size(); ++i) {
    if (!o.listeners[i])
      throw InvalidArgument(fmt::format("CheckpointSaverHook: listeners[{}] is null", i));
  }
  return {.every_secs = o.save_secs,
          .every_steps = o.save_steps,
          .owner = "CheckpointSaverHook",
          .secs_name = "save_secs",
          .steps_name = "save_steps"};
}

const std::string& checked_dir(const std::string& dir, const CheckpointSaverHookOptions& o) {
  if (dir.empty()) throw InvalidArgument("CheckpointSaverHook: checkpoint_dir must not be empty");
  if (o.checkpoint_basename.empty() || fs::path(o.checkpoint_basename).has_parent_path() ||
      o.checkpoint_basename == "." || o.checkpoint_basename == "..") {
    throw InvalidArgument(fmt::format(
        "CheckpointSaverHook: invalid checkpoint_basename '{}' (a file name, e.g. 'model.ckpt')",
        o.checkpoint_basename));
  }
  return dir;
}

const std::shared_ptr<CheckpointManager>& checked_manager(
    const std::shared_ptr<CheckpointManager>& manager, const CheckpointSaverHookOptions& o) {
  if (!manager) throw InvalidArgument("CheckpointSaverHook: manager is null");
  if (o.saver) {
    throw InvalidArgument(
        "CheckpointSaverHook: give a CheckpointManager or a saver, not both (the manager saves)");
  }
  return manager;
}

// TF prints the listener object; its type is the useful part here.
std::string type_name(const CheckpointSaverListener& l) {
  const char* mangled = typeid(l).name();
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string out = status == 0 && demangled ? demangled : mangled;
  std::free(demangled);
  return out;
}

}  // namespace

CheckpointSaverHook::CheckpointSaverHook(std::string checkpoint_dir,
                                         CheckpointSaverHookOptions options)
    : checkpoint_dir_(checked_dir(checkpoint_dir, options)),
      options_(std::move(options)),
      timer_(saver_timer(options_)) {
  save_path_ = (fs::path(checkpoint_dir_) / options_.checkpoint_basename).string();
}

CheckpointSaverHook::CheckpointSaverHook(std::shared_ptr<CheckpointManager> manager,
                                         CheckpointSaverHookOptions options)
    : checkpoint_dir_(checked_manager(manager, options)->directory()),
      save_path_(manager->prefix()),
      options_(std::move(options)),
      timer_(saver_timer(options_)),
      manager_given_(true),
      manager_(std::move(manager)) {}

CheckpointSaverHook::~CheckpointSaverHook() = default;

void CheckpointSaverHook::begin() {
  require_global_step("CheckpointSaverHook");
  Graph& g = graph();
  if (options_.saver && &options_.saver->graph() != &g) {
    throw InvalidArgument(
        "CheckpointSaverHook: the given saver belongs to another graph than the session's");
  }
  async_.reset();  // a writer of an earlier session ended with its Coordinator
  if (!manager_given_) {
    // Made here, not in the constructor: the hook's Env is known from begin() on.
    const compat::v1::SaverOptions& o =
        options_.saver ? options_.saver->options() : options_.saver_options;
    // Assigned member by member: GCC 12 warns (maybe-uninitialized) about the keep_best a
    // designated initializer leaves out.
    CheckpointManagerOptions manager_options;
    manager_options.basename = options_.checkpoint_basename;
    manager_options.max_to_keep = o.max_to_keep;
    manager_options.keep_checkpoint_every_n_hours = o.keep_checkpoint_every_n_hours;
    manager_options.save_relative_paths = o.save_relative_paths;
    manager_options.env = options_.saver ? o.env : o.env.or_else(env());
    manager_ = std::make_shared<CheckpointManager>(checkpoint_dir_, std::move(manager_options));
  }
  std::error_code ec;
  fs::create_directories(checkpoint_dir_, ec);
  if (ec || !fs::is_directory(checkpoint_dir_)) {
    throw FileError(fmt::format("CheckpointSaverHook: cannot create checkpoint_dir '{}': {}",
                                checkpoint_dir_, ec ? ec.message() : "not a directory"));
  }
  try {
    writer_ = summary::EventWriter::for_logdir(checkpoint_dir_);
  } catch (const std::exception& e) {
    throw FileError(fmt::format("CheckpointSaverHook: cannot open the event file in '{}': {}",
                                checkpoint_dir_, e.what()));
  }
  graph_writer_.reset();
  if (options_.save_graph_def && !options_.graph_summary_dir.empty() &&
      !internal::same_path(options_.graph_summary_dir, checkpoint_dir_)) {
    try {
      graph_writer_ = summary::EventWriter::for_logdir(options_.graph_summary_dir);
    } catch (const std::exception& e) {
      throw FileError(fmt::format("CheckpointSaverHook: cannot open the event file in '{}': {}",
                                  options_.graph_summary_dir, e.what()));
    }
  }
  graph_pending_ = graph_written_ = false;
  reset_timer(timer_);
  for (auto& l : options_.listeners) l->begin();
}

void CheckpointSaverHook::after_create_session(Session& session, Coordinator& coord) {
  if (options_.async_save && !async_) {
    async_ = std::make_unique<AsyncCheckpointWriter>(manager_, coord, "CheckpointSaverHook writer");
  }
  if (options_.save_graph_def && !graph_written_) {
    // Recorded by the next run, written in after_run(): the edges are known once ops have run.
    session.record_trace(true);
    graph_pending_ = true;
  }
  // The checkpoint saved here is the state at the current global step.
  const int64_t step = session.global_step();
  timer_.update_last_triggered_step(step);
  if (manager_->saved_at(step)) return;  // just restored from it
  save(session, step);
}

void CheckpointSaverHook::after_run(SessionRunContext& ctx, const SessionRunValues&) {
  if (graph_pending_) [[unlikely]]
    write_graph(ctx.session());
  if (async_ && report_write(ctx.session(), /*wait=*/false)) ctx.request_stop();
  const int64_t step = ctx.session().global_step();
  if (!timer_.should_trigger_for_step(step)) return;
  timer_.update_last_triggered_step(step);
  if (save(ctx.session(), step)) ctx.request_stop();
}

void CheckpointSaverHook::end(Session& session) {
  // A session that ran no step: the graph without the edges a run would have shown.
  if (graph_pending_) write_graph(session);
  const int64_t last_step = session.global_step();
  std::exception_ptr error;
  if (async_) {
    try {
      report_write(session, /*wait=*/true);
    } catch (...) {
      error = std::current_exception();
    }
    async_->shutdown();
  }
  if (timer_.last_triggered_step() != last_step) {
    timer_.update_last_triggered_step(last_step);
    // Synchronous: end() would wait for the write anyway.
    env().info(
        fmt::format("Calling checkpoint listeners before saving checkpoint {}...", last_step));
    for (auto& l : options_.listeners) l->before_save(session, last_step);
    env().info(fmt::format("Saving checkpoints for {} into {}.", last_step, save_path_));
    manager_->save(session, last_step, best_score_of(*manager_, services().metrics()));
    after_save(session, last_step);
  }
  for (auto& l : options_.listeners) l->end(session, last_step);
  if (writer_) writer_->flush();
  if (error) std::rethrow_exception(error);
}

void CheckpointSaverHook::write_graph(Session& session) {
  session.record_trace(false);
  graph_pending_ = false;
  graph_written_ = true;
  const summary::GraphDef graph = graph_def(session.graph());
  const std::string text = summary::to_text(graph);
  const std::string path = (fs::path(checkpoint_dir_) / "graph.pbtxt").string();
  {
    std::ifstream in(path, std::ios::binary);
    // The graph a run of the same model wrote before (a resume): TensorBoard has it already.
    if (in && std::string(std::istreambuf_iterator<char>(in), {}) == text) return;
  }
  internal::write_file_atomically(path, text);
  writer_->add_graph(graph);
  if (graph_writer_) graph_writer_->add_graph(graph);
}

bool CheckpointSaverHook::report_write(Session& session, bool wait) {
  std::optional<AsyncCheckpointWriter::Result> done = async_->collect(wait);
  if (!done) return false;
  if (done->error) std::rethrow_exception(done->error);
  return after_save(session, done->step);
}

bool CheckpointSaverHook::save(Session& session, int64_t step) {
  bool should_stop = false;
  if (async_) {
    if (async_->busy()) {
      env().info(fmt::format(
          "Waiting for the checkpoint write in flight to finish before saving checkpoint {}.",
          step));
    }
    should_stop = report_write(session, /*wait=*/true);
  }
  env().info(fmt::format("Calling checkpoint listeners before saving checkpoint {}...", step));
  for (auto& l : options_.listeners) l->before_save(session, step);

  env().info(fmt::format("Saving checkpoints for {} into {}.", step, save_path_));
  if (async_) {
    SaverSnapshot snapshot =
        manager_->snapshot(session, step, best_score_of(*manager_, services().metrics()));
    if (async_->submit(snapshot, step)) return should_stop;
    // The writer has ended (the Coordinator was asked to stop): write here.
    manager_->write(std::move(snapshot));
    return after_save(session, step) || should_stop;
  }
  manager_->save(session, step, best_score_of(*manager_, services().metrics()));
  return after_save(session, step);
}

bool CheckpointSaverHook::after_save(Session& session, int64_t step) {
  writer_->add_session_log(summary::SessionStatus::kCheckpoint, save_path_, "", step);
  env().info(fmt::format("Calling checkpoint listeners after saving checkpoint {}...", step));
  bool should_stop = false;
  for (auto& l : options_.listeners) {
    if (l->after_save(session, step)) {
      env().info(
          fmt::format("A CheckpointSaverListener requested that training be stopped. listener: {}",
                      type_name(*l)));
      should_stop = true;
    }
  }
  return should_stop;
}

}  // namespace trainhooks
