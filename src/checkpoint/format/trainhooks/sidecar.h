// The training-state file of a checkpoint, `<checkpoint>.trainstate` (docs/formats.md): a 28-byte
// header, then a payload that is a LibTorch pickle (torch.load-able) of a dict holding everything
// of a TrainingSnapshot but the variables' values, and the size and CRC32C of the variables file.
//   0  8  magic "TRNSTATE"
//   8  4  format version (u32, little-endian)
//  12  8  payload length (u64)
//  20  4  masked CRC32C of the payload
//  24  4  masked CRC32C of bytes 0..23
// The pickle is a zip archive, some of whose bytes (alignment padding, time stamps) no checksum of
// its own covers; the framing makes every flipped or missing byte of the file detectable.
#pragma once

#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/format/trainhooks/file_bytes.h"
#include "trainhooks/training_state.h"

namespace trainhooks::internal {

inline constexpr const char* kSidecarSuffix = ".trainstate";
// 2: the built-in optimizers' state as tensors (optimizer_state.h); 1: archives only.
inline constexpr uint32_t kCheckpointFormatVersion = 2;
inline constexpr size_t kSidecarHeaderSize = 28;

inline std::string sidecar_path(const std::string& path) { return path + kSidecarSuffix; }

// The variables file as the training-state file records it.
struct VariablesRecord {
  int64_t size = 0;
  uint32_t crc32c = 0;
};

// The payload of `c`: everything but the variables' values, with a variables entry naming
// `variables_file` whose size and CRC32C are set later (set_variables_record), once that file is
// written. From a snapshot that may change, the optimizer archives are moved out of `c` (no copy);
// from a const one, copied.
//
// LibTorch's pickler memoizes a dict that something else also refers to, which changes the bytes:
// the payload holds its sections (variables, optimizers, rng, inputs, state) for as long as it is
// pickled, as the files of format 2 have always been written.
struct SidecarPayload {
  c10::impl::GenericDict dict;
  std::vector<c10::IValue> sections;
};
SidecarPayload sidecar_payload(TrainingSnapshot& c, const std::string& variables_file);
SidecarPayload sidecar_payload(const TrainingSnapshot& c, const std::string& variables_file);
void set_variables_record(c10::impl::GenericDict& payload, uint64_t size, uint32_t crc32c);

// The header of a payload of `length` bytes whose masked CRC32C is that of `payload_crc32c`.
std::string sidecar_header(uint64_t length, uint32_t payload_crc32c);

// Checks the header of the training-state file `side` (read with read_file(path, header size,
// header size), so `payload_crc32c` is its payload's) and returns the format version.
// DataLossError naming `path` for a truncated or corrupt file, FailedPreconditionError for a newer
// version.
uint32_t check_sidecar_framing(const FileBytes& side, uint32_t payload_crc32c,
                               const std::string& path);

// Decodes an unpickled payload (of a file of `version`) into `out`, all but the variables, and
// returns its record of the variables file. DataLossError naming `file` for anything missing or
// mistyped.
VariablesRecord decode_sidecar_payload(const c10::IValue& payload, uint32_t version,
                                       const std::string& file, TrainingSnapshot& out);

}  // namespace trainhooks::internal
