#include "trainhooks/hooks/checkpoint_saver_hook.h"

#include <cxxabi.h>

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <typeinfo>

#include "trainhooks/errors.h"
#include "trainhooks/graph.h"
#include "trainhooks/summary/event_writer.h"

namespace trainhooks {

namespace fs = std::filesystem;

namespace {

TimerOptions saver_timer(const std::string& dir, const CheckpointSaverHookOptions& o) {
  if (dir.empty()) throw InvalidArgument("CheckpointSaverHook: checkpoint_dir must not be empty");
  if (o.checkpoint_basename.empty() || fs::path(o.checkpoint_basename).has_parent_path() ||
      o.checkpoint_basename == "." || o.checkpoint_basename == "..") {
    throw InvalidArgument(fmt::format(
        "CheckpointSaverHook: invalid checkpoint_basename '{}' (a file name, e.g. 'model.ckpt')",
        o.checkpoint_basename));
  }
  for (size_t i = 0; i < o.listeners.size(); ++i) {
    if (!o.listeners[i])
      throw InvalidArgument(fmt::format("CheckpointSaverHook: listeners[{}] is null", i));
  }
  if (o.save_steps && *o.save_steps <= 0 && !o.save_secs) {
    throw InvalidArgument(fmt::format(
        "CheckpointSaverHook: invalid save_steps {} (must be positive)", *o.save_steps));
  }
  if (o.save_secs && !(*o.save_secs > 0) && !o.save_steps) {
    throw InvalidArgument(
        fmt::format("CheckpointSaverHook: invalid save_secs {} (must be positive)", *o.save_secs));
  }
  return {.every_secs = o.save_secs, .every_steps = o.save_steps};
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
    : checkpoint_dir_(std::move(checkpoint_dir)),
      options_(std::move(options)),
      timer_(saver_timer(checkpoint_dir_, options_)),
      saver_(options_.saver) {
  save_path_ = (fs::path(checkpoint_dir_) / options_.checkpoint_basename).string();
}

CheckpointSaverHook::~CheckpointSaverHook() = default;

void CheckpointSaverHook::begin() {
  Graph& g = graph();
  if (!g.has_global_step())
    throw RuntimeError("Global step should be created to use CheckpointSaverHook.");
  if (options_.saver && &options_.saver->graph() != &g) {
    throw InvalidArgument(
        "CheckpointSaverHook: the given saver belongs to another graph than the session's");
  }
  saver_ = options_.saver;
  if (!saver_) {
    // Made here, not in the constructor: the graph is known from begin() on (and may differ if
    // the hook is used by another session later).
    SaverOptions o = options_.saver_options;
    o.env = o.env.or_else(env());
    saver_ = std::make_shared<Saver>(g, std::move(o));
  }
  std::error_code ec;
  fs::create_directories(checkpoint_dir_, ec);
  if (ec || !fs::is_directory(checkpoint_dir_)) {
    throw UnavailableError(fmt::format("CheckpointSaverHook: cannot create checkpoint_dir '{}': {}",
                                       checkpoint_dir_, ec ? ec.message() : "not a directory"));
  }
  try {
    writer_ = summary::EventWriter::for_logdir(checkpoint_dir_);
  } catch (const std::exception& e) {
    throw UnavailableError(fmt::format(
        "CheckpointSaverHook: cannot open the event file in '{}': {}", checkpoint_dir_, e.what()));
  }
  timer_.set_clock(env().clock);
  timer_.reset();
  for (auto& l : options_.listeners) l->begin();
}

void CheckpointSaverHook::after_create_session(Session& session, Coordinator&) {
  // The checkpoint saved here is the state at the current global step.
  const int64_t step = session.global_step();
  save(session, step);
  timer_.update_last_triggered_step(step);
}

void CheckpointSaverHook::after_run(SessionRunContext& ctx, const SessionRunValues&) {
  const int64_t step = ctx.session().global_step();
  if (!timer_.should_trigger_for_step(step)) return;
  timer_.update_last_triggered_step(step);
  if (save(ctx.session(), step)) ctx.request_stop();
}

void CheckpointSaverHook::end(Session& session) {
  const int64_t last_step = session.global_step();
  if (timer_.last_triggered_step() != last_step) save(session, last_step);
  for (auto& l : options_.listeners) l->end(session, last_step);
  if (writer_) writer_->flush();
}

bool CheckpointSaverHook::save(Session& session, int64_t step) {
  env().info(fmt::format("Calling checkpoint listeners before saving checkpoint {}...", step));
  for (auto& l : options_.listeners) l->before_save(session, step);

  env().info(fmt::format("Saving checkpoints for {} into {}.", step, save_path_));
  saver_->save(session, save_path_, step);
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
