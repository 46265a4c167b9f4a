// Saver: writes and reads one training checkpoint of a Graph (TF2's tf.train.Checkpoint
// write/read), and keeps TensorFlow 1's Saver API on top of CheckpointManager.
//
// write(session, "ckpt/model.ckpt-200") writes the checkpoint in the default format
// (checkpoint_format.h), two files, and returns the path:
//   ckpt/model.ckpt-200             every variable, as a dict name -> tensor that Python reads
//                                   with torch.load(path) (LibTorch's pickle format)
//   ckpt/model.ckpt-200.trainstate  the rest of the training state (optimizer state of every
//                                   train op, global step, CPU RNG state, input positions,
//                                   registered StateProviders) and the size and CRC32C of the
//                                   variables file; see docs/formats.md "Checkpoints"
// Each file is replaced atomically (temporary file, fsync, rename, fsync of the directory). A
// Saver keeps no record of what it wrote: naming checkpoints by step, the `checkpoint` state file,
// retention and "the latest checkpoint" belong to CheckpointManager (checkpoint_manager.h).
//
// restore(session, path) reads and verifies both files (sizes and CRC32Cs), checks them against
// the graph and only then changes anything: it either restores everything or nothing.
//
// The primary API: write(session, path), snapshot(session, path) + write(snapshot),
// restore(session, path), checkpoint_exists(path).
//
//   th::Saver saver(g);
//   saver.write(sess, "export/model.ckpt");              // one checkpoint, nothing else
//   th::Saver(other_graph).restore(other_sess, "export/model.ckpt");
//
// TensorFlow 1 compatibility: save(session, prefix, step), snapshot(session, prefix, step),
// restore_latest(session, dir), latest_checkpoint(dir) and last_checkpoints(dir) behave as
// tf.compat.v1.train.Saver's: save() writes `<prefix>-<step>` and lists it in the state file of
// the prefix's directory with retention (SaverOptions). They are thin wrappers over one
// CheckpointManager per directory that the Saver makes on first use (its hours rule counting from
// the Saver's creation); new code uses a CheckpointManager directly.
//
// One save or restore at a time, on the thread that runs the session; write(snapshot) may run on
// another thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "trainhooks/env.h"
#include "trainhooks/metric_mode.h"

namespace trainhooks {

class CheckpointManager;
class Graph;
class Session;
struct TrainingSnapshot;

struct SaverOptions {
  // Retention of the compatibility API (save(session, prefix, step)): checkpoints kept and
  // listed per directory; <= 0 keeps all of them on disk and lists only the newest.
  int max_to_keep = 5;
  // A checkpoint dropped by max_to_keep is kept on disk (no longer listed) when it was written
  // more than this many hours after the previous one kept this way (the first: after the Saver
  // was created). Positive.
  double keep_checkpoint_every_n_hours = 10000;
  // Write the state file's paths relative to its directory (as TF2's CheckpointManager does), so
  // that the directory can be moved or copied. false: TensorFlow 1's Saver's default, as given,
  // and relative when the save path itself is relative.
  bool save_relative_paths = true;
  // Keep-best (CheckpointManagerOptions): the keep_best_n checkpoints with the best best_metric
  // values by best_mode are never deleted by max_to_keep; 0: off.
  int keep_best_n = 0;
  std::string best_metric;
  MetricMode best_mode = MetricMode::kMin;
  // clock: checkpoint time stamps and the hours rule (wall time), read from construction on;
  // null: the system clock. log: `Restoring parameters from ...` and warnings; null: the
  // session's log sink, then stderr.
  Env env;
};

// A checkpoint captured in host memory by Saver::snapshot() or CheckpointManager::snapshot(),
// written by Saver::write() or CheckpointManager::write(). Movable; holds copies, so training may
// go on while it is written.
class SaverSnapshot {
 public:
  SaverSnapshot();
  ~SaverSnapshot();
  SaverSnapshot(SaverSnapshot&&) noexcept;
  SaverSnapshot& operator=(SaverSnapshot&&) noexcept;

  bool empty() const;
  // The checkpoint path it will be written to, and its global step.
  const std::string& path() const;
  int64_t global_step() const;
  // When it was captured (seconds since the Unix epoch, on the Saver's clock): the checkpoint's
  // time stamp.
  double wall_time() const;
  // Host memory it holds: the variables' and optimizer states' bytes.
  size_t bytes() const;

 private:
  friend class Saver;
  friend class CheckpointManager;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class Saver {
 public:
  // InvalidArgument naming the option for a bad keep_checkpoint_every_n_hours.
  explicit Saver(Graph& graph, SaverOptions options = {});
  ~Saver();
  Saver(const Saver&) = delete;
  Saver& operator=(const Saver&) = delete;

  // ---- One checkpoint --------------------------------------------------------------------------
  // Writes the checkpoint at exactly `path` (the two files at once, on this thread and a second
  // one) and returns `path`. No state file is written and nothing is deleted. InvalidArgument for
  // an empty or directory-like path, the name `checkpoint` (the state file's), or a session on
  // another graph; NotFoundError when the directory does not exist; write errors (a full disk:
  // ResourceExhaustedError) name the file.
  std::string write(Session& session, const std::string& path);

  // write() in two halves, for saving while training goes on: snapshot() copies the variables,
  // optimizer states and the rest into host memory on the thread that runs the session (with
  // write()'s argument checks; the copy is all it costs that thread), and write(snapshot) encodes
  // and writes that copy, on any thread, with write()'s guarantees and errors, and returns its
  // path. Optimizers whose state is not one of LibTorch's built-in optimizers' are serialised by
  // snapshot() itself. A restore must not run during a write.
  SaverSnapshot snapshot(Session& session, const std::string& path);
  // Static: a snapshot carries all it needs. A snapshot of the compatibility form below is also
  // listed in its directory's state file, as save() does.
  static std::string write(SaverSnapshot snapshot);

  // Logs `Restoring parameters from PATH`. NotFoundError naming a missing file (or a directory
  // or other non-file in its place), DataLossError naming a corrupt or truncated one,
  // FailedPreconditionError for a newer format; NotFoundError or InvalidArgument naming a
  // variable that is missing from the checkpoint or has another shape or dtype, or an optimizer
  // state that does not fit. On any error nothing has changed. Extra variables in the file are
  // ignored; state in the file for inputs, train ops and StateProvider keys the graph does not
  // have is ignored with a warning, and those the file lacks are left as they are (with a warning
  // for inputs and train ops).
  void restore(Session& session, const std::string& path);

  // True when both files of the checkpoint at `path` exist.
  static bool checkpoint_exists(const std::string& path);

  // ---- TensorFlow 1 compatibility (tf.compat.v1.train.Saver) ----------------------------------
  // Writes `<prefix>-<global_step>` (`<prefix>` without a step), lists it in the state file of the
  // prefix's directory, deletes checkpoints beyond max_to_keep (CheckpointManager::write) and
  // returns the path. write()'s errors, naming save_path_prefix; InvalidArgument for a negative
  // step or a prefix that would overwrite the state file.
  std::string save(Session& session, const std::string& save_path_prefix,
                   std::optional<int64_t> global_step = std::nullopt);
  // save() in two halves: the snapshot of `<prefix>-<global_step>` is listed when written.
  SaverSnapshot snapshot(Session& session, const std::string& save_path_prefix,
                         std::optional<int64_t> global_step);

  // CheckpointManager::restore_latest of `checkpoint_dir`; retention of later saves into that
  // directory continues with what its state file lists.
  std::optional<std::string> restore_latest(Session& session, const std::string& checkpoint_dir);

  // CheckpointManager::latest of `checkpoint_dir`.
  static std::optional<std::string> latest_checkpoint(const std::string& checkpoint_dir,
                                                      const Env& env = Env::system());

  // CheckpointManager::checkpoints of `checkpoint_dir` (TensorFlow's last_checkpoints).
  std::vector<std::string> last_checkpoints(const std::string& checkpoint_dir) const;

  Graph& graph() const { return *graph_; }
  const SaverOptions& options() const { return options_; }

 private:
  friend class CheckpointManager;  // saves without a copy, restores with a fallback
  // InvalidArgument or NotFoundError (named `arg` in messages of `what`) unless `given` can be a
  // checkpoint's path: a file name in an existing directory, not the state file's.
  // `prefix_of_step`: `given` gets `-<step>` appended, so it cannot be the state file's name.
  static void check_save_path(const char* what, const char* arg, const std::string& given,
                              bool prefix_of_step);
  // Checks that `session` runs this Saver's graph (`what` names the caller).
  void check_session(const Session& session, const char* what) const;
  // Captures the state of the session's graph for `path`; copies the tensors when `copy`.
  SaverSnapshot capture(Session& session, const std::string& path, bool copy) const;
  // restore() in two halves, for CheckpointManager::restore_latest, which falls back to an
  // earlier checkpoint when read() fails and not when apply() does: read() checks that both
  // files exist, logs `Restoring parameters from PATH` and decodes them; apply() checks the
  // contents against the graph and applies them.
  TrainingSnapshot read(const std::string& path, const Env& env) const;
  void apply(const TrainingSnapshot& snapshot, const std::string& path, const Env& env) const;
  // The path of `<prefix>-<step>` for the compatibility API, checked.
  std::string compat_path(Session& session, const std::string& save_path_prefix,
                          std::optional<int64_t> global_step) const;
  // The manager of `dir` for the compatibility API, made on first use.
  std::shared_ptr<CheckpointManager> manager_for(const std::string& dir) const;
  Env env_for(const Session& session) const;

  Graph* graph_;
  SaverOptions options_;
  std::shared_ptr<Clock> clock_;
  double created_at_;
  mutable std::mutex mu_;                                                       // guards managers_
  mutable std::map<std::string, std::shared_ptr<CheckpointManager>> managers_;  // by normal dir
};

// Restore functions for a chief's session creator (SessionCreatorOptions::restore): the newest
// usable checkpoint of `checkpoint_dir` (nothing when none is listed; see restore_latest), or
// exactly the checkpoint at `path`. With a CheckpointManager: checkpoint_manager.h.
std::function<void(Session&)> restore_latest_checkpoint(std::shared_ptr<Saver> saver,
                                                        std::string checkpoint_dir);
std::function<void(Session&)> restore_checkpoint(std::shared_ptr<Saver> saver, std::string path);

}  // namespace trainhooks
