// Builds `.trainstate` sidecar files for the checkpoint fuzz targets: the 28-byte framing header
// (checkpoint/checkpoint_file.cpp) around a payload, with correct lengths and checksums, so that
// mutations reach the decoding behind the checks.
#pragma once

#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>
#include <torch/serialize.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/format/trainhooks/sidecar.h"
#include "checkpoint/format/trainhooks/trainhooks_format.h"
#include "util/crc32c.h"

namespace trainhooks::fuzz {

inline void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

// Header + payload, as write_checkpoint_files frames it.
inline std::string frame_sidecar(std::string_view payload,
                                 uint32_t version = internal::kCheckpointFormatVersion) {
  std::string out("TRNSTATE");
  put_le(out, version, 4);
  put_le(out, payload.size(), 8);
  put_le(out, crc32c::mask(crc32c::value(payload)), 4);
  put_le(out, crc32c::mask(crc32c::value(out.data(), out.size())), 4);
  out.append(payload);
  return out;
}

// The smallest valid payload: no optimizers, RNG state, inputs or state, and a variables file of
// `size` bytes with CRC32C `crc`.
inline std::string minimal_payload(uint64_t size, uint32_t crc) {
  auto dict = [] { return c10::impl::GenericDict(c10::StringType::get(), c10::AnyType::get()); };
  auto payload = dict();
  payload.insert(std::string("format"), std::string("trainhooks.trainstate"));
  payload.insert(std::string("version"), static_cast<int64_t>(internal::kCheckpointFormatVersion));
  auto vars = dict();
  vars.insert(std::string("file"), std::string("model.ckpt-1"));
  vars.insert(std::string("size"), static_cast<int64_t>(size));
  vars.insert(std::string("crc32c"), static_cast<int64_t>(crc));
  vars.insert(std::string("count"), int64_t{0});
  payload.insert(std::string("variables"), vars);
  payload.insert(std::string("global_step"), int64_t{1});
  payload.insert(std::string("wall_time"), 0.0);
  for (const char* key : {"optimizers", "rng", "inputs", "state"})
    payload.insert(std::string(key), dict());
  const std::vector<char> bytes = torch::pickle_save(c10::IValue(payload));
  return std::string(bytes.data(), bytes.size());
}

}  // namespace trainhooks::fuzz
