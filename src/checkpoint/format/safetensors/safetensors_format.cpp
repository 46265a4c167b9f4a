#include "checkpoint/format/safetensors/safetensors_format.h"

#include <fmt/format.h>

#include <charconv>
#include <map>
#include <utility>

#include "checkpoint/format/safetensors/safetensors_file.h"
#include "trainhooks/errors.h"

namespace trainhooks::internal {

namespace {

// The metadata key of the global step (safetensors metadata maps strings to strings).
constexpr const char* kGlobalStep = "global_step";

std::map<std::string, std::string> metadata_of(const TrainingSnapshot& s) {
  return {{"format", "pt"}, {kGlobalStep, std::to_string(s.global_step)}};
}

TrainingSnapshot snapshot_of(SafetensorsFile file, const std::string& source) {
  TrainingSnapshot s;
  s.variables = std::move(file.tensors);
  s.variables_only = true;
  if (auto it = file.metadata.find(kGlobalStep); it != file.metadata.end()) {
    const std::string& v = it->second;
    int64_t step = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), step);
    if (ec != std::errc() || end != v.data() + v.size() || step < 0) {
      throw DataLossError(fmt::format(
          "Checkpoint file '{}' is corrupt: its metadata's global_step '{}' is not a step", source,
          v));
    }
    s.global_step = step;
  }
  return s;
}

}  // namespace

std::string SafetensorsFormat::checkpoint_of(const std::string& file) const {
  return std::string_view(file).ends_with(".safetensors") ? file : std::string();
}

void SafetensorsFormat::write(TrainingSnapshot& snapshot, const std::string& path,
                              bool /*parallel*/) const {
  write_safetensors(path, snapshot.variables, metadata_of(snapshot));
}

TrainingSnapshot SafetensorsFormat::read(const std::string& path) const {
  return snapshot_of(read_safetensors(path), path);
}

std::string SafetensorsFormat::to_bytes(const TrainingSnapshot& snapshot) const {
  return safetensors_bytes(snapshot.variables, metadata_of(snapshot));
}

TrainingSnapshot SafetensorsFormat::from_bytes(std::string_view bytes,
                                               const std::string& source) const {
  return snapshot_of(parse_safetensors(bytes.data(), bytes.size(), source), source);
}

}  // namespace trainhooks::internal
