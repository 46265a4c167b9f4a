#include "trainhooks/checkpoint/saver.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <utility>

#include "trainhooks/checkpoint/checkpoint_format.h"
#include "trainhooks/checkpoint/checkpoint_manager.h"
#include "trainhooks/errors.h"
#include "trainhooks/graph.h"
#include "trainhooks/session.h"
#include "trainhooks/training_state.h"
#include "util/path.h"

namespace trainhooks {

namespace fs = std::filesystem;

namespace {

// NotFoundError whatever is in place of a file (nothing, a directory, a FIFO): the checkpoint is
// not there, as checkpoint_exists() says, and restore_latest falls back past it.
void check_exists(const std::string& path) {
  for (const std::string& file : default_checkpoint_format().files(path)) {
    std::error_code ec;
    const fs::file_status status = fs::status(file, ec);
    if (fs::is_regular_file(status)) continue;
    throw NotFoundError(fmt::format("The passed save_path is not a valid checkpoint: {} ({} {})",
                                    path, file,
                                    fs::is_directory(status) ? "is a directory"
                                    : fs::exists(status)     ? "is not a regular file"
                                                             : "does not exist"));
  }
}

}  // namespace

// ---- SaverSnapshot ------------------------------------------------------------------------------

struct SaverSnapshot::Impl {
  TrainingSnapshot contents;
  std::string path;
  // A synchronous save, which holds up training anyway, writes its two files on two cores; a
  // snapshot written while training goes on leaves the other core to training.
  bool parallel = false;
  size_t bytes = 0;
  // Set by the compatibility form of Saver::snapshot: the manager that lists it once written.
  std::shared_ptr<CheckpointManager> list_with;
};

SaverSnapshot::SaverSnapshot() = default;
SaverSnapshot::~SaverSnapshot() = default;
SaverSnapshot::SaverSnapshot(SaverSnapshot&&) noexcept = default;
SaverSnapshot& SaverSnapshot::operator=(SaverSnapshot&&) noexcept = default;
bool SaverSnapshot::empty() const { return impl_ == nullptr; }
const std::string& SaverSnapshot::path() const {
  static const std::string kNone;
  return impl_ ? impl_->path : kNone;
}
int64_t SaverSnapshot::global_step() const { return impl_ ? impl_->contents.global_step : 0; }
double SaverSnapshot::wall_time() const { return impl_ ? impl_->contents.wall_time : 0; }
size_t SaverSnapshot::bytes() const { return impl_ ? impl_->bytes : 0; }

// ---- Saver: one checkpoint ----------------------------------------------------------------------

Saver::Saver(Graph& graph, SaverOptions options)
    : graph_(&graph),
      options_(std::move(options)),
      clock_(options_.env.clock ? options_.env.clock : Env::system().clock),
      created_at_(clock_->wall_seconds()) {
  const double hours = options_.keep_checkpoint_every_n_hours;
  if (!(hours > 0) || std::isinf(hours)) {
    throw InvalidArgument(fmt::format(
        "Saver: invalid keep_checkpoint_every_n_hours {} (must be a positive number)", hours));
  }
  if (options_.keep_best_n < 0) {
    throw InvalidArgument(
        fmt::format("Saver: invalid keep_best_n {} (must be >= 0)", options_.keep_best_n));
  }
  if (options_.keep_best_n > 0 && options_.best_metric.empty())
    throw InvalidArgument("Saver: keep_best_n needs best_metric (a metric name, e.g. 'eval/loss')");
}

Saver::~Saver() = default;

Env Saver::env_for(const Session& session) const {
  return Env{clock_, options_.env.sleeper, options_.env.log}
      .or_else(session.env())
      .or_else(Env::system());
}

bool Saver::checkpoint_exists(const std::string& path) {
  std::error_code ec;
  for (const std::string& file : default_checkpoint_format().files(path))
    if (!fs::is_regular_file(file, ec)) return false;
  return true;
}

void Saver::check_session(const Session& session, const char* what) const {
  if (&session.graph() != graph_)
    throw InvalidArgument(
        fmt::format("{}: the session runs another graph than this Saver's", what));
}

void Saver::check_save_path(const char* what, const char* arg, const std::string& given,
                            bool prefix_of_step) {
  if (given.empty()) throw InvalidArgument(fmt::format("{}: {} must not be empty", what, arg));
  const fs::path p(given);
  if (given.back() == '/' || p.filename() == "." || p.filename() == "..") {
    throw InvalidArgument(
        fmt::format("{}: {} '{}' names a directory; give a file prefix such as '{}/model.ckpt'",
                    what, arg, given, p.lexically_normal().string()));
  }
  if (!prefix_of_step && p.filename() == "checkpoint") {
    throw InvalidArgument(fmt::format(
        "{}: 'latest_filename' collides with 'save_path': 'checkpoint' and '{}'", what, given));
  }
  std::error_code ec;
  if (!fs::is_directory(internal::parent_dir(given), ec)) {
    throw NotFoundError(fmt::format("Parent directory of {} doesn't exist, can't save.", given));
  }
}

SaverSnapshot Saver::capture(Session& session, const std::string& path, bool copy) const {
  SaverSnapshot snap;
  snap.impl_ = std::make_unique<SaverSnapshot::Impl>();
  auto& impl = *snap.impl_;
  impl.parallel = !copy;
  impl.contents = capture_training_state(*graph_, copy, &impl.bytes);
  impl.path = path;
  impl.contents.wall_time = clock_->wall_seconds();
  return snap;
}

std::string Saver::write(Session& session, const std::string& path) {
  check_session(session, "Saver::write");
  check_save_path("Saver::write", "path", path, /*prefix_of_step=*/false);
  return write(capture(session, path, /*copy=*/false));
}

SaverSnapshot Saver::snapshot(Session& session, const std::string& path) {
  check_session(session, "Saver::snapshot");
  check_save_path("Saver::snapshot", "path", path, /*prefix_of_step=*/false);
  return capture(session, path, /*copy=*/true);
}

std::string Saver::write(SaverSnapshot snapshot) {
  if (snapshot.empty()) throw InvalidArgument("Saver::write: the snapshot is empty");
  if (auto manager = std::move(snapshot.impl_->list_with))
    return manager->write(std::move(snapshot));
  SaverSnapshot::Impl& impl = *snapshot.impl_;
  default_checkpoint_format().write(impl.contents, impl.path, impl.parallel);
  return impl.path;
}

void Saver::restore(Session& session, const std::string& path) {
  check_session(session, "Saver::restore");
  if (path.empty()) throw InvalidArgument("Saver::restore: path must not be empty");
  const Env env = env_for(session);
  apply(read(path, env), path, env);
}

TrainingSnapshot Saver::read(const std::string& path, const Env& env) const {
  check_exists(path);
  env.info(fmt::format("Restoring parameters from {}", path));
  return default_checkpoint_format().read(path);
}

void Saver::apply(const TrainingSnapshot& snapshot, const std::string& path, const Env& env) const {
  restore_training_state(*graph_, snapshot, path, env);
}

// ---- Saver: TensorFlow 1 compatibility ----------------------------------------------------------

std::string Saver::compat_path(Session& session, const std::string& save_path_prefix,
                               std::optional<int64_t> global_step) const {
  check_session(session, "Saver::save");
  if (global_step && *global_step < 0) {
    throw InvalidArgument(
        fmt::format("Saver::save: invalid global_step {} (must be >= 0)", *global_step));
  }
  check_save_path("Saver::save", "save_path_prefix", save_path_prefix,
                  /*prefix_of_step=*/global_step.has_value());
  return global_step ? CheckpointManager::path_for(save_path_prefix, *global_step)
                     : save_path_prefix;
}

std::shared_ptr<CheckpointManager> Saver::manager_for(const std::string& dir) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto& manager = managers_[internal::normal_dir(dir)];
  if (!manager) {
    manager.reset(new CheckpointManager(
        dir,
        {.max_to_keep = options_.max_to_keep,
         .keep_checkpoint_every_n_hours = options_.keep_checkpoint_every_n_hours,
         .save_relative_paths = options_.save_relative_paths,
         .keep_best_n = options_.keep_best_n,
         .best_metric = options_.best_metric,
         .best_mode = options_.best_mode,
         .env = Env{clock_, options_.env.sleeper, options_.env.log}},
        created_at_));
  }
  return manager;
}

std::string Saver::save(Session& session, const std::string& save_path_prefix,
                        std::optional<int64_t> global_step) {
  const std::string path = compat_path(session, save_path_prefix, global_step);
  return manager_for(internal::parent_dir(path))->write(capture(session, path, /*copy=*/false));
}

SaverSnapshot Saver::snapshot(Session& session, const std::string& save_path_prefix,
                              std::optional<int64_t> global_step) {
  const std::string path = compat_path(session, save_path_prefix, global_step);
  SaverSnapshot snap = capture(session, path, /*copy=*/true);
  snap.impl_->list_with = manager_for(internal::parent_dir(path));
  return snap;
}

std::optional<std::string> Saver::restore_latest(Session& session,
                                                 const std::string& checkpoint_dir) {
  check_session(session, "Saver::restore_latest");
  return manager_for(checkpoint_dir)->restore_latest(session);
}

std::optional<std::string> Saver::latest_checkpoint(const std::string& checkpoint_dir,
                                                    const Env& env) {
  return CheckpointManager(checkpoint_dir, {.env = env}).latest();
}

std::vector<std::string> Saver::last_checkpoints(const std::string& checkpoint_dir) const {
  return manager_for(checkpoint_dir)->checkpoints();
}

std::function<void(Session&)> restore_latest_checkpoint(std::shared_ptr<Saver> saver,
                                                        std::string checkpoint_dir) {
  if (!saver) throw InvalidArgument("restore_latest_checkpoint: saver is null");
  return [saver = std::move(saver), dir = std::move(checkpoint_dir)](Session& session) {
    saver->restore_latest(session, dir);
  };
}

std::function<void(Session&)> restore_checkpoint(std::shared_ptr<Saver> saver, std::string path) {
  if (!saver) throw InvalidArgument("restore_checkpoint: saver is null");
  return [saver = std::move(saver), path = std::move(path)](Session& session) {
    saver->restore(session, path);
  };
}

}  // namespace trainhooks
