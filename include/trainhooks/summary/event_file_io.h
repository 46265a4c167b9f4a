// EventFileIo: the calls EventWriter makes on its open event file.
//
// The default implementation is the operating system's: write(2), ftruncate(2) with lseek(2),
// fsync(2). A test substitutes one that fails (a full disk, a short write, an I/O error) through
// EventWriterOptions::file_io to check what the writer leaves in the file and what it logs.
//
//   struct FullDisk : trainhooks::summary::EventFileIo {
//     ssize_t write(int, const char*, size_t) override { errno = ENOSPC; return -1; }
//   };
//
// Thread safety: the writer calls it from its writer thread only (and from the thread that
// constructs or reopens the writer, before that thread starts).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace trainhooks::summary {

class EventFileIo {
 public:
  virtual ~EventFileIo() = default;
  // As write(2): the bytes written (possibly fewer than `size`), or -1 with errno set.
  virtual ssize_t write(int fd, const char* data, size_t size);
  // Cuts the file to `size` bytes and moves the write position there: 0, or -1 with errno set.
  virtual int truncate(int fd, uint64_t size);
  // As fsync(2).
  virtual int sync(int fd);
};

}  // namespace trainhooks::summary
