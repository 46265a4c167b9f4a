// Crash-safe file replacement: write a temporary file in the same directory, fsync it, rename it
// over the target, fsync the directory. A crash at any moment leaves the old file or the new one,
// never a partial one.
//
// Errors are trainhooks errors naming the path and the failing system call: NotFoundError (a
// missing directory), ResourceExhaustedError (a full disk or quota), FailedPreconditionError (a
// refusal a retry will not change: a directory in the way, permissions, a read-only file system)
// and FileError (other I/O errors). None of them is an UnavailableError: a MonitoredSession does
// not recover from a failing file system by recreating the session.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace trainhooks::internal {

// Streams a file into place: append() as the bytes come (no copy of the whole file in memory),
// overwrite() to fill in a header once the rest is known, commit() to make it durable and
// visible. While appending it starts the write-back of every 8 MiB written, so that the disk works
// while the rest is produced and commit() waits only for the tail. Destroyed without commit(), it
// removes its temporary file and the target is untouched.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::string path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void append(const void* data, size_t size);
  // Rewrites bytes already appended.
  void overwrite(uint64_t offset, const void* data, size_t size);
  uint64_t size() const { return size_; }
  // Syncs the file, renames it into place and, unless told otherwise, syncs the directory; a
  // caller that puts several files in place syncs the directory once after the last one.
  void commit(bool sync_directory = true);

 private:
  void write_at(const void* data, size_t size, std::optional<uint64_t> offset);

  std::string path_;
  std::string dir_;
  std::string tmp_;
  int fd_ = -1;
  uint64_t size_ = 0;
  uint64_t written_back_ = 0;  // write-back started for [0, written_back_)
  bool committed_ = false;
};

// fsync of a directory, making the renames into it durable.
void sync_dir(const std::string& dir);

// The whole file at once; the temporary file is removed on failure.
void write_file_atomically(const std::string& path, std::string_view contents);

}  // namespace trainhooks::internal
