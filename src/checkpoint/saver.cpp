#include "trainhooks/checkpoint/saver.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>
#include <signal.h>
#include <sys/stat.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize.h>
#include <torch/serialize/archive.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <utility>

#include "checkpoint/checkpoint_file.h"
#include "checkpoint/training_state.h"
#include "trainhooks/checkpoint/checkpoint_state.h"
#include "trainhooks/errors.h"
#include "trainhooks/graph.h"
#include "trainhooks/session.h"
#include "util/atomic_file.h"
#include "util/path.h"

namespace trainhooks {

namespace fs = std::filesystem;
using internal::normal_dir;
using internal::parent_dir;
using internal::same_path;
using internal::sidecar_path;

namespace {

double mtime_seconds(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<double>(st.st_mtim.tv_sec) + static_cast<double>(st.st_mtim.tv_nsec) * 1e-9;
}

// Removes the temporary files (util/atomic_file.h: `.<name>.tmp-<pid>-<n>`) that writers killed
// mid-write left in `dir`: those whose process no longer exists.
void remove_stale_temporaries(const std::string& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const size_t at = name.rfind(".tmp-");
    if (name.empty() || name[0] != '.' || at == std::string::npos) continue;
    const long pid = std::strtol(name.c_str() + at + 5, nullptr, 10);
    if (pid <= 0 || pid == ::getpid()) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    std::error_code ignored;
    fs::remove(entry.path(), ignored);
  }
}

// Rethrows a trainhooks error with context, keeping its type.
[[noreturn]] void rethrow_with(const Error& e, const std::string& context) {
  throw_error(e.code(), fmt::format("{}: {}", context, e.what()));
}

}  // namespace

// ---- Saver --------------------------------------------------------------------------------------

Saver::Saver(Graph& graph, SaverOptions options)
    : graph_(&graph),
      options_(std::move(options)),
      clock_(options_.env.clock ? options_.env.clock : Env::system().clock) {
  const double hours = options_.keep_checkpoint_every_n_hours;
  if (!(hours > 0) || std::isinf(hours)) {
    throw InvalidArgument(fmt::format(
        "Saver: invalid keep_checkpoint_every_n_hours {} (must be a positive number)", hours));
  }
  next_keep_time_ = clock_->wall_seconds() + hours * 3600;
}

Saver::~Saver() = default;

Env Saver::env_for(const Session& session) const {
  return Env{clock_, options_.env.sleeper, options_.env.log}
      .or_else(session.env())
      .or_else(Env::system());
}

bool Saver::checkpoint_exists(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec) && fs::is_regular_file(sidecar_path(path), ec);
}

void Saver::recover(DirState& state, const std::string& dir, const Env& env) {
  std::optional<CheckpointState> st;
  try {
    st = get_checkpoint_state(dir);
  } catch (const DataLossError& e) {
    env.warning(fmt::format(
        "{}; the checkpoints it lists are no longer tracked and will not be deleted", e.what()));
    return;
  }
  if (!st) return;
  const auto& paths = st->all_model_checkpoint_paths;
  const bool have_times = st->all_model_checkpoint_timestamps.size() == paths.size();
  for (size_t i = 0; i < paths.size(); ++i) {
    // As TensorFlow's recover_last_checkpoints: only those whose files exist; file times when the
    // state has none.
    if (!checkpoint_exists(paths[i])) continue;
    state.checkpoints.push_back(
        {paths[i], have_times ? st->all_model_checkpoint_timestamps[i] : mtime_seconds(paths[i])});
  }
  state.last_preserved_timestamp = st->last_preserved_timestamp;
}

Saver::DirState& Saver::dir_state(const std::string& dir, const Env& env) {
  const std::string key = normal_dir(dir);
  auto it = dirs_.find(key);
  if (it != dirs_.end()) return it->second;
  DirState state;
  recover(state, dir, env);
  remove_stale_temporaries(dir);
  return dirs_.emplace(key, std::move(state)).first->second;
}

std::vector<std::string> Saver::last_checkpoints(const std::string& checkpoint_dir) const {
  std::vector<std::string> out;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = dirs_.find(normal_dir(checkpoint_dir));
  if (it == dirs_.end()) return out;
  for (const auto& c : it->second.checkpoints) out.push_back(c.path);
  return out;
}

struct SaverSnapshot::Impl {
  std::string dir;
  internal::CheckpointContents contents;
  // A synchronous save, which holds up training anyway, writes its two files on two cores; a
  // snapshot written while training goes on leaves the other core to training.
  bool parallel = false;
  size_t bytes = 0;
  Env env;
};

SaverSnapshot::SaverSnapshot() = default;
SaverSnapshot::~SaverSnapshot() = default;
SaverSnapshot::SaverSnapshot(SaverSnapshot&&) noexcept = default;
SaverSnapshot& SaverSnapshot::operator=(SaverSnapshot&&) noexcept = default;
bool SaverSnapshot::empty() const { return impl_ == nullptr; }
const std::string& SaverSnapshot::path() const {
  static const std::string kNone;
  return impl_ ? impl_->contents.path : kNone;
}
int64_t SaverSnapshot::global_step() const { return impl_ ? impl_->contents.global_step : 0; }
size_t SaverSnapshot::bytes() const { return impl_ ? impl_->bytes : 0; }

std::string Saver::save(Session& session, const std::string& save_path_prefix,
                        std::optional<int64_t> global_step) {
  return write(capture(session, save_path_prefix, global_step, /*copy=*/false));
}

SaverSnapshot Saver::snapshot(Session& session, const std::string& save_path_prefix,
                              std::optional<int64_t> global_step) {
  return capture(session, save_path_prefix, global_step, /*copy=*/true);
}

SaverSnapshot Saver::capture(Session& session, const std::string& save_path_prefix,
                             std::optional<int64_t> global_step, bool copy) {
  if (&session.graph() != graph_)
    throw InvalidArgument("Saver::save: the session runs another graph than this Saver's");
  if (save_path_prefix.empty())
    throw InvalidArgument("Saver::save: save_path_prefix must not be empty");
  if (save_path_prefix.back() == '/' || fs::path(save_path_prefix).filename() == "." ||
      fs::path(save_path_prefix).filename() == "..") {
    throw InvalidArgument(
        fmt::format("Saver::save: save_path_prefix '{}' names a directory; give a file prefix such "
                    "as '{}/model.ckpt'",
                    save_path_prefix, fs::path(save_path_prefix).lexically_normal().string()));
  }
  if (global_step && *global_step < 0) {
    throw InvalidArgument(
        fmt::format("Saver::save: invalid global_step {} (must be >= 0)", *global_step));
  }
  const std::string path =
      global_step ? fmt::format("{}-{}", save_path_prefix, *global_step) : save_path_prefix;
  if (!global_step && fs::path(save_path_prefix).filename() == "checkpoint") {
    throw InvalidArgument(fmt::format(
        "Saver::save: 'latest_filename' collides with 'save_path': 'checkpoint' and '{}'",
        save_path_prefix));
  }
  const std::string dir = parent_dir(path);
  {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      throw NotFoundError(
          fmt::format("Parent directory of {} doesn't exist, can't save.", save_path_prefix));
    }
  }
  Graph& g = *graph_;
  SaverSnapshot snap;
  snap.impl_ = std::make_unique<SaverSnapshot::Impl>();
  auto& impl = *snap.impl_;
  impl.dir = dir;
  impl.env = env_for(session);
  impl.parallel = !copy;
  auto& c = impl.contents;
  c = internal::capture_training_state(g, copy, impl.bytes);
  c.path = path;
  c.wall_time = clock_->wall_seconds();
  return snap;
}

std::string Saver::write(SaverSnapshot snapshot) {
  if (snapshot.empty()) throw InvalidArgument("Saver::write: the snapshot is empty");
  std::lock_guard<std::mutex> write_lock(write_mu_);
  auto& impl = *snapshot.impl_;
  auto& c = impl.contents;
  const std::string& path = c.path;
  const std::string& dir = impl.dir;
  const Env& env = impl.env;
  // Variables, then the sidecar that vouches for them, then the state file that lists both.
  internal::write_checkpoint_files(c, impl.parallel);

  // Retention (TensorFlow's _RecordLastCheckpoint and _MaybeDeleteOldCheckpoints), decided on
  // copies and committed once the state file is written.
  std::lock_guard<std::mutex> lock(mu_);
  DirState& ds = dir_state(dir, env);
  std::vector<Listed> listed = ds.checkpoints;
  std::erase_if(listed, [&](const Listed& l) { return same_path(l.path, path); });
  listed.push_back({path, c.wall_time});
  std::vector<Listed> dropped;
  if (options_.max_to_keep > 0) {
    while (listed.size() > static_cast<size_t>(options_.max_to_keep)) {
      dropped.push_back(listed.front());
      listed.erase(listed.begin());
    }
  }
  double next_keep = next_keep_time_;
  double last_preserved = ds.last_preserved_timestamp;
  std::vector<std::string> to_delete;
  for (const auto& d : dropped) {
    if (d.timestamp > next_keep) {
      next_keep += options_.keep_checkpoint_every_n_hours * 3600;
      last_preserved = d.timestamp;
    } else {
      to_delete.push_back(d.path);
    }
  }

  CheckpointState st;
  st.model_checkpoint_path = path;
  for (const auto& l : listed) {
    st.all_model_checkpoint_paths.push_back(l.path);
    st.all_model_checkpoint_timestamps.push_back(l.timestamp);
  }
  st.last_preserved_timestamp = last_preserved;
  try {
    update_checkpoint_state(dir, std::move(st), options_.save_relative_paths);
  } catch (const Error& e) {
    rethrow_with(e, fmt::format("Cannot write checkpoint state '{}'", checkpoint_state_path(dir)));
  }
  ds.checkpoints = std::move(listed);
  ds.last_preserved_timestamp = last_preserved;
  next_keep_time_ = next_keep;

  for (const auto& p : to_delete) {
    for (const std::string& file : {p, sidecar_path(p)}) {
      std::error_code ec;
      fs::remove(file, ec);
      if (ec)
        env.warning(fmt::format("Ignoring: cannot delete old checkpoint file '{}': {}", file,
                                ec.message()));
    }
  }
  return path;
}

namespace {

void check_exists(const std::string& path) {
  for (const std::string& file : {path, sidecar_path(path)}) {
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) {
      throw NotFoundError(fmt::format(
          "The passed save_path is not a valid checkpoint: {} ({} does not exist)", path, file));
    }
  }
}

}  // namespace

void Saver::restore(Session& session, const std::string& path) {
  if (&session.graph() != graph_)
    throw InvalidArgument("Saver::restore: the session runs another graph than this Saver's");
  if (path.empty()) throw InvalidArgument("Saver::restore: path must not be empty");
  const Env env = env_for(session);
  check_exists(path);
  env.info(fmt::format("Restoring parameters from {}", path));
  internal::CheckpointContents cp = internal::decode_checkpoint(path);
  internal::RestorePlan plan = internal::check_training_state(*graph_, cp);
  internal::apply_training_state(*graph_, cp, plan, env);
}

std::optional<std::string> Saver::restore_latest(Session& session,
                                                 const std::string& checkpoint_dir) {
  if (&session.graph() != graph_)
    throw InvalidArgument(
        "Saver::restore_latest: the session runs another graph than this Saver's");
  const Env env = env_for(session);
  std::optional<CheckpointState> st = get_checkpoint_state(checkpoint_dir);
  if (!st) return std::nullopt;
  std::vector<std::string> candidates{st->model_checkpoint_path};
  for (auto it = st->all_model_checkpoint_paths.rbegin();
       it != st->all_model_checkpoint_paths.rend(); ++it) {
    bool seen = false;
    for (const auto& c : candidates) seen = seen || same_path(c, *it);
    if (!seen) candidates.push_back(*it);
  }
  std::vector<std::string> failures;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const std::string& path = candidates[i];
    std::optional<internal::CheckpointContents> cp;
    try {
      check_exists(path);
      env.info(fmt::format("Restoring parameters from {}", path));
      cp = internal::decode_checkpoint(path);
    } catch (const Error& e) {
      if (e.code() != Code::kDataLoss && e.code() != Code::kNotFound) throw;
      env.warning(fmt::format("Checkpoint {} cannot be restored: {}. {}", path, e.what(),
                              i + 1 < candidates.size() ? "Falling back to the previous checkpoint."
                                                        : "No earlier checkpoint is listed."));
      failures.push_back(e.what());
      continue;
    }
    internal::RestorePlan plan = internal::check_training_state(*graph_, *cp);
    internal::apply_training_state(*graph_, *cp, plan, env);
    std::lock_guard<std::mutex> lock(mu_);
    dir_state(checkpoint_dir, env);  // retention continues with what the state file lists
    return path;
  }
  throw DataLossError(fmt::format(
      "None of the {} checkpoint(s) listed in {} can be restored; not starting from scratch over "
      "them. {}",
      candidates.size(), checkpoint_state_path(checkpoint_dir), fmt::join(failures, "; ")));
}

std::optional<std::string> Saver::latest_checkpoint(const std::string& checkpoint_dir,
                                                    const Env& env) {
  std::optional<CheckpointState> st;
  try {
    st = get_checkpoint_state(checkpoint_dir);
  } catch (const DataLossError& e) {
    env.warning(fmt::format("{}: Checkpoint ignored", e.what()));
    return std::nullopt;
  }
  if (!st) return std::nullopt;
  if (checkpoint_exists(st->model_checkpoint_path)) return st->model_checkpoint_path;
  env.error(fmt::format("Couldn't match files for checkpoint {}", st->model_checkpoint_path));
  return std::nullopt;
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
