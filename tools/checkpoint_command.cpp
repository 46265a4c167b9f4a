#include "checkpoint_command.h"

#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "trainhooks/checkpoint/checkpoint_format.h"
#include "trainhooks/checkpoint/checkpoint_reader.h"
#include "trainhooks/checkpoint/inspect_checkpoint.h"

namespace trainhooks {

namespace {

// Runs `body`; an exception becomes `trainhooks checkpoint: <message>` on stderr and status 1,
// as does a false result (the output already says why).
void run(const std::function<bool()>& body) {
  bool ok = false;
  try {
    ok = body();
    std::cout.flush();
  } catch (const std::exception& e) {
    std::cout.flush();
    std::string message = e.what();
    message.resize(std::min(message.size(), message.find('\n')));  // c10 errors' backtraces
    std::cerr << "trainhooks checkpoint: " << message << std::endl;
  }
  if (!ok) throw CLI::RuntimeError(1);  // CLI11 exits with this status and prints nothing more
}

}  // namespace

void add_checkpoint_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("checkpoint", "List, inspect, verify and export checkpoints");
  cmd->require_subcommand(1);

  auto dir = std::make_shared<std::string>();
  CLI::App* list = cmd->add_subcommand(
      "list",
      "The checkpoints a directory's state file lists (* marks the latest, #k the k-th best)");
  list->add_option("DIR", *dir, "Checkpoint directory")->required();
  list->callback([dir] {
    run([&] {
      print_checkpoint_list(std::cout, *dir);
      return true;
    });
  });

  struct InspectArgs {
    std::string path;
    InspectCheckpointOptions options;
    bool json = false;
  };
  auto args = std::make_shared<InspectArgs>();
  CLI::App* inspect = cmd->add_subcommand(
      "inspect", "Variables, optimizer state, input positions and state keys of a checkpoint");
  inspect
      ->add_option("PATH", args->path,
                   "Checkpoint (or its .trainstate file), or directory (its latest checkpoint)")
      ->required();
  // Several names after one --tensor, or the option repeated; PATH goes first, or after `--`.
  inspect
      ->add_option("--tensor", args->options.tensors,
                   "Print these variables' values (--tensor a b, or --tensor a --tensor b)")
      ->take_all()
      ->allow_extra_args(true);
  inspect->add_flag("--all-tensors", args->options.all_tensors, "Print every variable's value");
  inspect->add_flag("--json", args->json, "Print one JSON object");
  inspect->callback([args] {
    run([&] {
      if (args->json) {
        print_checkpoint_json(std::cout, args->path, args->options);
      } else {
        print_checkpoint(std::cout, args->path, args->options);
      }
      return true;
    });
  });

  auto target = std::make_shared<std::string>();
  CLI::App* verify = cmd->add_subcommand(
      "verify", "Verify every byte of a checkpoint, or of each checkpoint a directory lists");
  verify
      ->add_option("PATH", *target,
                   "Checkpoint (or its .trainstate file), or directory (every checkpoint it lists)")
      ->required();
  verify->callback([target] { run([&] { return verify_checkpoints(std::cout, *target); }); });

  struct ExportArgs {
    std::string path;
    std::string format;
    std::string output;
  };
  auto exported = std::make_shared<ExportArgs>();
  CLI::App* export_cmd = cmd->add_subcommand(
      "export", "Write a checkpoint's variables in another format (e.g. safetensors)");
  export_cmd
      ->add_option("PATH", exported->path,
                   "Checkpoint (or its .trainstate file), or directory (its latest checkpoint)")
      ->required();
  export_cmd->add_option("--format", exported->format, "The format to write: safetensors")
      ->required();
  export_cmd->add_option("-o,--output", exported->output, "The file to write")->required();
  export_cmd->callback([exported] {
    run([&] {
      const std::string checkpoint = resolve_checkpoint(exported->path);
      export_checkpoint(checkpoint, exported->output, exported->format);
      std::cout << "Wrote the variables of " << checkpoint << " to " << exported->output << " ("
                << exported->format << ")\n";
      return true;
    });
  });
}

}  // namespace trainhooks
