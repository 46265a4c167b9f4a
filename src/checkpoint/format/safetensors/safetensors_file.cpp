#include "checkpoint/format/safetensors/safetensors_file.h"

// Before <ATen/ATen.h>: clang 14 with libstdc++ 12 (the fuzz build) needs c10::IValue complete
// before ATen's lists of it are instantiated.
#include <ATen/core/ivalue.h>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/ScalarType.h>

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string_view>
#include <unordered_set>

#include "trainhooks/errors.h"
#include "util/atomic_file.h"
#include "util/json_writer.h"
#include "util/readable_file.h"

namespace trainhooks::internal {

// The data buffer is little-endian and copied byte for byte in both directions.
static_assert(std::endian::native == std::endian::little,
              "safetensors I/O supports little-endian hosts only");

namespace {

using Tensors = std::vector<std::pair<std::string, at::Tensor>>;
using Json = nlohmann::ordered_json;  // keeps the header's order: ties in data order follow it

constexpr uint64_t kMaxHeaderSize = 100'000'000;  // the reference's MAX_HEADER_SIZE
constexpr size_t kLengthSize = 8;
constexpr std::string_view kMetadataKey = "__metadata__";

struct Dtype {
  std::string_view name;
  uint64_t bits;
  at::ScalarType torch;  // Undefined: no LibTorch 1.13 type
};

// The reference's Dtype enum in its declaration order, which is the writer's sort key (descending)
// and so part of the bytes: I64 before F64 before F32 before I32, BF16 before F16, I8 before U8.
constexpr at::ScalarType kNone = at::ScalarType::Undefined;
constexpr std::array<Dtype, 20> kDtypes = {{
    {"BOOL", 8, at::kBool},      {"F4", 4, kNone},      {"F6_E2M3", 6, kNone},
    {"F6_E3M2", 6, kNone},       {"U8", 8, at::kByte},  {"I8", 8, at::kChar},
    {"F8_E5M2", 8, kNone},       {"F8_E4M3", 8, kNone}, {"F8_E8M0", 8, kNone},
    {"I16", 16, at::kShort},     {"U16", 16, kNone},    {"F16", 16, at::kHalf},
    {"BF16", 16, at::kBFloat16}, {"I32", 32, at::kInt}, {"U32", 32, kNone},
    {"F32", 32, at::kFloat},     {"C64", 64, kNone},    {"F64", 64, at::kDouble},
    {"I64", 64, at::kLong},      {"U64", 64, kNone},
}};

const Dtype* dtype_named(std::string_view name) {
  for (const Dtype& d : kDtypes)
    if (d.name == name) return &d;
  return nullptr;
}

// The dtype's place in the reference's enum.
size_t rank(const Dtype* d) { return static_cast<size_t>(d - kDtypes.data()); }

const Dtype* dtype_of(at::ScalarType type) {
  for (const Dtype& d : kDtypes)
    if (d.torch != kNone && d.torch == type) return &d;
  return nullptr;
}

bool is_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

uint64_t get_le64(const char* p) {
  uint64_t v = 0;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// ---- Writing ----------------------------------------------------------------------------------

struct Prepared {
  std::string head;                      // the length, the JSON header and its padding
  std::vector<const at::Tensor*> order;  // the tensors in data order
};

// Throws InvalidArgument about writing `target`.
struct WriteFault {
  const std::string& target;
  [[noreturn]] void operator()(const std::string& what) const {
    throw InvalidArgument(fmt::format("Cannot write {}: {}", target, what));
  }
};

Prepared prepare(const Tensors& tensors, const std::map<std::string, std::string>& metadata,
                 const std::string& target) {
  const WriteFault invalid{target};
  struct Item {
    const std::string* name;
    const Dtype* dtype;
    const at::Tensor* tensor;
  };
  std::vector<Item> items;
  items.reserve(tensors.size());
  std::unordered_set<std::string_view> seen;
  for (const auto& [name, t] : tensors) {
    if (name.empty()) invalid("a tensor name is empty");
    if (name == kMetadataKey)
      invalid("the tensor name '__metadata__' is the format's metadata key");
    if (!is_utf8(name)) invalid(fmt::format("the tensor name '{}' is not valid UTF-8", name));
    if (!seen.insert(name).second) invalid(fmt::format("the tensor name '{}' appears twice", name));
    if (!t.defined()) invalid(fmt::format("tensor '{}' is undefined", name));
    if (t.layout() != at::kStrided || !t.device().is_cpu()) {
      invalid(fmt::format("tensor '{}' is not a dense CPU tensor but a {}", name, t.toString()));
    }
    const Dtype* dtype = dtype_of(t.scalar_type());
    if (dtype == nullptr) {
      invalid(fmt::format(
          "tensor '{}' has dtype {}, which has no safetensors type here (Bool, Byte, Char, Short, "
          "Half, BFloat16, Int, Float, Double, Long)",
          name, c10::toString(t.scalar_type())));
    }
    items.push_back({&name, dtype, &t});
  }
  for (const auto& [key, value] : metadata) {
    if (!is_utf8(key) || !is_utf8(value))
      invalid(fmt::format("the metadata entry '{}' is not valid UTF-8", key));
  }
  // The reference's order: dtype descending, then name (byte-wise, as Rust compares strings).
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    if (a.dtype != b.dtype) return rank(a.dtype) > rank(b.dtype);
    return *a.name < *b.name;
  });

  // Compact JSON as serde_json writes it, with the escapes it uses (util/json_writer.h's).
  std::string json = "{";
  if (!metadata.empty()) {
    json += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [key, value] : metadata) {
      if (!first) json += ',';
      first = false;
      append_json_string(json, key);
      json += ':';
      append_json_string(json, value);
    }
    json += '}';
  }
  Prepared out;
  out.order.reserve(items.size());
  uint64_t offset = 0;
  for (const Item& item : items) {
    if (json.size() > 1) json += ',';
    append_json_string(json, *item.name);
    json += ":{\"dtype\":\"";
    json += item.dtype->name;
    json += "\",\"shape\":";
    append_json_array(json, item.tensor->sizes());
    const auto size = static_cast<uint64_t>(item.tensor->numel() * item.tensor->element_size());
    json += ",\"data_offsets\":[";
    append_json_number(json, offset);
    json += ',';
    append_json_number(json, offset + size);
    json += "]}";
    offset += size;
    out.order.push_back(item.tensor);
  }
  json += '}';
  // Padded so that the data buffer, and with the order above every tensor, starts aligned.
  json.resize((json.size() + kLengthSize - 1) / kLengthSize * kLengthSize, ' ');
  if (json.size() > kMaxHeaderSize) {
    invalid(fmt::format("the header would be {} bytes, over the format's limit of {}", json.size(),
                        kMaxHeaderSize));
  }
  const uint64_t length = json.size();
  out.head.resize(kLengthSize);
  std::memcpy(out.head.data(), &length, kLengthSize);
  out.head += json;
  return out;
}

// Hands each tensor's bytes to `sink` in data order, making one contiguous copy at a time.
void for_each_data(const Prepared& prepared, const std::function<void(const void*, size_t)>& sink) {
  for (const at::Tensor* t : prepared.order) {
    const at::Tensor c = t->detach().contiguous();
    const size_t size = static_cast<size_t>(c.numel()) * c.element_size();
    if (size > 0) sink(c.data_ptr(), size);
  }
}

// ---- Reading ----------------------------------------------------------------------------------

[[noreturn]] void corrupt(const std::string& file, const std::string& what) {
  throw DataLossError(fmt::format("Safetensors file '{}' is corrupt: {}", file, what));
}

[[noreturn]] void truncated(const std::string& file, const std::string& what) {
  throw DataLossError(fmt::format("Safetensors file '{}' is truncated: {}", file, what));
}

// A JSON value for a message, cut short: a header may be 100 MB.
std::string excerpt(const Json& value) {
  std::string s = value.dump();
  constexpr size_t kMax = 80;
  if (s.size() > kMax) {
    s.resize(kMax);
    s += "...";
  }
  return s;
}

// Throws DataLossError about tensor `name` of `file`.
struct TensorFault {
  const std::string& file;
  const std::string& name;
  [[noreturn]] void operator()(const std::string& what) const {
    corrupt(file, fmt::format("tensor '{}' {}", name, what));
  }
};

struct Entry {
  std::string name;
  const Dtype* dtype;
  std::vector<int64_t> shape;
  uint64_t begin;
  uint64_t end;
};

struct Layout {
  std::vector<Entry> entries;  // in data order
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;  // of the data buffer in the file
};

// The header's length from the file's first 8 bytes, checked against the limit and the file.
uint64_t header_length(const char* first8, uint64_t file_size, const std::string& file) {
  const uint64_t n = get_le64(first8);
  if (n > kMaxHeaderSize) {
    corrupt(file, fmt::format("its header length {} exceeds the format's limit of {} bytes", n,
                              kMaxHeaderSize));
  }
  if (n > file_size - kLengthSize) {
    truncated(file, fmt::format("its header length is {} bytes, but only {} bytes follow it", n,
                                file_size - kLengthSize));
  }
  return n;
}

Json parse_json(std::string_view header, const std::string& file) {
  // What serde_json refuses and nlohmann's parser would take: it stops at a NUL byte, skips a
  // byte order mark, and checks UTF-8 only inside strings.
  if (!is_utf8(header)) corrupt(file, "its header is not valid UTF-8");
  if (const size_t nul = header.find('\0'); nul != std::string_view::npos) {
    corrupt(file, fmt::format("its header is not valid JSON: a NUL byte at offset {}", nul));
  }
  if (header.starts_with("\xEF\xBB\xBF"))
    corrupt(file, "its header is not valid JSON: it starts with a byte order mark");

  // Duplicate keys (the parser would keep the last) and nesting deeper than the format's three
  // levels (an object of objects of arrays of numbers) are refused while parsing, before a
  // hostile header can build a deep tree.
  std::vector<std::unordered_set<std::string>> keys;  // of each open object
  std::string entry;                                  // the current top-level key
  const Json::parser_callback_t check = [&](int depth, Json::parse_event_t event, Json& parsed) {
    using Event = Json::parse_event_t;
    switch (event) {
      case Event::object_start:
      case Event::array_start:
        if (depth >= 3) corrupt(file, "its header nests JSON deeper than the format does");
        if (event == Event::object_start) keys.emplace_back();
        break;
      case Event::object_end:
        keys.pop_back();
        break;
      case Event::key: {
        const auto& key = parsed.get_ref<const std::string&>();
        if (!keys.back().insert(key).second) {
          if (depth == 1)
            corrupt(file, fmt::format("the name '{}' appears twice in its header", key));
          corrupt(file,
                  fmt::format("the key '{}' appears twice in the header entry '{}'", key, entry));
        }
        if (depth == 1) entry = key;
        break;
      }
      default:
        break;
    }
    return true;
  };
  try {
    return Json::parse(header.begin(), header.end(), check);
  } catch (const nlohmann::json::exception& e) {
    corrupt(file, fmt::format("its header is not valid JSON ({})", e.what()));
  }
}

// The tensors of `header` in data order, checked against each other and a file of `file_size`
// bytes: the format's rules (the reference's Metadata::validate and read_metadata) and the limits
// of LibTorch's sizes. Nothing is allocated per tensor until all of this holds.
Layout parse_header(std::string_view header, uint64_t file_size, const std::string& file) {
  const Json root = parse_json(header, file);
  if (!root.is_object()) corrupt(file, "its header is not a JSON object");

  Layout layout;
  layout.data_start = kLengthSize + header.size();
  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string& name = it.key();
    const Json& value = it.value();
    if (name == kMetadataKey) {
      if (value.is_null()) continue;  // serde's None, as the reference reads it
      if (!value.is_object()) corrupt(file, "its '__metadata__' is not an object of strings");
      for (auto m = value.begin(); m != value.end(); ++m) {
        if (!m.value().is_string()) {
          corrupt(file, fmt::format("its '__metadata__' value for '{}' is not a string but {}",
                                    m.key(), excerpt(m.value())));
        }
        layout.metadata.emplace(m.key(), m.value().get<std::string>());
      }
      continue;
    }
    const TensorFault bad{file, name};
    if (!value.is_object())
      bad(fmt::format("has the header entry {}, not an object", excerpt(value)));
    auto field = [&](const char* key) -> const Json& {
      const auto f = value.find(key);
      if (f == value.end()) bad(fmt::format("has no '{}'", key));
      return *f;
    };
    auto integers = [&](const char* key, const Json& list) {
      if (!list.is_array()) bad(fmt::format("has the {} {}, not a list", key, excerpt(list)));
      std::vector<uint64_t> out;
      out.reserve(list.size());
      for (const Json& v : list) {
        if (!v.is_number_unsigned()) {
          bad(fmt::format("has the {} {}, not a list of non-negative integers", key,
                          excerpt(list)));
        }
        out.push_back(v.get<uint64_t>());
      }
      return out;
    };

    const Json& dtype_field = field("dtype");
    if (!dtype_field.is_string()) bad(fmt::format("has the dtype {}", excerpt(dtype_field)));
    const std::string& dtype_name = dtype_field.get_ref<const std::string&>();
    const Dtype* dtype = dtype_named(dtype_name);
    if (dtype == nullptr) bad(fmt::format("has the unknown dtype '{}'", dtype_name));
    const std::vector<uint64_t> shape = integers("shape", field("shape"));
    const std::vector<uint64_t> offsets = integers("data_offsets", field("data_offsets"));
    if (offsets.size() != 2) {
      bad(fmt::format("has the data_offsets {}, not [BEGIN, END]", excerpt(field("data_offsets"))));
    }
    const uint64_t begin = offsets[0];
    const uint64_t end = offsets[1];
    if (end < begin)
      bad(fmt::format("has data_offsets [{}, {}] that end before they begin", begin, end));

    uint64_t bits = dtype->bits;
    for (const uint64_t d : shape) {
      if (__builtin_mul_overflow(bits, d, &bits)) {
        bad(fmt::format("has the shape {}, whose size overflows 64 bits", excerpt(field("shape"))));
      }
    }
    if (bits % 8 != 0) {
      bad(fmt::format("of dtype {} and shape {} does not fill whole bytes", dtype->name,
                      excerpt(field("shape"))));
    }
    if (bits / 8 != end - begin) {
      bad(fmt::format(
          "of dtype {} and shape {} has {} bytes, but its data_offsets [{}, {}] span {}",
          dtype->name, excerpt(field("shape")), bits / 8, begin, end, end - begin));
    }
    std::vector<int64_t> sizes;
    sizes.reserve(shape.size());
    for (const uint64_t d : shape) {
      // Possible beside a zero dimension.
      if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        bad(fmt::format("has the dimension {}, beyond LibTorch's sizes", d));
      sizes.push_back(static_cast<int64_t>(d));
    }
    layout.entries.push_back({name, dtype, std::move(sizes), begin, end});
  }

  // The tensors must tile the data buffer: each starting where the previous one ended, the last
  // ending at the end of the file. Older writers listed them in another order than their data.
  std::stable_sort(layout.entries.begin(), layout.entries.end(),
                   [](const Entry& a, const Entry& b) {
                     return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
                   });
  uint64_t covered = 0;
  const Entry* previous = nullptr;
  for (const Entry& e : layout.entries) {
    if (e.begin > covered) {
      corrupt(file, fmt::format("bytes [{}, {}) of its data buffer belong to no tensor", covered,
                                e.begin));
    }
    if (e.begin < covered) {
      corrupt(file,
              fmt::format("tensor '{}' (data_offsets [{}, {}]) overlaps tensor '{}' "
                          "(data_offsets [{}, {}])",
                          e.name, e.begin, e.end, previous->name, previous->begin, previous->end));
    }
    covered = e.end;
    previous = &e;
  }
  const uint64_t data_size = file_size - layout.data_start;
  if (covered > data_size) {
    truncated(file,
              fmt::format("its tensors need {} bytes of data after the header, the file has {}",
                          covered, data_size));
  }
  if (covered < data_size) {
    corrupt(file, fmt::format("the last {} bytes of its data buffer belong to no tensor",
                              data_size - covered));
  }
  return layout;
}

// The tensors of `layout`, each in memory of its own, filled by `read(file offset, dst, size)`.
SafetensorsFile materialize(Layout layout, const std::string& file,
                            const std::function<void(uint64_t, void*, size_t)>& read) {
  for (const Entry& e : layout.entries) {
    if (e.dtype->torch == kNone) {
      throw UnimplementedError(fmt::format(
          "Safetensors file '{}': tensor '{}' has dtype {}, for which LibTorch 1.13 has no type",
          file, e.name, e.dtype->name));
    }
  }
  SafetensorsFile out;
  out.metadata = std::move(layout.metadata);
  out.tensors.reserve(layout.entries.size());
  for (Entry& e : layout.entries) {
    at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(e.dtype->torch));
    const size_t size = static_cast<size_t>(e.end - e.begin);
    if (size > 0) read(layout.data_start + e.begin, t.data_ptr(), size);
    if (e.dtype->torch == at::kBool) {
      // LibTorch takes a bool's byte to be 0 or 1; the format does not say, and numpy reads any
      // other byte as true.
      auto* p = static_cast<uint8_t*>(t.data_ptr());
      for (size_t i = 0; i < size; ++i) p[i] = p[i] != 0;
    }
    out.tensors.emplace_back(std::move(e.name), std::move(t));
  }
  return out;
}

}  // namespace

std::string safetensors_bytes(const Tensors& tensors,
                              const std::map<std::string, std::string>& metadata) {
  const Prepared prepared = prepare(tensors, metadata, "safetensors");
  std::string out = prepared.head;
  for_each_data(prepared,
                [&](const void* p, size_t n) { out.append(static_cast<const char*>(p), n); });
  return out;
}

void write_safetensors(const std::string& path, const Tensors& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const Prepared prepared = prepare(tensors, metadata, fmt::format("safetensors file '{}'", path));
  AtomicFileWriter writer(path);
  writer.append(prepared.head.data(), prepared.head.size());
  for_each_data(prepared, [&](const void* p, size_t n) { writer.append(p, n); });
  writer.commit();
}

SafetensorsFile parse_safetensors(const char* data, size_t size, const std::string& name) {
  if (size < kLengthSize) {
    truncated(name,
              fmt::format("{} bytes, shorter than the {}-byte header length", size, kLengthSize));
  }
  const uint64_t n = header_length(data, size, name);
  Layout layout = parse_header(std::string_view(data + kLengthSize, n), size, name);
  return materialize(std::move(layout), name, [&](uint64_t offset, void* dst, size_t count) {
    std::memcpy(dst, data + offset, count);
  });
}

SafetensorsFile read_safetensors(const std::string& path) {
  const ReadableFile file(path, "safetensors file");
  const uint64_t file_size = file.size();
  auto read_at = [&](uint64_t offset, void* dst, size_t count) {
    file.read_at(offset, dst, count);
  };

  if (file_size < kLengthSize) {
    truncated(path, fmt::format("{} bytes, shorter than the {}-byte header length", file_size,
                                kLengthSize));
  }
  char first8[kLengthSize];
  read_at(0, first8, kLengthSize);
  const uint64_t n = header_length(first8, file_size, path);
  std::string header(n, '\0');
  read_at(kLengthSize, header.data(), n);
  return materialize(parse_header(header, file_size, path), path, read_at);
}

}  // namespace trainhooks::internal
