// Error types of trainhooks, named after TensorFlow's status codes.
//
// Every error is a trainhooks::Error (a std::runtime_error) carrying a Code, so callers can catch
// the family or one code. Messages name what was wrong: the argument and value, or the node path
// (`loss <- y_pred <- x`) for errors raised while evaluating a graph.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

namespace trainhooks {

enum class Code {
  kCancelled,
  kUnknown,
  kInvalidArgument,
  kDeadlineExceeded,
  kNotFound,
  kAlreadyExists,
  kFailedPrecondition,
  kAborted,
  kOutOfRange,
  kUnimplemented,
  kResourceExhausted,
  kInternal,
  kUnavailable,
  kDataLoss,
};

// The code's TensorFlow name, e.g. "InvalidArgument".
const char* code_name(Code code);

class Error : public std::runtime_error {
 public:
  Error(Code code, const std::string& message) : std::runtime_error(message), code_(code) {}
  Code code() const { return code_; }

 private:
  Code code_;
};

#define TRAINHOOKS_DEFINE_ERROR(Name, code_value)                             \
  class Name : public Error {                                                 \
   public:                                                                    \
    explicit Name(const std::string& message) : Error(code_value, message) {} \
  };

TRAINHOOKS_DEFINE_ERROR(CancelledError, Code::kCancelled)
TRAINHOOKS_DEFINE_ERROR(UnknownError, Code::kUnknown)
TRAINHOOKS_DEFINE_ERROR(InvalidArgument, Code::kInvalidArgument)
TRAINHOOKS_DEFINE_ERROR(DeadlineExceededError, Code::kDeadlineExceeded)
TRAINHOOKS_DEFINE_ERROR(NotFoundError, Code::kNotFound)
TRAINHOOKS_DEFINE_ERROR(AlreadyExistsError, Code::kAlreadyExists)
TRAINHOOKS_DEFINE_ERROR(FailedPreconditionError, Code::kFailedPrecondition)
TRAINHOOKS_DEFINE_ERROR(AbortedError, Code::kAborted)
TRAINHOOKS_DEFINE_ERROR(OutOfRangeError, Code::kOutOfRange)
TRAINHOOKS_DEFINE_ERROR(UnimplementedError, Code::kUnimplemented)
TRAINHOOKS_DEFINE_ERROR(ResourceExhaustedError, Code::kResourceExhausted)
TRAINHOOKS_DEFINE_ERROR(InternalError, Code::kInternal)
TRAINHOOKS_DEFINE_ERROR(UnavailableError, Code::kUnavailable)
TRAINHOOKS_DEFINE_ERROR(DataLossError, Code::kDataLoss)

#undef TRAINHOOKS_DEFINE_ERROR

// Misuse of a session's lifecycle, as TF's Python RuntimeError
// ("Run called even after should_stop requested.", a feed conflict between hooks).
class RuntimeError : public Error {
 public:
  explicit RuntimeError(const std::string& message) : Error(Code::kFailedPrecondition, message) {}
};

// A file could not be created, read or written for a reason other than a missing file, a full
// disk (ResourceExhaustedError) or a refusal (FailedPreconditionError): EIO and the like. The
// message names the file and the system's error. Not transient: a MonitoredSession never
// recovers from it by recreating the session (unlike UnavailableError), so a failing disk ends
// training with the error instead of retrying.
class FileError : public Error {
 public:
  explicit FileError(const std::string& message) : Error(Code::kUnknown, message) {}
};

// Raised by NanTensorHook (fail_on_nan_loss) when the monitored loss is NaN.
class NanLossDuringTrainingError : public Error {
 public:
  NanLossDuringTrainingError() : Error(Code::kInvalidArgument, "NaN loss during training.") {}
  explicit NanLossDuringTrainingError(const std::string& message)
      : Error(Code::kInvalidArgument, message) {}
};

// Throws the Error subclass that matches `code` (InvalidArgument for kInvalidArgument, ...), so a
// rethrown error keeps its type after its message has been extended.
[[noreturn]] void throw_error(Code code, const std::string& message);

namespace internal {
[[noreturn]] void throw_not_positive(std::string_view owner, std::string_view arg, int64_t value);
[[noreturn]] void throw_not_positive(std::string_view owner, std::string_view arg, double value);
}  // namespace internal

// The one check and text for a numeric option that must be positive (NaN is not):
// InvalidArgument("<owner>: <arg> must be positive, got <value>"), e.g.
// check_positive("CheckpointSaverHook", "save_steps", 0) raises
// "CheckpointSaverHook: save_steps must be positive, got 0".
template <typename T>
requires std::is_arithmetic_v<T>
void check_positive(std::string_view owner, std::string_view arg, T value) {
  if (value > 0) return;
  if constexpr (std::is_floating_point_v<T>) {
    internal::throw_not_positive(owner, arg, static_cast<double>(value));
  } else {
    internal::throw_not_positive(owner, arg, static_cast<int64_t>(value));
  }
}

}  // namespace trainhooks
