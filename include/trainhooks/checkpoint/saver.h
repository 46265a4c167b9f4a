// Saver: writes and restores full training checkpoints of a Graph, with TensorFlow's naming,
// state file and retention (tf.compat.v1.train.Saver).
//
// save(session, "ckpt/model.ckpt", 200) writes two files and returns "ckpt/model.ckpt-200":
//   ckpt/model.ckpt-200             every variable, as a dict name -> tensor that Python reads
//                                   with torch.load(path) (LibTorch's pickle format)
//   ckpt/model.ckpt-200.trainstate  the rest of the training state (optimizer state of every
//                                   train op, global step, CPU RNG state, input positions,
//                                   registered StateProviders) and the size and CRC32C of the
//                                   variables file; see docs/formats.md "Checkpoints"
// Each file is replaced atomically (temporary file, fsync, rename, fsync of the directory), then
// the state file ckpt/checkpoint (checkpoint_state.h) lists the new checkpoint, and only then are
// checkpoints beyond max_to_keep deleted, oldest first, unless the keep_checkpoint_every_n_hours
// rule keeps them. A kill at any moment leaves every listed checkpoint complete.
//
// restore(session, path) reads and verifies both files (sizes and CRC32Cs), checks them against
// the graph and only then changes anything: it either restores everything or nothing.
//
//   th::Saver saver(g, {.max_to_keep = 3});
//   std::string path = saver.save(sess, "ckpt/model.ckpt", g.global_step_value());
//   ...
//   if (!saver.restore_latest(sess, "ckpt")) g.initialize();   // nothing saved yet
//
// The Saver remembers, per directory, the checkpoints it listed (TensorFlow's last_checkpoints);
// its first save into a directory, or restore_latest(), reads that directory's state file so that
// retention continues across restarts. One save or restore at a time, on the thread that runs
// the session; only write() (below) may run on another thread.
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

namespace trainhooks {

class Graph;
class Session;

struct SaverOptions {
  // Checkpoints kept (and listed in the state file), newest ones; <= 0 keeps all of them.
  int max_to_keep = 5;
  // A checkpoint dropped by max_to_keep is kept on disk (no longer listed) when it was written
  // more than this many hours after the previous one kept this way (the first: after the Saver
  // was created). Positive.
  double keep_checkpoint_every_n_hours = 10000;
  // Write the state file's paths relative to its directory (a directory that can be moved).
  // false, TensorFlow's default: as given, and relative when the save path itself is relative.
  bool save_relative_paths = false;
  // clock: checkpoint time stamps and the hours rule (wall time), read from construction on;
  // null: the system clock. log: `Restoring parameters from ...` and warnings; null: the
  // session's log sink, then stderr.
  Env env;
};

// A checkpoint captured in host memory by Saver::snapshot(), written by Saver::write(). Movable;
// holds copies, so training may go on while it is written.
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
  // Host memory it holds: the variables' and optimizer states' bytes.
  size_t bytes() const;

 private:
  friend class Saver;
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

  // Writes `<prefix>-<global_step>` (`<prefix>` without a step) and returns that path.
  // InvalidArgument for an empty or directory-like prefix, a negative step, a prefix that would
  // overwrite the state file, or a session on another graph; NotFoundError when the directory
  // does not exist; write errors (a full disk: ResourceExhaustedError) name the file. The two
  // files of the checkpoint are written at once, on this thread and a second one.
  std::string save(Session& session, const std::string& save_path_prefix,
                   std::optional<int64_t> global_step = std::nullopt);

  // save() in two halves, for saving while training goes on (CheckpointSaverHookOptions::
  // async_save): snapshot() copies the variables, optimizer states and the rest into host memory
  // on the thread that runs the session (with save()'s argument checks; the copy is all it costs
  // that thread), and write() encodes and writes that copy, on any thread, with save()'s
  // guarantees and write errors, and returns its path. write() calls are serialised; a restore
  // must not run during a write. Optimizers whose state is not one of LibTorch's built-in
  // optimizers' are serialised by snapshot() itself.
  SaverSnapshot snapshot(Session& session, const std::string& save_path_prefix,
                         std::optional<int64_t> global_step = std::nullopt);
  std::string write(SaverSnapshot snapshot);

  // Logs `Restoring parameters from PATH`. NotFoundError naming a missing file, DataLossError
  // naming a corrupt or truncated one, FailedPreconditionError for a newer format;
  // NotFoundError or InvalidArgument naming a variable that is missing from the checkpoint or
  // has another shape or dtype, or an optimizer state that does not fit. On any error nothing
  // has changed. Extra variables in the file are ignored; state in the file for inputs,
  // train ops and StateProvider keys the graph does not have is ignored with a warning, and
  // those the file lacks are left as they are (with a warning for inputs and train ops).
  void restore(Session& session, const std::string& path);

  // Restores the newest checkpoint listed in `<checkpoint_dir>/checkpoint` and returns its path.
  // A listed checkpoint that is missing, corrupt or truncated is skipped with a warning naming
  // it, and the previous one is tried. nullopt when no state file exists; DataLossError when
  // checkpoints are listed but none can be restored, or the state file cannot be parsed (never
  // a silent fresh start). Errors that are not about the files (a graph mismatch) propagate.
  std::optional<std::string> restore_latest(Session& session, const std::string& checkpoint_dir);

  // TensorFlow's latest_checkpoint: the newest listed checkpoint if its files exist, else
  // nullopt (logging an error when the state file names a missing checkpoint, a warning when it
  // cannot be parsed).
  static std::optional<std::string> latest_checkpoint(const std::string& checkpoint_dir,
                                                      const Env& env = Env::system());

  // True when both files of the checkpoint at `path` exist.
  static bool checkpoint_exists(const std::string& path);

  // The checkpoints this Saver lists in `checkpoint_dir`'s state file, oldest first
  // (TensorFlow's last_checkpoints); empty before its first save there or restore_latest().
  std::vector<std::string> last_checkpoints(const std::string& checkpoint_dir) const;

  Graph& graph() const { return *graph_; }
  const SaverOptions& options() const { return options_; }

 private:
  struct Listed {
    std::string path;
    double timestamp;
  };
  struct DirState {
    std::vector<Listed> checkpoints;  // oldest first
    double last_preserved_timestamp = 0;
  };
  SaverSnapshot capture(Session& session, const std::string& save_path_prefix,
                        std::optional<int64_t> global_step, bool copy);
  DirState& dir_state(const std::string& dir, const Env& env);
  void recover(DirState& state, const std::string& dir, const Env& env);
  Env env_for(const Session& session) const;

  Graph* graph_;
  SaverOptions options_;
  std::shared_ptr<Clock> clock_;
  double next_keep_time_;
  std::map<std::string, DirState> dirs_;  // by absolute, normal directory; guarded by mu_
  mutable std::mutex mu_;
  std::mutex write_mu_;  // one write() at a time
};

// Restore functions for a chief's session creator (SessionCreatorOptions::restore): the newest
// usable checkpoint of `checkpoint_dir` (nothing when none is listed; see restore_latest), or
// exactly the checkpoint at `path`.
std::function<void(Session&)> restore_latest_checkpoint(std::shared_ptr<Saver> saver, std::string checkpoint_dir);
std::function<void(Session&)> restore_checkpoint(std::shared_ptr<Saver> saver, std::string path);

}  // namespace trainhooks
