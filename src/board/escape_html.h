// Text placed in the board's HTML (the report's title, the network warning's address), escaped so
// that it can neither close an element nor an attribute.
#pragma once
#include <string>
#include <string_view>

namespace trainhooks::board::internal {

inline std::string escape_html(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace trainhooks::board::internal
