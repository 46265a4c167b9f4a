// The zip container of torch.save and torch::pickle_save, written as a stream.
//
// LibTorch's PyTorchStreamWriter (miniz) computes each record's CRC-32 with a byte-at-a-time table
// before writing it, and hands the whole record to its sink at once. TorchZipWriter writes the
// same bytes (tested against PyTorchStreamWriter) in 1 MiB pieces, each checksummed with a
// carry-less-multiply CRC-32 (ISA-L) while it is in cache and then passed to the sink: a record's
// bytes are read from memory once.
//
// The layout, as miniz writes it for PyTorch: every local header has flags 0x0808 (UTF-8 names,
// sizes in a data descriptor after the data), zero time and CRC; an extra field "FB" pads it so
// that the data starts at a multiple of 64 bytes; sizes or offsets of 0xFFFFFFFF or more get ZIP64
// extra fields and a 24-byte data descriptor; the archive always ends with ZIP64 end records.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace trainhooks::internal {

// zlib's crc32(): the CRC-32 of zip and gzip, continued from `crc` (0 to start).
uint32_t zip_crc32(uint32_t crc, const void* data, size_t size);

class TorchZipWriter {
 public:
  using Sink = std::function<void(const void* data, size_t size)>;
  static constexpr uint64_t kZip64Limit = 0xFFFFFFFFu;

  // Records are named `<archive_name>/<name>`. `zip64_limit` is where ZIP64 fields start; only
  // tests lower it, to exercise them without gigabytes.
  explicit TorchZipWriter(Sink sink, std::string archive_name = "archive",
                          uint64_t zip64_limit = kZip64Limit);

  void write_record(const std::string& name, const void* data, size_t size);
  // The `version` record ("3\n", what torch::pickle_save writes), the central directory and the
  // end records. Nothing may be written after.
  void finish(uint64_t version = 3);
  // Bytes passed to the sink or buffered so far.
  uint64_t size() const { return offset_; }

 private:
  void put(const void* data, size_t size);  // small pieces: buffered
  void flush();

  Sink sink_;
  std::string prefix_;
  uint64_t zip64_limit_;
  std::string buffer_;
  std::string central_;
  uint64_t offset_ = 0;
  uint64_t records_ = 0;
  bool finished_ = false;
};

}  // namespace trainhooks::internal
