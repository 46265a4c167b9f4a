// The message of a stored exception, for log lines about an error that is raised elsewhere.
#pragma once

#include <exception>
#include <string>

namespace trainhooks::internal {

inline std::string error_message(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

}  // namespace trainhooks::internal
