// CRC32C (Castagnoli), the checksum of TFRecord framing and of checkpoint files, plus
// TensorFlow's masking.
//
// crc32c() picks the SSE4.2 instruction when the CPU has it and a table-driven fallback
// otherwise; both paths are callable directly so tests can check each against known values.
//
//   uint32_t c = crc32c::value("123456789", 9);   // 0xE3069283
//   uint32_t stored = crc32c::mask(c);              // what a TFRecord header holds
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace trainhooks::crc32c {

// Continues a CRC over more bytes: extend(extend(0, a), b) == value(a + b).
uint32_t extend(uint32_t crc, const void* data, size_t size);
uint32_t extend_portable(uint32_t crc, const void* data, size_t size);
// Only valid when has_hardware() is true.
uint32_t extend_hardware(uint32_t crc, const void* data, size_t size);
bool has_hardware();

inline uint32_t value(const void* data, size_t size) { return extend(0, data, size); }
inline uint32_t value(std::string_view bytes) { return extend(0, bytes.data(), bytes.size()); }

// Storing a CRC of data that itself contains CRCs weakens it; TFRecord rotates and offsets.
inline constexpr uint32_t kMaskDelta = 0xa282ead8u;
inline uint32_t mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kMaskDelta; }
inline uint32_t unmask(uint32_t masked) {
  uint32_t rot = masked - kMaskDelta;
  return (rot >> 17) | (rot << 15);
}

}  // namespace trainhooks::crc32c
