// Path comparisons for checkpoint directories and files: paths written by different code (a
// relative prefix, an absolute directory from a state file) name the same file or not, without
// touching the file system.
//
//   if (same_path(listed.back(), path)) ...      // "ckpt/./model.ckpt-5" and
//   "/abs/ckpt/model.ckpt-5"
//
// Pure functions of their arguments and the working directory.
#pragma once

#include <string>

namespace trainhooks::internal {

// The directory of `path`: its parent, "." for a bare file name.
std::string parent_dir(const std::string& path);

// `dir` made absolute and normal, without a trailing slash ("" is the working directory).
std::string normal_dir(const std::string& dir);

// Whether two paths are the same once made absolute and normal (symbolic links not followed).
bool same_path(const std::string& a, const std::string& b);

}  // namespace trainhooks::internal
