#include "checkpoint/format/trainhooks/torch_zip_writer.h"

#include <isa-l/crc.h>

#include <algorithm>
#include <cstring>

#include "trainhooks/errors.h"

namespace trainhooks::internal {

namespace {

constexpr size_t kPiece = size_t{1} << 20;  // checksummed and passed on while in cache
constexpr size_t kAlignment = 64;           // caffe2::serialize::detail::kFieldAlignment
constexpr uint16_t kUtf8 = 0x0800;          // bit 11: UTF-8 names
constexpr uint16_t kDescriptor = 0x0008;    // bit 3: sizes and CRC in a data descriptor

void le16(std::string& out, uint64_t v) {
  out += static_cast<char>(v & 0xff);
  out += static_cast<char>((v >> 8) & 0xff);
}
void le32(std::string& out, uint64_t v) {
  le16(out, v & 0xffff);
  le16(out, (v >> 16) & 0xffff);
}
void le64(std::string& out, uint64_t v) {
  le32(out, v & 0xffffffffu);
  le32(out, v >> 32);
}

// The ZIP64 extended-information extra field with the values present, in the order the format
// gives: uncompressed size, compressed size, local header offset.
std::string zip64_extra(const uint64_t* uncompressed, const uint64_t* compressed,
                        const uint64_t* offset) {
  std::string body;
  if (uncompressed) le64(body, *uncompressed);
  if (compressed) le64(body, *compressed);
  if (offset) le64(body, *offset);
  std::string out;
  if (body.empty()) return out;
  le16(out, 0x0001);
  le16(out, body.size());
  return out + body;
}

}  // namespace

uint32_t zip_crc32(uint32_t crc, const void* data, size_t size) {
  return crc32_gzip_refl(crc, static_cast<const unsigned char*>(data), size);
}

TorchZipWriter::TorchZipWriter(Sink sink, std::string archive_name, uint64_t zip64_limit)
    : sink_(std::move(sink)), prefix_(std::move(archive_name) + "/"), zip64_limit_(zip64_limit) {}

void TorchZipWriter::put(const void* data, size_t size) {
  buffer_.append(static_cast<const char*>(data), size);
  offset_ += size;
  if (buffer_.size() >= kPiece) flush();
}

void TorchZipWriter::flush() {
  if (buffer_.empty()) return;
  sink_(buffer_.data(), buffer_.size());
  buffer_.clear();
}

void TorchZipWriter::write_record(const std::string& name, const void* data, size_t size) {
  if (finished_) throw InternalError("TorchZipWriter: a record after finish()");
  const std::string full = prefix_ + name;
  if (full.size() > 0xffff)
    throw InvalidArgument("TorchZipWriter: a record name longer than 65535 bytes");
  const uint64_t header_offset = offset_;
  const uint64_t size64 = size;
  const bool big_size = size64 >= zip64_limit_;
  const bool big_offset = header_offset >= zip64_limit_;
  // miniz writes the sizes it knows when it writes the local header: the uncompressed one and a
  // compressed one of 0.
  const uint64_t zero = 0;
  const std::string local_zip64 =
      zip64_extra(big_size ? &size64 : nullptr, big_size ? &zero : nullptr,
                  big_offset ? &header_offset : nullptr);
  const size_t data_start = header_offset + 30 + full.size() + local_zip64.size() + 4;
  const size_t padding = (kAlignment - data_start % kAlignment) % kAlignment;
  // miniz writes an empty record without a data descriptor.
  const uint16_t flags = size > 0 ? kUtf8 | kDescriptor : kUtf8;

  std::string header;
  header.reserve(30 + full.size() + local_zip64.size() + 4 + padding);
  le32(header, 0x04034b50);
  le16(header, 0);  // version needed: stored
  le16(header, flags);
  le16(header, 0);  // method: stored
  le16(header, 0);  // time
  le16(header, 0);  // date
  le32(header, 0);  // CRC-32, compressed and uncompressed sizes: in the data descriptor
  le32(header, 0);
  le32(header, 0);
  le16(header, full.size());
  le16(header, local_zip64.size() + 4 + padding);
  header += full;
  header += local_zip64;
  header += "FB";
  le16(header, padding);
  header.append(padding, 'Z');
  put(header.data(), header.size());

  uint32_t crc = 0;
  const char* p = static_cast<const char*>(data);
  for (size_t done = 0; done < size;) {
    const size_t n = std::min(kPiece, size - done);
    crc = zip_crc32(crc, p + done, n);
    if (n < 4096 && buffer_.size() + n < kPiece) {
      put(p + done, n);
    } else {
      flush();
      sink_(p + done, n);
      offset_ += n;
    }
    done += n;
  }

  if (flags & kDescriptor) {
    std::string descriptor;
    le32(descriptor, 0x08074b50);
    le32(descriptor, crc);
    if (big_size || big_offset) {
      le64(descriptor, size64);
      le64(descriptor, size64);
    } else {
      le32(descriptor, size64);
      le32(descriptor, size64);
    }
    put(descriptor.data(), descriptor.size());
  }

  const std::string central_zip64 =
      zip64_extra(big_size ? &size64 : nullptr, big_size ? &size64 : nullptr,
                  big_offset ? &header_offset : nullptr);
  std::string& c = central_;
  le32(c, 0x02014b50);
  le16(c, 0);  // version made by
  le16(c, 0);  // version needed
  le16(c, flags);
  le16(c, 0);  // method
  le16(c, 0);  // time
  le16(c, 0);  // date
  le32(c, crc);
  le32(c, big_size ? 0xFFFFFFFFu : size64);
  le32(c, big_size ? 0xFFFFFFFFu : size64);
  le16(c, full.size());
  le16(c, central_zip64.size());
  le16(c, 0);  // comment length
  le16(c, 0);  // disk
  le16(c, 0);  // internal attributes
  le32(c, 0);  // external attributes
  le32(c, big_offset ? 0xFFFFFFFFu : header_offset);
  c += full;
  c += central_zip64;
  ++records_;
}

void TorchZipWriter::finish(uint64_t version) {
  if (finished_) throw InternalError("TorchZipWriter: finish() twice");
  const std::string text = std::to_string(version) + "\n";
  write_record("version", text.data(), text.size());
  finished_ = true;

  const uint64_t directory_offset = offset_;
  const uint64_t directory_size = central_.size();
  put(central_.data(), central_.size());
  central_.clear();

  const uint64_t end64_offset = offset_;
  std::string end;
  le32(end, 0x06064b50);  // ZIP64 end of central directory record
  le64(end, 44);
  le16(end, 0x031e);  // made by: UNIX, 3.0
  le16(end, 0x002d);  // needed: 4.5, ZIP64
  le32(end, 0);
  le32(end, 0);
  le64(end, records_);
  le64(end, records_);
  le64(end, directory_size);
  le64(end, directory_offset);
  le32(end, 0x07064b50);  // its locator
  le32(end, 0);
  le64(end, end64_offset);
  le32(end, 1);
  le32(end, 0x06054b50);  // end of central directory record
  le16(end, 0);
  le16(end, 0);
  le16(end, std::min<uint64_t>(records_, 0xffff));
  le16(end, std::min<uint64_t>(records_, 0xffff));
  le32(end, std::min<uint64_t>(directory_size, 0xFFFFFFFFu));
  le32(end, std::min<uint64_t>(directory_offset, 0xFFFFFFFFu));
  le16(end, 0);
  put(end.data(), end.size());
  flush();
}

}  // namespace trainhooks::internal
