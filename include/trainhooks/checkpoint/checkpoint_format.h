// CheckpointFormat: how a TrainingSnapshot (training_state.h) becomes files and bytes, and back.
// The Saver, CheckpointManager, CheckpointReader and the `trainhooks checkpoint` command reach
// files only through a format; none of them knows a format's layout.
//
// Two formats come with trainhooks:
//   "trainhooks"   the default: every checkpoint (docs/formats.md "Checkpoints"). Two files,
//                  `<path>` (the variables, a torch.load-able dict name -> tensor) and
//                  `<path>.trainstate` (everything else, checksummed); the whole training state.
//   "safetensors"  Hugging Face's weights format: one file of the variables (little-endian, a
//                  JSON header) with the global step in its metadata; variables only. For
//                  export_checkpoint() and import_variables().
//
// A new format is one class and one line in src/checkpoint/checkpoint_format.cpp's list (the
// safetensors folder, src/checkpoint/format/safetensors/, shows one); docs/architecture.md says
// more.
//
//   th::export_checkpoint("runs/exp1/model.ckpt-900", "model.safetensors", "safetensors");
//   th::import_variables(sess, "model.safetensors");     // into another program's graph
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "trainhooks/env.h"
#include "trainhooks/training_state.h"

namespace trainhooks {

class Session;

class CheckpointFormat {
 public:
  virtual ~CheckpointFormat() = default;

  // The name it is registered under ("trainhooks", "safetensors").
  virtual std::string name() const = 0;
  // Whether it keeps the whole training state (optimizers, RNG, inputs, hook state), or only the
  // variables and the global step (snapshots it reads are variables_only).
  virtual bool holds_training_state() const = 0;

  // The files of the checkpoint at `path`, the one named `path` first.
  virtual std::vector<std::string> files(const std::string& path) const = 0;
  // The checkpoint that the file `file` belongs to: `path` for any of files(path), or "" when it
  // is none of this format's files. The default format takes any file but its training-state
  // file for a checkpoint's own (`model.ckpt-3.trainstate` -> `model.ckpt-3`, `x` -> `x`).
  virtual std::string checkpoint_of(const std::string& file) const = 0;

  // Writes the checkpoint at `path`, each file crash-safe (temporary file, fsync, rename, fsync of
  // the directory), so that a crash leaves the old checkpoint or the new one. May move tensors
  // and archives out of `snapshot`. `parallel`: it may write its files on this thread and another
  // at once. Errors name the file: NotFoundError (no directory), ResourceExhaustedError (a full
  // disk), FileError.
  virtual void write(TrainingSnapshot& snapshot, const std::string& path,
                     bool parallel = false) const = 0;
  // Reads and verifies the checkpoint at `path`. NotFoundError naming a missing file,
  // DataLossError naming a corrupt or truncated one, FailedPreconditionError for a newer version
  // of the format, FileError for other I/O errors.
  virtual TrainingSnapshot read(const std::string& path) const = 0;

  // The same contents as one buffer (a broadcast, a message) and back; from_bytes() names
  // `source` in its errors (DataLossError).
  virtual std::string to_bytes(const TrainingSnapshot& snapshot) const = 0;
  virtual TrainingSnapshot from_bytes(std::string_view bytes, const std::string& source) const = 0;
};

// The format of every checkpoint the Saver and CheckpointManager write: "trainhooks".
const CheckpointFormat& default_checkpoint_format();
// The format registered as `name`; NotFoundError listing the registered ones.
const CheckpointFormat& checkpoint_format(std::string_view name);
// The names of the registered formats, the default first.
std::vector<std::string> checkpoint_format_names();
// The format whose file `path` is, by its name (".safetensors") or else the default.
const CheckpointFormat& checkpoint_format_of(const std::string& path);

// Reads the checkpoint `checkpoint` (default format) and writes its variables and global step at
// `path` in the format `format`, crash-safe. The reader's and the format's errors, naming the file.
void export_checkpoint(const std::string& checkpoint, const std::string& path,
                       std::string_view format);

// Restores the variables (and the global step, when the file has one) of `session`'s graph from
// the file `path` of the format `format` ("" : by the file's name, checkpoint_format_of()).
// Logs `Restoring parameters from PATH`. Every variable of the graph must be in the file with
// its shape and dtype (NotFoundError / InvalidArgument naming it); extra ones in the file are
// ignored. All or nothing. The rest of the training state is left as it is.
void import_variables(Session& session, const std::string& path, std::string_view format = "");

}  // namespace trainhooks
