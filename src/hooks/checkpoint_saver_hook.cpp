#include "trainhooks/hooks/checkpoint_saver_hook.h"

#include <cxxabi.h>

#include <fmt/format.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <mutex>
#include <optional>
#include <typeinfo>

#include "trainhooks/coordinator.h"
#include "trainhooks/errors.h"
#include "trainhooks/graph.h"
#include "trainhooks/summary/event_writer.h"
#include "util/path.h"

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
  return {.every_secs = o.save_secs,
          .every_steps = o.save_steps,
          .owner = "CheckpointSaverHook",
          .secs_name = "save_secs",
          .steps_name = "save_steps"};
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

// The background writer of async_save, shared with its thread (which may outlive the hook's
// use of it until the Coordinator joins it).
struct CheckpointSaverHook::AsyncWriter {
  struct Done {
    int64_t step = 0;
    std::exception_ptr error;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::optional<SaverSnapshot> job;  // handed over, not started
  int64_t job_step = 0;
  bool busy = false;         // a write in progress
  std::optional<Done> done;  // finished, not yet reported
  bool shutdown = false;
  bool started = false;
  bool alive = true;  // false once run() returned; saves are then synchronous

  bool idle() const { return !job && !busy; }

  void run(Saver& saver, Coordinator& coord) {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      // Polls the Coordinator: a session closed while unwinding never calls end().
      cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return job || shutdown; });
      if (job) {
        SaverSnapshot snapshot = std::move(*job);
        const int64_t step = job_step;
        job.reset();
        busy = true;
        lock.unlock();
        std::exception_ptr error;
        try {
          saver.write(std::move(snapshot));
        } catch (...) {
          error = std::current_exception();
        }
        lock.lock();
        busy = false;
        done = Done{step, error};
        cv.notify_all();
        continue;
      }
      if (shutdown || coord.should_stop()) {
        alive = false;
        cv.notify_all();
        return;
      }
    }
  }
};

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
  require_global_step("CheckpointSaverHook");
  Graph& g = graph();
  if (options_.saver && &options_.saver->graph() != &g) {
    throw InvalidArgument(
        "CheckpointSaverHook: the given saver belongs to another graph than the session's");
  }
  saver_ = options_.saver;
  async_.reset();  // a writer of an earlier session ended with its Coordinator
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
    throw FileError(fmt::format("CheckpointSaverHook: cannot create checkpoint_dir '{}': {}",
                                       checkpoint_dir_, ec ? ec.message() : "not a directory"));
  }
  try {
    writer_ = summary::EventWriter::for_logdir(checkpoint_dir_);
  } catch (const std::exception& e) {
    throw FileError(fmt::format("CheckpointSaverHook: cannot open the event file in '{}': {}", checkpoint_dir_,
                                e.what()));
  }
  reset_timer(timer_);
  for (auto& l : options_.listeners) l->begin();
}

void CheckpointSaverHook::after_create_session(Session& session, Coordinator& coord) {
  if (options_.async_save && (!async_ || !async_->started)) {
    async_ = std::make_shared<AsyncWriter>();
    async_->started = true;
    coord.start_thread("CheckpointSaverHook writer",
                       [state = async_, saver = saver_, c = &coord] { state->run(*saver, *c); });
  }
  // The checkpoint saved here is the state at the current global step.
  const int64_t step = session.global_step();
  timer_.update_last_triggered_step(step);
  const auto listed = saver_->last_checkpoints(checkpoint_dir_);
  if (!listed.empty() && internal::same_path(listed.back(), fmt::format("{}-{}", save_path_, step)) &&
      Saver::checkpoint_exists(listed.back())) {
    return;  // just restored from it
  }
  save(session, step);
}

void CheckpointSaverHook::after_run(SessionRunContext& ctx, const SessionRunValues&) {
  if (async_ && report_write(ctx.session(), /*wait=*/false)) ctx.request_stop();
  const int64_t step = ctx.session().global_step();
  if (!timer_.should_trigger_for_step(step)) return;
  timer_.update_last_triggered_step(step);
  if (save(ctx.session(), step)) ctx.request_stop();
}

void CheckpointSaverHook::end(Session& session) {
  const int64_t last_step = session.global_step();
  std::exception_ptr error;
  if (async_) {
    try {
      report_write(session, /*wait=*/true);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(async_->mu);
      async_->shutdown = true;
    }
    async_->cv.notify_all();
  }
  if (timer_.last_triggered_step() != last_step) {
    timer_.update_last_triggered_step(last_step);
    // Synchronous: end() would wait for the write anyway.
    env().info(
        fmt::format("Calling checkpoint listeners before saving checkpoint {}...", last_step));
    for (auto& l : options_.listeners) l->before_save(session, last_step);
    env().info(fmt::format("Saving checkpoints for {} into {}.", last_step, save_path_));
    saver_->save(session, save_path_, last_step);
    after_save(session, last_step);
  }
  for (auto& l : options_.listeners) l->end(session, last_step);
  if (writer_) writer_->flush();
  if (error) std::rethrow_exception(error);
}

bool CheckpointSaverHook::report_write(Session& session, bool wait) {
  std::optional<AsyncWriter::Done> done;
  {
    std::unique_lock<std::mutex> lock(async_->mu);
    if (wait) async_->cv.wait(lock, [&] { return async_->idle() || !async_->alive; });
    done.swap(async_->done);
  }
  if (!done) return false;
  if (done->error) std::rethrow_exception(done->error);
  return after_save(session, done->step);
}

bool CheckpointSaverHook::save(Session& session, int64_t step) {
  bool should_stop = false;
  if (async_) {
    bool waiting = false;
    {
      std::lock_guard<std::mutex> lock(async_->mu);
      waiting = !async_->idle();
    }
    if (waiting) {
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
    SaverSnapshot snapshot = saver_->snapshot(session, save_path_, step);
    {
      std::lock_guard<std::mutex> lock(async_->mu);
      if (async_->alive) {
        async_->job = std::move(snapshot);
        async_->job_step = step;
      }
    }
    if (snapshot.empty()) {
      async_->cv.notify_all();
      return should_stop;
    }
    // The writer has ended (the Coordinator was asked to stop): write here.
    saver_->write(std::move(snapshot));
    return after_save(session, step) || should_stop;
  }
  saver_->save(session, save_path_, step);
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
