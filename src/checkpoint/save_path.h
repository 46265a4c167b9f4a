// The checks every writer of a checkpoint makes on the path it is given (Saver, CheckpointManager,
// compat::v1::Saver), with the same messages whichever is called.
#pragma once

#include <string>

namespace trainhooks::internal {

// InvalidArgument (naming `arg` in messages of `what`) unless `given` can be a checkpoint's path:
// not empty, a file name rather than a directory, not the state file's name `checkpoint`;
// NotFoundError when its directory does not exist. `prefix_of_step`: `given` gets `-<step>`
// appended, so it cannot be the state file's name.
void check_save_path(const char* what, const char* arg, const std::string& given,
                     bool prefix_of_step);

}  // namespace trainhooks::internal
