// A checkpoint file's bytes in memory, read and checksummed in one pass, and the little-endian
// fields of the formats' headers.
#pragma once

#include <c10/core/Allocator.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace trainhooks::internal {

// Where a torch zip aligns its records (caffe2::serialize::detail::kFieldAlignment).
inline constexpr size_t kRecordAlignment = 64;
// Files from this size on are mapped (and read on a second thread by the checkpoint reader).
inline constexpr size_t kMapAtLeast = size_t{4} << 20;

inline void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

inline uint64_t get_le(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

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

struct FileRead {
  std::shared_ptr<FileBytes> bytes;
  uint32_t crc32c = 0;  // of the bytes from `crc_from` on
};

// The bytes of the file at `path` (FileBytes::allocate(size, aligned_at)) and the CRC32C of those
// from `crc_from` on, computed piece by piece as they arrive. NotFoundError for a missing file,
// FileError for a directory or another non-file and for read errors, each naming the file.
FileRead read_file(const std::string& path, size_t aligned_at, size_t crc_from);

}  // namespace trainhooks::internal
