// The board's canonical request URLs, built as the page builds them (JavaScript's
// encodeURIComponent), so that the report's recorded responses are found under the exact keys
// the page asks for.
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trainhooks::board::internal {

// encodeURIComponent on the UTF-8 bytes of `value`: A-Z a-z 0-9 - _ . ! ~ * ' ( ) stay, every
// other byte becomes %XX (uppercase hex). (JavaScript throws on lone surrogates; a byte string
// has none to meet.)
inline std::string encode_uri_component(std::string_view value) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(value.size() * 3);
  for (const char ch : value) {
    const auto c = static_cast<unsigned char>(ch);
    const bool kept = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '_' || c == '.' || c == '!' || c == '~' || c == '*' ||
                      c == '\'' || c == '(' || c == ')';
    if (kept) {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
  return out;
}

// endpoint?name=value&... with the values encoded, in the order given; the endpoint alone when
// there are no parameters.
inline std::string api_url(std::string_view endpoint,
                           const std::vector<std::pair<std::string, std::string>>& params) {
  std::string out(endpoint);
  char separator = '?';
  for (const auto& [name, value] : params) {
    out += separator;
    out += name;
    out += '=';
    out += encode_uri_component(value);
    separator = '&';
  }
  return out;
}

}  // namespace trainhooks::board::internal
