// CheckpointManager: the checkpoints of one directory (TF2's tf.train.CheckpointManager): their
// names, the `checkpoint` state file that lists them, which are kept, which is the latest, and
// restoring the latest one.
//
// It holds a directory and a basename ("model.ckpt"), and owns the naming rule: the checkpoint of
// global step N is `<directory>/<basename>-N` (path_for), and step_of() reads N back from such a
// path; nothing else in trainhooks builds or parses these names. A save writes the checkpoint's
// two files (Saver, saver.h), then rewrites the state file (checkpoint_state.h) to list it, and
// only then deletes the checkpoints beyond max_to_keep, oldest first, unless the
// keep_checkpoint_every_n_hours rule keeps them on disk (no longer listed). Retention follows
// TensorFlow's CheckpointManager: a dropped checkpoint is kept when it was written at least
// keep_checkpoint_every_n_hours after the last one kept this way, whose time the state file
// remembers (last_preserved_timestamp) so the rule goes on across restarts; with no state file
// the period starts at the manager's creation. A clock that went back behind that time is
// warned about and the period starts again from now. max_to_keep <= 0 (TensorFlow's Saver with
// max_to_keep 0) keeps every checkpoint on disk and tracks none: the state file lists only the
// newest. A kill at any moment
// leaves every listed checkpoint complete. The state file lists paths relative to the directory
// (save_relative_paths), so the directory can be moved or copied and still be resumed from.
//
//   auto manager = std::make_shared<th::CheckpointManager>(
//       "runs/exp1", th::CheckpointManagerOptions{.max_to_keep = 3});
//   if (!manager->restore_latest(sess)) g.initialize();        // nothing saved yet
//   ...
//   manager->save(sess, g.global_step_value());                // runs/exp1/model.ckpt-<step>
//
// The manager reads the state file the first time it needs the list (a save, checkpoints(),
// restore_latest()), so one made on a directory that already holds checkpoints continues their
// retention; it takes the listed checkpoints written after the last preserved one (times later
// than the manager's creation count as its creation), as TensorFlow's does.
// MonitoredTrainingSession makes one manager of checkpoint_dir and gives it to the chief's restore
// and to its CheckpointSaverHook.
//
// Thread-safety: save(), snapshot() and restore_latest() run on the thread that runs the session;
// write() may run on any thread (AsyncCheckpointWriter's); the list is guarded, so const methods
// may be called from any thread. A restore must not run during a write.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trainhooks/checkpoint/checkpoint_state.h"
#include "trainhooks/checkpoint/keep_best.h"
#include "trainhooks/checkpoint/saver.h"
#include "trainhooks/env.h"

namespace trainhooks {

class Session;

struct CheckpointManagerOptions {
  // The checkpoints' file name before `-<step>` (TF2's checkpoint_name); a file name, no
  // directory part.
  std::string basename = "model.ckpt";
  // Checkpoints kept (and listed in the state file), newest ones; <= 0 keeps all of them on disk
  // and lists only the newest (TensorFlow's Saver with max_to_keep 0: none tracked).
  int max_to_keep = 5;
  // A checkpoint dropped by max_to_keep is kept on disk (no longer listed) when it was written at
  // least this many hours after the previous one kept this way (the state file's
  // last_preserved_timestamp; without a state file, the manager's creation). Positive.
  double keep_checkpoint_every_n_hours = 10000;
  // Write the state file's paths relative to the directory, as TF2's CheckpointManager does, so
  // that the directory can be moved or copied. false: as given (absolute for an absolute
  // directory), TensorFlow 1's Saver's rule, which only readers that predate relative paths need.
  bool save_relative_paths = true;
  // Keep-best (keep_best.h): checkpoints kept because of a metric's value. A checkpoint's value
  // is the metric measured at its step: each save() may pass a CheckpointScore, which goes to the
  // listed checkpoint of its step (the one being saved, or an earlier one when the evaluation ran
  // after that checkpoint was written, as an EvaluationHook listed after the
  // CheckpointSaverHook does). The values and the best list survive restarts in
  // `<directory>/best_checkpoints.json`, written crash-safely before the state file and before
  // anything is deleted; `trainhooks checkpoint list` marks the best.
  KeepBest keep_best;
  // TensorFlow 1's Saver's keep_checkpoint_every_n_hours rule instead of TF2's above (what
  // compat::v1::Saver gives): a dropped checkpoint is kept when written after the next whole
  // period counted from this wall time, and every listed checkpoint whose files exist is tracked
  // on recovery (time stamps from the files when the state file has none). nullopt: TF2's rule.
  std::optional<double> tf1_keep_period_start;
  // clock: checkpoint time stamps and the hours rule (wall time), read from construction on;
  // null: the system clock. log: `Restoring parameters from ...` and warnings; null: the
  // session's log sink, then stderr.
  Env env;
};

class CheckpointManager {
 public:
  // InvalidArgument naming the argument for an empty directory, a basename that is not a file
  // name, or a keep_checkpoint_every_n_hours that is not positive. Reads no file.
  explicit CheckpointManager(std::string directory, CheckpointManagerOptions options = {});
  ~CheckpointManager();
  CheckpointManager(const CheckpointManager&) = delete;
  CheckpointManager& operator=(const CheckpointManager&) = delete;

  const std::string& directory() const { return directory_; }
  const CheckpointManagerOptions& options() const { return options_; }
  // `<directory>/<basename>`: what path_for() appends `-<step>` to.
  const std::string& prefix() const { return prefix_; }

  // ---- Naming ----------------------------------------------------------------------------------
  // `<directory>/<basename>-<step>`. InvalidArgument for a negative step.
  std::string path_for(int64_t step) const;
  // The same rule for any prefix: `<prefix>-<step>` (Saver::save's TF1 naming).
  static std::string path_for(std::string_view prefix, int64_t step);
  // The step of a path that ends in `-<digits>` (`runs/exp1/model.ckpt-1200` -> 1200); nullopt
  // for any other path.
  static std::optional<int64_t> step_of(std::string_view path);

  // ---- Saving ----------------------------------------------------------------------------------
  // Writes the checkpoint of `session`'s graph at path_for(step) (the two files at once, on this
  // thread and a second one), lists it in the state file, applies retention and returns its path.
  // Saver's errors: NotFoundError when the directory does not exist, write errors naming the
  // file; nothing is listed or deleted when the write fails.
  // `score`: keep-best's value of the metric at score->step (ignored without keep_best).
  std::string save(Session& session, int64_t step,
                   std::optional<CheckpointScore> score = std::nullopt);
  // save() in two halves, for saving while training goes on: snapshot() copies the state into
  // host memory on the thread that runs the session (Saver::snapshot), write() writes it, lists
  // it and applies retention, on any thread, and returns its path. write() accepts any snapshot
  // of a path in this directory (InvalidArgument otherwise, or for an empty snapshot). Writes
  // are serialised.
  SaverSnapshot snapshot(Session& session, int64_t step,
                         std::optional<CheckpointScore> score = std::nullopt);
  std::string write(SaverSnapshot snapshot);

  // ---- State -----------------------------------------------------------------------------------
  // The checkpoints tracked (listed, subject to retention), oldest first: those of the state file
  // whose files existed when it was first read and that were written after its last preserved
  // time, and the manager's own saves since then; empty with max_to_keep <= 0. A state file that
  // cannot be parsed counts as none, with a warning (its checkpoints are not deleted); so do
  // checkpoints on disk when there is no state file (a warning names them before a save can replace
  // one).
  std::vector<std::string> checkpoints() const;
  // TensorFlow's latest_checkpoint: the newest checkpoint the state file lists, read now, if its
  // files exist; else nullopt, logging an error when the state file names a missing checkpoint
  // and a warning when it cannot be parsed.
  std::optional<std::string> latest() const;
  // Whether the checkpoint of `step` is already on disk as this manager left it: the last one it
  // saved or restored, still the newest listed, with both files present. CheckpointSaverHook
  // does not write that checkpoint again after a restore.
  bool saved_at(int64_t step) const;
  // Keep-best: the keep_best.n best checkpoints on disk with their values, best first (listed or
  // kept beyond max_to_keep); empty without keep_best.
  std::vector<ScoredCheckpoint> best_checkpoints() const;

  // ---- Restoring -------------------------------------------------------------------------------
  // Restores the newest listed checkpoint into `session`'s graph and returns its path. A listed
  // checkpoint that is missing, corrupt or truncated is skipped with a warning naming it, and the
  // previous one is tried. No state file: the checkpoints `<basename>-<N>` in the directory
  // (a deleted state file) are tried the same way, newest step first, with a warning naming them
  // (they stay unlisted, never deleted), and nullopt when there are none. DataLossError when
  // checkpoints are listed or found but none can be restored, or the state file cannot be parsed
  // (never a silent fresh start); FileError when it cannot be read (a directory in its place).
  // Errors that are not about the files (a graph mismatch) propagate. A directory in place of a
  // checkpoint's variables file or .trainstate counts as a missing file: it is skipped.
  std::optional<std::string> restore_latest(Session& session);

 private:
  struct Listed {
    std::string path;
    double timestamp;
  };
  Env env() const;
  Env env_for(const Session& session) const;
  Saver saver_for(Session& session) const;
  // Reads the state file into checkpoints_ the first time (`known`: as already read); mu_ held.
  // Warns about checkpoints on disk when there is no state file.
  void recover_locked(const Env& env, const std::optional<CheckpointState>* known) const;
  // Reads best_checkpoints.json into scored_ (keep-best only); mu_ held.
  void recover_best_locked(const Env& env) const;
  // Lists `path`, written at `timestamp`, and applies retention; mu_ held.
  void record_locked(const std::string& path, double timestamp, const Env& env,
                     std::optional<CheckpointScore> score);
  std::string write_scored(SaverSnapshot snapshot, std::optional<CheckpointScore> score);

  std::string directory_;
  std::string prefix_;
  CheckpointManagerOptions options_;
  std::shared_ptr<Clock> clock_;
  double created_at_;      // wall time at construction: the hours rule's start without a state file
  bool tf1_hours_rule_;    // options_.tf1_keep_period_start is set
  std::mutex write_mu_;    // one write() at a time
  mutable std::mutex mu_;  // guards what follows
  mutable bool recovered_ = false;
  mutable std::vector<Listed> checkpoints_;  // oldest first
  mutable double last_preserved_timestamp_ = 0;
  mutable std::string newest_;  // the state file's model_checkpoint_path, or the last save
  mutable bool unlisted_reported_ = false;  // the warning about checkpoints without a state file
  double next_keep_time_ = 0;
  bool temporaries_removed_ = false;
  std::string last_touched_;  // the last checkpoint saved or restored
  // Keep-best: the values of checkpoints on disk (best_checkpoints.json), and those snapshot()
  // read for write() to record.
  mutable std::vector<ScoredCheckpoint> scored_;
  std::vector<std::pair<std::string, std::optional<CheckpointScore>>> pending_;
};

// TensorFlow's tf.train.latest_checkpoint: CheckpointManager(checkpoint_dir).latest(), the
// newest checkpoint the directory's state file lists if its files exist (`env`: its log).
std::optional<std::string> latest_checkpoint(const std::string& checkpoint_dir,
                                             const Env& env = Env::system());

// The restore function of a chief's session creator (SessionCreatorOptions::restore):
// manager->restore_latest(session).
std::function<void(Session&)> restore_latest_checkpoint(std::shared_ptr<CheckpointManager> manager);

}  // namespace trainhooks
