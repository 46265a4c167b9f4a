// Saver: writes and reads one training checkpoint of a Graph at a path it is given (TF2's
// tf.train.Checkpoint write/read). It keeps no record of what it wrote: naming checkpoints by
// step, the `checkpoint` state file, retention and "the latest checkpoint" belong to
// CheckpointManager (checkpoint_manager.h), which calls the Saver; TensorFlow 1's Saver API
// (save with a step, restore_latest, latest_checkpoint) is compat::v1::Saver (tf1_saver.h), a
// client of CheckpointManager.
//
// write(session, "ckpt/model.ckpt-200") writes the checkpoint in the default format
// (checkpoint_format.h), two files, and returns the path:
//   ckpt/model.ckpt-200             every variable, as a dict name -> tensor that Python reads
//                                   with torch.load(path) (LibTorch's pickle format)
//   ckpt/model.ckpt-200.trainstate  the rest of the training state (optimizer state of every
//                                   train op, global step, CPU RNG state, input positions,
//                                   registered StateProviders) and the size and CRC32C of the
//                                   variables file; see docs/formats.md "Checkpoints"
// Each file is replaced atomically (temporary file, fsync, rename, fsync of the directory).
//
// restore(session, path) reads and verifies both files (sizes and CRC32Cs), checks them against
// the graph and only then changes anything: it either restores everything or nothing.
//
//   th::Saver saver(g);
//   saver.write(sess, "export/model.ckpt");              // one checkpoint, nothing else
//   th::Saver(other_graph).restore(other_sess, "export/model.ckpt");
//
// One save or restore at a time, on the thread that runs the session; write(snapshot) may run on
// another thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "trainhooks/env.h"

namespace trainhooks {

class Graph;
class Session;
struct TrainingSnapshot;

struct SaverOptions {
  // clock: the checkpoint's time stamp; null: the system clock. log: `Restoring parameters from
  // ...` and warnings; null: the session's log sink, then stderr.
  Env env;
};

// A checkpoint captured in host memory by Saver::snapshot() (or CheckpointManager::snapshot(),
// compat::v1::Saver::snapshot()), written by Saver::write() (or the same class's write(), which
// also lists it). Movable; a copying snapshot (the default) holds copies, so training may go on
// while it is written.
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
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class Saver {
 public:
  explicit Saver(Graph& graph, SaverOptions options = {});
  ~Saver();
  Saver(const Saver&) = delete;
  Saver& operator=(const Saver&) = delete;

  // ---- Writing ---------------------------------------------------------------------------------
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
  // `copy` false: the snapshot shares the variables' and optimizer states' tensors instead of
  // copying them, so it must be written before the session runs again (write(session, path) is
  // exactly that, and writes its two files at once).
  SaverSnapshot snapshot(Session& session, const std::string& path, bool copy = true);
  // Static: a snapshot carries all it needs.
  static std::string write(SaverSnapshot snapshot);

  // ---- Reading ---------------------------------------------------------------------------------
  // read() then apply(). Logs `Restoring parameters from PATH`. NotFoundError naming a missing
  // file (or a directory or other non-file in its place), DataLossError naming a corrupt or
  // truncated one, FailedPreconditionError for a newer format; NotFoundError or InvalidArgument
  // naming a variable that is missing from the checkpoint or has another shape or dtype, or an
  // optimizer state that does not fit. On any error nothing has changed. Extra variables in the
  // file are ignored; state in the file for inputs, train ops and StateProvider keys the graph
  // does not have is ignored with a warning, and those the file lacks are left as they are (with
  // a warning for inputs and train ops).
  void restore(Session& session, const std::string& path);
  // restore() in two halves: read() checks that the checkpoint's files exist, logs `Restoring
  // parameters from PATH` and decodes them (the file errors above; CheckpointManager falls back
  // to an earlier checkpoint on those); apply() checks the contents against the session's graph
  // and applies them, all or nothing (the graph errors above; `path` names the source in them).
  TrainingSnapshot read(Session& session, const std::string& path) const;
  void apply(Session& session, const TrainingSnapshot& snapshot, const std::string& path) const;

  // True when both files of the checkpoint at `path` exist.
  static bool checkpoint_exists(const std::string& path);

  Graph& graph() const { return *graph_; }
  const SaverOptions& options() const { return options_; }

 private:
  // Checks that `session` runs this Saver's graph (`what` names the caller).
  void check_session(const Session& session, const char* what) const;
  // The state of the graph for `path`; copies the tensors when `copy`.
  SaverSnapshot capture(const std::string& path, bool copy) const;
  Env env_for(const Session& session) const;

  Graph* graph_;
  SaverOptions options_;
  std::shared_ptr<Clock> clock_;
};

// The restore function of a chief's session creator (SessionCreatorOptions::restore) that
// restores exactly the checkpoint at `path`. The newest of a directory:
// restore_latest_checkpoint(manager) (checkpoint_manager.h).
std::function<void(Session&)> restore_checkpoint(std::shared_ptr<Saver> saver, std::string path);

}  // namespace trainhooks
