#include "checkpoint/format/trainhooks/torch_zip_reader.h"

#include <ATen/core/Tensor.h>
#include <c10/core/CPUAllocator.h>
#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <torch/csrc/jit/serialization/storage_context.h>
#include <torch/csrc/jit/serialization/unpickler.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <string_view>

#include "trainhooks/errors.h"

namespace trainhooks::internal {

namespace {

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
    // Resizable through the CPU allocator, as a storage LibTorch makes: a restore makes these the
    // variables' storages, and a variable may be resized later.
    storages->addStorage(key, c10::Storage(c10::Storage::use_byte_size_t(), r.size, std::move(ptr),
                                           c10::GetCPUAllocator(), true));
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

}  // namespace trainhooks::internal
