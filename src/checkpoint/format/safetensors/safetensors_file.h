// Hugging Face safetensors files (github.com/huggingface/safetensors, README "Format"):
//   8 bytes  N, the length of the header (u64, little-endian)
//   N bytes  the header, a JSON object: per tensor name
//            {"dtype":"F32","shape":[2,3],"data_offsets":[BEGIN,END]}, offsets into the data
//            buffer; under the key "__metadata__" an optional object of strings
//   the rest the data buffer: each tensor's elements row-major and little-endian, back to back,
//            every byte belonging to exactly one tensor
//
// The writer produces the bytes of the reference serializer (safetensors/src/tensor.rs, which
// safetensors.torch.save_file calls): tensors ordered by the reference's Dtype enum descending
// (8-byte types first, so every tensor starts aligned for its type) and then by name, compact JSON
// with "__metadata__" first (its keys in std::map order: the reference takes whatever order its
// HashMap yields), and the header padded with spaces to a multiple of 8 bytes. Empty metadata is
// left out, as save_file(metadata=None) does.
//
// The reader accepts what the reference reader accepts (any header order, whitespace padding) and
// copies each tensor into memory of its own. Ten dtypes have a LibTorch 1.13 type:
// BOOL U8 I8 I16 F16 BF16 I32 F32 F64 I64. A well-formed file with another of the format's
// dtypes (U16, U32, U64, C64, the F8, F6 and F4 types) is UnimplementedError naming it.
//
//   write_safetensors("model.safetensors", {{"w", w}, {"b", b}}, {{"format", "pt"}});
//   SafetensorsFile f = read_safetensors("model.safetensors");  // f.tensors: b, w if same dtype
//
// Little-endian hosts only (the build refuses others): tensor bytes are copied as they are.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace trainhooks::internal {

struct SafetensorsFile {
  std::vector<std::pair<std::string, at::Tensor>> tensors;  // in the file's data order
  std::map<std::string, std::string> metadata;              // the "__metadata__" object
};

// The file's bytes for `tensors` (defined dense CPU tensors of the ten dtypes above, any strides:
// written contiguous) and `metadata`. InvalidArgument naming the tensor for another dtype or
// device, an empty, duplicate or non-UTF-8 name, the name "__metadata__", metadata that is not
// UTF-8, or a header beyond the format's 100 MB.
std::string safetensors_bytes(const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                              const std::map<std::string, std::string>& metadata);

// The same bytes, streamed crash-safe to `path` (util/atomic_file.h: temporary file, fsync,
// rename, fsync of the directory), with AtomicFileWriter's errors.
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata);

// Parses a whole file's bytes; `name` is what messages call the file. DataLossError naming the
// file and what is wrong for anything malformed, truncated or inconsistent (checked before any
// tensor byte is read or allocated); UnimplementedError for a dtype LibTorch 1.13 lacks.
SafetensorsFile parse_safetensors(const char* data, size_t size, const std::string& name);

// Reads the file at `path`, each tensor straight into its own memory. NotFoundError for a missing
// file, FileError for other I/O errors, else as parse_safetensors.
SafetensorsFile read_safetensors(const std::string& path);

}  // namespace trainhooks::internal
