#include "util/path.h"

#include <filesystem>

namespace trainhooks::internal {

namespace fs = std::filesystem;

std::string parent_dir(const std::string& path) {
  fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

std::string normal_dir(const std::string& dir) {
  fs::path p = fs::absolute(fs::path(dir.empty() ? "." : dir)).lexically_normal();
  std::string s = p.string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

bool same_path(const std::string& a, const std::string& b) {
  return fs::absolute(fs::path(a)).lexically_normal() ==
         fs::absolute(fs::path(b)).lexically_normal();
}

}  // namespace trainhooks::internal
