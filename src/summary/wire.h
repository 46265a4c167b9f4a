// Protocol-buffer wire format, written by hand for the event envelope (Event, Summary, Value).
//
// The writer thread encodes every event; building protobuf message objects for each scalar would
// cost allocations per event, while these helpers append straight into a reused buffer. Fields
// are emitted in field-number order and proto3 defaults are omitted, so the bytes equal what the
// protobuf library serializes for the same message.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace trainhooks::summary::wire {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

constexpr uint32_t key(uint32_t field, WireType type) { return (field << 3) | type; }

inline size_t varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

inline void put_varint(std::string& out, uint64_t v) {
  char buf[10];
  size_t n = 0;
  while (v >= 0x80) {
    buf[n++] = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  buf[n++] = static_cast<char>(v);
  out.append(buf, n);
}

inline void put_fixed32(std::string& out, uint32_t v) {
  char buf[4];
  for (int i = 0; i < 4; ++i) buf[i] = static_cast<char>(v >> (8 * i));
  out.append(buf, 4);
}

inline void put_fixed64(std::string& out, uint64_t v) {
  char buf[8];
  for (int i = 0; i < 8; ++i) buf[i] = static_cast<char>(v >> (8 * i));
  out.append(buf, 8);
}

inline uint64_t double_bits(double d) {
  uint64_t bits;
  std::memcpy(&bits, &d, sizeof bits);
  return bits;
}

inline uint32_t float_bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

// Size of a length-delimited field (key, length, payload) with a one-byte key.
inline size_t delimited_size(size_t payload) { return 1 + varint_size(payload) + payload; }

inline void put_delimited_header(std::string& out, uint32_t field, size_t payload) {
  put_varint(out, key(field, kLengthDelimited));
  put_varint(out, payload);
}

inline void put_bytes_field(std::string& out, uint32_t field, std::string_view bytes) {
  put_delimited_header(out, field, bytes.size());
  out.append(bytes);
}

}  // namespace trainhooks::summary::wire
