// Reading the zip container of torch.save and torch::pickle_save, for files nobody vouches for:
// every offset and length is checked before it is used, and the tensors point into the file's
// bytes instead of being copied.
#pragma once

#include <ATen/core/ivalue.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/format/trainhooks/file_bytes.h"

namespace trainhooks::internal {

// A record of a torch zip archive: its name and where its bytes are in the archive.
struct ZipRecord {
  std::string name;
  uint64_t offset = 0;
  uint64_t size = 0;
};

// The records of the zip archive `data`, from its central directory (ZIP64 fields included),
// each stored uncompressed within the archive's bytes; DataLossError saying what is wrong if not.
std::vector<ZipRecord> zip_records(const char* data, size_t size);

// What torch::pickle_load returns for the archive at bytes [offset, offset + size) of `file`,
// with every storage as long as the record it was read from (LibTorch takes the length that the
// pickle states), and a length or memo index in the pickle beyond its bytes refused before
// LibTorch allocates for it. The storages point into `file` where their records are aligned for
// any dtype (else they are copies): the tensors are not copied. A storage that the pickle names
// and the archive lacks, or a record that is compressed or reaches past the archive, is
// DataLossError. Throws what LibTorch throws, or DataLossError.
c10::IValue unpickle(const std::shared_ptr<const FileBytes>& file, size_t offset, size_t size);

// The same for bytes that the caller keeps: they are copied once.
c10::IValue unpickle(const char* data, size_t size);

// LibTorch's unpickler takes a tensor's sizes, strides and storage offset from the pickle without
// checking them against its storage: DataLossError naming `file` for any tensor in `value` (from
// unpickle()) that reaches past its storage, which would otherwise be read out of bounds.
void check_tensor_extents(const c10::IValue& value, const std::string& file);

}  // namespace trainhooks::internal
