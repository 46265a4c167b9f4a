// Crash-safe file replacement: write a temporary file in the same directory, fsync it, rename it
// over the target, fsync the directory. A crash at any moment leaves the old file or the new one,
// never a partial one.
#pragma once

#include <string>
#include <string_view>

namespace trainhooks::internal {

// Throws trainhooks errors naming the path and the failing system call (a full disk included);
// the temporary file is removed on failure.
void write_file_atomically(const std::string& path, std::string_view contents);

}  // namespace trainhooks::internal
