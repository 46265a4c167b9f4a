#include "graph_command.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "trainhooks/errors.h"
#include "trainhooks/summary/event_reader.h"
#include "trainhooks/summary/graph_def.h"

namespace trainhooks {
namespace {

namespace fs = std::filesystem;
namespace ths = summary;

constexpr const char* kGraphFile = "graph.pbtxt";

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FileError(fmt::format("Cannot read {}", path.string()));
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A graph.pbtxt, checked, as protobuf prints it.
std::string text_file_graph(const fs::path& path) {
  const std::string text = read_text(path);
  try {
    return ths::to_text(ths::parse_graph_def_text(text));
  } catch (const InvalidArgument& e) {
    throw DataLossError(fmt::format("{}: {}", path.string(), e.what()));
  }
}

// The last graph event of an event file or of a directory's event files.
std::optional<std::string> event_graph(const fs::path& path) {
  ths::EventReader reader(path);
  std::optional<std::string> data;
  fs::path file;
  while (auto event = reader.next()) {
    if (event->graph_def) {
      data = std::move(event->graph_def_data);
      file = reader.current_file();
    }
  }
  if (!data) return std::nullopt;
  try {
    return ths::graph_def_bytes_to_text(*data);
  } catch (const DataLossError& e) {
    throw DataLossError(fmt::format("{}: its last graph event: {}", file.string(), e.what()));
  }
}

void run_graph(const std::string& arg) {
  const fs::path path(arg);
  std::error_code ec;
  if (!fs::exists(path, ec)) throw NotFoundError(fmt::format("No such file or directory: {}", arg));
  std::string text;
  if (fs::is_directory(path, ec)) {
    if (fs::exists(path / kGraphFile, ec)) {
      text = text_file_graph(path / kGraphFile);
    } else if (auto graph = event_graph(path)) {
      text = std::move(*graph);
    } else {
      throw NotFoundError(fmt::format("No graph in {}: no {} and no graph event in its event files",
                                      arg, kGraphFile));
    }
  } else if (path.extension() == ".pbtxt") {
    text = text_file_graph(path);
  } else if (auto graph = event_graph(path)) {
    text = std::move(*graph);
  } else {
    throw NotFoundError(fmt::format("No graph event in {}", arg));
  }
  std::cout << text;
  std::cout.flush();
}

}  // namespace

void add_graph_command(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "graph", "Print the graph a run wrote (graph.pbtxt or its last graph event) as text");
  cmd->add_option("PATH", *path, "Checkpoint or log directory, a graph.pbtxt or an event file")
      ->required();
  cmd->callback([path] {
    try {
      run_graph(*path);
    } catch (const std::exception& e) {
      std::cout.flush();
      std::cerr << "trainhooks graph: " << e.what() << std::endl;
      throw CLI::RuntimeError(1);
    } catch (...) {
      std::cout.flush();
      std::cerr << "trainhooks graph: unexpected error" << std::endl;
      throw CLI::RuntimeError(1);
    }
  });
}

}  // namespace trainhooks
