// The safetensors reader (checkpoint/format/safetensors/safetensors_file.h), from bytes in memory
// and from a file.
//
// Input: the file. Any trainhooks error is an accepted outcome. Both readers must agree, and a
// file that reads must write back to bytes that read as the same tensors and metadata.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "checkpoint/format/safetensors/safetensors_file.h"
#include "fuzz_util.h"
#include "trainhooks/errors.h"

namespace {

namespace th = trainhooks;
using th::internal::SafetensorsFile;

std::optional<SafetensorsFile> parse(const char* data, size_t size) {
  try {
    return th::internal::parse_safetensors(data, size, "input");
  } catch (const th::Error&) {
    return std::nullopt;
  }
}

bool same(const SafetensorsFile& a, const SafetensorsFile& b) {
  if (a.metadata != b.metadata || a.tensors.size() != b.tensors.size()) return false;
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const auto& [name_a, ta] = a.tensors[i];
    const auto& [name_b, tb] = b.tensors[i];
    if (name_a != name_b || ta.scalar_type() != tb.scalar_type() || ta.sizes() != tb.sizes())
      return false;
    const size_t bytes = static_cast<size_t>(ta.numel()) * ta.element_size();
    if (bytes > 0 && std::memcmp(ta.data_ptr(), tb.data_ptr(), bytes) != 0) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::optional<SafetensorsFile> parsed = parse(input.data(), input.size());

  std::optional<SafetensorsFile> read;
  try {
    read = th::internal::read_safetensors(th::fuzz::write_scratch("input.safetensors", input));
  } catch (const th::Error&) {
  }
  if (parsed.has_value() != read.has_value()) __builtin_trap();
  if (!parsed) return 0;
  if (!same(*parsed, *read)) __builtin_trap();

  std::string rewritten;
  try {
    rewritten = th::internal::safetensors_bytes(parsed->tensors, parsed->metadata);
  } catch (const th::InvalidArgument&) {
    return 0;  // a name the writer refuses (empty), which the reader lets through
  }
  std::optional<SafetensorsFile> again = parse(rewritten.data(), rewritten.size());
  if (!again) __builtin_trap();
  // The writer orders by dtype and name, the input's order may differ.
  SafetensorsFile original = *parsed;
  const auto by_name = [](const auto& a, const auto& b) { return a.first < b.first; };
  std::sort(original.tensors.begin(), original.tensors.end(), by_name);
  std::sort(again->tensors.begin(), again->tensors.end(), by_name);
  if (!same(original, *again)) __builtin_trap();
  return 0;
}
