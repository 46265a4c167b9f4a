#include "util/readable_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "trainhooks/errors.h"

namespace trainhooks::internal {

namespace fs = std::filesystem;

ReadableFile::ReadableFile(std::string path, std::string_view what)
    : path_(std::move(path)), what_(what) {
  std::error_code ec;
  const auto status = fs::status(path_, ec);
  if (fs::is_directory(status)) fail("it is a directory");
  if (fs::exists(status) && !fs::is_regular_file(status)) fail("not a regular file");
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) {
    const int err = errno;
    if (err == ENOENT) {
      std::string kind = what_;
      if (!kind.empty()) kind[0] = static_cast<char>(std::toupper(kind[0]));
      throw NotFoundError(fmt::format("{} '{}' does not exist", kind, path_));
    }
    throw FileError(fmt::format("Cannot open {} '{}': {}", what_, path_, std::strerror(err)));
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    fail(std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    fail(S_ISDIR(st.st_mode) ? "it is a directory" : "not a regular file");
  }
  size_ = static_cast<uint64_t>(st.st_size);
}

ReadableFile::~ReadableFile() {
  if (fd_ >= 0) ::close(fd_);
}

void ReadableFile::fail(const std::string& reason) const {
  throw FileError(fmt::format("Cannot read {} '{}': {}", what_, path_, reason));
}

void ReadableFile::read_at(uint64_t offset, void* dst, size_t count) const {
  constexpr size_t kPiece = size_t{1} << 30;  // a read(2) moves at most ~2 GiB
  size_t done = 0;
  while (done < count) {
    const ssize_t got = ::pread(fd_, static_cast<char*>(dst) + done, std::min(kPiece, count - done),
                                static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail(std::strerror(errno));
    if (got == 0) {
      fail(fmt::format("it ended after {} of {} bytes", offset + done, offset + count));
    }
    done += static_cast<size_t>(got);
  }
}

}  // namespace trainhooks::internal
