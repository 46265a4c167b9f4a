// `trainhooks events LOGDIR [--csv] [--tag TAG] [--skip-corrupt] [--no-purge]`: what a log
// directory holds.
//
// Without --csv it lists every run (the directory itself and each subdirectory with event files)
// and, per tag, the kind of data, the number of values, the step range and the last value, as
// `tensorboard --inspect` does. With --csv it prints `run,tag,step,wall_time,value` for every
// scalar. --tag keeps one tag. Values a restart orphaned are left out, as TensorBoard leaves them
// out, unless --no-purge. Notes (a file ending in a partial record; with --csv, skipped records
// and purges) go to stderr. Every error (a missing path, a file that is not an event file, a
// corrupt record without --skip-corrupt, a --tag matching nothing) is one line on stderr,
// `trainhooks events: <message>`, after whatever was read before it, and the exit status is 1.
//
//   CLI::App app{"trainhooks"};
//   trainhooks::add_events_command(app);
#pragma once

#include <CLI/CLI.hpp>

namespace trainhooks {

void add_events_command(CLI::App& app);

}  // namespace trainhooks
