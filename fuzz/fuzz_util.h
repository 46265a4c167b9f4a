// Helpers shared by the fuzz targets: the readers under test take paths, so each input is written
// to a file in a directory of this process, and inputs are split into parts with a small cursor.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

namespace trainhooks::fuzz {

// A directory of this process under $TMPDIR (or /tmp), removed at exit.
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::filesystem::path p = std::filesystem::path(tmp && *tmp ? tmp : "/tmp") /
                              ("trainhooks-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(p);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratch_dir(), ec);
    });
    return p;
  }();
  return dir;
}

// Replaces the file `name` in the scratch directory with `bytes`; returns its path.
inline std::string write_scratch(const std::string& name, std::string_view bytes) {
  const std::string path = (scratch_dir() / name).string();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) std::abort();
  std::fclose(f);
  return path;
}

// Consumes an input front to back; reads past the end yield zeros and empty strings.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size)
      : data_(reinterpret_cast<const char*>(data)), size_(size) {}

  uint8_t byte() { return pos_ < size_ ? static_cast<uint8_t>(data_[pos_++]) : 0; }
  uint16_t u16() {
    const uint16_t lo = byte();
    return static_cast<uint16_t>(lo | byte() << 8);
  }
  // Up to n bytes.
  std::string_view take(size_t n) {
    n = n < size_ - pos_ ? n : size_ - pos_;
    std::string_view out(data_ + pos_, n);
    pos_ += n;
    return out;
  }
  std::string_view rest() { return take(size_ - pos_); }
  bool empty() const { return pos_ >= size_; }

 private:
  const char* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace trainhooks::fuzz
