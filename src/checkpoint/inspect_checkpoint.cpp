#include "trainhooks/checkpoint/inspect_checkpoint.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/view_as_real.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <optional>

#include "checkpoint/best_checkpoints.h"
#include "optimizer_state.h"
#include "tensor_format.h"
#include "trainhooks/checkpoint/checkpoint_format.h"
#include "trainhooks/checkpoint/checkpoint_reader.h"
#include "trainhooks/checkpoint/checkpoint_state.h"
#include "trainhooks/errors.h"
#include "util/first_line.h"
#include "util/path.h"

namespace trainhooks {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

namespace {

// As Python names them (torch.float32), which is what a user of the files sees.
std::string dtype_name(at::ScalarType type) {
  switch (type) {
    case at::kFloat:
      return "float32";
    case at::kDouble:
      return "float64";
    case at::kHalf:
      return "float16";
    case at::kBFloat16:
      return "bfloat16";
    case at::kByte:
      return "uint8";
    case at::kChar:
      return "int8";
    case at::kShort:
      return "int16";
    case at::kInt:
      return "int32";
    case at::kLong:
      return "int64";
    case at::kBool:
      return "bool";
    case at::kComplexFloat:
      return "complex64";
    case at::kComplexDouble:
      return "complex128";
    default:
      return c10::toString(type);
  }
}

std::string human_bytes(uint64_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  static constexpr std::array<const char*, 5> kUnits = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes) / 1024;
  size_t unit = 0;
  // Round first so that 1048575 bytes reads 1.0 MiB, not 1024.0 KiB.
  while (std::round(v * 10) / 10 >= 1024 && unit + 1 < kUnits.size()) {
    v /= 1024;
    ++unit;
  }
  return fmt::format("{:.1f} {}", v, kUnits[unit]);
}

std::string iso8601_utc(double seconds) {
  const auto t = static_cast<std::time_t>(std::floor(seconds));
  std::tm tm{};
  if (!::gmtime_r(&t, &tm)) return fmt::format("{}", seconds);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string shape_text(at::IntArrayRef sizes) {
  return fmt::format("[{}]", fmt::join(sizes, ", "));
}

std::string plural(size_t n, const char* one, const char* many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

// Rows of cells printed as aligned columns, two spaces apart and indented by two; columns in
// `right` are right-aligned (numbers), the last column is not padded.
void print_table(std::ostream& out, const std::vector<std::vector<std::string>>& rows,
                 const std::vector<bool>& right) {
  std::vector<size_t> width(rows.front().size());
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  for (const auto& row : rows) {
    std::string line = " ";
    for (size_t c = 0; c < row.size(); ++c) {
      line += ' ';
      if (c + 1 == row.size() && !right[c]) {
        line += row[c];
      } else {
        line += right[c] ? fmt::format("{:>{}}", row[c], width[c])
                         : fmt::format("{:<{}}", row[c], width[c]);
        line += ' ';
      }
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << '\n';
  }
}

std::string learning_rates_text(const std::vector<double>& lrs) {
  if (lrs.empty()) return "-";
  std::vector<std::string> parts;
  for (double lr : lrs) parts.push_back(internal::format_float(lr, false));
  return fmt::format("{}", fmt::join(parts, ", "));
}

// The names to print values of, in file order; every name asked for must exist.
std::vector<std::string> tensors_to_print(const CheckpointReader& reader,
                                          const InspectCheckpointOptions& options) {
  for (const auto& name : options.tensors) reader.get_tensor(name);  // NotFoundError
  std::vector<std::string> names;
  for (const auto& name : reader.variable_names()) {
    if (options.all_tensors ||
        std::find(options.tensors.begin(), options.tensors.end(), name) != options.tensors.end())
      names.push_back(name);
  }
  return names;
}

// A value as nested lists; NaN and infinities as null.
Json json_of(const at::Tensor& value) {
  at::Tensor t = value.detach().cpu().contiguous();
  if (t.is_complex()) t = at::view_as_real(t).contiguous();  // [..., 2]: real and imaginary parts
  enum class Kind { kFloat, kInt, kBool } kind;
  if (t.scalar_type() == at::kBool) {
    kind = Kind::kBool;
  } else if (at::isFloatingType(t.scalar_type())) {
    kind = Kind::kFloat;
    t = t.to(at::kDouble);
  } else {
    kind = Kind::kInt;
    t = t.to(at::kLong);
  }
  const std::vector<int64_t> sizes = t.sizes().vec();
  int64_t offset = 0;
  auto element = [&](int64_t i) -> Json {
    switch (kind) {
      case Kind::kBool:
        return t.data_ptr<bool>()[i];
      case Kind::kInt:
        return t.data_ptr<int64_t>()[i];
      case Kind::kFloat: {
        double v = t.data_ptr<double>()[i];
        return std::isfinite(v) ? Json(v) : Json(nullptr);
      }
    }
    return nullptr;
  };
  auto build = [&](auto&& self, size_t dim) -> Json {
    if (dim == sizes.size()) return element(offset++);
    Json list = Json::array();
    for (int64_t i = 0; i < sizes[dim]; ++i) list.push_back(self(self, dim + 1));
    return list;
  };
  return build(build, 0);
}

std::optional<std::string> verify_one(const std::string& path, std::string& ok_line) {
  try {
    CheckpointReader reader(path);
    // The CRC covers the optimizers' archives; decoding one also catches a writer that produced
    // something Optimizer::load cannot read. (The reader has checked the state held as tensors.)
    for (const auto& o : reader.optimizers()) {
      if (!o.type.empty()) continue;
      const std::string bytes = reader.optimizer_archive(o.train_op);
      try {
        internal::read_optimizer_archive(bytes);
      } catch (const std::exception& e) {
        throw DataLossError(fmt::format(
            "Checkpoint file '{}' is corrupt: the optimizer state of train op '{}' cannot be "
            "read ({})",
            reader.trainstate_path(), o.train_op, internal::first_line(e)));
      }
    }
    ok_line = fmt::format("OK {} (step {}, {}, {} bytes)", path, reader.global_step(),
                          plural(reader.variable_names().size(), "variable", "variables"),
                          reader.total_bytes());
    return std::nullopt;
  } catch (const NotFoundError& e) {
    return fmt::format("MISSING {}: {}", path, e.what());
  } catch (const DataLossError& e) {
    return fmt::format("CORRUPT {}: {}", path, e.what());
  } catch (const std::exception& e) {
    return fmt::format("ERROR {}: {}", path, internal::first_line(e));
  }
}

}  // namespace

void print_checkpoint_list(std::ostream& out, const std::string& checkpoint_dir) {
  const std::vector<ListedCheckpoint> listed = list_checkpoints(checkpoint_dir);
  // Keep-best (checkpoint/best_checkpoints.h): a `best` column and the ranking, only when the
  // directory has the file, so that other listings stay as they were.
  std::optional<internal::BestCheckpoints> best_file;
  std::string best_problem;
  try {
    best_file = internal::read_best_checkpoints(checkpoint_dir);
  } catch (const Error& e) {
    best_problem = e.what();
  }
  std::vector<ScoredCheckpoint> best;
  if (best_file)
    best = internal::rank_best(best_file->scored, best_file->mode, best_file->keep_best_n);
  auto rank_of = [&](const std::string& path) -> std::string {
    for (size_t i = 0; i < best.size(); ++i)
      if (internal::same_path(best[i].path, path)) return fmt::format("#{}", i + 1);
    return "";
  };

  std::vector<std::vector<std::string>> rows = {{"", "step", "bytes", "size", "written", "path"}};
  if (best_file) rows[0].insert(rows[0].end() - 1, "best");
  for (const ListedCheckpoint& c : listed) {
    std::string path = c.path;
    if (!c.exists()) {
      std::vector<std::string> missing;
      if (!c.variables_file_exists) missing.push_back(fs::path(c.path).filename().string());
      if (!c.trainstate_file_exists)
        missing.push_back(
            fs::path(default_checkpoint_format().files(c.path).at(1)).filename().string());
      path += fmt::format("  (missing: {})", fmt::join(missing, ", "));
    }
    rows.push_back({c.latest ? "*" : "", c.step ? fmt::format("{}", *c.step) : "-",
                    fmt::format("{}", c.bytes), human_bytes(c.bytes),
                    c.timestamp ? iso8601_utc(*c.timestamp) : "-", path});
    if (best_file) rows.back().insert(rows.back().end() - 1, rank_of(c.path));
  }
  out << fmt::format("{} listed in {} (oldest first, * latest{}):\n",
                     plural(listed.size(), "checkpoint", "checkpoints"),
                     checkpoint_state_path(checkpoint_dir),
                     best_file ? fmt::format(", #k the k-th best by {}", best_file->metric) : "");
  std::vector<bool> right = {false, true, true, true, false, false};
  if (best_file) right.insert(right.end() - 1, false);
  print_table(out, rows, right);

  if (!best_problem.empty()) out << fmt::format("\nbest checkpoints: {}\n", best_problem);
  if (!best_file) return;
  out << fmt::format("\n{} by {} ({}, keep_best_n {}) in {}, never deleted by max_to_keep:\n",
                     plural(best.size(), "best checkpoint", "best checkpoints"), best_file->metric,
                     internal::metric_mode_name(best_file->mode), best_file->keep_best_n,
                     internal::best_checkpoints_path(checkpoint_dir));
  if (best.empty()) return;
  std::vector<std::vector<std::string>> ranked = {{"best", "step", best_file->metric, "path"}};
  for (size_t i = 0; i < best.size(); ++i) {
    const bool is_listed = std::any_of(listed.begin(), listed.end(), [&](const auto& c) {
      return internal::same_path(c.path, best[i].path);
    });
    ranked.push_back({fmt::format("#{}", i + 1), fmt::format("{}", best[i].step),
                      fmt::format("{:.6g}", best[i].value),
                      best[i].path + (is_listed ? "" : "  (kept, no longer listed)")});
  }
  print_table(out, ranked, {false, true, true, false});
}

void print_checkpoint(std::ostream& out, const std::string& path,
                      const InspectCheckpointOptions& options) {
  const CheckpointReader reader = load_checkpoint(path);
  const std::vector<std::string> values = tensors_to_print(reader, options);

  out << "checkpoint " << reader.path() << "\n";
  print_table(out,
              {{"global step", fmt::format("{}", reader.global_step())},
               {"written", iso8601_utc(reader.wall_time())},
               {"variables file", fmt::format("{} bytes ({})", reader.variables_file_bytes(),
                                              human_bytes(reader.variables_file_bytes()))},
               {"training state", fmt::format("{} bytes ({})", reader.trainstate_file_bytes(),
                                              human_bytes(reader.trainstate_file_bytes()))}},
              {false, false});

  const auto names = reader.variable_names();
  int64_t elements = 0;
  uint64_t bytes = 0;
  std::vector<std::vector<std::string>> vars = {{"name", "dtype", "shape", "elements"}};
  for (const auto& name : names) {
    const at::Tensor t = reader.get_tensor(name);
    elements += t.numel();
    bytes += t.nbytes();
    vars.push_back(
        {name, dtype_name(t.scalar_type()), shape_text(t.sizes()), fmt::format("{}", t.numel())});
  }
  out << fmt::format("\nvariables: {} ({}, {})\n", names.size(),
                     plural(elements, "element", "elements"), human_bytes(bytes));
  if (!names.empty()) print_table(out, vars, {false, false, false, true});

  const auto optimizers = reader.optimizers();
  out << fmt::format("\noptimizer state: {}\n", plural(optimizers.size(), "train op", "train ops"));
  if (!optimizers.empty()) {
    std::vector<std::vector<std::string>> rows = {
        {"train op", "optimizer", "learning rates", "bytes"}};
    for (const auto& o : optimizers) {
      rows.push_back({o.train_op, o.type.empty() ? "(archive)" : o.type,
                      learning_rates_text(o.learning_rates), fmt::format("{}", o.state_bytes)});
    }
    print_table(out, rows, {false, false, false, true});
  }

  const auto inputs = reader.input_positions();
  out << fmt::format("\ninput positions: {}\n", plural(inputs.size(), "input", "inputs"));
  if (!inputs.empty()) {
    std::vector<std::vector<std::string>> rows = {{"input", "epoch", "offset"}};
    for (const auto& [name, pos] : inputs)
      rows.push_back({name, fmt::format("{}", pos.epoch), fmt::format("{}", pos.offset)});
    print_table(out, rows, {false, true, true});
  }

  const auto keys = reader.state_keys();
  out << fmt::format("\nstate: {}\n", plural(keys.size(), "key", "keys"));
  if (!keys.empty()) {
    std::vector<std::vector<std::string>> rows = {{"key", "bytes"}};
    for (const auto& key : keys) rows.push_back({key, fmt::format("{}", reader.state(key).size())});
    print_table(out, rows, {false, true});
  }

  const auto rng = reader.cpu_rng_state();
  out << "\ncpu rng state: " << (rng ? fmt::format("{} bytes", rng->nbytes()) : "none") << "\n";

  for (const auto& name : values) {
    const at::Tensor t = reader.get_tensor(name);
    out << fmt::format("\n{} ({} {}):\n{}\n", name, dtype_name(t.scalar_type()),
                       shape_text(t.sizes()), internal::format_tensor(t));
  }
}

void print_checkpoint_json(std::ostream& out, const std::string& path,
                           const InspectCheckpointOptions& options) {
  const CheckpointReader reader = load_checkpoint(path);
  const std::vector<std::string> values = tensors_to_print(reader, options);

  Json j;
  j["path"] = reader.path();
  j["trainstate_path"] = reader.trainstate_path();
  j["global_step"] = reader.global_step();
  j["wall_time"] = reader.wall_time();
  j["written"] = iso8601_utc(reader.wall_time());
  j["variables_file_bytes"] = reader.variables_file_bytes();
  j["trainstate_file_bytes"] = reader.trainstate_file_bytes();
  Json vars = Json::array();
  for (const auto& name : reader.variable_names()) {
    const at::Tensor t = reader.get_tensor(name);
    Json v = {{"name", name},
              {"dtype", dtype_name(t.scalar_type())},
              {"shape", t.sizes().vec()},
              {"elements", t.numel()}};
    if (std::find(values.begin(), values.end(), name) != values.end()) v["value"] = json_of(t);
    vars.push_back(std::move(v));
  }
  j["variables"] = std::move(vars);
  Json optimizers = Json::array();
  for (const auto& o : reader.optimizers()) {
    optimizers.push_back({{"train_op", o.train_op},
                          {"learning_rates", o.learning_rates},
                          {"type", o.type},
                          {"state_bytes", o.state_bytes}});
  }
  j["optimizers"] = std::move(optimizers);
  Json inputs = Json::array();
  for (const auto& [name, pos] : reader.input_positions())
    inputs.push_back({{"name", name}, {"epoch", pos.epoch}, {"offset", pos.offset}});
  j["inputs"] = std::move(inputs);
  Json state = Json::array();
  for (const auto& key : reader.state_keys())
    state.push_back({{"key", key}, {"bytes", reader.state(key).size()}});
  j["state"] = std::move(state);
  const auto rng = reader.cpu_rng_state();
  j["cpu_rng_state_bytes"] = rng ? Json(rng->nbytes()) : Json(nullptr);
  // Names are bytes; a name that is not UTF-8 must not make the whole report fail.
  out << j.dump(2, ' ', false, Json::error_handler_t::replace) << "\n";
}

bool verify_checkpoints(std::ostream& out, const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    const std::string checkpoint = resolve_checkpoint(path);  // says when it is not a checkpoint
    std::string ok;
    auto failure = verify_one(checkpoint, ok);
    out << (failure ? *failure : ok) << "\n";
    return !failure;
  }
  const std::vector<ListedCheckpoint> listed = list_checkpoints(path);
  size_t good = 0;
  for (const ListedCheckpoint& c : listed) {
    std::string ok;
    auto failure = verify_one(c.path, ok);
    out << (failure ? *failure : ok) << "\n";
    if (!failure) ++good;
  }
  out << fmt::format("{} of {} OK\n", good, plural(listed.size(), "checkpoint", "checkpoints"));
  return good == listed.size();
}

}  // namespace trainhooks
