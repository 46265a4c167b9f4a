// A regular file opened for reading, with trainhooks errors that name it: what the checkpoint
// formats read through. A FIFO or a device in a file's place is refused before it is opened (an
// open would wait for a writer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace trainhooks::internal {

class ReadableFile {
 public:
  // `what` names the kind of file in messages ("checkpoint file"): NotFoundError "Checkpoint
  // file 'P' does not exist"; FileError "Cannot read checkpoint file 'P': it is a directory" (or
  // "not a regular file", or the system's error), "Cannot open checkpoint file 'P': ...".
  ReadableFile(std::string path, std::string_view what);
  ~ReadableFile();
  ReadableFile(const ReadableFile&) = delete;
  ReadableFile& operator=(const ReadableFile&) = delete;

  int fd() const { return fd_; }
  // The size when it was opened.
  uint64_t size() const { return size_; }
  // Exactly `count` bytes from `offset` on; FileError naming the file for an error or a file that
  // ends before (it shrank since it was opened).
  void read_at(uint64_t offset, void* dst, size_t count) const;
  // FileError "Cannot read <what> 'P': <reason>".
  [[noreturn]] void fail(const std::string& reason) const;

 private:
  std::string path_;
  std::string what_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

}  // namespace trainhooks::internal
