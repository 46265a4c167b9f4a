#include "summary/record_io.h"

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "trainhooks/summary/event_reader.h"
#include "util/crc32c.h"

namespace trainhooks::summary {
namespace {

void store_le64(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
void store_le32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
uint64_t load_le64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint32_t load_le32(const unsigned char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Records above this are taken as a corrupt length even if its CRC matches by chance.
constexpr uint64_t kMaxRecordSize = uint64_t{1} << 40;
constexpr uint64_t kLargeRecord = uint64_t{16} << 20;

}  // namespace

size_t begin_record(std::string& out) {
  size_t start = out.size();
  out.append(kRecordHeaderSize, '\0');
  return start;
}

void finish_record(std::string& out, size_t record_start) {
  char* header = out.data() + record_start;
  const uint64_t length = out.size() - record_start - kRecordHeaderSize;
  store_le64(header, length);
  store_le32(header + 8, crc32c::mask(crc32c::value(header, 8)));
  char footer[kRecordFooterSize];
  store_le32(footer, crc32c::mask(crc32c::value(header + kRecordHeaderSize, length)));
  out.append(footer, kRecordFooterSize);
}

uint64_t framed_size(const char* header) {
  return kRecordHeaderSize + load_le64(reinterpret_cast<const unsigned char*>(header)) +
         kRecordFooterSize;
}

void append_record(std::string& out, std::string_view data) {
  size_t start = begin_record(out);
  out.append(data);
  finish_record(out, start);
}

RecordFileReader::RecordFileReader(std::filesystem::path path) : path_(std::move(path)) {
  file_ = std::fopen(path_.c_str(), "rb");
  if (file_ == nullptr) {
    throw EventFileError(fmt::format("Cannot open {}: {}", path_.string(), std::strerror(errno)),
                         path_, 0);
  }
}

RecordFileReader::~RecordFileReader() {
  if (file_ != nullptr) std::fclose(file_);
}

bool RecordFileReader::read_at(uint64_t offset, void* out, size_t size) {
  if (fseeko(file_, static_cast<off_t>(offset), SEEK_SET) != 0) return false;
  size_t got = std::fread(out, 1, size, file_);
  if (got != size) {
    // Forget the EOF so that data appended later is seen by the next call.
    std::clearerr(file_);
    return false;
  }
  return true;
}

RecordFileReader::Status RecordFileReader::read(std::string& data) {
  unsigned char header[kRecordHeaderSize];
  if (!read_at(offset_, header, sizeof header)) return Status::kEnd;
  const uint64_t length = load_le64(header);
  if (crc32c::unmask(load_le32(header + 8)) != crc32c::value(header, 8)) {
    error_ = "length CRC mismatch";
    length_was_corrupt_ = true;
    return Status::kCorrupt;
  }
  if (length > kMaxRecordSize) {
    error_ = fmt::format("record length {} is implausible", length);
    length_was_corrupt_ = true;
    return Status::kCorrupt;
  }
  // Only large records are checked against the file size: a stat per record would cost more
  // than reading it, and a bogus length must not allocate before the end of file is noticed.
  if (length > kLargeRecord) {
    std::error_code ec;
    const uint64_t size = std::filesystem::file_size(path_, ec);
    if (ec || offset_ + kRecordHeaderSize + length + kRecordFooterSize > size) return Status::kEnd;
  }
  data.resize(length);
  unsigned char footer[kRecordFooterSize];
  if (!read_at(offset_ + kRecordHeaderSize, data.data(), length) ||
      std::fread(footer, 1, sizeof footer, file_) != sizeof footer) {
    std::clearerr(file_);
    return Status::kEnd;  // still being written
  }
  if (crc32c::unmask(load_le32(footer)) != crc32c::value(data.data(), data.size())) {
    error_ = "data CRC mismatch";
    length_was_corrupt_ = false;
    corrupt_length_ = length;
    return Status::kCorrupt;
  }
  offset_ += kRecordHeaderSize + length + kRecordFooterSize;
  return Status::kRecord;
}

uint64_t RecordFileReader::skip_corrupt() {
  if (!length_was_corrupt_) {
    uint64_t skipped = kRecordHeaderSize + corrupt_length_ + kRecordFooterSize;
    offset_ += skipped;
    return skipped;
  }
  // Resynchronise: the first later offset where a whole record passes both checks.
  const uint64_t start = offset_;
  std::string data;
  for (uint64_t candidate = start + 1;; ++candidate) {
    unsigned char header[kRecordHeaderSize];
    if (!read_at(candidate, header, sizeof header)) return 0;
    if (crc32c::unmask(load_le32(header + 8)) != crc32c::value(header, 8)) continue;
    offset_ = candidate;
    if (read(data) == Status::kRecord) {
      offset_ = candidate;  // read() advanced; the caller reads this record next
      return candidate - start;
    }
    offset_ = start;
  }
}

}  // namespace trainhooks::summary
