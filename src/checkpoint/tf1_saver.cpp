#include "trainhooks/checkpoint/tf1_saver.h"

#include <fmt/format.h>

#include <cmath>
#include <utility>

#include "checkpoint/save_path.h"
#include "trainhooks/checkpoint/checkpoint_manager.h"
#include "trainhooks/errors.h"
#include "trainhooks/session.h"
#include "util/path.h"

namespace trainhooks::compat::v1 {

namespace {

SaverOptions checked(SaverOptions o) {
  const double hours = o.keep_checkpoint_every_n_hours;
  if (!(hours > 0) || std::isinf(hours)) {
    throw InvalidArgument(fmt::format(
        "Saver: invalid keep_checkpoint_every_n_hours {} (must be a positive number)", hours));
  }
  // One clock for the snapshots' time stamps and the managers' hours rule.
  if (!o.env.clock) o.env.clock = Env::system().clock;
  return o;
}

void check_session(const Saver& saver, const Session& session, const char* what) {
  if (&session.graph() != &saver.graph())
    throw InvalidArgument(
        fmt::format("{}: the session runs another graph than this Saver's", what));
}

}  // namespace

Saver::Saver(Graph& graph, SaverOptions options)
    : options_(checked(std::move(options))),
      saver_(graph, {.env = options_.env}),
      created_at_(options_.env.clock->wall_seconds()) {}

Saver::~Saver() = default;

std::string Saver::path_of(Session& session, const char* what, const std::string& save_path_prefix,
                           std::optional<int64_t> global_step) const {
  check_session(*this, session, what);
  if (global_step && *global_step < 0) {
    throw InvalidArgument(
        fmt::format("{}: invalid global_step {} (must be >= 0)", what, *global_step));
  }
  internal::check_save_path(what, "save_path_prefix", save_path_prefix,
                            /*prefix_of_step=*/global_step.has_value());
  return global_step ? CheckpointManager::path_for(save_path_prefix, *global_step)
                     : save_path_prefix;
}

std::shared_ptr<CheckpointManager> Saver::manager_for(const std::string& dir) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto& manager = managers_[internal::normal_dir(dir)];
  if (!manager) {
    manager = std::make_shared<CheckpointManager>(
        dir, CheckpointManagerOptions{
                 .max_to_keep = options_.max_to_keep,
                 .keep_checkpoint_every_n_hours = options_.keep_checkpoint_every_n_hours,
                 .save_relative_paths = options_.save_relative_paths,
                 .tf1_keep_period_start = created_at_,
                 .env = options_.env});
  }
  return manager;
}

std::string Saver::save(Session& session, const std::string& save_path_prefix,
                        std::optional<int64_t> global_step) {
  const std::string path = path_of(session, "Saver::save", save_path_prefix, global_step);
  // No copy: the files are written before training goes on.
  return manager_for(internal::parent_dir(path))
      ->write(saver_.snapshot(session, path, /*copy=*/false));
}

SaverSnapshot Saver::snapshot(Session& session, const std::string& save_path_prefix,
                              std::optional<int64_t> global_step) {
  return saver_.snapshot(session,
                         path_of(session, "Saver::snapshot", save_path_prefix, global_step));
}

std::string Saver::write(SaverSnapshot snapshot) {
  if (snapshot.empty()) throw InvalidArgument("Saver::write: the snapshot is empty");
  return manager_for(internal::parent_dir(snapshot.path()))->write(std::move(snapshot));
}

void Saver::restore(Session& session, const std::string& path) { saver_.restore(session, path); }

std::optional<std::string> Saver::restore_latest(Session& session,
                                                 const std::string& checkpoint_dir) {
  check_session(*this, session, "Saver::restore_latest");
  return manager_for(checkpoint_dir)->restore_latest(session);
}

std::vector<std::string> Saver::last_checkpoints(const std::string& checkpoint_dir) const {
  return manager_for(checkpoint_dir)->checkpoints();
}

bool Saver::checkpoint_exists(const std::string& path) {
  return trainhooks::Saver::checkpoint_exists(path);
}

}  // namespace trainhooks::compat::v1
