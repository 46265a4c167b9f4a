#include "checkpoint/checkpoint_file.h"

#include <ATen/ATen.h>
#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>
#include <c10/core/CPUAllocator.h>
#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <torch/csrc/jit/serialization/storage_context.h>
#include <torch/csrc/jit/serialization/unpickler.h>
#include <torch/serialize.h>

#include <fcntl.h>
#include <fmt/format.h>
#include <isa-l/crc.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <future>
#include <optional>
#include <system_error>

#include "checkpoint/optimizer_state.h"
#include "checkpoint/torch_zip_writer.h"
#include "trainhooks/errors.h"
#include "util/atomic_file.h"
#include "util/crc32c.h"

namespace trainhooks::internal {

namespace fs = std::filesystem;

namespace {

// ---- The training-state sidecar: `<checkpoint>.trainstate` ------------------------------------
//
// A 28-byte header, then a payload that is a LibTorch pickle (torch.load-able) of a dict:
//   0  8  magic "TRNSTATE"
//   8  4  format version (u32, little-endian)
//  12  8  payload length (u64)
//  20  4  masked CRC32C of the payload
//  24  4  masked CRC32C of bytes 0..23
// The pickle is a zip archive, some of whose bytes (alignment padding, time stamps) no checksum of
// its own covers; the framing makes every flipped or missing byte of the file detectable.

constexpr char kMagic[8] = {'T', 'R', 'N', 'S', 'T', 'A', 'T', 'E'};
constexpr uint32_t kFormatVersion = kCheckpointFormatVersion;
constexpr size_t kHeaderSize = kSidecarHeaderSize;
constexpr const char* kFormatName = "trainhooks.trainstate";

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

uint64_t get_le(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

constexpr size_t kRecordAlignment = 64;         // caffe2::serialize::detail::kFieldAlignment
constexpr size_t kReadPiece = size_t{1} << 20;  // checksummed while in cache
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kMapAtLeast = size_t{4} << 20;  // smaller files come from the heap

// CRC32C as util/crc32c.h computes it (crc32c::extend), with ISA-L's folding kernel, several
// times as fast: a restore checksums every byte it reads.
uint32_t crc32c_extend(uint32_t crc, const char* data, size_t size) {
  return ~crc32_iscsi(reinterpret_cast<unsigned char*>(const_cast<char*>(data)),
                      static_cast<int>(size), ~crc);
}

struct FileRead {
  std::shared_ptr<FileBytes> bytes;
  uint32_t crc32c = 0;  // of the bytes from `crc_from` on
};

// The bytes of the file at `path` (FileBytes::allocate(size, aligned_at)) and the CRC32C of those
// from `crc_from` on, computed piece by piece as they arrive.
FileRead read_file(const std::string& path, size_t aligned_at, size_t crc_from) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (fs::is_directory(status)) {
    throw FileError(fmt::format("Cannot read checkpoint file '{}': it is a directory", path));
  }
  if (fs::exists(status) && !fs::is_regular_file(status)) {
    throw FileError(fmt::format("Cannot read checkpoint file '{}': not a regular file", path));
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT)
      throw NotFoundError(fmt::format("Checkpoint file '{}' does not exist", path));
    throw FileError(fmt::format("Cannot open checkpoint file '{}': {}", path, std::strerror(err)));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    throw FileError(
        fmt::format("Cannot read checkpoint file '{}': {}", path, std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode))
    throw FileError(fmt::format("Cannot read checkpoint file '{}': not a regular file", path));
  const auto size = static_cast<size_t>(st.st_size);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  FileRead out{FileBytes::allocate(size, aligned_at), 0};
  char* data = out.bytes->data();
  size_t done = 0;
  while (done < size) {
    const ssize_t got = ::read(fd, data + done, std::min(kReadPiece, size - done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      throw FileError(
          fmt::format("Cannot read checkpoint file '{}': {}", path, std::strerror(errno)));
    }
    if (got == 0) {
      throw FileError(fmt::format("Cannot read checkpoint file '{}': it ended after {} of {} bytes",
                                  path, done, size));
    }
    const size_t end = done + static_cast<size_t>(got);
    if (end > crc_from) {
      const size_t from = std::max(done, crc_from);
      out.crc32c = crc32c_extend(out.crc32c, data + from, end - from);
    }
    done = end;
  }
  return out;
}

at::Tensor bytes_tensor(std::string_view bytes) {
  at::Tensor t = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
  if (!bytes.empty()) std::memcpy(t.data_ptr<uint8_t>(), bytes.data(), bytes.size());
  return t;
}

std::string tensor_bytes(const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  return std::string(reinterpret_cast<const char*>(c.data_ptr<uint8_t>()),
                     static_cast<size_t>(c.numel()));
}

c10::impl::GenericDict new_dict() {
  return c10::impl::GenericDict(c10::StringType::get(), c10::AnyType::get());
}

std::string first_line_of(const std::exception& e) {
  // c10::Error's what() carries a backtrace; its first line is the message.
  std::string msg = e.what();
  if (auto nl = msg.find('\n'); nl != std::string::npos) msg.resize(nl);
  return msg;
}

// ---- A decoded checkpoint -----------------------------------------------------------------------

// Field access on the unpickled payload; anything missing or mistyped is data loss (the CRC
// matched, so the file was written that way, but not by this format).
class Fields {
 public:
  Fields(const c10::IValue& v, std::string where, const std::string& file)
      : file_(file), where_(std::move(where)) {
    if (!v.isGenericDict()) fail("is not a dict");
    dict_ = v.toGenericDict();
  }
  const c10::IValue* find(const std::string& key) const {
    auto it = dict_.find(c10::IValue(key));
    return it == dict_.end() ? nullptr : &it->value();
  }
  const c10::IValue& get(const std::string& key) const {
    const auto* v = find(key);
    if (!v) fail(fmt::format("has no '{}'", key));
    return *v;
  }
  int64_t integer(const std::string& key) const {
    const auto& v = get(key);
    if (!v.isInt()) fail(fmt::format("'{}' is not an integer", key));
    return v.toInt();
  }
  at::Tensor bytes(const std::string& key) const {
    const auto& v = get(key);
    if (!v.isTensor() || v.toTensor().scalar_type() != at::kByte || v.toTensor().dim() != 1) {
      fail(fmt::format("'{}' is not a uint8 tensor", key));
    }
    return v.toTensor();
  }
  Fields sub(const std::string& key) const { return Fields(get(key), where_ + "/" + key, file_); }
  std::vector<std::string> keys() const {
    std::vector<std::string> out;
    for (const auto& kv : dict_) {
      if (!kv.key().isString()) fail("has a key that is not a string");
      out.push_back(kv.key().toStringRef());
    }
    return out;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw DataLossError(fmt::format(
        "Checkpoint file '{}' is not a valid training-state file: {} {}", file_, where_, what));
  }

 private:
  const std::string& file_;
  std::string where_;
  c10::impl::GenericDict dict_ = new_dict();
};

// The bytes of a pickle's zip archive, in memory.
class BytesReader final : public caffe2::serialize::ReadAdapterInterface {
 public:
  BytesReader(const char* data, size_t size) : data_(data), size_(size) {}
  size_t size() const override { return size_; }
  size_t read(uint64_t pos, void* buf, size_t n, const char* /*what*/) const override {
    if (pos >= size_) return 0;
    n = std::min<size_t>(n, size_ - pos);
    std::memcpy(buf, data_ + pos, n);
    return n;
  }

 private:
  const char* data_;
  size_t size_;
};

// LibTorch's Unpickler allocates (and zeroes) the length that a string, bytes or long opcode
// states before it reads that many bytes: a corrupt length would allocate gigabytes. The opcodes
// are walked here first, each length checked against the bytes that remain. Returns what is
// wrong, or "" when the pickle is well-framed up to its STOP.
std::string check_pickle_lengths(std::string_view p) {
  size_t i = 0;
  auto remain = [&] { return p.size() - i; };
  while (i < p.size()) {
    const auto op = static_cast<unsigned char>(p[i++]);
    uint64_t skip = 0;     // argument bytes after the opcode
    int length_bytes = 0;  // or a little-endian length of this many bytes, then that many bytes
    int lines = 0;         // or this many newline-terminated lines
    auto is = [op](std::string_view ops) { return ops.find(static_cast<char>(op)) != ops.npos; };
    if (op == '.') return "";  // STOP
    if (is("(012NQRabd}el]ost)u\x81\x85\x86\x87\x88\x89\x8f\x90\x91\x92\x93\x94\x97\x98")) {
      // no argument
    } else if (is("Khq\x80\x82")) {
      skip = 1;
    } else if (is("M\x83")) {
      skip = 2;
    } else if (is("Jjr\x84")) {
      skip = 4;
    } else if (is("G\x95")) {
      skip = 8;
    } else if (is("UC\x8a\x8c")) {
      length_bytes = 1;
    } else if (is("TXB\x8b")) {
      length_bytes = 4;
    } else if (is("\x8d\x8e\x96")) {
      length_bytes = 8;
    } else if (is("FILPSVgp")) {
      lines = 1;
    } else if (is("ci")) {
      lines = 2;
    } else {
      return fmt::format("unknown pickle opcode 0x{:02x} at byte {}", op, i - 1);
    }
    if (length_bytes > 0) {
      if (remain() < static_cast<size_t>(length_bytes)) break;
      skip = get_le(p.data() + i, length_bytes);
      i += length_bytes;
    }
    for (; lines > 0; --lines) {
      const size_t nl = p.find('\n', i);
      if (nl == std::string_view::npos) return "the pickle ends inside a line";
      i = nl + 1;
    }
    if (skip > remain()) {
      return fmt::format("the opcode at byte {} states {} bytes, {} remain", i - 1 - length_bytes,
                         skip, remain());
    }
    // BINPUT, LONG_BINPUT: LibTorch grows its memo table to the index. Picklers number the
    // memo from 0, one entry per opcode, so an index beyond the pickle's length is corrupt.
    if ((op == 'q' || op == 'r') && get_le(p.data() + i, static_cast<int>(skip)) > p.size()) {
      return fmt::format("the memo index {} at byte {} exceeds the pickle's {} bytes",
                         get_le(p.data() + i, static_cast<int>(skip)), i - 1, p.size());
    }
    i += skip;
  }
  return "the pickle ends without its STOP opcode";
}

}  // namespace

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

namespace {

// A torch zip's central directory, every offset and length checked against the archive's bytes.
// LibTorch's reader (miniz) checks the archive too, but tells a record's size only with a copy of
// its bytes.
class ZipDirectory {
 public:
  ZipDirectory(const char* data, size_t size) : p_(data), n_(size) {
    if (n_ < 22) fail("it is too short for a zip archive");
    size_t eocd = n_ - 22;
    const size_t lowest = n_ - 22 > 65535 ? n_ - 22 - 65535 : 0;  // after a comment of <= 64 KiB
    while (u32(eocd) != 0x06054b50) {
      if (eocd == lowest) fail("it has no end of central directory record");
      --eocd;
    }
    uint64_t count = u16(eocd + 10);
    uint64_t cd_offset = u32(eocd + 16);
    if (eocd >= 20 && u32(eocd - 20) == 0x07064b50) {  // the ZIP64 locator
      const uint64_t z = u64(eocd - 20 + 8);
      need(z, 56);
      if (u32(z) != 0x06064b50) fail("its ZIP64 end of central directory record is missing");
      count = u64(z + 32);
      cd_offset = u64(z + 48);
    }
    uint64_t pos = cd_offset;
    for (uint64_t i = 0; i < count; ++i) {
      need(pos, 46);
      if (u32(pos) != 0x02014b50) fail("a central directory entry is corrupt");
      const uint16_t method = u16(pos + 10);
      uint64_t compressed = u32(pos + 20), size = u32(pos + 24), local = u32(pos + 42);
      const uint64_t name_len = u16(pos + 28), extra_len = u16(pos + 30),
                     comment_len = u16(pos + 32);
      need(pos + 46, name_len + extra_len + comment_len);
      ZipRecord r;
      r.name.assign(p_ + pos + 46, name_len);
      // The ZIP64 extra field holds, in this order, the values that are 0xffffffff above.
      for (uint64_t x = pos + 46 + name_len, end = x + extra_len; x + 4 <= end;) {
        const uint64_t id = u16(x), len = u16(x + 2);
        if (x + 4 + len > end) fail(fmt::format("the entry of '{}' is corrupt", r.name));
        uint64_t f = x + 4;
        for (uint64_t* v : {&size, &compressed, &local}) {
          if (id != 0x0001 || *v != 0xffffffffu) continue;
          if (f + 8 > x + 4 + len) fail(fmt::format("the entry of '{}' is corrupt", r.name));
          *v = u64(f);
          f += 8;
        }
        x += 4 + len;
      }
      if (method != 0 || compressed != size)
        fail(fmt::format("the record '{}' is compressed", r.name));
      need(local, 30);
      if (u32(local) != 0x04034b50) fail(fmt::format("the record '{}' is corrupt", r.name));
      r.offset = local + 30 + u16(local + 26) + u16(local + 28);
      r.size = size;
      need(r.offset, r.size);
      records_.push_back(std::move(r));
      pos += 46 + name_len + extra_len + comment_len;
    }
  }

  std::vector<ZipRecord>& records() { return records_; }

 private:
  [[noreturn]] static void fail(const std::string& what) { throw DataLossError(what); }
  void need(uint64_t pos, uint64_t len) const {
    if (pos > n_ || len > n_ - pos) fail("the zip archive reaches past its bytes");
  }
  uint64_t u16(uint64_t pos) const {
    need(pos, 2);
    return get_le(p_ + pos, 2);
  }
  uint64_t u32(uint64_t pos) const {
    need(pos, 4);
    return get_le(p_ + pos, 4);
  }
  uint64_t u64(uint64_t pos) const {
    need(pos, 8);
    return get_le(p_ + pos, 8);
  }

  const char* p_;
  size_t n_;
  std::vector<ZipRecord> records_;
};

}  // namespace

std::vector<ZipRecord> zip_records(const char* data, size_t size) {
  return std::move(ZipDirectory(data, size).records());
}

c10::IValue unpickle(const std::shared_ptr<const FileBytes>& file, size_t offset, size_t size) {
  if (offset > file->size() || size > file->size() - offset)
    throw InternalError("unpickle: the archive reaches past its bytes");
  const char* data = file->data() + offset;
  // torch::pickle_load, except that each storage is made from its record before the pickle is
  // read, with the record's size: LibTorch would take the size that the pickle states, and a
  // storage bigger than its record would then be read out of bounds.
  caffe2::serialize::PyTorchStreamReader reader(std::make_shared<BytesReader>(data, size));
  // Not a structured binding: the reader lambda below captures the size (clang 14 cannot).
  auto pickle_record = reader.getRecord("data.pkl");
  const at::DataPtr& pickle = std::get<0>(pickle_record);
  const size_t pickle_size = std::get<1>(pickle_record);
  const char* pickle_data = static_cast<const char*>(pickle.get());
  {
    const std::string wrong = check_pickle_lengths(std::string_view(pickle_data, pickle_size));
    if (!wrong.empty()) throw DataLossError(wrong);
  }
  // The records' names are below the archive's folder, the first entry's (as LibTorch has it).
  const std::vector<ZipRecord> records = zip_records(data, size);
  if (records.empty()) throw DataLossError("the zip archive has no records");
  const std::string& first = records.front().name;
  const std::string folder = first.substr(0, first.find('/') + 1) + "data/";
  auto storages = std::make_shared<torch::jit::DeserializationStorageContext>();
  for (const ZipRecord& r : records) {
    if (r.name.rfind(folder, 0) != 0) continue;
    const std::string key = r.name.substr(folder.size());
    if (storages->hasStorage(key))
      throw DataLossError(fmt::format("the archive holds the record '{}' twice", r.name));
    const char* bytes = data + r.offset;
    at::DataPtr ptr;
    if (reinterpret_cast<uintptr_t>(bytes) % kRecordAlignment == 0) {
      ptr = file->share(bytes);
    } else {  // another writer's archive: a copy, aligned for any dtype
      ptr = c10::GetCPUAllocator()->allocate(r.size);
      if (r.size > 0) std::memcpy(ptr.get(), bytes, r.size);
    }
    storages->addStorage(
        key, c10::Storage(c10::Storage::use_byte_size_t(), r.size, std::move(ptr), nullptr, false));
  }
  // torch::jit::readArchiveAndTensors, but a storage that the pickle names and the archive lacks
  // is an error: LibTorch would look for it by another spelling and size it as the pickle says.
  size_t read = 0;
  torch::jit::Unpickler unpickler(
      [&](char* buf, size_t n) -> size_t {
        n = std::min(n, pickle_size - read);
        std::memcpy(buf, pickle_data + read, n);
        read += n;
        return n;
      },
      nullptr, nullptr,
      [](const std::string& key) -> at::DataPtr {
        throw DataLossError(
            fmt::format("the pickle names the storage '{}', which the archive lacks", key));
      },
      c10::nullopt, false, torch::jit::Unpickler::defaultTypeParser, storages);
  unpickler.set_version(reader.version());
  return unpickler.parse_ivalue();
}

c10::IValue unpickle(const char* data, size_t size) {
  std::shared_ptr<FileBytes> copy = FileBytes::allocate(size);
  if (size > 0) std::memcpy(copy->data(), data, size);
  return unpickle(copy, 0, size);
}

void check_tensor_extents(const c10::IValue& value, const std::string& file) {
  value.visit([&](const c10::IValue& v) {
    if (!v.isTensor()) return false;
    const at::Tensor& t = v.toTensor();
    if (!t.defined() || !t.has_storage()) return false;
    // The byte after the last element, in 128 bits: no int64 sizes or strides overflow it.
    bool bad = t.storage_offset() < 0;
    unsigned __int128 last = bad ? 0 : static_cast<uint64_t>(t.storage_offset());
    for (int64_t d = 0; d < t.dim() && !bad; ++d) {
      if (t.size(d) < 0 || t.stride(d) < 0)
        bad = true;
      else if (t.size(d) == 0)
        return false;  // no elements: nothing is read
      else
        last += static_cast<unsigned __int128>(t.size(d) - 1) * static_cast<uint64_t>(t.stride(d));
    }
    if (bad || (last + 1) * t.element_size() > t.storage().nbytes()) {
      throw DataLossError(fmt::format(
          "Checkpoint file '{}' is corrupt: a tensor of shape [{}] reaches past its storage of {} "
          "bytes",
          file, fmt::join(t.sizes(), ", "), t.storage().nbytes()));
    }
    return false;
  });
}

CheckpointContents decode_checkpoint(const std::string& path) {
  const std::string side_path = sidecar_path(path);
  CheckpointContents cp;
  cp.path = path;

  // A big variables file is read and checksummed on another thread while the sidecar is decoded;
  // the sidecar's errors still come first.
  std::future<FileRead> vars_read;
  std::error_code ec;
  if (const auto size = fs::file_size(path, ec); !ec && size >= kMapAtLeast) {
    try {
      vars_read = std::async(std::launch::async, [&path] { return read_file(path, 0, 0); });
    } catch (const std::system_error&) {
      // no thread to be had: read after the sidecar
    }
  }

  const FileRead side_file = read_file(side_path, kHeaderSize, kHeaderSize);
  const FileBytes& side = *side_file.bytes;
  if (side.size() < kHeaderSize) {
    throw DataLossError(
        fmt::format("Checkpoint file '{}' is truncated: {} bytes, shorter than its {}-byte header",
                    side_path, side.size(), kHeaderSize));
  }
  if (std::memcmp(side.data(), kMagic, sizeof(kMagic)) != 0) {
    throw DataLossError(fmt::format(
        "Checkpoint file '{}' is corrupt: it does not start with the training-state magic",
        side_path));
  }
  if (crc32c::unmask(static_cast<uint32_t>(get_le(side.data() + 24, 4))) !=
      crc32c::value(side.data(), 24)) {
    throw DataLossError(
        fmt::format("Checkpoint file '{}' is corrupt: header checksum mismatch", side_path));
  }
  const auto version = static_cast<uint32_t>(get_le(side.data() + 8, 4));
  if (version == 0)
    throw DataLossError(
        fmt::format("Checkpoint file '{}' is corrupt: format version 0", side_path));
  if (version > kFormatVersion) {
    throw FailedPreconditionError(
        fmt::format("Checkpoint file '{}' has format version {}; this version of trainhooks reads "
                    "version {} or older",
                    side_path, version, kFormatVersion));
  }
  const uint64_t length = get_le(side.data() + 12, 8);
  if (length != side.size() - kHeaderSize) {
    throw DataLossError(fmt::format(
        "Checkpoint file '{}' is {}: its header announces {} payload bytes, the file has {}",
        side_path, length > side.size() - kHeaderSize ? "truncated" : "corrupt", length,
        side.size() - kHeaderSize));
  }
  if (crc32c::unmask(static_cast<uint32_t>(get_le(side.data() + 20, 4))) != side_file.crc32c) {
    throw DataLossError(
        fmt::format("Checkpoint file '{}' is corrupt: payload checksum mismatch", side_path));
  }
  c10::IValue root;
  try {
    root = unpickle(side_file.bytes, kHeaderSize, length);
  } catch (const std::exception& e) {
    throw DataLossError(
        fmt::format("Checkpoint file '{}' is corrupt: its payload cannot be unpickled ({})",
                    side_path, first_line_of(e)));
  }
  check_tensor_extents(root, side_path);

  Fields top(root, "payload", side_path);
  const auto& format = top.get("format");
  if (!format.isString() || format.toStringRef() != kFormatName) top.fail("has the wrong 'format'");
  Fields vars_info = top.sub("variables");
  const int64_t vars_size = vars_info.integer("size");
  const auto vars_crc = static_cast<uint32_t>(vars_info.integer("crc32c"));
  cp.sidecar_bytes = side.size();
  cp.global_step = top.integer("global_step");
  if (const auto* wt = top.find("wall_time"); wt && wt->isDouble()) cp.wall_time = wt->toDouble();
  if (cp.global_step < 0) top.fail("'global_step' is negative");

  Fields optimizers = top.sub("optimizers");
  for (const auto& name : optimizers.keys()) {
    Fields o = optimizers.sub(name);
    OptimizerState s;
    if (const auto* encoded = o.find("state_dict")) {
      if (version < 2) o.fail("has a 'state_dict' in a format 1 file");
      try {
        validate_encoded_optimizer(*encoded);
      } catch (const InvalidArgument& e) {
        o.fail(fmt::format("'state_dict' is malformed: {}", e.what()));
      }
      s.encoded = *encoded;
    } else {
      s.archive = tensor_bytes(o.bytes("archive"));
    }
    const auto& lr = o.get("lr");
    if (!lr.isDoubleList()) o.fail("'lr' is not a list of floats");
    s.lrs = lr.toDoubleVector();
    cp.optimizers.emplace(name, std::move(s));
  }
  Fields rng = top.sub("rng");
  if (rng.find("cpu")) cp.cpu_rng = rng.bytes("cpu");
  Fields inputs = top.sub("inputs");
  for (const auto& name : inputs.keys()) {
    const auto& v = inputs.get(name);
    if (!v.isIntList() || v.toIntList().size() != 2)
      inputs.fail(fmt::format("'{}' is not [epoch, offset]", name));
    auto pos = v.toIntVector();
    if (pos[0] < 0 || pos[1] < 0) inputs.fail(fmt::format("'{}' is a negative position", name));
    cp.inputs.emplace(name, InputPosition{pos[0], pos[1]});
  }
  if (const auto* w = top.find("world_size")) {
    if (!w->isInt() || w->toInt() < 1) top.fail("'world_size' is not a positive integer");
    cp.world_size = w->toInt();
  }
  Fields state = top.sub("state");
  for (const auto& key : state.keys()) cp.state.emplace(key, tensor_bytes(state.bytes(key)));

  const FileRead vars_file = vars_read.valid() ? vars_read.get() : read_file(path, 0, 0);
  const FileBytes& vars = *vars_file.bytes;
  if (static_cast<int64_t>(vars.size()) != vars_size) {
    throw DataLossError(
        fmt::format("Checkpoint file '{}' is {}: {} bytes, {} were written", path,
                    static_cast<int64_t>(vars.size()) < vars_size ? "truncated" : "corrupt",
                    vars.size(), vars_size));
  }
  cp.variables_bytes = vars.size();
  if (vars_file.crc32c != vars_crc) {
    throw DataLossError(fmt::format(
        "Checkpoint file '{}' is corrupt: its CRC32C does not match the one recorded in '{}'", path,
        side_path));
  }
  c10::IValue value;
  try {
    value = unpickle(vars_file.bytes, 0, vars.size());
  } catch (const std::exception& e) {
    throw DataLossError(fmt::format("Checkpoint file '{}' is corrupt: it cannot be unpickled ({})",
                                    path, first_line_of(e)));
  }
  check_tensor_extents(value, path);
  if (!value.isGenericDict())
    throw DataLossError(fmt::format("Checkpoint file '{}' does not hold a dict", path));
  for (const auto& kv : value.toGenericDict()) {
    if (!kv.key().isString() || !kv.value().isTensor()) {
      throw DataLossError(
          fmt::format("Checkpoint file '{}' is not a dict of name -> tensor", path));
    }
    cp.variables.emplace_back(kv.key().toStringRef(), kv.value().toTensor());
  }
  return cp;
}

std::string describe_tensor(const at::Tensor& t) {
  return fmt::format("shape [{}] and dtype {}", fmt::join(t.sizes(), ", "),
                     c10::toString(t.scalar_type()));
}

std::string first_line(const std::exception& e) { return first_line_of(e); }

at::Tensor host_tensor(const at::Tensor& t, bool copy) {
  if (t.is_cpu() && !copy) return t.detach();
  at::NoGradGuard no_grad;  // a copy that records no history and does not require grad
  return t.is_cpu() ? t.clone() : t.cpu();
}

const at::Tensor* CheckpointContents::find_variable(const std::string& name) const {
  for (const auto& [n, t] : variables)
    if (n == name) return &t;
  return nullptr;
}

namespace {

// torch::pickle_save's container (a zip that torch.load reads), streamed instead of built in
// memory: the tensors' bytes go from their storage to the sink, each read once. The records come
// in torch::jit::writeArchiveAndTensors' order, the storages before the pickle, so the small
// values of the pickled object may still change while its tensors are being written.
class PickleStream {
 public:
  PickleStream(const c10::IValue& value, const std::function<void(const void*, size_t)>& sink)
      : writer_(sink) {
    std::vector<char> bytes;  // only its tensors are needed now
    tensors_ = pickle(value, bytes);
  }

  void write_tensors() {
    size_t i = 0;
    for (const auto& t : tensors_) {
      const torch::jit::WriteableTensorData data = torch::jit::getWriteableTensorData(t);
      writer_.write_record(fmt::format("data/{}", i++), data.data(), data.sizeInBytes());
      storages_.push_back(t.storage().unsafeGetStorageImpl());
    }
    // The pickler memoizes tensors that have other references: holding them here would change
    // the pickle written by finish().
    tensors_.clear();
  }

  // The pickle of `value` as it is now (it holds the same tensors), and the end of the archive.
  void finish(const c10::IValue& value) {
    std::vector<char> bytes;
    const std::vector<at::Tensor> tensors = pickle(value, bytes);
    bool same = tensors.size() == storages_.size();
    for (size_t i = 0; same && i < tensors.size(); ++i)
      same = tensors[i].storage().unsafeGetStorageImpl() == storages_[i];
    if (!same) throw InternalError("PickleStream: the value's tensors changed while writing it");
    writer_.write_record("data.pkl", bytes.data(), bytes.size());
    writer_.finish();
  }

 private:
  static std::vector<at::Tensor> pickle(const c10::IValue& value, std::vector<char>& out) {
    torch::jit::Pickler pickler(
        [&](const char* bytes, size_t n) { out.insert(out.end(), bytes, bytes + n); });
    pickler.protocol();
    pickler.pushIValue(value);
    pickler.stop();
    return pickler.tensorData();
  }

  TorchZipWriter writer_;
  std::vector<at::Tensor> tensors_;
  std::vector<const c10::StorageImpl*> storages_;
};

void pickle_to(const c10::IValue& value, const std::function<void(const void*, size_t)>& sink) {
  PickleStream stream(value, sink);
  stream.write_tensors();
  stream.finish(value);
}

// A byte tensor over the string's memory, which it takes: no copy.
at::Tensor adopt_bytes(std::string bytes) {
  auto* owned = new std::string(std::move(bytes));
  return at::from_blob(
      owned->data(), {static_cast<int64_t>(owned->size())}, [owned](void*) { delete owned; },
      at::TensorOptions().dtype(at::kByte));
}

}  // namespace

std::vector<char> pickle_bytes(const c10::IValue& value) {
  std::vector<char> out;
  pickle_to(value, [&](const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    out.insert(out.end(), c, c + n);
  });
  return out;
}

void write_checkpoint_files(CheckpointContents& c, bool parallel) {
  // The variables file, streamed with its CRC32C.
  auto write_variables = [&c]() {
    uint32_t crc = 0;
    c10::Dict<std::string, at::Tensor> variables;
    for (const auto& [name, t] : c.variables) variables.insert(name, t);
    try {
      AtomicFileWriter file(c.path);
      pickle_to(c10::IValue(variables), [&](const void* p, size_t n) {
        crc = crc32c::extend(crc, p, n);
        file.append(p, n);
      });
      const uint64_t size = file.size();
      file.commit(/*sync_directory=*/false);  // the sidecar's commit syncs the directory
      return std::make_pair(size, crc);
    } catch (const Error& e) {
      throw_error(e.code(), fmt::format("Cannot write checkpoint file '{}': {}", c.path, e.what()));
    } catch (const std::exception& e) {
      throw InternalError(
          fmt::format("Cannot write checkpoint file '{}': {}", c.path, first_line_of(e)));
    }
  };
  // In parallel, the sidecar's tensors are written while the variables file is; the variables
  // file's size and CRC, which the sidecar records, go into its pickle, written last.
  std::future<std::pair<uint64_t, uint32_t>> variables_written;
  std::optional<std::pair<uint64_t, uint32_t>> variables_result;
  if (parallel) {
    try {
      variables_written = std::async(std::launch::async, write_variables);
    } catch (const std::system_error&) {
      parallel = false;  // no thread to be had: one after the other
    }
  }
  if (!parallel) variables_result = write_variables();
  auto variables_done = [&]() -> std::pair<uint64_t, uint32_t> {
    if (!variables_result) variables_result = variables_written.get();
    return *variables_result;
  };

  auto payload = new_dict();
  payload.insert(std::string("format"), std::string(kFormatName));
  payload.insert(std::string("version"), static_cast<int64_t>(kFormatVersion));
  auto vars_info = new_dict();
  vars_info.insert(std::string("file"), fs::path(c.path).filename().string());
  vars_info.insert(std::string("size"), int64_t{0});  // set once the variables file is written
  vars_info.insert(std::string("crc32c"), int64_t{0});
  vars_info.insert(std::string("count"), static_cast<int64_t>(c.variables.size()));
  payload.insert(std::string("variables"), vars_info);
  payload.insert(std::string("global_step"), c.global_step);
  payload.insert(std::string("wall_time"), c.wall_time);

  auto optimizers = new_dict();
  for (auto& [name, s] : c.optimizers) {
    auto entry = new_dict();
    if (s.is_encoded())
      entry.insert(std::string("state_dict"), s.encoded);
    else
      entry.insert(std::string("archive"), adopt_bytes(std::move(s.archive)));
    entry.insert(std::string("lr"), c10::List<double>(s.lrs));
    optimizers.insert(name, entry);
  }
  c.optimizers.clear();  // their archives and tensors moved into the payload
  payload.insert(std::string("optimizers"), optimizers);

  auto rng = new_dict();
  if (c.cpu_rng) rng.insert(std::string("cpu"), *c.cpu_rng);
  payload.insert(std::string("rng"), rng);

  auto inputs = new_dict();
  for (const auto& [name, p] : c.inputs)
    inputs.insert(name, c10::List<int64_t>({p.epoch, p.offset}));
  payload.insert(std::string("inputs"), inputs);
  if (c.world_size) payload.insert(std::string("world_size"), *c.world_size);

  auto state = new_dict();
  for (const auto& [key, bytes] : c.state) state.insert(key, bytes_tensor(bytes));
  payload.insert(std::string("state"), state);

  // The sidecar: a header whose length and CRC are known only at the end, then the payload.
  const std::string side_path = sidecar_path(c.path);
  bool variables_failed = false;
  try {
    AtomicFileWriter file(side_path);
    const char zeros[kHeaderSize] = {};
    file.append(zeros, kHeaderSize);
    uint32_t crc = 0;
    PickleStream stream(c10::IValue(payload), [&](const void* p, size_t n) {
      crc = crc32c::extend(crc, p, n);
      file.append(p, n);
    });
    stream.write_tensors();
    try {
      const auto [vars_size, vars_crc] = variables_done();
      c.variables_bytes = vars_size;
      vars_info.insert_or_assign(std::string("size"), static_cast<int64_t>(vars_size));
      vars_info.insert_or_assign(std::string("crc32c"), static_cast<int64_t>(vars_crc));
    } catch (...) {
      variables_failed = true;
      throw;
    }
    stream.finish(c10::IValue(payload));
    std::string header;
    header.append(kMagic, sizeof(kMagic));
    put_le(header, kFormatVersion, 4);
    put_le(header, file.size() - kHeaderSize, 8);
    put_le(header, crc32c::mask(crc), 4);
    put_le(header, crc32c::mask(crc32c::value(header.data(), header.size())), 4);
    file.overwrite(0, header.data(), header.size());
    c.sidecar_bytes = file.size();
    file.commit();
  } catch (const std::exception& e) {
    if (variables_failed) throw;  // it names the variables file; nothing was put in place
    // The variables file's own error, if it has one, comes first, as without parallel writing.
    if (variables_written.valid()) variables_written.get();
    std::error_code ec;
    fs::remove(c.path, ec);  // unlisted and without its sidecar: of no use
    const auto* err = dynamic_cast<const Error*>(&e);
    throw_error(err ? err->code() : Code::kInternal,
                fmt::format("Cannot write checkpoint file '{}': {}", side_path,
                            err ? std::string(e.what()) : first_line_of(e)));
  }
}

}  // namespace trainhooks::internal
