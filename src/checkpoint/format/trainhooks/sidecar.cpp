#include "checkpoint/format/trainhooks/sidecar.h"

#include <ATen/core/List.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>

#include <fmt/format.h>

#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "optimizer_state.h"
#include "trainhooks/errors.h"
#include "util/crc32c.h"

namespace trainhooks::internal {

namespace {

constexpr char kMagic[8] = {'T', 'R', 'N', 'S', 'T', 'A', 'T', 'E'};
constexpr uint32_t kFormatVersion = kCheckpointFormatVersion;
constexpr const char* kFormatName = "trainhooks.trainstate";

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

// A byte tensor over the string's memory, which it takes: no copy.
at::Tensor adopt_bytes(std::string bytes) {
  auto* owned = new std::string(std::move(bytes));
  return at::from_blob(
      owned->data(), {static_cast<int64_t>(owned->size())}, [owned](void*) { delete owned; },
      at::TensorOptions().dtype(at::kByte));
}

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

}  // namespace

namespace {

// S is TrainingSnapshot (the archives move into the payload) or const TrainingSnapshot (copied).
template <typename S>
SidecarPayload payload_of(S& c, const std::string& variables_file) {
  constexpr bool move = !std::is_const_v<S>;
  auto payload = new_dict();
  payload.insert(std::string("format"), std::string(kFormatName));
  payload.insert(std::string("version"), static_cast<int64_t>(kFormatVersion));
  auto vars_info = new_dict();
  vars_info.insert(std::string("file"), variables_file);
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
    else if constexpr (move)
      entry.insert(std::string("archive"), adopt_bytes(std::move(s.archive)));
    else
      entry.insert(std::string("archive"), bytes_tensor(s.archive));
    entry.insert(std::string("lr"), c10::List<double>(s.lrs));
    optimizers.insert(name, entry);
  }
  if constexpr (move) c.optimizers.clear();  // their archives and tensors moved into the payload
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
  return SidecarPayload{payload, {vars_info, optimizers, rng, inputs, state}};
}

}  // namespace

SidecarPayload sidecar_payload(TrainingSnapshot& c, const std::string& variables_file) {
  return payload_of(c, variables_file);
}

SidecarPayload sidecar_payload(const TrainingSnapshot& c, const std::string& variables_file) {
  return payload_of(c, variables_file);
}

void set_variables_record(c10::impl::GenericDict& payload, uint64_t size, uint32_t crc32c) {
  auto vars_info = payload.at(std::string("variables")).toGenericDict();
  vars_info.insert_or_assign(std::string("size"), static_cast<int64_t>(size));
  vars_info.insert_or_assign(std::string("crc32c"), static_cast<int64_t>(crc32c));
}

std::string sidecar_header(uint64_t length, uint32_t payload_crc32c) {
  std::string header;
  header.append(kMagic, sizeof(kMagic));
  put_le(header, kFormatVersion, 4);
  put_le(header, length, 8);
  put_le(header, crc32c::mask(payload_crc32c), 4);
  put_le(header, crc32c::mask(crc32c::value(header.data(), header.size())), 4);
  return header;
}

uint32_t check_sidecar_framing(const FileBytes& side, uint32_t payload_crc32c,
                               const std::string& side_path) {
  if (side.size() < kSidecarHeaderSize) {
    throw DataLossError(
        fmt::format("Checkpoint file '{}' is truncated: {} bytes, shorter than its {}-byte header",
                    side_path, side.size(), kSidecarHeaderSize));
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
  if (length != side.size() - kSidecarHeaderSize) {
    throw DataLossError(fmt::format(
        "Checkpoint file '{}' is {}: its header announces {} payload bytes, the file has {}",
        side_path, length > side.size() - kSidecarHeaderSize ? "truncated" : "corrupt", length,
        side.size() - kSidecarHeaderSize));
  }
  if (crc32c::unmask(static_cast<uint32_t>(get_le(side.data() + 20, 4))) != payload_crc32c) {
    throw DataLossError(
        fmt::format("Checkpoint file '{}' is corrupt: payload checksum mismatch", side_path));
  }
  return version;
}

VariablesRecord decode_sidecar_payload(const c10::IValue& root, uint32_t version,
                                       const std::string& side_path, TrainingSnapshot& cp) {
  Fields top(root, "payload", side_path);
  const auto& format = top.get("format");
  if (!format.isString() || format.toStringRef() != kFormatName) top.fail("has the wrong 'format'");
  Fields vars_info = top.sub("variables");
  const int64_t vars_size = vars_info.integer("size");
  const auto vars_crc = static_cast<uint32_t>(vars_info.integer("crc32c"));
  cp.global_step = top.integer("global_step");
  if (const auto* wt = top.find("wall_time"); wt && wt->isDouble()) cp.wall_time = wt->toDouble();
  if (cp.global_step < 0) top.fail("'global_step' is negative");

  Fields optimizers = top.sub("optimizers");
  for (const auto& name : optimizers.keys()) {
    Fields o = optimizers.sub(name);
    OptimizerSnapshot s;
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
  return VariablesRecord{vars_size, vars_crc};
}

}  // namespace trainhooks::internal
