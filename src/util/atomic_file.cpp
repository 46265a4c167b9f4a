#include "util/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "trainhooks/errors.h"

namespace trainhooks::internal {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail(const char* what, const std::string& path, int err) {
  std::string message = fmt::format("{} '{}': {}", what, path, std::strerror(err));
  if (err == ENOENT) throw NotFoundError(message);
  if (err == ENOSPC || err == EDQUOT || err == EMFILE || err == ENFILE)
    throw ResourceExhaustedError(message);
  // The file system refuses for a reason a retry will not change: not a transient error, so a
  // MonitoredSession does not recover from it by restarting the session.
  if (err == EISDIR || err == ENOTDIR || err == EROFS || err == EACCES || err == EPERM ||
      err == ENAMETOOLONG || err == ELOOP)
    throw FailedPreconditionError(message);
  throw FileError(message);
}

std::atomic<uint64_t> g_temp_counter{0};

// Without it the kernel starts writing a file back only when a tenth of the memory is dirty or at
// the fsync, and a checkpoint of a few gigabytes is first copied, then written.
constexpr uint64_t kWriteBackChunk = uint64_t{8} << 20;

}  // namespace

AtomicFileWriter::AtomicFileWriter(std::string path) : path_(std::move(path)) {
  fs::path target(path_);
  dir_ = target.has_parent_path() ? target.parent_path().string() : std::string(".");
  // pid and a counter: concurrent writers in one process (an asynchronous checkpoint and the
  // training thread) never share a temporary file.
  tmp_ = (fs::path(dir_) / fmt::format(".{}.tmp-{}-{}", target.filename().string(), ::getpid(),
                                       g_temp_counter.fetch_add(1)))
             .string();
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("Cannot create", tmp_, errno);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

void AtomicFileWriter::write_at(const void* data, size_t size, std::optional<uint64_t> offset) {
  const char* p = static_cast<const char*>(data);
  uint64_t at = offset ? *offset : size_;
  size_t left = size;
  while (left > 0) {
    ssize_t n = offset ? ::pwrite(fd_, p, left, static_cast<off_t>(at)) : ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("Cannot write", tmp_, errno);
    }
    p += n;
    at += static_cast<uint64_t>(n);
    left -= static_cast<size_t>(n);
  }
  if (offset) return;
  size_ += size;
  if (size_ - written_back_ >= kWriteBackChunk) {
    // Only a start (no wait); failures show at the fdatasync of commit().
    ::sync_file_range(fd_, static_cast<off_t>(written_back_),
                      static_cast<off_t>(size_ - written_back_), SYNC_FILE_RANGE_WRITE);
    written_back_ = size_;
  }
}

void AtomicFileWriter::append(const void* data, size_t size) { write_at(data, size, std::nullopt); }

void AtomicFileWriter::overwrite(uint64_t offset, const void* data, size_t size) {
  if (offset + size > size_) {
    throw InvalidArgument(
        fmt::format("AtomicFileWriter: overwrite past the end of '{}' ({} + {} > {})", tmp_, offset,
                    size, size_));
  }
  write_at(data, size, offset);
}

void AtomicFileWriter::commit(bool sync_directory) {
  if (committed_ || fd_ < 0) throw FailedPreconditionError("AtomicFileWriter: committed twice");
  // fdatasync: the data and the size, which reading it back needs; not the time stamps.
  if (::fdatasync(fd_) != 0) fail("Cannot fsync", tmp_, errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("Cannot close", tmp_, errno);
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) fail("Cannot rename onto", path_, errno);
  committed_ = true;
  if (sync_directory) sync_dir(dir_);
}

void sync_dir(const std::string& dir_) {
  int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) fail("Cannot open directory", dir_, errno);
  int rc = ::fsync(dfd);
  int err = errno;
  ::close(dfd);
  if (rc != 0) fail("Cannot fsync directory", dir_, err);
}

void write_file_atomically(const std::string& path, std::string_view contents) {
  AtomicFileWriter file(path);
  file.append(contents.data(), contents.size());
  file.commit();
}

}  // namespace trainhooks::internal
