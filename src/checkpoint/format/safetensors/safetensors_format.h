// The "safetensors" checkpoint format: Hugging Face's weights file (safetensors_file.h), one file
// of the variables, with the global step in its metadata. It holds no training state: snapshots
// it reads are variables_only, and what a snapshot has besides variables is not written.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "trainhooks/checkpoint/checkpoint_format.h"

namespace trainhooks::internal {

class SafetensorsFormat final : public CheckpointFormat {
 public:
  std::string name() const override { return "safetensors"; }
  bool holds_training_state() const override { return false; }
  std::vector<std::string> files(const std::string& path) const override { return {path}; }
  // Files named `*.safetensors`.
  std::string checkpoint_of(const std::string& file) const override;
  void write(TrainingSnapshot& snapshot, const std::string& path, bool parallel) const override;
  TrainingSnapshot read(const std::string& path) const override;
  std::string to_bytes(const TrainingSnapshot& snapshot) const override;
  TrainingSnapshot from_bytes(std::string_view bytes, const std::string& source) const override;
};

}  // namespace trainhooks::internal
