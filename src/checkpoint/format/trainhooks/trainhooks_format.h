// The default checkpoint format, "trainhooks" (docs/formats.md "Checkpoints"): two files,
//   <path>             the variables, a LibTorch pickle of a dict name -> tensor (torch.load-able)
//   <path>.trainstate  the rest of the training state and the size and CRC32C of the variables
//                      file (sidecar.h)
// Only this folder knows that layout; everything else asks the format (checkpoint_format.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "trainhooks/checkpoint/checkpoint_format.h"
#include "trainhooks/training_state.h"

namespace trainhooks::internal {

// A snapshot as read from (or written to) the files, with where they are and how big.
struct CheckpointContents : TrainingSnapshot {
  std::string path;
  uint64_t variables_bytes = 0;
  uint64_t sidecar_bytes = 0;
};
using OptimizerState = OptimizerSnapshot;

// Writes both files of `contents` at contents.path, each crash-safe (util/atomic_file.h), the
// variables file first: the sidecar records its size and CRC32C. Streams the tensors from their
// memory to the files; moves the optimizer archives out of `contents` and sets the two sizes.
// Errors name the file (the variables file is removed again when its sidecar cannot be written).
// `parallel`: the two files are written at once, on this thread and another.
void write_checkpoint_files(CheckpointContents& contents, bool parallel = false);

// Reads and verifies both files of the checkpoint at `path`. Throws NotFoundError, DataLossError
// (corrupt or truncated: the fallback-worthy cases), FailedPreconditionError (a newer format) or
// FileError (I/O), each naming the file.
CheckpointContents decode_checkpoint(const std::string& path);

class TrainhooksFormat final : public CheckpointFormat {
 public:
  std::string name() const override { return "trainhooks"; }
  bool holds_training_state() const override { return true; }
  std::vector<std::string> files(const std::string& path) const override;
  std::string checkpoint_of(const std::string& file) const override;
  void write(TrainingSnapshot& snapshot, const std::string& path, bool parallel) const override;
  TrainingSnapshot read(const std::string& path) const override;
  std::string to_bytes(const TrainingSnapshot& snapshot) const override;
  TrainingSnapshot from_bytes(std::string_view bytes, const std::string& source) const override;
};

}  // namespace trainhooks::internal
