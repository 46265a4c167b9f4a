// `trainhooks checkpoint list|inspect|verify`: what checkpoints hold, and whether they are intact.
//
//   trainhooks checkpoint list DIR                 the checkpoints DIR's state file lists
//   trainhooks checkpoint inspect PATH [--tensor NAME...]... [--all-tensors] [--json]
//   trainhooks checkpoint verify PATH              every byte of a checkpoint, or of each one
//                                                  a directory lists
//
// PATH is a checkpoint (or its `.trainstate` file) or a checkpoint directory (its latest
// checkpoint). Errors are reported on stderr in one line, naming the path, with exit status 1
// (a file that is not a checkpoint says so); verify also exits with 1 when a checkpoint is
// missing or corrupt. The output is that of trainhooks/checkpoint/inspect_checkpoint.h.
//
//   CLI::App app{"trainhooks"};
//   trainhooks::add_checkpoint_command(app);
#pragma once

#include <CLI/CLI.hpp>

namespace trainhooks {

void add_checkpoint_command(CLI::App& app);

}  // namespace trainhooks
