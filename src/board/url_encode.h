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

// A Content-Disposition header's value that names a download `name` (any bytes: run and tag names
// are whatever the logs hold): `attachment; filename="<ASCII>"; filename*=UTF-8''<encoded>`
// (RFC 6266). The plain name keeps A-Z a-z 0-9 - _ . and turns every other byte into '_'; the
// encoded one percent-encodes every byte outside those, so neither can hold a quote, a CR or LF
// or anything else that would end the header or add one. '/' becomes '_' first in both, as
// TensorBoard's download names have it.
inline std::string content_disposition(std::string_view name) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string plain, encoded;
  for (const char ch : name) {
    const auto c = static_cast<unsigned char>(ch == '/' ? '_' : ch);
    const bool kept = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '_' || c == '.';
    plain += kept ? static_cast<char>(c) : '_';
    if (kept) {
      encoded += static_cast<char>(c);
    } else {
      encoded += '%';
      encoded += kHex[c >> 4];
      encoded += kHex[c & 0xf];
    }
  }
  return "attachment; filename=\"" + plain + "\"; filename*=UTF-8''" + encoded;
}

}  // namespace trainhooks::board::internal
