#include "util/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "trainhooks/errors.h"

namespace trainhooks::internal {

namespace {

[[noreturn]] void fail(const char* what, const std::string& path, int err) {
  std::string message = fmt::format("{} '{}': {}", what, path, std::strerror(err));
  if (err == ENOENT) throw NotFoundError(message);
  if (err == ENOSPC || err == EDQUOT) throw ResourceExhaustedError(message);
  throw UnavailableError(message);
}

}  // namespace

void write_file_atomically(const std::string& path, std::string_view contents) {
  namespace fs = std::filesystem;
  fs::path target(path);
  fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmp = (dir / fmt::format(".{}.tmp-{}", target.filename().string(), ::getpid())).string();

  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("Cannot create", tmp, errno);
  const char* p = contents.data();
  size_t left = contents.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      fail("Cannot write", tmp, err);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    fail("Cannot fsync", tmp, err);
  }
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    fail("Cannot close", tmp, err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    fail("Cannot rename onto", path, err);
  }
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) fail("Cannot open directory", dir.string(), errno);
  int rc = ::fsync(dfd);
  int err = errno;
  ::close(dfd);
  if (rc != 0) fail("Cannot fsync directory", dir.string(), err);
}

}  // namespace trainhooks::internal
