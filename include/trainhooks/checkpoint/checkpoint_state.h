// The checkpoint state file: `<dir>/checkpoint`, TensorFlow's CheckpointState in protobuf text
// format, so TensorFlow's tools and `tf.train.latest_checkpoint` read ours and we read theirs.
//
//   model_checkpoint_path: "model.ckpt-200"
//   all_model_checkpoint_paths: "model.ckpt-100"
//   all_model_checkpoint_paths: "model.ckpt-200"
//   all_model_checkpoint_timestamps: 1700000000.5
//   all_model_checkpoint_timestamps: 1700000600.25
//
// CheckpointManager (checkpoint_manager.h) keeps this file; these functions are for tools and
// tests.
//
//   if (auto state = th::get_checkpoint_state("runs/exp1"))
//     for (const auto& p : state->all_model_checkpoint_paths) std::cout << p << "\n";
//
// Paths: update_checkpoint_state() writes them relative to the directory when save_relative_paths
// is set (what CheckpointManager does, as TF2's does) or the directory itself is relative, and as
// given otherwise (TensorFlow's rule). get_checkpoint_state() joins relative paths with the
// directory being read, as TensorFlow does, so a directory written with relative paths can be
// moved or copied; an absolute path (older files) that is not in that directory is replaced by
// the file of the same name in it when that exists (the directory was moved or copied), with a
// warning. The file is replaced atomically (temporary file, fsync, rename, fsync of the directory).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trainhooks/env.h"

namespace trainhooks {

struct CheckpointState {
  // The newest checkpoint; also the last entry of all_model_checkpoint_paths.
  std::string model_checkpoint_path;
  // The checkpoints not deleted yet, oldest first.
  std::vector<std::string> all_model_checkpoint_paths;
  // Seconds since the Unix epoch when each was written: empty, or one per path.
  std::vector<double> all_model_checkpoint_timestamps;
  // When the newest checkpoint kept by keep_checkpoint_every_n_hours was written; 0: none.
  double last_preserved_timestamp = 0;

  bool operator==(const CheckpointState&) const = default;
};

// The file name of the state: `<dir>/checkpoint`.
std::string checkpoint_state_path(const std::string& checkpoint_dir);

// The text that protobuf's text_format.MessageToString prints for the state: one `field: value`
// line per value in field-number order, strings C-escaped, doubles as Python prints them, zero
// and empty fields left out.
std::string checkpoint_state_to_text(const CheckpointState& state);

// Parses that text (any field order, `#` comments, either quote). Throws DataLossError naming
// `source` and the line for anything that is not a CheckpointState: a syntax error, a last line
// without its newline (every writer ends each line with one, so this is a file cut short, e.g.
// in the middle of a time stamp), time stamps that are not one per path, or a missing
// model_checkpoint_path (TensorFlow's "Invalid checkpoint state").
CheckpointState parse_checkpoint_state(std::string_view text, std::string_view source = "<text>");

// TensorFlow's get_checkpoint_state: nullopt when `<dir>/checkpoint` does not exist; relative
// paths are returned joined with `checkpoint_dir`; absolute paths outside it are resolved as said
// above, with one warning on `env`. Throws DataLossError for a file that cannot be parsed
// (TensorFlow logs and ignores it; a trainhooks chief must not start afresh silently), FileError
// naming the path when it is a directory or cannot be read.
std::optional<CheckpointState> get_checkpoint_state(const std::string& checkpoint_dir,
                                                    const Env& env = Env::system());

// TensorFlow's update_checkpoint_state: appends model_checkpoint_path to the list when it is not
// its last entry, applies the path rule above and replaces `<save_dir>/checkpoint` atomically.
// InvalidArgument for an empty model_checkpoint_path, timestamps that do not match the paths, or
// a checkpoint path that is the state file itself.
void update_checkpoint_state(const std::string& save_dir, CheckpointState state,
                             bool save_relative_paths = false);

}  // namespace trainhooks
