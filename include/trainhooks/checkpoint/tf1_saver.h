// compat::v1::Saver: TensorFlow 1's tf.compat.v1.train.Saver API, a client of
// CheckpointManager (checkpoint_manager.h) for code written against TF1.
//
// save(session, prefix, step) writes `<prefix>-<step>` and lists it in the state file of the
// prefix's directory with TF1 retention (max_to_keep, keep_checkpoint_every_n_hours counted from
// the Saver's creation); restore_latest(session, dir) and last_checkpoints(dir) read that file, as
// trainhooks::latest_checkpoint(dir) does (TF's tf.train.latest_checkpoint, checkpoint_manager.h).
// The Saver keeps one CheckpointManager per directory it saved into or restored from, as TF1's
// Saver remembers its last checkpoints. New code uses a CheckpointManager (a directory) or a
// trainhooks::Saver (one path) directly.
//
//   th::compat::v1::Saver saver(g, {.max_to_keep = 3});
//   saver.save(sess, "runs/exp1/model.ckpt", g.global_step_value());  // runs/exp1/model.ckpt-N
//   saver.restore_latest(other_sess, "runs/exp1");
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "trainhooks/checkpoint/saver.h"
#include "trainhooks/env.h"

namespace trainhooks {

class CheckpointManager;

namespace compat::v1 {

struct SaverOptions {
  // Checkpoints kept and listed per directory; <= 0 keeps all of them on disk and lists only the
  // newest.
  int max_to_keep = 5;
  // A checkpoint dropped by max_to_keep is kept on disk (no longer listed) when it was written
  // more than this many hours after the previous one kept this way (the first: after the Saver
  // was created). Positive.
  double keep_checkpoint_every_n_hours = 10000;
  // Write the state file's paths relative to its directory (as TF2's CheckpointManager does), so
  // that the directory can be moved or copied. false: TensorFlow 1's Saver's default, as given,
  // and relative when the save path itself is relative.
  bool save_relative_paths = true;
  // clock: checkpoint time stamps and the hours rule (wall time), read from construction on;
  // null: the system clock. log: `Restoring parameters from ...` and warnings; null: the
  // session's log sink, then stderr.
  Env env;
};

class Saver {
 public:
  // InvalidArgument naming the option for a bad keep_checkpoint_every_n_hours.
  explicit Saver(Graph& graph, SaverOptions options = {});
  ~Saver();
  Saver(const Saver&) = delete;
  Saver& operator=(const Saver&) = delete;

  // Writes `<prefix>-<global_step>` (`<prefix>` without a step), lists it in the state file of the
  // prefix's directory, deletes checkpoints beyond max_to_keep (CheckpointManager::write) and
  // returns the path. trainhooks::Saver::write's errors, naming save_path_prefix; InvalidArgument
  // for a negative step or a prefix that would overwrite the state file.
  std::string save(Session& session, const std::string& save_path_prefix,
                   std::optional<int64_t> global_step = std::nullopt);
  // save() in two halves: snapshot() copies the state (trainhooks::Saver::snapshot) on the
  // thread that runs the session; write() writes it and lists it in its directory, on any
  // thread.
  SaverSnapshot snapshot(Session& session, const std::string& save_path_prefix,
                         std::optional<int64_t> global_step);
  std::string write(SaverSnapshot snapshot);

  // trainhooks::Saver::restore of exactly `path`.
  void restore(Session& session, const std::string& path);
  // CheckpointManager::restore_latest of `checkpoint_dir`; retention of later saves into that
  // directory continues with what its state file lists.
  std::optional<std::string> restore_latest(Session& session, const std::string& checkpoint_dir);
  // CheckpointManager::checkpoints of `checkpoint_dir` (TensorFlow's last_checkpoints).
  std::vector<std::string> last_checkpoints(const std::string& checkpoint_dir) const;
  // True when both files of the checkpoint at `path` exist.
  static bool checkpoint_exists(const std::string& path);

  Graph& graph() const { return saver_.graph(); }
  const SaverOptions& options() const { return options_; }

 private:
  // `<prefix>-<step>`, checked (`what` names the caller in messages).
  std::string path_of(Session& session, const char* what, const std::string& save_path_prefix,
                      std::optional<int64_t> global_step) const;
  // The manager of `dir`, made on first use.
  std::shared_ptr<CheckpointManager> manager_for(const std::string& dir) const;

  SaverOptions options_;
  trainhooks::Saver saver_;
  double created_at_;                                                           // the hours rule
  mutable std::mutex mu_;                                                       // guards managers_
  mutable std::map<std::string, std::shared_ptr<CheckpointManager>> managers_;  // by normal dir
};

}  // namespace compat::v1
}  // namespace trainhooks
