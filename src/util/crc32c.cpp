#include "util/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <nmmintrin.h>
#define TRAINHOOKS_HAVE_X86 1
#endif

namespace trainhooks::crc32c {
namespace {

constexpr uint32_t kPoly = 0x82f63b78u;  // Castagnoli, reflected.

// Slice-by-8 tables: table[k][b] is the CRC of byte b followed by k zero bytes.
struct Tables {
  std::array<std::array<uint32_t, 256>, 8> t{};
  constexpr Tables() {
    for (uint32_t b = 0; b < 256; ++b) {
      uint32_t c = b;
      for (int i = 0; i < 8; ++i) c = (c >> 1) ^ ((c & 1u) ? kPoly : 0u);
      t[0][b] = c;
    }
    for (uint32_t b = 0; b < 256; ++b) {
      for (size_t k = 1; k < 8; ++k) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xffu];
    }
  }
};
constexpr Tables kTables;

inline uint64_t load_le64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap64(v);
#endif
  return v;
}

}  // namespace

uint32_t extend_portable(uint32_t crc, const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  const auto& t = kTables.t;
  uint32_t c = ~crc;
  for (; size >= 8; size -= 8, p += 8) {
    uint64_t v = load_le64(p) ^ c;
    c = t[7][v & 0xff] ^ t[6][(v >> 8) & 0xff] ^ t[5][(v >> 16) & 0xff] ^ t[4][(v >> 24) & 0xff] ^
        t[3][(v >> 32) & 0xff] ^ t[2][(v >> 40) & 0xff] ^ t[1][(v >> 48) & 0xff] ^ t[0][v >> 56];
  }
  for (; size > 0; --size, ++p) c = (c >> 8) ^ t[0][(c ^ *p) & 0xff];
  return ~c;
}

#if TRAINHOOKS_HAVE_X86
__attribute__((target("sse4.2"))) uint32_t extend_hardware(uint32_t crc, const void* data,
                                                           size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t c = ~crc;
  for (; size >= 8; size -= 8, p += 8) {
    uint64_t v;
    std::memcpy(&v, p, sizeof v);
    c = _mm_crc32_u64(c, v);
  }
  auto c32 = static_cast<uint32_t>(c);
  for (; size > 0; --size, ++p) c32 = _mm_crc32_u8(c32, *p);
  return ~c32;
}

bool has_hardware() {
  static const bool supported = __builtin_cpu_supports("sse4.2");
  return supported;
}
#else
uint32_t extend_hardware(uint32_t crc, const void* data, size_t size) {
  return extend_portable(crc, data, size);
}
bool has_hardware() { return false; }
#endif

uint32_t extend(uint32_t crc, const void* data, size_t size) {
  // Decided once; a function pointer keeps the per-call cost to one indirect call.
  static const auto impl = has_hardware() ? &extend_hardware : &extend_portable;
  return impl(crc, data, size);
}

}  // namespace trainhooks::crc32c
