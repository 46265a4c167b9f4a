#include "trainhooks/checkpoint/checkpoint_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "checkpoint/format/trainhooks/trainhooks_format.h"
#include "optimizer_state.h"
#include "trainhooks/checkpoint/checkpoint_format.h"
#include "trainhooks/checkpoint/checkpoint_manager.h"
#include "trainhooks/checkpoint/checkpoint_state.h"
#include "trainhooks/errors.h"
#include "util/path.h"

namespace trainhooks {

namespace fs = std::filesystem;

namespace {

// The default format's training-state file of the checkpoint at `path`.
std::string trainstate_file(const std::string& path) {
  return default_checkpoint_format().files(path).at(1);
}

}  // namespace

CheckpointReader::CheckpointReader(const std::string& path)
    : contents_(std::make_unique<internal::CheckpointContents>(internal::decode_checkpoint(path))) {
}
CheckpointReader::~CheckpointReader() = default;
CheckpointReader::CheckpointReader(CheckpointReader&&) noexcept = default;
CheckpointReader& CheckpointReader::operator=(CheckpointReader&&) noexcept = default;

const std::string& CheckpointReader::path() const { return contents_->path; }
std::string CheckpointReader::trainstate_path() const { return trainstate_file(contents_->path); }
int64_t CheckpointReader::global_step() const { return contents_->global_step; }
double CheckpointReader::wall_time() const { return contents_->wall_time; }

std::vector<std::string> CheckpointReader::variable_names() const {
  std::vector<std::string> names;
  names.reserve(contents_->variables.size());
  for (const auto& [name, t] : contents_->variables) names.push_back(name);
  return names;
}

bool CheckpointReader::has_tensor(const std::string& name) const {
  return contents_->find_variable(name) != nullptr;
}

at::Tensor CheckpointReader::get_tensor(const std::string& name) const {
  if (const at::Tensor* t = contents_->find_variable(name)) return *t;
  throw NotFoundError(
      fmt::format("Variable '{}' not found in checkpoint '{}'", name, contents_->path));
}

std::map<std::string, std::vector<int64_t>> CheckpointReader::variable_to_shape_map() const {
  std::map<std::string, std::vector<int64_t>> out;
  for (const auto& [name, t] : contents_->variables) out.emplace(name, t.sizes().vec());
  return out;
}

std::map<std::string, at::ScalarType> CheckpointReader::variable_to_dtype_map() const {
  std::map<std::string, at::ScalarType> out;
  for (const auto& [name, t] : contents_->variables) out.emplace(name, t.scalar_type());
  return out;
}

std::vector<CheckpointOptimizerInfo> CheckpointReader::optimizers() const {
  std::vector<CheckpointOptimizerInfo> out;
  for (const auto& [name, s] : contents_->optimizers) {
    CheckpointOptimizerInfo info{.train_op = name, .learning_rates = s.lrs};
    if (s.is_encoded()) {
      info.type = internal::encoded_optimizer_type(s.encoded);
      for (const auto& [key, t] : internal::encoded_optimizer_tensors(s.encoded))
        info.state_bytes += t.nbytes();
    } else {
      info.state_bytes = s.archive.size();
    }
    out.push_back(std::move(info));
  }
  return out;
}

namespace {

const internal::OptimizerState& optimizer_of(const internal::CheckpointContents& c,
                                             const std::string& train_op) {
  auto it = c.optimizers.find(train_op);
  if (it == c.optimizers.end()) {
    throw NotFoundError(
        fmt::format("No optimizer state for train op '{}' in checkpoint '{}'", train_op, c.path));
  }
  return it->second;
}

}  // namespace

std::string CheckpointReader::optimizer_archive(const std::string& train_op) const {
  const auto& s = optimizer_of(*contents_, train_op);
  return s.is_encoded() ? internal::encoded_optimizer_archive(s.encoded) : s.archive;
}

std::vector<std::pair<std::string, at::Tensor>> CheckpointReader::optimizer_tensors(
    const std::string& train_op) const {
  const auto& s = optimizer_of(*contents_, train_op);
  if (!s.is_encoded()) return {};
  return internal::encoded_optimizer_tensors(s.encoded);
}

std::map<std::string, InputPosition> CheckpointReader::input_positions() const {
  return contents_->inputs;
}

std::vector<std::string> CheckpointReader::state_keys() const {
  std::vector<std::string> keys;
  for (const auto& [key, bytes] : contents_->state) keys.push_back(key);
  return keys;
}

const std::string& CheckpointReader::state(const std::string& key) const {
  auto it = contents_->state.find(key);
  if (it == contents_->state.end()) {
    throw NotFoundError(
        fmt::format("No state for key '{}' in checkpoint '{}'", key, contents_->path));
  }
  return it->second;
}

std::optional<at::Tensor> CheckpointReader::cpu_rng_state() const { return contents_->cpu_rng; }

uint64_t CheckpointReader::variables_file_bytes() const { return contents_->variables_bytes; }
uint64_t CheckpointReader::trainstate_file_bytes() const { return contents_->sidecar_bytes; }

// ---- Checkpoint directories ---------------------------------------------------------------------

namespace {

// The state of `dir`, which must exist: a directory given by mistake for a checkpoint (or the
// reverse) gets a message that says which.
CheckpointState required_state(const std::string& dir) {
  std::error_code ec;
  const auto status = fs::status(dir, ec);
  if (!fs::exists(status))
    throw NotFoundError(fmt::format("Checkpoint directory '{}' does not exist", dir));
  if (!fs::is_directory(status))
    throw InvalidArgument(fmt::format("'{}' is not a checkpoint directory", dir));
  auto state = get_checkpoint_state(dir);
  if (state) return *std::move(state);
  // Checkpoints without a state file (deleted, or never written): name them, they can be given
  // by path.
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    std::error_code ignored;
    if (CheckpointManager::step_of(name) && entry.is_regular_file(ignored) &&
        fs::exists(trainstate_file(entry.path().string()), ignored))
      names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  if (names.empty()) throw NotFoundError(fmt::format("No checkpoint state file in '{}'", dir));
  throw NotFoundError(fmt::format(
      "No checkpoint state file in '{}'; it holds checkpoints that no state file lists: {} (give "
      "one by its path)",
      dir, fmt::join(names, ", ")));
}

// The checkpoint that the file `given` belongs to: itself, or `X` for `X.trainstate`; a file that
// is not one of a checkpoint's two files is an error that says so.
std::string checkpoint_of_file(const std::string& given) {
  auto exists = [](const std::string& p) {
    std::error_code ec;
    return fs::exists(p, ec);
  };
  std::string path = given;
  if (const std::string of = default_checkpoint_format().checkpoint_of(given);
      of != given && !exists(trainstate_file(given)))
    path = of;
  const bool variables = exists(path), trainstate = exists(trainstate_file(path));
  if (!variables && !trainstate) throw NotFoundError(fmt::format("'{}' does not exist", given));
  if (!trainstate) {
    if (fs::path(path).filename() == "checkpoint") {
      throw InvalidArgument(
          fmt::format("'{}' is a checkpoint state file, not a checkpoint; give its directory, '{}'",
                      path, internal::parent_dir(path)));
    }
    throw InvalidArgument(fmt::format(
        "'{}' is not a checkpoint: a checkpoint has a training-state file beside it, and '{}' "
        "does not exist",
        path, trainstate_file(path)));
  }
  return path;
}

std::optional<double> modification_time(const std::string& path) {
  std::error_code ec;
  const auto t = fs::last_write_time(path, ec);
  if (ec) return std::nullopt;
  const auto sys = std::chrono::file_clock::to_sys(t);
  return std::chrono::duration<double>(sys.time_since_epoch()).count();
}

}  // namespace

std::string resolve_checkpoint(const std::string& dir_or_path) {
  std::error_code ec;
  if (!fs::is_directory(dir_or_path, ec)) return checkpoint_of_file(dir_or_path);
  return required_state(dir_or_path).model_checkpoint_path;
}

CheckpointReader load_checkpoint(const std::string& dir_or_path) {
  return CheckpointReader(resolve_checkpoint(dir_or_path));
}

std::vector<ListedCheckpoint> list_checkpoints(const std::string& checkpoint_dir) {
  const CheckpointState state = required_state(checkpoint_dir);
  std::vector<std::string> paths = state.all_model_checkpoint_paths;
  std::vector<double> timestamps = state.all_model_checkpoint_timestamps;
  if (timestamps.size() != paths.size()) timestamps.clear();
  // TensorFlow's files always list the latest among all paths; others may not.
  if (paths.empty() || paths.back() != state.model_checkpoint_path) {
    auto it = std::find(paths.begin(), paths.end(), state.model_checkpoint_path);
    if (it == paths.end()) {
      paths.push_back(state.model_checkpoint_path);
      timestamps.clear();
    }
  }

  std::vector<ListedCheckpoint> out;
  for (size_t i = 0; i < paths.size(); ++i) {
    ListedCheckpoint c;
    c.path = paths[i];
    c.latest = paths[i] == state.model_checkpoint_path;
    std::error_code ec;
    for (const auto& [file, exists] :
         {std::pair{c.path, &c.variables_file_exists},
          std::pair{trainstate_file(c.path), &c.trainstate_file_exists}}) {
      const auto size = fs::file_size(file, ec);
      *exists = !ec && fs::is_regular_file(file, ec);
      if (*exists) c.bytes += size;
    }
    c.step = CheckpointManager::step_of(c.path);
    if (!c.step && c.exists()) {
      try {
        c.step = internal::decode_checkpoint(c.path).global_step;
      } catch (const Error&) {
        // Unreadable: no step. `verify` says why.
      }
    }
    if (!timestamps.empty()) {
      c.timestamp = timestamps[i];
    } else if (c.variables_file_exists) {
      c.timestamp = modification_time(c.path);
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace trainhooks
