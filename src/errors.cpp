#include "trainhooks/errors.h"

#include <fmt/format.h>

namespace trainhooks {

const char* code_name(Code code) {
  switch (code) {
    case Code::kCancelled:
      return "Cancelled";
    case Code::kUnknown:
      return "Unknown";
    case Code::kInvalidArgument:
      return "InvalidArgument";
    case Code::kDeadlineExceeded:
      return "DeadlineExceeded";
    case Code::kNotFound:
      return "NotFound";
    case Code::kAlreadyExists:
      return "AlreadyExists";
    case Code::kFailedPrecondition:
      return "FailedPrecondition";
    case Code::kAborted:
      return "Aborted";
    case Code::kOutOfRange:
      return "OutOfRange";
    case Code::kUnimplemented:
      return "Unimplemented";
    case Code::kResourceExhausted:
      return "ResourceExhausted";
    case Code::kInternal:
      return "Internal";
    case Code::kUnavailable:
      return "Unavailable";
    case Code::kDataLoss:
      return "DataLoss";
  }
  return "Unknown";
}

void throw_error(Code code, const std::string& message) {
  switch (code) {
    case Code::kCancelled:
      throw CancelledError(message);
    case Code::kUnknown:
      throw UnknownError(message);
    case Code::kInvalidArgument:
      throw InvalidArgument(message);
    case Code::kDeadlineExceeded:
      throw DeadlineExceededError(message);
    case Code::kNotFound:
      throw NotFoundError(message);
    case Code::kAlreadyExists:
      throw AlreadyExistsError(message);
    case Code::kFailedPrecondition:
      throw FailedPreconditionError(message);
    case Code::kAborted:
      throw AbortedError(message);
    case Code::kOutOfRange:
      throw OutOfRangeError(message);
    case Code::kUnimplemented:
      throw UnimplementedError(message);
    case Code::kResourceExhausted:
      throw ResourceExhaustedError(message);
    case Code::kInternal:
      throw InternalError(message);
    case Code::kUnavailable:
      throw UnavailableError(message);
    case Code::kDataLoss:
      throw DataLossError(message);
  }
  throw UnknownError(message);
}

namespace internal {

void throw_not_positive(std::string_view owner, std::string_view arg, int64_t value) {
  throw InvalidArgument(fmt::format("{}: {} must be positive, got {}", owner, arg, value));
}

void throw_not_positive(std::string_view owner, std::string_view arg, double value) {
  throw InvalidArgument(fmt::format("{}: {} must be positive, got {}", owner, arg, value));
}

}  // namespace internal

}  // namespace trainhooks
