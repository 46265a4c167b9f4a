// Reading a hook's checkpointed state (key = value text): numbers must parse whole, and anything
// else is a DataLossError naming the hook and the key, never a silently wrong counter.
#pragma once

#include <fmt/format.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
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

}  // namespace trainhooks::internal
