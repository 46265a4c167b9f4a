// What `trainhooks checkpoint list|inspect|verify` print (TensorFlow's inspect_checkpoint), as
// functions that write to a stream, for tools and tests.
//
//   trainhooks::print_checkpoint_list(std::cout, "runs/exp1");
//   trainhooks::print_checkpoint(std::cout, "runs/exp1", {.tensors = {"net/weight"}});
//   bool ok = trainhooks::verify_checkpoints(std::cout, "runs/exp1");
//
// A `path` is a checkpoint (`runs/exp1/model.ckpt-1200`, or its `.trainstate` file) or a
// checkpoint directory, which stands for its latest checkpoint (for verify_checkpoints: for every
// checkpoint it lists). Errors are those of checkpoint_reader.h (resolve_checkpoint: a file that
// is not a checkpoint says so), naming the path; nothing is printed before the files are read.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace trainhooks {

struct InspectCheckpointOptions {
  // Print the values of these variables (NotFoundError naming one the checkpoint lacks).
  std::vector<std::string> tensors{};
  // Print the value of every variable.
  bool all_tensors = false;
};

// One row per checkpoint the directory's state file lists, oldest first: step, size, when it
// was written (ISO 8601, UTC) and path; `*` marks the latest, missing files are named.
void print_checkpoint_list(std::ostream& out, const std::string& checkpoint_dir);

// The global step, time, files, then a table of variables (dtype, shape, elements), optimizer
// state, input positions and state keys; then the requested values, formatted as numpy prints
// them (summarised beyond 1000 elements).
void print_checkpoint(std::ostream& out, const std::string& path,
                      const InspectCheckpointOptions& options = {});

// The same facts as one JSON object (values as nested lists, in full; NaN and infinities as
// null, which JSON cannot represent).
void print_checkpoint_json(std::ostream& out, const std::string& path,
                           const InspectCheckpointOptions& options = {});

// Reads and verifies every byte of the checkpoint (or of every checkpoint a directory lists) and
// prints `OK <path> (step N, V variables, B bytes)`, or `MISSING <path>: <reason>` or
// `CORRUPT <path>: <reason>` (any other failure: `ERROR <path>: <reason>`) per checkpoint, and
// for a directory a summary line. Returns true when every checkpoint is OK.
bool verify_checkpoints(std::ostream& out, const std::string& path);

}  // namespace trainhooks
