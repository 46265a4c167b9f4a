// The `trainhooks` command-line tool.
#include <CLI/CLI.hpp>

#include "checkpoint_command.h"
#include "events_command.h"

int main(int argc, char** argv) {
  CLI::App app{"trainhooks: inspect checkpoints and event files"};
  app.require_subcommand(1);
  trainhooks::add_checkpoint_command(app);
  trainhooks::add_events_command(app);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
