#include "trainhooks/checkpoint/saver.h"

#include <fmt/format.h>

#include <filesystem>
#include <utility>

#include "checkpoint/save_path.h"
#include "trainhooks/checkpoint/checkpoint_format.h"
#include "trainhooks/errors.h"
#include "trainhooks/graph.h"
#include "trainhooks/session.h"
#include "trainhooks/training_state.h"

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

// ---- Saver --------------------------------------------------------------------------------------

Saver::Saver(Graph& graph, SaverOptions options)
    : graph_(&graph),
      options_(std::move(options)),
      clock_(options_.env.clock ? options_.env.clock : Env::system().clock) {}

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

std::string Saver::write(Session& session, const std::string& path) {
  check_session(session, "Saver::write");
  internal::check_save_path("Saver::write", "path", path, /*prefix_of_step=*/false);
  return write(capture(path, /*copy=*/false));
}

SaverSnapshot Saver::snapshot(Session& session, const std::string& path, bool copy) {
  check_session(session, "Saver::snapshot");
  internal::check_save_path("Saver::snapshot", "path", path, /*prefix_of_step=*/false);
  return capture(path, copy);
}

SaverSnapshot Saver::capture(const std::string& path, bool copy) const {
  SaverSnapshot snap;
  snap.impl_ = std::make_unique<SaverSnapshot::Impl>();
  auto& impl = *snap.impl_;
  impl.parallel = !copy;
  impl.contents = capture_training_state(*graph_, copy, &impl.bytes);
  impl.path = path;
  impl.contents.wall_time = clock_->wall_seconds();
  return snap;
}

std::string Saver::write(SaverSnapshot snapshot) {
  if (snapshot.empty()) throw InvalidArgument("Saver::write: the snapshot is empty");
  SaverSnapshot::Impl& impl = *snapshot.impl_;
  default_checkpoint_format().write(impl.contents, impl.path, impl.parallel);
  return impl.path;
}

void Saver::restore(Session& session, const std::string& path) {
  check_session(session, "Saver::restore");
  if (path.empty()) throw InvalidArgument("Saver::restore: path must not be empty");
  apply(session, read(session, path), path);
}

TrainingSnapshot Saver::read(Session& session, const std::string& path) const {
  check_session(session, "Saver::read");
  check_exists(path);
  env_for(session).info(fmt::format("Restoring parameters from {}", path));
  return default_checkpoint_format().read(path);
}

void Saver::apply(Session& session, const TrainingSnapshot& snapshot,
                  const std::string& path) const {
  check_session(session, "Saver::apply");
  restore_training_state(*graph_, snapshot, path, env_for(session));
}

std::function<void(Session&)> restore_checkpoint(std::shared_ptr<Saver> saver, std::string path) {
  if (!saver) throw InvalidArgument("restore_checkpoint: saver is null");
  return [saver = std::move(saver), path = std::move(path)](Session& session) {
    saver->restore(session, path);
  };
}

}  // namespace trainhooks
