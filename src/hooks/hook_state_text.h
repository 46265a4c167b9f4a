// Reading a hook's checkpointed state (a header line naming the format, then "key value" lines):
// numbers must parse whole, and anything else is a DataLossError naming the hook and the key,
// never a silently wrong counter.
#pragma once

#include <fmt/format.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <string_view>

#include "trainhooks/errors.h"

namespace trainhooks::internal {

[[noreturn]] inline void bad_hook_state(std::string_view hook, const std::string& why) {
  throw DataLossError(fmt::format("{}: cannot read its checkpointed state: {}", hook, why));
}

inline double parse_hook_state_double(std::string_view hook, const std::string& key,
                                      const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno == ERANGE)
    bad_hook_state(hook, key + " = '" + text + "'");
  return v;
}

inline int64_t parse_hook_state_int(std::string_view hook, const std::string& key,
                                    const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE)
    bad_hook_state(hook, key + " = '" + text + "'");
  return v;
}

// The fields of one state text, checked against its expected header line. A missing key or an
// unparsable value throws; the caller assigns its members only after every field has been read.
class HookStateFields {
 public:
  HookStateFields(std::string_view hook, std::string_view header, std::string_view bytes)
      : hook_(hook) {
    std::istringstream in{std::string(bytes)};
    std::string line;
    if (!std::getline(in, line) || line != header)
      bad_hook_state(hook_, "unknown format '" + line + "'");
    while (std::getline(in, line)) {
      const auto space = line.find(' ');
      fields_[line.substr(0, space)] = space == std::string::npos ? "" : line.substr(space + 1);
    }
  }

  const std::string& text(const std::string& key) const {
    auto it = fields_.find(key);
    if (it == fields_.end()) bad_hook_state(hook_, "missing " + key);
    return it->second;
  }
  double number(const std::string& key) const {
    return parse_hook_state_double(hook_, key, text(key));
  }
  int64_t integer(const std::string& key) const {
    return parse_hook_state_int(hook_, key, text(key));
  }
  std::string_view hook() const { return hook_; }

 private:
  std::string_view hook_;
  std::map<std::string, std::string> fields_;
};

}  // namespace trainhooks::internal
