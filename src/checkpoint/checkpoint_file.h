// The two files of a checkpoint (docs/formats.md "Checkpoints"), encoded and decoded here so that
// the Saver, its asynchronous writer, CheckpointReader and the CLI share one definition:
//   <path>             the variables, a LibTorch pickle of a dict name -> tensor (torch.load-able)
//   <path>.trainstate  a 28-byte framing header (magic, version, length, masked CRC32Cs) and a
//                      pickled dict with the rest of the training state and the size and CRC32C
//                      of the variables file
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <c10/core/Allocator.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "trainhooks/input.h"

namespace trainhooks::internal {

inline constexpr const char* kSidecarSuffix = ".trainstate";
// 2: the built-in optimizers' state as tensors (checkpoint/optimizer_state.h); 1: archives only.
inline constexpr uint32_t kCheckpointFormatVersion = 2;
inline constexpr size_t kSidecarHeaderSize = 28;

inline std::string sidecar_path(const std::string& path) { return path + kSidecarSuffix; }

// One of the two is set: `encoded` for LibTorch's built-in optimizers (optimizer_state.h),
// `archive` (torch::serialize::OutputArchive bytes) for others and in format 1.
struct OptimizerState {
  c10::IValue encoded;
  std::string archive;
  std::vector<double> lrs;  // per parameter group; empty when the optimizer has no get_lr

  bool is_encoded() const { return !encoded.isNone(); }
};

// Everything a checkpoint holds, in host memory.
struct CheckpointContents {
  std::string path;
  std::vector<std::pair<std::string, at::Tensor>> variables;  // in the graph's order
  int64_t global_step = 0;
  double wall_time = 0;
  std::map<std::string, OptimizerState> optimizers;  // by train op name
  std::optional<at::Tensor> cpu_rng;
  std::map<std::string, InputPosition> inputs;  // by input node name
  // The ranks that trained it (the graph's shards, Graph::shard_inputs()). nullopt in a file of an
  // earlier version, whose input offsets count the examples of one rank's shard.
  std::optional<int64_t> world_size;
  std::map<std::string, std::string> state;  // by StateProvider key
  // Decoded only: the sizes of the two files.
  uint64_t variables_bytes = 0;
  uint64_t sidecar_bytes = 0;

  const at::Tensor* find_variable(const std::string& name) const;
};

// Writes both files of `contents` at contents.path, each crash-safe (util/atomic_file.h), the
// variables file first: the sidecar records its size and CRC32C. Streams the tensors from their
// memory to the files; moves the optimizer archives out of `contents` and sets the two sizes.
// Errors name the file (the variables file is removed again when its sidecar cannot be written).
// `parallel`: the two files are written at once, on this thread and another.
void write_checkpoint_files(CheckpointContents& contents, bool parallel = false);

// What torch::pickle_save(value) returns, built the same way write_checkpoint_files() streams it.
std::vector<char> pickle_bytes(const c10::IValue& value);

// Reads and verifies both files of the checkpoint at `path`. Throws NotFoundError, DataLossError
// (corrupt or truncated: the fallback-worthy cases), FailedPreconditionError (a newer format) or
// FileError (I/O), each naming the file.
CheckpointContents decode_checkpoint(const std::string& path);

// A file's bytes in one allocation, placed so that byte `aligned_at` is at a 64-byte boundary,
// where a torch zip aligns its records (caffe2::serialize::detail::kFieldAlignment). Big files get
// transparent huge pages: on a virtual machine a fault per 4 KiB page costs more than the copy.
// The storages that unpickle() makes of its records point into it and keep it alive.
class FileBytes : public std::enable_shared_from_this<FileBytes> {
 public:
  static std::shared_ptr<FileBytes> allocate(size_t size, size_t aligned_at = 0);
  FileBytes(const FileBytes&) = delete;
  FileBytes& operator=(const FileBytes&) = delete;
  ~FileBytes();

  char* data() { return data_; }
  const char* data() const { return data_; }
  size_t size() const { return size_; }
  // A CPU DataPtr to the byte at `p`, inside these bytes, that keeps them alive.
  at::DataPtr share(const char* p) const;

 private:
  FileBytes() = default;
  at::DataPtr heap_;     // from c10's CPU allocator, or
  void* map_ = nullptr;  // an anonymous mapping of map_size_ bytes
  size_t map_size_ = 0;
  char* data_ = nullptr;
  size_t size_ = 0;
};

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

// `t` on the host without autograd: itself (detached) when on the CPU and not `copy`, else a copy.
at::Tensor host_tensor(const at::Tensor& t, bool copy);

// The first line of an exception's message (c10::Error's what() carries a backtrace).
std::string first_line(const std::exception& e);

// "shape [2, 3] and dtype Float"
std::string describe_tensor(const at::Tensor& t);

}  // namespace trainhooks::internal
