#include "checkpoint/save_path.h"

#include <fmt/format.h>

#include <filesystem>

#include "trainhooks/errors.h"
#include "util/path.h"

namespace trainhooks::internal {

namespace fs = std::filesystem;

void check_save_path(const char* what, const char* arg, const std::string& given,
                     bool prefix_of_step) {
  if (given.empty()) throw InvalidArgument(fmt::format("{}: {} must not be empty", what, arg));
  const fs::path p(given);
  if (given.back() == '/' || p.filename() == "." || p.filename() == "..") {
    throw InvalidArgument(
        fmt::format("{}: {} '{}' names a directory; give a file prefix such as '{}/model.ckpt'",
                    what, arg, given, p.lexically_normal().string()));
  }
  if (!prefix_of_step && p.filename() == "checkpoint") {
    throw InvalidArgument(fmt::format(
        "{}: 'latest_filename' collides with 'save_path': 'checkpoint' and '{}'", what, given));
  }
  std::error_code ec;
  if (!fs::is_directory(parent_dir(given), ec)) {
    throw NotFoundError(fmt::format("Parent directory of {} doesn't exist, can't save.", given));
  }
}

}  // namespace trainhooks::internal
