#include "events_command.h"

#include <iostream>
#include <memory>
#include <string>

#include "trainhooks/summary/inspect.h"

namespace trainhooks {

void add_events_command(CLI::App& app) {
  struct Args {
    std::string logdir;
    bool csv = false;
    std::string tag;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("events", "Summarise the event files of a log directory");
  cmd->add_option("LOGDIR", args->logdir, "Log directory (or one event file)")->required();
  cmd->add_flag("--csv", args->csv, "Print run,tag,step,wall_time,value rows for scalars");
  cmd->add_option("--tag", args->tag, "Only this tag");
  cmd->callback([args] {
    summary::InspectOptions options{.tag = args->tag};
    try {
      if (args->csv) {
        summary::write_scalars_csv(std::cout, args->logdir, options);
      } else {
        summary::print_runs(std::cout, summary::inspect_logdir(args->logdir, options));
      }
      std::cout.flush();
    } catch (const std::exception& e) {
      std::cout.flush();
      std::cerr << "trainhooks events: " << e.what() << std::endl;
      throw CLI::RuntimeError(1);  // CLI11 exits with this status and prints nothing more
    }
  });
}

}  // namespace trainhooks
