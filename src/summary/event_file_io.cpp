#include "trainhooks/summary/event_file_io.h"

#include <unistd.h>

namespace trainhooks::summary {

ssize_t EventFileIo::write(int fd, const char* data, size_t size) {
  return ::write(fd, data, size);
}

int EventFileIo::truncate(int fd, uint64_t size) {
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) return -1;
  return ::lseek(fd, static_cast<off_t>(size), SEEK_SET) < 0 ? -1 : 0;
}

int EventFileIo::sync(int fd) { return ::fsync(fd); }

}  // namespace trainhooks::summary
