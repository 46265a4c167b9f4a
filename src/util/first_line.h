// The first line of an exception's message: c10::Error's what() carries a backtrace after it.
#pragma once

#include <exception>
#include <string>

namespace trainhooks::internal {

inline std::string first_line(const std::exception& e) {
  std::string msg = e.what();
  if (auto nl = msg.find('\n'); nl != std::string::npos) msg.resize(nl);
  return msg;
}

}  // namespace trainhooks::internal
