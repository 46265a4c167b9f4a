#include "trainhooks/idx_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <ATen/ops/empty.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "trainhooks/errors.h"

namespace trainhooks {

namespace {

[[noreturn]] void fail_io(const char* what, const std::string& path, int err) {
  std::string message = fmt::format("{} IDX file '{}': {}", what, path, std::strerror(err));
  if (err == ENOENT || err == ENOTDIR) throw NotFoundError(message);
  if (err == EMFILE || err == ENFILE) throw ResourceExhaustedError(message);
  if (err == EISDIR || err == EACCES || err == EPERM || err == ENAMETOOLONG || err == ELOOP)
    throw FailedPreconditionError(message);
  throw FileError(message);
}

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a file";
}

// Opening a FIFO for reading waits for a writer, and a device may act on being opened: only
// regular files (a symlink is followed) are read.
void check_regular(const std::string& path, const struct stat& st) {
  if (!S_ISREG(st.st_mode)) {
    throw FailedPreconditionError(
        fmt::format("Cannot read IDX file '{}': it is {}, not a regular file (plain or gzip)", path,
                    file_kind(st.st_mode)));
  }
}

// The uncompressed bytes of a plain or gzip file (one or more concatenated members), with the
// offset reached in them for error messages.
class ByteStream {
 public:
  explicit ByteStream(std::string path) : path_(std::move(path)) {
    struct stat st {};
    if (::stat(path_.c_str(), &st) != 0) fail_io("Cannot open", path_, errno);
    check_regular(path_, st);
    // O_NONBLOCK: should the file be replaced by a FIFO after the check, open returns at once
    // and fstat refuses it. Reads of a regular file ignore the flag.
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd_ < 0) fail_io("Cannot open", path_, errno);
    if (::fstat(fd_, &st) != 0) fail_io("Cannot stat", path_, errno);
    check_regular(path_, st);
    file_size_ = static_cast<uint64_t>(st.st_size);
    in_.resize(kInputChunk);
    while (in_end_ < 2 && fill()) {
    }
    gzip_ = in_end_ >= 2 && in_[0] == 0x1f && in_[1] == 0x8b;
    if (gzip_) {
      // 16 + 15: a gzip wrapper (header and CRC-32 trailer) around a 32 KiB deflate window.
      if (inflateInit2(&z_, 16 + 15) != Z_OK) throw ResourceExhaustedError("inflateInit2 failed");
      z_ready_ = true;
    }
  }
  ~ByteStream() {
    if (z_ready_) inflateEnd(&z_);
    if (fd_ >= 0) ::close(fd_);
  }
  ByteStream(const ByteStream&) = delete;
  ByteStream& operator=(const ByteStream&) = delete;

  const std::string& path() const { return path_; }
  bool gzip() const { return gzip_; }
  uint64_t file_size() const { return file_size_; }
  // Bytes delivered so far: the offset of the next byte in the uncompressed stream.
  uint64_t offset() const { return offset_; }
  // The gzip input ended inside a member (a short read follows from it).
  bool truncated() const { return truncated_; }

  // Up to n bytes into dst; fewer only at the end of the stream.
  size_t read(uint8_t* dst, size_t n) {
    size_t got = gzip_ ? inflate_into(dst, n) : copy_into(dst, n);
    offset_ += got;
    return got;
  }

  // Reads to the end of the stream, discarding the bytes: a gzip stream's damage (its CRC-32)
  // shows only there.
  void skip_to_end() {
    std::vector<uint8_t> scratch(size_t{1} << 16);
    while (read(scratch.data(), scratch.size()) != 0) {
    }
  }

 private:
  static constexpr size_t kInputChunk = size_t{1} << 18;

  // Appends to in_ after compacting it; false at the end of the file.
  bool fill() {
    if (in_pos_ > 0) {
      std::memmove(in_.data(), in_.data() + in_pos_, in_end_ - in_pos_);
      in_end_ -= in_pos_;
      file_pos_ += in_pos_;
      in_pos_ = 0;
    }
    for (;;) {
      ssize_t r = ::read(fd_, in_.data() + in_end_, in_.size() - in_end_);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) fail_io("Cannot read", path_, errno);
      in_end_ += static_cast<size_t>(r);
      return r > 0;
    }
  }

  size_t copy_into(uint8_t* dst, size_t n) {
    size_t got = std::min(n, in_end_ - in_pos_);
    std::memcpy(dst, in_.data() + in_pos_, got);
    in_pos_ += got;
    while (got < n) {
      ssize_t r = ::read(fd_, dst + got, n - got);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) fail_io("Cannot read", path_, errno);
      if (r == 0) break;
      got += static_cast<size_t>(r);
    }
    return got;
  }

  size_t inflate_into(uint8_t* dst, size_t n) {
    size_t got = 0;
    while (got < n && !done_) {
      if (member_ended_) {
        // Another member may follow (gzip allows concatenation); anything else is not ours.
        while (in_end_ - in_pos_ < 2 && fill()) {
        }
        size_t left = in_end_ - in_pos_;
        if (left == 0) {
          done_ = true;
          break;
        }
        if (left < 2 || in_[in_pos_] != 0x1f || in_[in_pos_ + 1] != 0x8b) {
          throw DataLossError(fmt::format(
              "IDX file '{}': unexpected bytes after the end of the gzip stream (at byte offset {} "
              "of the uncompressed data, byte offset {} of the file)",
              path_, offset_ + got, file_pos_ + in_pos_));
        }
        inflateReset(&z_);
        member_ended_ = false;
      }
      if (in_pos_ == in_end_ && !input_eof_) input_eof_ = !fill();
      // uInt counts: a chunk of at most 1 GiB per call.
      auto out_chunk = static_cast<uInt>(std::min<size_t>(n - got, size_t{1} << 30));
      z_.next_in = in_.data() + in_pos_;
      z_.avail_in = static_cast<uInt>(in_end_ - in_pos_);
      z_.next_out = dst + got;
      z_.avail_out = out_chunk;
      int rc = ::inflate(&z_, Z_NO_FLUSH);
      in_pos_ = in_end_ - z_.avail_in;
      got += out_chunk - z_.avail_out;
      if (rc == Z_BUF_ERROR && in_pos_ == in_end_ && input_eof_) {
        // No progress without more input, and there is none: the file ends inside a member.
        truncated_ = true;
        done_ = true;
      } else if (rc == Z_STREAM_END) {
        member_ended_ = true;
      } else if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT) {
        throw DataLossError(fmt::format(
            "IDX file '{}': corrupt gzip stream at byte offset {} of the uncompressed data: {}",
            path_, offset_ + got,
            rc == Z_NEED_DICT ? "it needs a preset dictionary"
            : z_.msg          ? z_.msg
                              : "invalid data"));
      } else if (rc == Z_MEM_ERROR) {
        throw ResourceExhaustedError(
            fmt::format("IDX file '{}': out of memory while inflating", path_));
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        throw InternalError(fmt::format("IDX file '{}': inflate returned {}", path_, rc));
      }
    }
    return got;
  }

  std::string path_;
  int fd_ = -1;
  uint64_t file_size_ = 0;
  std::vector<uint8_t> in_;
  size_t in_pos_ = 0, in_end_ = 0;
  uint64_t file_pos_ = 0;  // the file offset of in_[0]
  uint64_t offset_ = 0;
  bool gzip_ = false;
  z_stream z_{};
  bool z_ready_ = false;
  bool member_ended_ = false;
  bool input_eof_ = false;
  bool done_ = false;
  bool truncated_ = false;
};

const char* idx_type_name(uint8_t code) {
  switch (code) {
    case 0x08:
      return "unsigned byte";
    case 0x09:
      return "signed byte";
    case 0x0B:
      return "int16";
    case 0x0C:
      return "int32";
    case 0x0D:
      return "float32";
    case 0x0E:
      return "float64";
    default:
      return "unknown";
  }
}

std::string decimal(unsigned __int128 v) {
  std::string digits;
  do {
    digits.insert(digits.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  } while (v != 0);
  return digits;
}

// Deflate's best ratio is 1032:1, so a gzip file of n bytes holds at most about 1032 n bytes: a
// header that claims more is corrupt, and is rejected before its size is allocated.
constexpr uint64_t kMaxDeflateRatio = 1032;

struct IdxArray {
  std::vector<uint32_t> dims;
  std::vector<uint8_t> data;
};

// The unsigned-byte array of an IDX file with `rank` dimensions, validated to the last byte.
IdxArray read_idx(const std::string& path, uint8_t rank, const char* layout) {
  ByteStream in(path);
  const uint64_t header_size = 4 + 4 * uint64_t{rank};
  const char* note = "";
  auto ends_at = [&] {
    note = in.truncated() ? " (the gzip stream is truncated)" : "";
    return in.offset();
  };

  std::array<uint8_t, 4> magic{};
  if (in.read(magic.data(), 4) < 4) {
    auto at = ends_at();
    throw DataLossError(
        fmt::format("IDX file '{}': truncated header: expected {} bytes, the file ends at byte "
                    "offset {}{}",
                    path, header_size, at, note));
  }
  const uint32_t expected_magic = 0x0800u | rank;
  if (magic[0] != 0 || magic[1] != 0) {
    uint32_t m =
        uint32_t{magic[0]} << 24 | uint32_t{magic[1]} << 16 | uint32_t{magic[2]} << 8 | magic[3];
    throw DataLossError(fmt::format(
        "IDX file '{}': bad magic number 0x{:08x} at byte offset 0, expected 0x{:08x} (unsigned "
        "bytes, {} dimensions: {})",
        path, m, expected_magic, rank, layout));
  }
  if (magic[2] != 0x08) {
    throw DataLossError(fmt::format(
        "IDX file '{}': data type 0x{:02x} ({}) at byte offset 2, expected 0x08 (unsigned byte)",
        path, magic[2], idx_type_name(magic[2])));
  }
  if (magic[3] != rank) {
    throw DataLossError(
        fmt::format("IDX file '{}': number of dimensions {} at byte offset 3, expected {} ({})",
                    path, magic[3], rank, layout));
  }

  IdxArray out;
  std::array<uint8_t, 12> raw{};
  if (in.read(raw.data(), 4 * rank) < 4 * size_t{rank}) {
    auto at = ends_at();
    throw DataLossError(
        fmt::format("IDX file '{}': truncated header: expected {} bytes, the file ends at byte "
                    "offset {}{}",
                    path, header_size, at, note));
  }
  unsigned __int128 total = 1;
  for (size_t i = 0; i < rank; ++i) {
    const uint8_t* b = raw.data() + 4 * i;
    out.dims.push_back(uint32_t{b[0]} << 24 | uint32_t{b[1]} << 16 | uint32_t{b[2]} << 8 | b[3]);
    total *= out.dims.back();  // at most 3 factors below 2^32: no overflow
  }
  std::string shape = fmt::format("{}", fmt::join(out.dims, " x "));
  for (size_t i = 1; i < rank; ++i) {
    if (out.dims[i] == 0) {
      throw DataLossError(fmt::format(
          "IDX file '{}': dimensions {} at byte offset 4 ({}): a size is 0", path, shape, layout));
    }
  }

  // Refuse before allocating: a plain file must hold exactly what the header says; a gzip file
  // can hold no more than its size times deflate's best ratio.
  const unsigned __int128 data_bound =
      in.gzip() ? static_cast<unsigned __int128>(in.file_size()) * kMaxDeflateRatio
                : (in.file_size() > header_size ? in.file_size() - header_size : 0);
  if (total > data_bound) {
    if (!in.gzip()) {
      throw DataLossError(fmt::format(
          "IDX file '{}': truncated data: dimensions {} ({}) need {} bytes after the {}-byte "
          "header, the file ends at byte offset {}",
          path, shape, layout, static_cast<uint64_t>(total), header_size, in.file_size()));
    }
    throw DataLossError(fmt::format(
        "IDX file '{}': dimensions {} at byte offset 4 ({}) claim {} bytes of data, more than a "
        "gzip file of {} bytes can hold",
        path, shape, layout, decimal(total), in.file_size()));
  }
  const auto size = static_cast<uint64_t>(total);

  // Grows with the data actually inflated, so a lying gzip header costs no more memory than its
  // contents.
  constexpr uint64_t kChunk = uint64_t{16} << 20;
  out.data.reserve(in.gzip() ? std::min(size, uint64_t{64} << 20) : size);
  while (out.data.size() < size) {
    size_t old = out.data.size();
    auto chunk = static_cast<size_t>(std::min<uint64_t>(size - old, kChunk));
    out.data.resize(old + chunk);
    size_t got = in.read(out.data.data() + old, chunk);
    if (got < chunk) {
      auto at = ends_at();
      throw DataLossError(fmt::format(
          "IDX file '{}': truncated data: dimensions {} ({}) need {} bytes after the {}-byte "
          "header, the file ends at byte offset {}{}",
          path, shape, layout, size, header_size, at, note));
    }
  }

  // Reading past the data also makes zlib check the gzip trailer's CRC-32 and length.
  uint8_t extra = 0;
  if (in.read(&extra, 1) != 0) {
    // Damage inside a gzip stream can make it inflate to more bytes than it holds: the rest is
    // inflated first, so that such a stream is reported by zlib's check (a corrupt gzip stream),
    // not as bytes after the data.
    if (in.gzip()) {
      in.skip_to_end();
      ends_at();
    }
    throw DataLossError(fmt::format(
        "IDX file '{}': unexpected bytes after the data at byte offset {}, where dimensions {} "
        "({}) end{}",
        path, header_size + size, shape, layout, note));
  }
  if (in.truncated()) {
    throw DataLossError(
        fmt::format("IDX file '{}': truncated gzip stream: it ends after the data at byte offset "
                    "{} without its trailer",
                    path, header_size + size));
  }
  return out;
}

class IdxSource final : public InputSource {
 public:
  IdxSource(IdxArray images, IdxArray labels, const IdxOptions& options)
      : count_(images.dims[0]),
        rows_(images.dims[1]),
        cols_(images.dims[2]),
        pixels_(std::move(images.data)),
        labels_(std::move(labels.data)) {
    // One table lookup per pixel: cheaper than the tensor ops (index_select, to float, sub, div)
    // it replaces, and exact: each value is computed in double and rounded once.
    for (int v = 0; v < 256; ++v) {
      double x = v / 255.0;
      lut_[v] = static_cast<float>(options.normalize ? (x - options.mean) / options.stddev : x);
    }
  }

  size_t size() const override { return static_cast<size_t>(count_); }
  std::vector<std::string> component_names() const override { return {"data", "target"}; }

  std::vector<at::Tensor> get_batch(const std::vector<int64_t>& indices) override {
    for (int64_t i : indices) {
      if (i < 0 || i >= count_) {
        throw InvalidArgument(fmt::format("idx_source: index {} out of range [0, {})", i, count_));
      }
    }
    const auto b = static_cast<int64_t>(indices.size());
    const int64_t image_size = rows_ * cols_;
    at::Tensor data = at::empty({b, 1, rows_, cols_}, at::kFloat);
    at::Tensor target = at::empty({b}, at::kLong);
    float* out = data.data_ptr<float>();
    int64_t* label = target.data_ptr<int64_t>();
    const float* lut = lut_.data();
    for (int64_t k = 0; k < b; ++k) {
      // Shuffled indices jump across the whole array: fetching a later image's cache lines while
      // this one converts hides most of the memory latency.
      if (k + kPrefetchAhead < b) {
        const uint8_t* next = pixels_.data() + indices[k + kPrefetchAhead] * image_size;
        for (int64_t line = 0; line < image_size; line += 64) __builtin_prefetch(next + line);
      }
      const uint8_t* px = pixels_.data() + indices[k] * image_size;
      for (int64_t j = 0; j < image_size; ++j) out[j] = lut[px[j]];
      out += image_size;
      label[k] = labels_[static_cast<size_t>(indices[k])];
    }
    return {std::move(data), std::move(target)};
  }

 private:
  static constexpr int64_t kPrefetchAhead = 4;

  int64_t count_, rows_, cols_;
  std::vector<uint8_t> pixels_;
  std::vector<uint8_t> labels_;
  std::array<float, 256> lut_{};
};

std::string existing_file(const std::string& dir, const std::string& name, const char* what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  // The plain file when both exist: it loads without inflating.
  for (const auto& candidate : {name, name + ".gz"}) {
    fs::path p = fs::path(dir) / candidate;
    if (fs::exists(p, ec)) return p.string();
  }
  throw NotFoundError(fmt::format(
      "fashion_mnist_source: no {} in '{}': neither {} nor {}.gz exists; install the Debian "
      "package dataset-fashion-mnist (it puts the files into {})",
      what, dir, name, name, kFashionMnistDefaultDir));
}

}  // namespace

std::shared_ptr<InputSource> idx_source(const std::string& images_path,
                                        const std::string& labels_path, IdxOptions options) {
  for (auto [arg, value] : {std::pair{"mean", options.mean}, {"stddev", options.stddev}}) {
    if (!std::isfinite(value)) {
      throw InvalidArgument(fmt::format("idx_source: {} must be finite, got {}", arg, value));
    }
  }
  check_positive("idx_source", "stddev", options.stddev);
  if (options.num_classes < 1 || options.num_classes > 256) {
    throw InvalidArgument(
        fmt::format("idx_source: num_classes must be between 1 and 256 (labels are bytes), got {}",
                    options.num_classes));
  }
  IdxArray images = read_idx(images_path, 3, "images: count, rows, cols");
  IdxArray labels = read_idx(labels_path, 1, "labels: count");
  if (images.dims[0] != labels.dims[0]) {
    throw DataLossError(fmt::format(
        "idx_source: the images file '{}' holds {} images but the labels file '{}' holds {} "
        "labels",
        images_path, images.dims[0], labels_path, labels.dims[0]));
  }
  // Here rather than in the loss at the first step that draws the label, where LibTorch names
  // neither the file nor the example.
  const auto bad = std::find_if(labels.data.begin(), labels.data.end(),
                                [&](uint8_t v) { return v >= options.num_classes; });
  if (bad != labels.data.end()) {
    const auto index = static_cast<uint64_t>(bad - labels.data.begin());
    throw DataLossError(fmt::format(
        "IDX file '{}': label {} at index {} (byte offset {}) is out of range: with {} classes "
        "(IdxOptions::num_classes) labels are 0 to {}",
        labels_path, unsigned{*bad}, index, 8 + index, options.num_classes,
        options.num_classes - 1));
  }
  return std::make_shared<IdxSource>(std::move(images), std::move(labels), options);
}

std::shared_ptr<InputSource> fashion_mnist_source(const std::string& dir, FashionMnistSplit split,
                                                  IdxOptions options) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    throw NotFoundError(fmt::format(
        "fashion_mnist_source: directory '{}' does not exist; install the Debian package "
        "dataset-fashion-mnist (it puts the files into {})",
        dir, kFashionMnistDefaultDir));
  }
  const char* prefix = split == FashionMnistSplit::kTrain ? "train" : "t10k";
  std::string images =
      existing_file(dir, fmt::format("{}-images-idx3-ubyte", prefix), "Fashion-MNIST images");
  std::string labels =
      existing_file(dir, fmt::format("{}-labels-idx1-ubyte", prefix), "Fashion-MNIST labels");
  return idx_source(images, labels, options);
}

}  // namespace trainhooks
