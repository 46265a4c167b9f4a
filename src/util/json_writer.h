// Appending JSON to a std::string: the board's API responses (large scalar series written
// directly, fmt into a reserved string, rather than through a DOM) and the metrics logger's rows.
//
// Floating-point numbers are written shortest-round-trip for their own type (a float as a float,
// so 0.1f is "0.1"); NaN and the infinities, which JSON lacks, as the strings "NaN",
// "Infinity" and "-Infinity" (JavaScript's Number() reads those back). Strings are escaped for
// JSON; bytes that are not valid UTF-8 become U+FFFD, so a tag or text written by a careless
// writer cannot make a response unparsable.
#pragma once
#include <cmath>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>
#include <type_traits>

#include <fmt/compile.h>
#include <fmt/format.h>

namespace trainhooks::internal {

template <typename T>
requires std::is_arithmetic_v<T>
void append_json_number(std::string& out, T value) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(value)) {
      out += "\"NaN\"";
      return;
    }
    if (std::isinf(value)) {
      out += value > 0 ? "\"Infinity\"" : "\"-Infinity\"";
      return;
    }
  }
  // Through a stack buffer: appending via a back_inserter costs as much again as the formatting.
  char buffer[40];
  const char* end = fmt::format_to(buffer, FMT_COMPILE("{}"), value);
  out.append(buffer, static_cast<size_t>(end - buffer));
}

// The length of the valid UTF-8 sequence at s[i], or 0 when it is not one (overlong forms,
// surrogates and code points above U+10FFFF included).
inline size_t utf8_sequence_length(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  size_t n = 0;
  uint32_t cp = 0;
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
    cp = c & 0x1f;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    cp = c & 0x0f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    cp = cp << 6 | (byte(i + k) & 0x3f);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff) return 0;
  if (cp >= 0xd800 && cp <= 0xdfff) return 0;
  return n;
}

inline void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t n = utf8_sequence_length(s, i);
      if (n == 0) {
        out += "\\ufffd";
        ++i;
      } else {
        out.append(s.substr(i, n));
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          fmt::format_to(std::back_inserter(out), "\\u{:04x}", c);
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
  out += '"';
}

// "key": — keys are ASCII literals.
inline void append_json_key(std::string& out, std::string_view key) {
  out += '"';
  out += key;
  out += "\": ";
}

// [a,b,c] of numbers.
template <typename Range>
void append_json_array(std::string& out, const Range& values) {
  out += '[';
  bool first = true;
  for (const auto& v : values) {
    if (!first) out += ',';
    first = false;
    append_json_number(out, v);
  }
  out += ']';
}

// Writes one JSON object field by field ({"a": 1, "b": "x"}), the braces and commas in one place:
//   JsonObject(out).text("run", run).number("step", 10);
// key() writes a key and returns the string, for the caller to append the value.
class JsonObject {
 public:
  explicit JsonObject(std::string& out) : out_(out) { out_ += '{'; }
  ~JsonObject() { out_ += '}'; }
  JsonObject(const JsonObject&) = delete;
  JsonObject& operator=(const JsonObject&) = delete;

  std::string& key(std::string_view key) {
    if (!first_) out_ += ", ";
    first_ = false;
    append_json_key(out_, key);
    return out_;
  }
  template <typename T>
  requires std::is_arithmetic_v<T> JsonObject& number(std::string_view k, T value) {
    append_json_number(key(k), value);
    return *this;
  }
  JsonObject& text(std::string_view k, std::string_view value) {
    append_json_string(key(k), value);
    return *this;
  }
  JsonObject& flag(std::string_view k, bool value) {
    key(k) += value ? "true" : "false";
    return *this;
  }
  template <typename Range>
  JsonObject& numbers(std::string_view k, const Range& values) {
    append_json_array(key(k), values);
    return *this;
  }

 private:
  std::string& out_;
  bool first_ = true;
};

// Writes one JSON array element by element: next() adds the separator and returns the string,
// for the caller to append the element.
class JsonArray {
 public:
  explicit JsonArray(std::string& out, std::string_view separator = ", ")
      : out_(out), separator_(separator) {
    out_ += '[';
  }
  ~JsonArray() { out_ += ']'; }
  JsonArray(const JsonArray&) = delete;
  JsonArray& operator=(const JsonArray&) = delete;

  std::string& next() {
    if (!first_) out_ += separator_;
    first_ = false;
    return out_;
  }

 private:
  std::string& out_;
  std::string_view separator_;
  bool first_ = true;
};

}  // namespace trainhooks::internal
