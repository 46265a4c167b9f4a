#include "checkpoint/format/trainhooks/file_bytes.h"

#include <c10/core/CPUAllocator.h>

#include <fcntl.h>
#include <fmt/format.h>
#include <isa-l/crc.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "trainhooks/errors.h"
#include "util/readable_file.h"

namespace trainhooks::internal {

namespace {

constexpr size_t kReadPiece = size_t{1} << 20;  // checksummed while in cache
constexpr size_t kHugePage = size_t{2} << 20;

// CRC32C as util/crc32c.h computes it (crc32c::extend), with ISA-L's folding kernel, several
// times as fast: a restore checksums every byte it reads.
uint32_t crc32c_extend(uint32_t crc, const char* data, size_t size) {
  return ~crc32_iscsi(reinterpret_cast<unsigned char*>(const_cast<char*>(data)),
                      static_cast<int>(size), ~crc);
}

}  // namespace

FileRead read_file(const std::string& path, size_t aligned_at, size_t crc_from) {
  const ReadableFile file(path, "checkpoint file");
  const int fd = file.fd();
  const auto size = static_cast<size_t>(file.size());
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  FileRead out{FileBytes::allocate(size, aligned_at), 0};
  char* data = out.bytes->data();
  size_t done = 0;
  while (done < size) {
    const ssize_t got = ::read(fd, data + done, std::min(kReadPiece, size - done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) file.fail(std::strerror(errno));
    if (got == 0) file.fail(fmt::format("it ended after {} of {} bytes", done, size));
    const size_t end = done + static_cast<size_t>(got);
    if (end > crc_from) {
      const size_t from = std::max(done, crc_from);
      out.crc32c = crc32c_extend(out.crc32c, data + from, end - from);
    }
    done = end;
  }
  return out;
}

std::shared_ptr<FileBytes> FileBytes::allocate(size_t size, size_t aligned_at) {
  std::shared_ptr<FileBytes> f(new FileBytes());
  const size_t pad = kRecordAlignment - 1;
  char* base = nullptr;
  if (size >= kMapAtLeast) {
    const size_t length = size + pad + kHugePage;
    void* map = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map != MAP_FAILED) {
      f->map_ = map;
      f->map_size_ = length;
      const auto start = reinterpret_cast<uintptr_t>(map);
      base = reinterpret_cast<char*>((start + kHugePage - 1) & ~(kHugePage - 1));
      ::madvise(base, length - static_cast<size_t>(base - static_cast<char*>(map)),
                MADV_HUGEPAGE);  // advice only: without huge pages it still works
    }
  }
  if (!base) {
    f->heap_ = c10::GetCPUAllocator()->allocate(size + pad);
    base = static_cast<char*>(f->heap_.get());
  }
  const uintptr_t at = reinterpret_cast<uintptr_t>(base) + aligned_at;
  f->data_ = base + (kRecordAlignment - at % kRecordAlignment) % kRecordAlignment;
  f->size_ = size;
  return f;
}

FileBytes::~FileBytes() {
  if (map_) ::munmap(map_, map_size_);
}

at::DataPtr FileBytes::share(const char* p) const {
  return at::DataPtr(
      const_cast<char*>(p), new std::shared_ptr<const FileBytes>(shared_from_this()),
      [](void* owner) { delete static_cast<std::shared_ptr<const FileBytes>*>(owner); },
      at::Device(at::kCPU));
}

}  // namespace trainhooks::internal
