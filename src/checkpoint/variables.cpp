#include "trainhooks/checkpoint/variables.h"

#include <ATen/core/Dict.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/core/ivalue.h>
#include <torch/serialize.h>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "checkpoint/format/trainhooks/torch_zip_reader.h"
#include "trainhooks/errors.h"
#include "trainhooks/graph.h"
#include "util/atomic_file.h"

namespace trainhooks {

namespace fs = std::filesystem;

void save_variables(const Graph& graph, const std::string& path) {
  c10::Dict<std::string, at::Tensor> dict;
  for (Node v : graph.variables()) dict.insert(graph.name(v), graph.variable_value(v).detach());
  std::vector<char> bytes = torch::pickle_save(c10::IValue(dict));
  internal::write_file_atomically(path, std::string_view(bytes.data(), bytes.size()));
}

void load_variables(Graph& graph, const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw FileError(fmt::format("Cannot read variables file '{}': it is a directory", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw NotFoundError(fmt::format("Cannot open variables file '{}'", path));
  std::vector<char> bytes;
  try {
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } catch (const std::exception&) {
    in.setstate(std::ios::badbit);  // libstdc++ throws from the buffer on a read error
  }
  if (in.bad()) throw FileError(fmt::format("Cannot read variables file '{}'", path));
  c10::IValue value;
  try {
    value = internal::unpickle(bytes.data(), bytes.size());
  } catch (const std::exception& e) {
    throw DataLossError(
        fmt::format("Cannot read variables file '{}': it is not a readable tensor dict", path));
  }
  internal::check_tensor_extents(value, path);
  if (!value.isGenericDict())
    throw DataLossError(fmt::format("Variables file '{}' does not hold a dict", path));
  auto dict = value.toGenericDict();
  // Check everything before changing anything.
  std::vector<std::pair<Node, at::Tensor>> updates;
  for (Node v : graph.variables()) {
    const auto& name = graph.name(v);
    auto it = dict.find(c10::IValue(name));
    if (it == dict.end())
      throw NotFoundError(fmt::format("Variable '{}' is not in '{}'", name, path));
    if (!it->value().isTensor())
      throw DataLossError(fmt::format("Entry '{}' of '{}' is not a tensor", name, path));
    at::Tensor t = it->value().toTensor();
    const auto& current = graph.variable_value(v);
    if (t.sizes() != current.sizes() || t.scalar_type() != current.scalar_type()) {
      throw InvalidArgument(
          fmt::format("Variable '{}' in '{}' has shape [{}] and dtype {}, the graph's has shape "
                      "[{}] and dtype {}",
                      name, path, fmt::join(t.sizes(), ", "), c10::toString(t.scalar_type()),
                      fmt::join(current.sizes(), ", "), c10::toString(current.scalar_type())));
    }
    updates.emplace_back(v, t);
  }
  at::NoGradGuard no_grad;
  for (auto& [v, t] : updates) graph.variable_value(v).copy_(t);
}

}  // namespace trainhooks
