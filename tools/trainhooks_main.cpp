// The `trainhooks` command-line tool: `trainhooks checkpoint ...`, `trainhooks events ...`,
// `trainhooks graph PATH` (a run's graph as text),
// `trainhooks board LOGDIR` (the live dashboard) and `trainhooks report LOGDIR -o FILE`.
//
// Exit statuses (docs/guide.md): 0 success; 1 an error, or a check that found a problem
// (`checkpoint verify`); 2 a usage error: an unknown subcommand or option, a missing or extra
// argument. Every error is one line on stderr; no exception leaves main().
#include <CLI/CLI.hpp>

#include <algorithm>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "board_command.h"
#include "checkpoint_command.h"
#include "events_command.h"
#include "graph_command.h"

namespace {

constexpr int kUsageError = 2;

// The subcommands that the words of argv select (the tool itself first), and the first word that
// names none where a subcommand is expected. CLI11 would report that word as an unexpected
// argument; a user who mistyped a subcommand wants to hear which ones exist.
struct Selection {
  std::vector<CLI::App*> apps;
  std::string unknown;
  std::string unknown_option;  // one that the level before a subcommand does not have

  CLI::App* last() const { return apps.back(); }
  std::string name() const {
    std::string out;
    for (const CLI::App* app : apps) out += (out.empty() ? "" : " ") + app->get_name();
    return out;
  }
  std::string valid() const {
    std::string out;
    for (const CLI::App* sub : last()->get_subcommands({}))
      out += (out.empty() ? "" : ", ") + sub->get_name();
    return out;
  }
  bool at_leaf() const { return last()->get_subcommands({}).empty(); }
};

Selection select(CLI::App& app, int argc, char** argv) {
  Selection s{{&app}, ""};
  for (int i = 1; i < argc && !s.at_leaf(); ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.starts_with("-")) {  // --help, --version: the levels above a leaf take no values
      if (!s.last()->get_option_no_throw(arg.substr(0, arg.find('=')))) {
        s.unknown_option = arg;
        break;
      }
      continue;
    }
    CLI::App* next = nullptr;
    for (CLI::App* sub : s.last()->get_subcommands({}))
      if (sub->check_name(arg)) next = sub;
    if (!next) {
      s.unknown = arg;
      break;
    }
    s.apps.push_back(next);
  }
  return s;
}

int run(int argc, char** argv) {
  CLI::App app{"trainhooks: inspect checkpoints and event files, serve and export the dashboard",
               "trainhooks"};
  app.set_version_flag("--version", "trainhooks " TRAINHOOKS_VERSION, "Print the version and exit");
  app.require_subcommand(1);
  trainhooks::add_checkpoint_command(app);
  trainhooks::add_events_command(app);
  trainhooks::add_graph_command(app);
  trainhooks::add_board_commands(app);

  const Selection selection = select(app, argc, argv);
  if (!selection.unknown.empty()) {
    std::cerr << selection.name() << ": unknown subcommand '" << selection.unknown
              << "'; valid subcommands: " << selection.valid() << " (see " << selection.name()
              << " --help)" << std::endl;
    return kUsageError;
  }
  if (!selection.unknown_option.empty()) {
    std::cerr << selection.name() << ": unknown option '" << selection.unknown_option << "' (see "
              << selection.name() << " --help)" << std::endl;
    return kUsageError;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();  // a command failed and has said why
  } catch (const CLI::ParseError& e) {
    // No subcommand where one is needed: say which exist.
    const bool missing = !selection.at_leaf() && dynamic_cast<const CLI::RequiredError*>(&e);
    std::cerr << selection.name() << ": "
              << (missing ? "a subcommand is required; valid subcommands: " + selection.valid()
                          : std::string(e.what()))
              << " (see " << selection.name() << " --help)" << std::endl;
    return kUsageError;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::string message = e.what();
    message.resize(std::min(message.size(), message.find('\n')));  // c10 errors' backtraces
    std::cerr << "trainhooks: " << message << std::endl;
  } catch (...) {
    std::cerr << "trainhooks: unknown error" << std::endl;
  }
  return 1;
}
