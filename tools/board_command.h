// `trainhooks board LOGDIR` and `trainhooks report LOGDIR -o FILE` (include/trainhooks/board/).
//
// `board` serves the live dashboard of a log directory over HTTP (default
// http://127.0.0.1:6006/), re-reading what the event files gained every --reload-interval
// seconds, until SIGINT or SIGTERM, then exits 0. It prints one line once it listens:
// `trainhooks board: serving LOGDIR at http://HOST:PORT/ (Ctrl-C to stop)` (with --port 0, the
// port the system chose). `report` writes the dashboard as one self-contained HTML file and
// prints `trainhooks report: wrote FILE (R runs, T tags)`.
//
// Errors (a missing log directory, a port in use, an unwritable output) are one line on
// stderr, `trainhooks board: <message>` or `trainhooks report: <message>`, and exit status 1.
//
//   CLI::App app{"trainhooks"};
//   trainhooks::add_board_commands(app);
#pragma once
#include <CLI/CLI.hpp>

namespace trainhooks {

// Adds the `board` and `report` subcommands to the tool.
void add_board_commands(CLI::App& app);

}  // namespace trainhooks
