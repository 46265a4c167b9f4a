// CheckpointReader: what one checkpoint holds, read without a graph (TensorFlow's
// tf.train.load_checkpoint / NewCheckpointReader), for tools, tests and warm starts.
//
// The constructor reads both files of the checkpoint at `path` (`<path>` and
// `<path>.trainstate`, docs/formats.md "Checkpoints") and verifies every byte: sizes, CRC32Cs,
// both pickles and the fields of the training state. It then holds everything in host memory,
// so the accessors do no I/O. Errors, each naming the file: NotFoundError (a missing file),
// DataLossError (a corrupt or truncated one), FailedPreconditionError (a newer format),
// FileError (I/O).
//
//   th::CheckpointReader reader("runs/exp1/model.ckpt-1200");
//   for (const auto& [name, shape] : reader.variable_to_shape_map()) ...
//   at::Tensor w = reader.get_tensor("net/weight");
//
// load_checkpoint(dir_or_path) also accepts a checkpoint directory (its latest checkpoint);
// list_checkpoints(dir) describes the checkpoints that a directory's state file lists.
// A reader is immutable after construction: const methods may run concurrently.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "trainhooks/input.h"

namespace trainhooks {

namespace internal {
struct CheckpointContents;
}

// The optimizer state a checkpoint holds for one train op.
struct CheckpointOptimizerInfo {
  std::string train_op;
  // Per parameter group; empty for an optimizer without a learning rate.
  std::vector<double> learning_rates;
  // "sgd", "adam", "adamw", "rmsprop" or "adagrad": LibTorch's built-in optimizers, whose state
  // the checkpoint holds as tensors; empty for other optimizers, held as the archive of
  // Optimizer::save.
  std::string type;
  // The bytes of its state: its tensors', or its archive's.
  uint64_t state_bytes = 0;
};

class CheckpointReader {
 public:
  explicit CheckpointReader(const std::string& path);
  ~CheckpointReader();
  CheckpointReader(CheckpointReader&&) noexcept;
  CheckpointReader& operator=(CheckpointReader&&) noexcept;

  // The checkpoint path as given, which is also the variables file; and the training-state file.
  const std::string& path() const;
  std::string trainstate_path() const;

  int64_t global_step() const;
  // Seconds since the Unix epoch when the checkpoint was captured (the Saver's clock).
  double wall_time() const;

  // Variable names in the order of the file (the graph's order when it was saved).
  std::vector<std::string> variable_names() const;
  bool has_tensor(const std::string& name) const;
  // The saved value, a CPU tensor that shares storage with the reader. NotFoundError naming the
  // variable and the checkpoint when it has no such variable.
  at::Tensor get_tensor(const std::string& name) const;
  std::map<std::string, std::vector<int64_t>> variable_to_shape_map() const;
  std::map<std::string, at::ScalarType> variable_to_dtype_map() const;

  // One entry per train op, by name.
  std::vector<CheckpointOptimizerInfo> optimizers() const;
  // The bytes that Optimizer::load reads (through torch::serialize::InputArchive::load_from):
  // the saved archive, or one made from the state tensors. NotFoundError naming the train op when
  // the checkpoint has no state for it.
  std::string optimizer_archive(const std::string& train_op) const;
  // The state tensors of a built-in optimizer by "<parameter index>/<name>" ("0/exp_avg"),
  // numbering the parameters across groups as PyTorch's state_dict does; empty for an archive.
  // NotFoundError as optimizer_archive().
  std::vector<std::pair<std::string, at::Tensor>> optimizer_tensors(
      const std::string& train_op) const;

  // Per input, by the name of its first component node.
  std::map<std::string, InputPosition> input_positions() const;
  // Keys of the StateProviders saved, sorted; and the bytes one's save_state() returned
  // (NotFoundError naming the key when absent).
  std::vector<std::string> state_keys() const;
  const std::string& state(const std::string& key) const;
  // The default CPU generator's state (torch.get_rng_state()), when saved.
  std::optional<at::Tensor> cpu_rng_state() const;

  // File sizes in bytes.
  uint64_t variables_file_bytes() const;
  uint64_t trainstate_file_bytes() const;
  uint64_t total_bytes() const { return variables_file_bytes() + trainstate_file_bytes(); }

 private:
  std::unique_ptr<internal::CheckpointContents> contents_;
};

// TensorFlow's tf.train.load_checkpoint: a reader of the checkpoint at `dir_or_path`, or, for a
// directory, of the latest checkpoint its state file lists (NotFoundError when it has none).
// A checkpoint may also be named by its training-state file (`model.ckpt-200.trainstate`).
CheckpointReader load_checkpoint(const std::string& dir_or_path);

// The checkpoint that `dir_or_path` names: a directory's latest checkpoint, else the checkpoint
// itself (`X` for `X.trainstate`). Reads no checkpoint file. NotFoundError when neither the
// path nor its training-state file exists, or a directory has no state file (naming the
// checkpoints it holds, if any); InvalidArgument saying that a file without a training-state
// file beside it is not a checkpoint.
std::string resolve_checkpoint(const std::string& dir_or_path);

// One checkpoint listed in a directory's state file (checkpoint_state.h).
struct ListedCheckpoint {
  std::string path;  // relative paths joined with the directory, as get_checkpoint_state does
  // The `-N` suffix of the path (CheckpointManager::step_of); else the training state's global step
  // when that file can be read; else none.
  std::optional<int64_t> step;
  // When it was written: the state file's time stamp, else the variables file's modification
  // time, else none.
  std::optional<double> timestamp;
  bool variables_file_exists = false;
  bool trainstate_file_exists = false;
  uint64_t bytes = 0;   // the total size of those of its two files that exist
  bool latest = false;  // the state file's model_checkpoint_path

  bool exists() const { return variables_file_exists && trainstate_file_exists; }
};

// The checkpoints listed in `<checkpoint_dir>/checkpoint`, oldest first (the latest last).
// Only listed ones: a checkpoint kept on disk by keep_checkpoint_every_n_hours is no longer
// listed. Files are checked for existence and size, not read (but for the step of a path
// without a `-N` suffix). NotFoundError when the directory or its state file does not exist,
// InvalidArgument when `checkpoint_dir` is not a directory, DataLossError naming the state file
// when it cannot be parsed.
std::vector<ListedCheckpoint> list_checkpoints(const std::string& checkpoint_dir);

}  // namespace trainhooks
