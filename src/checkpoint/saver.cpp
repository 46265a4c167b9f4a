#include "trainhooks/checkpoint/saver.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>
#include <sys/stat.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize.h>
#include <torch/serialize/archive.h>

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <utility>

#include "graph_state.h"
#include "summary/crc32c.h"
#include "trainhooks/checkpoint/checkpoint_state.h"
#include "trainhooks/errors.h"
#include "trainhooks/graph.h"
#include "trainhooks/session.h"
#include "util/atomic_file.h"

namespace trainhooks {

namespace fs = std::filesystem;
namespace crc32c = summary::crc32c;

namespace {

// ---- The training-state sidecar: `<checkpoint>.trainstate` ------------------------------------
//
// A 28-byte header, then a payload that is a LibTorch pickle (torch.load-able) of a dict:
//   0  8  magic "TRNSTATE"
//   8  4  format version (u32, little-endian)
//  12  8  payload length (u64)
//  20  4  masked CRC32C of the payload
//  24  4  masked CRC32C of bytes 0..23
// The pickle is a zip archive, some of whose bytes (alignment padding, time stamps) no checksum of
// its own covers; the framing makes every flipped or missing byte of the file detectable.

constexpr char kMagic[8] = {'T', 'R', 'N', 'S', 'T', 'A', 'T', 'E'};
constexpr uint32_t kFormatVersion = 1;
constexpr size_t kHeaderSize = 28;
constexpr const char* kSidecarSuffix = ".trainstate";
constexpr const char* kFormatName = "trainhooks.trainstate";

std::string sidecar_path(const std::string& path) { return path + kSidecarSuffix; }

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

uint64_t get_le(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

std::string frame_sidecar(const std::vector<char>& payload) {
  std::string out;
  out.reserve(kHeaderSize + payload.size());
  out.append(kMagic, sizeof(kMagic));
  put_le(out, kFormatVersion, 4);
  put_le(out, payload.size(), 8);
  put_le(out, crc32c::mask(crc32c::value(payload.data(), payload.size())), 4);
  put_le(out, crc32c::mask(crc32c::value(out.data(), out.size())), 4);
  out.append(payload.data(), payload.size());
  return out;
}

std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int err = errno;
    if (err == ENOENT)
      throw NotFoundError(fmt::format("Checkpoint file '{}' does not exist", path));
    throw UnavailableError(
        fmt::format("Cannot open checkpoint file '{}': {}", path, std::strerror(err)));
  }
  in.seekg(0, std::ios::end);
  auto size = static_cast<size_t>(in.tellg());
  in.seekg(0, std::ios::beg);
  std::vector<char> bytes(size);
  if (size > 0 && !in.read(bytes.data(), static_cast<std::streamsize>(size))) {
    throw UnavailableError(fmt::format("Cannot read checkpoint file '{}'", path));
  }
  return bytes;
}

at::Tensor bytes_tensor(std::string_view bytes) {
  at::Tensor t = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
  if (!bytes.empty()) std::memcpy(t.data_ptr<uint8_t>(), bytes.data(), bytes.size());
  return t;
}

std::string tensor_bytes(const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  return std::string(reinterpret_cast<const char*>(c.data_ptr<uint8_t>()),
                     static_cast<size_t>(c.numel()));
}

c10::impl::GenericDict new_dict() {
  return c10::impl::GenericDict(c10::StringType::get(), c10::AnyType::get());
}

std::string normal_dir(const std::string& dir) {
  fs::path p = fs::absolute(fs::path(dir.empty() ? "." : dir)).lexically_normal();
  std::string s = p.string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

std::string parent_dir(const std::string& path) {
  fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

bool same_path(const std::string& a, const std::string& b) {
  return fs::absolute(fs::path(a)).lexically_normal() ==
         fs::absolute(fs::path(b)).lexically_normal();
}

double mtime_seconds(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<double>(st.st_mtim.tv_sec) + static_cast<double>(st.st_mtim.tv_nsec) * 1e-9;
}

std::string first_line(const std::exception& e) {
  // c10::Error's what() carries a backtrace; its first line is the message.
  std::string msg = e.what();
  if (auto nl = msg.find('\n'); nl != std::string::npos) msg.resize(nl);
  return msg;
}

// Rethrows a trainhooks error with context, keeping its type.
[[noreturn]] void rethrow_with(const Error& e, const std::string& context) {
  throw_error(e.code(), fmt::format("{}: {}", context, e.what()));
}

// ---- A decoded checkpoint -----------------------------------------------------------------------

struct OptimizerState {
  std::string archive;      // torch::serialize::OutputArchive bytes
  std::vector<double> lrs;  // per parameter group; empty when the optimizer has no get_lr
};

struct Checkpoint {
  std::string path;
  std::map<std::string, at::Tensor> variables;
  int64_t global_step = 0;
  std::map<std::string, OptimizerState> optimizers;
  std::optional<at::Tensor> cpu_rng;
  std::map<std::string, InputPosition> inputs;
  std::map<std::string, std::string> state;
};

// Field access on the unpickled payload; anything missing or mistyped is data loss (the CRC
// matched, so the file was written that way, but not by this format).
class Fields {
 public:
  Fields(const c10::IValue& v, std::string where, const std::string& file)
      : file_(file), where_(std::move(where)) {
    if (!v.isGenericDict()) fail("is not a dict");
    dict_ = v.toGenericDict();
  }
  const c10::IValue* find(const std::string& key) const {
    auto it = dict_.find(c10::IValue(key));
    return it == dict_.end() ? nullptr : &it->value();
  }
  const c10::IValue& get(const std::string& key) const {
    const auto* v = find(key);
    if (!v) fail(fmt::format("has no '{}'", key));
    return *v;
  }
  int64_t integer(const std::string& key) const {
    const auto& v = get(key);
    if (!v.isInt()) fail(fmt::format("'{}' is not an integer", key));
    return v.toInt();
  }
  at::Tensor bytes(const std::string& key) const {
    const auto& v = get(key);
    if (!v.isTensor() || v.toTensor().scalar_type() != at::kByte || v.toTensor().dim() != 1) {
      fail(fmt::format("'{}' is not a uint8 tensor", key));
    }
    return v.toTensor();
  }
  Fields sub(const std::string& key) const { return Fields(get(key), where_ + "/" + key, file_); }
  std::vector<std::string> keys() const {
    std::vector<std::string> out;
    for (const auto& kv : dict_) {
      if (!kv.key().isString()) fail("has a key that is not a string");
      out.push_back(kv.key().toStringRef());
    }
    return out;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw DataLossError(fmt::format(
        "Checkpoint file '{}' is not a valid training-state file: {} {}", file_, where_, what));
  }

 private:
  const std::string& file_;
  std::string where_;
  c10::impl::GenericDict dict_ = new_dict();
};

// Reads and verifies both files of the checkpoint at `path`. Throws NotFoundError, DataLossError
// (corrupt or truncated: the fallback-worthy cases), FailedPreconditionError (newer format) or
// UnavailableError (I/O), each naming the file.
Checkpoint decode(const std::string& path) {
  const std::string side_path = sidecar_path(path);
  Checkpoint cp;
  cp.path = path;

  std::vector<char> side = read_file(side_path);
  if (side.size() < kHeaderSize) {
    throw DataLossError(
        fmt::format("Checkpoint file '{}' is truncated: {} bytes, shorter than its {}-byte header",
                    side_path, side.size(), kHeaderSize));
  }
  if (std::memcmp(side.data(), kMagic, sizeof(kMagic)) != 0) {
    throw DataLossError(fmt::format(
        "Checkpoint file '{}' is corrupt: it does not start with the training-state magic",
        side_path));
  }
  if (crc32c::unmask(static_cast<uint32_t>(get_le(side.data() + 24, 4))) !=
      crc32c::value(side.data(), 24)) {
    throw DataLossError(
        fmt::format("Checkpoint file '{}' is corrupt: header checksum mismatch", side_path));
  }
  const auto version = static_cast<uint32_t>(get_le(side.data() + 8, 4));
  if (version == 0)
    throw DataLossError(
        fmt::format("Checkpoint file '{}' is corrupt: format version 0", side_path));
  if (version > kFormatVersion) {
    throw FailedPreconditionError(
        fmt::format("Checkpoint file '{}' has format version {}; this version of trainhooks reads "
                    "version {} or older",
                    side_path, version, kFormatVersion));
  }
  const uint64_t length = get_le(side.data() + 12, 8);
  if (length != side.size() - kHeaderSize) {
    throw DataLossError(fmt::format(
        "Checkpoint file '{}' is {}: its header announces {} payload bytes, the file has {}",
        side_path, length > side.size() - kHeaderSize ? "truncated" : "corrupt", length,
        side.size() - kHeaderSize));
  }
  const char* payload = side.data() + kHeaderSize;
  if (crc32c::unmask(static_cast<uint32_t>(get_le(side.data() + 20, 4))) !=
      crc32c::value(payload, length)) {
    throw DataLossError(
        fmt::format("Checkpoint file '{}' is corrupt: payload checksum mismatch", side_path));
  }
  c10::IValue root;
  try {
    root = torch::pickle_load(std::vector<char>(payload, payload + length));
  } catch (const std::exception& e) {
    throw DataLossError(
        fmt::format("Checkpoint file '{}' is corrupt: its payload cannot be unpickled ({})",
                    side_path, first_line(e)));
  }

  Fields top(root, "payload", side_path);
  const auto& format = top.get("format");
  if (!format.isString() || format.toStringRef() != kFormatName) top.fail("has the wrong 'format'");
  Fields vars_info = top.sub("variables");
  const int64_t vars_size = vars_info.integer("size");
  const auto vars_crc = static_cast<uint32_t>(vars_info.integer("crc32c"));
  cp.global_step = top.integer("global_step");
  if (cp.global_step < 0) top.fail("'global_step' is negative");

  Fields optimizers = top.sub("optimizers");
  for (const auto& name : optimizers.keys()) {
    Fields o = optimizers.sub(name);
    OptimizerState s;
    s.archive = tensor_bytes(o.bytes("archive"));
    const auto& lr = o.get("lr");
    if (!lr.isDoubleList()) o.fail("'lr' is not a list of floats");
    s.lrs = lr.toDoubleVector();
    cp.optimizers.emplace(name, std::move(s));
  }
  Fields rng = top.sub("rng");
  if (rng.find("cpu")) cp.cpu_rng = rng.bytes("cpu");
  Fields inputs = top.sub("inputs");
  for (const auto& name : inputs.keys()) {
    const auto& v = inputs.get(name);
    if (!v.isIntList() || v.toIntList().size() != 2)
      inputs.fail(fmt::format("'{}' is not [epoch, offset]", name));
    auto pos = v.toIntVector();
    if (pos[0] < 0 || pos[1] < 0) inputs.fail(fmt::format("'{}' is a negative position", name));
    cp.inputs.emplace(name, InputPosition{pos[0], pos[1]});
  }
  Fields state = top.sub("state");
  for (const auto& key : state.keys()) cp.state.emplace(key, tensor_bytes(state.bytes(key)));

  std::vector<char> vars = read_file(path);
  if (static_cast<int64_t>(vars.size()) != vars_size) {
    throw DataLossError(
        fmt::format("Checkpoint file '{}' is {}: {} bytes, {} were written", path,
                    static_cast<int64_t>(vars.size()) < vars_size ? "truncated" : "corrupt",
                    vars.size(), vars_size));
  }
  if (crc32c::value(vars.data(), vars.size()) != vars_crc) {
    throw DataLossError(fmt::format(
        "Checkpoint file '{}' is corrupt: its CRC32C does not match the one recorded in '{}'", path,
        side_path));
  }
  c10::IValue value;
  try {
    value = torch::pickle_load(vars);
  } catch (const std::exception& e) {
    throw DataLossError(fmt::format("Checkpoint file '{}' is corrupt: it cannot be unpickled ({})",
                                    path, first_line(e)));
  }
  if (!value.isGenericDict())
    throw DataLossError(fmt::format("Checkpoint file '{}' does not hold a dict", path));
  for (const auto& kv : value.toGenericDict()) {
    if (!kv.key().isString() || !kv.value().isTensor()) {
      throw DataLossError(
          fmt::format("Checkpoint file '{}' is not a dict of name -> tensor", path));
    }
    cp.variables.emplace(kv.key().toStringRef(), kv.value().toTensor());
  }
  return cp;
}

std::string describe(const at::Tensor& t) {
  return fmt::format("shape [{}] and dtype {}", fmt::join(t.sizes(), ", "),
                     c10::toString(t.scalar_type()));
}

}  // namespace

// ---- Saver --------------------------------------------------------------------------------------

Saver::Saver(Graph& graph, SaverOptions options)
    : graph_(&graph),
      options_(std::move(options)),
      clock_(options_.env.clock ? options_.env.clock : Env::system().clock) {
  const double hours = options_.keep_checkpoint_every_n_hours;
  if (!(hours > 0) || std::isinf(hours)) {
    throw InvalidArgument(fmt::format(
        "Saver: invalid keep_checkpoint_every_n_hours {} (must be a positive number)", hours));
  }
  next_keep_time_ = clock_->wall_seconds() + hours * 3600;
}

Saver::~Saver() = default;

Env Saver::env_for(const Session& session) const {
  return Env{clock_, options_.env.sleeper, options_.env.log}
      .or_else(session.env())
      .or_else(Env::system());
}

bool Saver::checkpoint_exists(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec) && fs::is_regular_file(sidecar_path(path), ec);
}

void Saver::recover(DirState& state, const std::string& dir, const Env& env) {
  std::optional<CheckpointState> st;
  try {
    st = get_checkpoint_state(dir);
  } catch (const DataLossError& e) {
    env.warning(fmt::format(
        "{}; the checkpoints it lists are no longer tracked and will not be deleted", e.what()));
    return;
  }
  if (!st) return;
  const auto& paths = st->all_model_checkpoint_paths;
  const bool have_times = st->all_model_checkpoint_timestamps.size() == paths.size();
  for (size_t i = 0; i < paths.size(); ++i) {
    // As TensorFlow's recover_last_checkpoints: only those whose files exist; file times when the
    // state has none.
    if (!checkpoint_exists(paths[i])) continue;
    state.checkpoints.push_back(
        {paths[i], have_times ? st->all_model_checkpoint_timestamps[i] : mtime_seconds(paths[i])});
  }
  state.last_preserved_timestamp = st->last_preserved_timestamp;
}

Saver::DirState& Saver::dir_state(const std::string& dir, const Env& env) {
  const std::string key = normal_dir(dir);
  auto it = dirs_.find(key);
  if (it != dirs_.end()) return it->second;
  DirState state;
  recover(state, dir, env);
  return dirs_.emplace(key, std::move(state)).first->second;
}

std::vector<std::string> Saver::last_checkpoints(const std::string& checkpoint_dir) const {
  std::vector<std::string> out;
  auto it = dirs_.find(normal_dir(checkpoint_dir));
  if (it == dirs_.end()) return out;
  for (const auto& c : it->second.checkpoints) out.push_back(c.path);
  return out;
}

std::string Saver::save(Session& session, const std::string& save_path_prefix,
                        std::optional<int64_t> global_step) {
  if (&session.graph() != graph_)
    throw InvalidArgument("Saver::save: the session runs another graph than this Saver's");
  if (save_path_prefix.empty())
    throw InvalidArgument("Saver::save: save_path_prefix must not be empty");
  if (save_path_prefix.back() == '/' || fs::path(save_path_prefix).filename() == "." ||
      fs::path(save_path_prefix).filename() == "..") {
    throw InvalidArgument(
        fmt::format("Saver::save: save_path_prefix '{}' names a directory; give a file prefix such "
                    "as '{}/model.ckpt'",
                    save_path_prefix, fs::path(save_path_prefix).lexically_normal().string()));
  }
  if (global_step && *global_step < 0) {
    throw InvalidArgument(
        fmt::format("Saver::save: invalid global_step {} (must be >= 0)", *global_step));
  }
  const std::string path =
      global_step ? fmt::format("{}-{}", save_path_prefix, *global_step) : save_path_prefix;
  if (!global_step && fs::path(save_path_prefix).filename() == "checkpoint") {
    throw InvalidArgument(fmt::format(
        "Saver::save: 'latest_filename' collides with 'save_path': 'checkpoint' and '{}'",
        save_path_prefix));
  }
  const std::string dir = parent_dir(path);
  {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      throw NotFoundError(
          fmt::format("Parent directory of {} doesn't exist, can't save.", save_path_prefix));
    }
  }
  const Env env = env_for(session);
  Graph& g = *graph_;

  // Snapshot and encode everything first: a failure here writes nothing.
  c10::Dict<std::string, at::Tensor> variables;
  for (Node v : g.variables()) variables.insert(g.name(v), g.variable_value(v).detach().cpu());
  const std::vector<char> vars_bytes = torch::pickle_save(c10::IValue(variables));

  auto payload = new_dict();
  payload.insert(std::string("format"), std::string(kFormatName));
  payload.insert(std::string("version"), static_cast<int64_t>(kFormatVersion));
  auto vars_info = new_dict();
  vars_info.insert(std::string("file"), fs::path(path).filename().string());
  vars_info.insert(std::string("size"), static_cast<int64_t>(vars_bytes.size()));
  vars_info.insert(std::string("crc32c"),
                   static_cast<int64_t>(crc32c::value(vars_bytes.data(), vars_bytes.size())));
  vars_info.insert(std::string("count"), static_cast<int64_t>(variables.size()));
  payload.insert(std::string("variables"), vars_info);
  payload.insert(std::string("global_step"), g.global_step_value());
  payload.insert(std::string("wall_time"), clock_->wall_seconds());

  auto optimizers = new_dict();
  for (Node t : g.train_ops()) {
    auto& opt = g.optimizer(t);
    torch::serialize::OutputArchive archive;
    opt.save(archive);
    std::ostringstream os;
    archive.save_to(os);
    c10::List<double> lrs;
    try {
      for (const auto& group : opt.param_groups()) lrs.push_back(group.options().get_lr());
    } catch (const std::exception&) {
      lrs.clear();  // an optimizer without a learning rate
    }
    auto entry = new_dict();
    entry.insert(std::string("archive"), bytes_tensor(os.str()));
    entry.insert(std::string("lr"), lrs);
    optimizers.insert(g.name(t), entry);
  }
  payload.insert(std::string("optimizers"), optimizers);

  auto rng = new_dict();
  {
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    rng.insert(std::string("cpu"), gen.get_state());
  }
  payload.insert(std::string("rng"), rng);

  auto inputs = new_dict();
  for (Node n : g.inputs()) {
    InputPosition p = g.input_position(n);
    inputs.insert(g.name(n), c10::List<int64_t>({p.epoch, p.offset}));
  }
  payload.insert(std::string("inputs"), inputs);

  auto state = new_dict();
  for (const auto& [key, provider] : g.state_providers())
    state.insert(key, bytes_tensor(provider->save_state()));
  payload.insert(std::string("state"), state);

  const std::string sidecar = frame_sidecar(torch::pickle_save(c10::IValue(payload)));

  // Variables, then the sidecar that vouches for them, then the state file that lists both.
  try {
    internal::write_file_atomically(path, std::string_view(vars_bytes.data(), vars_bytes.size()));
  } catch (const Error& e) {
    rethrow_with(e, fmt::format("Cannot write checkpoint file '{}'", path));
  }
  try {
    internal::write_file_atomically(sidecar_path(path), sidecar);
  } catch (const Error& e) {
    std::error_code ec;
    fs::remove(path, ec);  // unlisted and without its sidecar: of no use
    rethrow_with(e, fmt::format("Cannot write checkpoint file '{}'", sidecar_path(path)));
  }

  // Retention (TensorFlow's _RecordLastCheckpoint and _MaybeDeleteOldCheckpoints), decided on
  // copies and committed once the state file is written.
  DirState& ds = dir_state(dir, env);
  std::vector<Listed> listed = ds.checkpoints;
  std::erase_if(listed, [&](const Listed& c) { return same_path(c.path, path); });
  listed.push_back({path, clock_->wall_seconds()});
  std::vector<Listed> dropped;
  if (options_.max_to_keep > 0) {
    while (listed.size() > static_cast<size_t>(options_.max_to_keep)) {
      dropped.push_back(listed.front());
      listed.erase(listed.begin());
    }
  }
  double next_keep = next_keep_time_;
  double last_preserved = ds.last_preserved_timestamp;
  std::vector<std::string> to_delete;
  for (const auto& c : dropped) {
    if (c.timestamp > next_keep) {
      next_keep += options_.keep_checkpoint_every_n_hours * 3600;
      last_preserved = c.timestamp;
    } else {
      to_delete.push_back(c.path);
    }
  }

  CheckpointState st;
  st.model_checkpoint_path = path;
  for (const auto& c : listed) {
    st.all_model_checkpoint_paths.push_back(c.path);
    st.all_model_checkpoint_timestamps.push_back(c.timestamp);
  }
  st.last_preserved_timestamp = last_preserved;
  try {
    update_checkpoint_state(dir, std::move(st), options_.save_relative_paths);
  } catch (const Error& e) {
    rethrow_with(e, fmt::format("Cannot write checkpoint state '{}'", checkpoint_state_path(dir)));
  }
  ds.checkpoints = std::move(listed);
  ds.last_preserved_timestamp = last_preserved;
  next_keep_time_ = next_keep;

  for (const auto& p : to_delete) {
    for (const std::string& file : {p, sidecar_path(p)}) {
      std::error_code ec;
      fs::remove(file, ec);
      if (ec)
        env.warning(fmt::format("Ignoring: cannot delete old checkpoint file '{}': {}", file,
                                ec.message()));
    }
  }
  return path;
}

namespace {

// What restore() will apply, checked against the graph.
struct Plan {
  std::vector<std::pair<Node, at::Tensor>> variables;
  std::vector<std::pair<Node, const OptimizerState*>> optimizers;
  std::vector<std::pair<Node, InputPosition>> inputs;
  std::vector<std::pair<std::string, StateProvider*>> providers;
  std::vector<const std::string*> provider_bytes;
  std::vector<std::string> warnings;
};

Plan check(Graph& g, const Checkpoint& cp) {
  Plan plan;
  for (Node v : g.variables()) {
    const auto& name = g.name(v);
    auto it = cp.variables.find(name);
    if (it == cp.variables.end()) {
      throw NotFoundError(
          fmt::format("Variable '{}' is not in the checkpoint '{}'", name, cp.path));
    }
    const at::Tensor& current = g.variable_value(v);
    if (it->second.sizes() != current.sizes() ||
        it->second.scalar_type() != current.scalar_type()) {
      throw InvalidArgument(
          fmt::format("Variable '{}' in the checkpoint '{}' has {}, the graph's has {}", name,
                      cp.path, describe(it->second), describe(current)));
    }
    plan.variables.emplace_back(v, it->second);
  }

  auto& gs = g.state();
  std::set<std::string> used;
  for (Node t : g.train_ops()) {
    const auto& name = g.name(t);
    auto it = cp.optimizers.find(name);
    if (it == cp.optimizers.end()) {
      plan.warnings.push_back(fmt::format(
          "The checkpoint '{}' has no optimizer state for train op '{}'; it is left as it is",
          cp.path, name));
      continue;
    }
    used.insert(name);
    // Load into a scratch optimizer over the same variables: a state that does not fit fails
    // here, before anything changed.
    auto& op = gs.train_ops[gs.nodes[t.index].train_index];
    try {
      auto scratch = op.factory.make(op.params);
      torch::serialize::InputArchive archive;
      archive.load_from(it->second.archive.data(), it->second.archive.size());
      scratch->load(archive);
      if (!it->second.lrs.empty() && it->second.lrs.size() != scratch->param_groups().size()) {
        throw InvalidArgument(fmt::format("{} learning rates for {} parameter groups",
                                          it->second.lrs.size(), scratch->param_groups().size()));
      }
    } catch (const std::exception& e) {
      throw InvalidArgument(
          fmt::format("The optimizer state of train op '{}' in the checkpoint '{}' does not fit "
                      "its {} optimizer: {}",
                      name, cp.path, op.factory.name, first_line(e)));
    }
    plan.optimizers.emplace_back(t, &it->second);
  }
  for (const auto& [name, s] : cp.optimizers) {
    if (!used.count(name))
      plan.warnings.push_back(
          fmt::format("Ignoring the optimizer state of train op '{}' in the checkpoint '{}': the "
                      "graph has no such train op",
                      name, cp.path));
  }

  if (cp.cpu_rng) {
    try {
      at::Generator scratch = at::detail::createCPUGenerator();
      scratch.set_state(*cp.cpu_rng);
    } catch (const std::exception& e) {
      throw InvalidArgument(fmt::format(
          "The CPU RNG state in the checkpoint '{}' cannot be used: {}", cp.path, first_line(e)));
    }
  }

  used.clear();
  for (Node n : g.inputs()) {
    const auto& name = g.name(n);
    auto it = cp.inputs.find(name);
    if (it == cp.inputs.end()) {
      plan.warnings.push_back(
          fmt::format("The checkpoint '{}' has no position for input '{}'; it is left as it is",
                      cp.path, name));
      continue;
    }
    used.insert(name);
    plan.inputs.emplace_back(n, it->second);
  }
  for (const auto& [name, p] : cp.inputs) {
    if (!used.count(name))
      plan.warnings.push_back(fmt::format(
          "Ignoring the position of input '{}' in the checkpoint '{}': the graph has no such input",
          name, cp.path));
  }

  used.clear();
  for (const auto& [key, provider] : g.state_providers()) {
    auto it = cp.state.find(key);
    if (it == cp.state.end()) continue;  // registered after the checkpoint was written
    used.insert(key);
    plan.providers.emplace_back(key, provider);
    plan.provider_bytes.push_back(&it->second);
  }
  for (const auto& [key, bytes] : cp.state) {
    if (!used.count(key))
      plan.warnings.push_back(fmt::format(
          "Ignoring state '{}' in the checkpoint '{}': nothing is registered under that key", key,
          cp.path));
  }
  return plan;
}

void apply(Graph& g, const Checkpoint& cp, const Plan& plan, const Env& env) {
  // State providers first: they are the only part that may reject its bytes, and are rolled back
  // from a snapshot if one does.
  std::vector<std::string> before;
  for (const auto& [key, provider] : plan.providers) before.push_back(provider->save_state());
  for (size_t i = 0; i < plan.providers.size(); ++i) {
    try {
      plan.providers[i].second->load_state(*plan.provider_bytes[i]);
    } catch (const std::exception& e) {
      for (size_t j = 0; j <= i; ++j) {
        try {
          plan.providers[j].second->load_state(before[j]);
        } catch (const std::exception&) {
        }
      }
      const auto* err = dynamic_cast<const Error*>(&e);
      throw_error(err ? err->code() : Code::kInvalidArgument,
                  fmt::format("Cannot restore state '{}' from the checkpoint '{}': {}",
                              plan.providers[i].first, cp.path, e.what()));
    }
  }
  {
    at::NoGradGuard no_grad;
    for (const auto& [v, t] : plan.variables) g.variable_value(v).copy_(t);
  }
  for (const auto& [t, s] : plan.optimizers) {
    auto& opt = g.optimizer(t);
    // LibTorch's load only adds entries: clear first so that a parameter without saved state
    // (no step taken yet) does not keep a newer one.
    opt.state().clear();
    torch::serialize::InputArchive archive;
    archive.load_from(s->archive.data(), s->archive.size());
    opt.load(archive);
    // LibTorch's load keeps the current options; PyTorch's load_state_dict restores the learning
    // rate, and schedules that changed it rely on that.
    for (size_t i = 0; i < s->lrs.size(); ++i) opt.param_groups()[i].options().set_lr(s->lrs[i]);
  }
  g.set_global_step_value(cp.global_step);
  if (cp.cpu_rng) {
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(*cp.cpu_rng);
  }
  for (const auto& [n, p] : plan.inputs) g.set_input_position(n, p);
  for (const auto& w : plan.warnings) env.warning(w);
}

void check_exists(const std::string& path) {
  for (const std::string& file : {path, sidecar_path(path)}) {
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) {
      throw NotFoundError(fmt::format(
          "The passed save_path is not a valid checkpoint: {} ({} does not exist)", path, file));
    }
  }
}

}  // namespace

void Saver::restore(Session& session, const std::string& path) {
  if (&session.graph() != graph_)
    throw InvalidArgument("Saver::restore: the session runs another graph than this Saver's");
  if (path.empty()) throw InvalidArgument("Saver::restore: path must not be empty");
  const Env env = env_for(session);
  check_exists(path);
  env.info(fmt::format("Restoring parameters from {}", path));
  Checkpoint cp = decode(path);
  Plan plan = check(*graph_, cp);
  apply(*graph_, cp, plan, env);
}

std::optional<std::string> Saver::restore_latest(Session& session,
                                                 const std::string& checkpoint_dir) {
  if (&session.graph() != graph_)
    throw InvalidArgument(
        "Saver::restore_latest: the session runs another graph than this Saver's");
  const Env env = env_for(session);
  std::optional<CheckpointState> st = get_checkpoint_state(checkpoint_dir);
  if (!st) return std::nullopt;
  std::vector<std::string> candidates{st->model_checkpoint_path};
  for (auto it = st->all_model_checkpoint_paths.rbegin();
       it != st->all_model_checkpoint_paths.rend(); ++it) {
    bool seen = false;
    for (const auto& c : candidates) seen = seen || same_path(c, *it);
    if (!seen) candidates.push_back(*it);
  }
  std::vector<std::string> failures;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const std::string& path = candidates[i];
    std::optional<Checkpoint> cp;
    try {
      check_exists(path);
      env.info(fmt::format("Restoring parameters from {}", path));
      cp = decode(path);
    } catch (const Error& e) {
      if (e.code() != Code::kDataLoss && e.code() != Code::kNotFound) throw;
      env.warning(fmt::format("Checkpoint {} cannot be restored: {}. {}", path, e.what(),
                              i + 1 < candidates.size() ? "Falling back to the previous checkpoint."
                                                        : "No earlier checkpoint is listed."));
      failures.push_back(e.what());
      continue;
    }
    Plan plan = check(*graph_, *cp);
    apply(*graph_, *cp, plan, env);
    dir_state(checkpoint_dir, env);  // retention continues with what the state file lists
    return path;
  }
  throw DataLossError(fmt::format(
      "None of the {} checkpoint(s) listed in {} can be restored; not starting from scratch over "
      "them. {}",
      candidates.size(), checkpoint_state_path(checkpoint_dir), fmt::join(failures, "; ")));
}

std::optional<std::string> Saver::latest_checkpoint(const std::string& checkpoint_dir,
                                                    const Env& env) {
  std::optional<CheckpointState> st;
  try {
    st = get_checkpoint_state(checkpoint_dir);
  } catch (const DataLossError& e) {
    env.warning(fmt::format("{}: Checkpoint ignored", e.what()));
    return std::nullopt;
  }
  if (!st) return std::nullopt;
  if (checkpoint_exists(st->model_checkpoint_path)) return st->model_checkpoint_path;
  env.error(fmt::format("Couldn't match files for checkpoint {}", st->model_checkpoint_path));
  return std::nullopt;
}

}  // namespace trainhooks
