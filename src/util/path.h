// Path helpers shared by the checkpoint code and the hooks: comparing paths the way the file
// system would, without touching the disk.
#pragma once

#include <string>

namespace trainhooks::internal {

// `dir` made absolute and lexically normal, without a trailing '/' ("" is the current directory).
std::string normal_dir(const std::string& dir);
// The directory part of `path` ("." when it has none).
std::string parent_dir(const std::string& path);
// True when `a` and `b` name the same path once made absolute and lexically normal (symbolic
// links are not followed).
bool same_path(const std::string& a, const std::string& b);

}  // namespace trainhooks::internal
