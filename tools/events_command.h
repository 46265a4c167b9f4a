// `trainhooks events LOGDIR [--csv] [--tag TAG]`: what a log directory holds.
//
// Without --csv it lists every run (the directory itself and each subdirectory with event files)
// and, per tag, the kind of data, the number of values, the step range and the last value, as
// `tensorboard --inspect` does. With --csv it prints `run,tag,step,wall_time,value` for every
// scalar. --tag keeps one tag. A missing directory or a corrupt record is reported on stderr
// (naming the path and byte offset) and the command exits with status 1.
//
//   CLI::App app{"trainhooks"};
//   trainhooks::add_events_command(app);
#pragma once

#include <CLI/CLI.hpp>

namespace trainhooks {

void add_events_command(CLI::App& app);

}  // namespace trainhooks
