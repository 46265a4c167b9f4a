// TFRecord framing, the container of TensorBoard event files:
//
//   u64 length (little endian) | u32 masked crc32c(length bytes) | data | u32 masked crc32c(data)
//
// append_record() frames one record into a buffer. RecordFileReader walks the records of a
// file that may still be growing: a record cut short by the end of the file is not an error but
// the current end, and reading again later resumes at that record.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>

namespace trainhooks::summary {

inline constexpr size_t kRecordHeaderSize = 12;  // length + its masked CRC
inline constexpr size_t kRecordFooterSize = 4;   // masked CRC of the data

void append_record(std::string& out, std::string_view data);

// Frames a record whose payload the caller writes directly into `out` (avoids a copy):
// begin reserves the header, finish fills in the length and both CRCs.
size_t begin_record(std::string& out);
void finish_record(std::string& out, size_t record_start);

// The whole size (header, data, footer) of the finished record whose header starts at `header`.
uint64_t framed_size(const char* header);

class RecordFileReader {
 public:
  enum class Status {
    kRecord,   // `data` holds the next record
    kEnd,      // no further whole record (clean end, or a record still being written)
    kCorrupt,  // a CRC mismatch at offset(); see error()
  };

  // Opens the file; throws EventFileError when it cannot be opened.
  explicit RecordFileReader(std::filesystem::path path);
  ~RecordFileReader();
  RecordFileReader(const RecordFileReader&) = delete;
  RecordFileReader& operator=(const RecordFileReader&) = delete;

  // Reads the record at offset(). On kRecord the offset advances past it; on kEnd and kCorrupt
  // it stays, so a later call sees data appended meanwhile.
  Status read(std::string& data);

  // After kCorrupt: moves past the bad bytes. A record whose data CRC failed is skipped whole
  // (its length was verified); a bad length moves to the next offset where a record passes both
  // checks. Returns the number of bytes skipped, 0 when no valid record follows yet.
  uint64_t skip_corrupt();

  uint64_t offset() const { return offset_; }
  const std::filesystem::path& path() const { return path_; }
  // What was wrong with the last kCorrupt record ("data CRC mismatch", ...).
  const std::string& error() const { return error_; }

 private:
  bool read_at(uint64_t offset, void* out, size_t size);

  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
  uint64_t offset_ = 0;
  bool length_was_corrupt_ = false;
  uint64_t corrupt_length_ = 0;
  std::string error_;
};

}  // namespace trainhooks::summary
