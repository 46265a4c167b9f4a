#include "trainhooks/checkpoint/saver.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/Storage.h>

#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <string_view>
#include <utility>
#include <vector>

#include "checkpoint/adopt_storage.h"
#include "checkpoint/save_path.h"
#include "trainhooks/checkpoint/checkpoint_format.h"
#include "trainhooks/errors.h"
#include "trainhooks/graph.h"
#include "trainhooks/session.h"
#include "trainhooks/training_state.h"

namespace trainhooks {

namespace fs = std::filesystem;

namespace {

// NotFoundError whatever is in place of a file (nothing, a directory, a FIFO): the checkpoint is
// not there, as checkpoint_exists() says, and restore_latest falls back past it.
void check_exists(const std::string& path) {
  for (const std::string& file : default_checkpoint_format().files(path)) {
    std::error_code ec;
    const fs::file_status status = fs::status(file, ec);
    if (fs::is_regular_file(status)) continue;
    throw NotFoundError(fmt::format("The passed save_path is not a valid checkpoint: {} ({} {})",
                                    path, file,
                                    fs::is_directory(status) ? "is a directory"
                                    : fs::exists(status)     ? "is not a regular file"
                                                             : "does not exist"));
  }
}

// A CPU tensor that is the only one on its storage and covers all of it: giving it another storage
// changes no other tensor, and its storage (saved, all of it) holds nothing but its elements.
bool alone_on_storage(const at::Tensor& t) {
  return t.defined() && t.is_cpu() && t.layout() == at::kStrided && t.has_storage() &&
         t.storage_offset() == 0 && t.is_contiguous() && t.storage().nbytes() == t.nbytes() &&
         t.storage().use_count() == 1 && !t.is_conj() && !t.is_neg();
}

}  // namespace

namespace internal {

void apply_adopting_storage(Graph& graph, TrainingSnapshot& snapshot,
                            const std::function<void()>& apply) {
  struct Swap {
    at::Tensor variable;
    at::Tensor* entry;  // the snapshot's, which holds `variable` while it has `saved`'s storage
    at::Tensor saved;
    c10::Storage own;  // the variable's storage before, untouched
  };
  std::vector<Swap> swaps;
  std::map<std::string_view, at::Tensor*> saved;
  for (auto& [name, t] : snapshot.variables) saved.emplace(name, &t);
  auto undo = [&swaps] {
    at::NoGradGuard no_grad;
    for (Swap& s : swaps) {
      const std::vector<int64_t> sizes = s.variable.sizes().vec();
      const std::vector<int64_t> strides = s.variable.strides().vec();
      s.variable.set_(std::move(s.own), 0, sizes, strides);
      *s.entry = std::move(s.saved);
    }
  };
  try {
    at::NoGradGuard no_grad;
    for (Node v : graph.variables()) {
      auto it = saved.find(graph.name(v));
      if (it == saved.end()) continue;  // apply() says so
      at::Tensor& entry = *it->second;
      const at::Tensor& variable = graph.variable_value(v);
      if (!alone_on_storage(variable) || !alone_on_storage(entry) ||
          entry.scalar_type() != variable.scalar_type() || entry.sizes() != variable.sizes() ||
          !variable.unsafeGetTensorImpl()->allow_tensor_metadata_change())
        continue;
      const std::vector<int64_t> sizes = variable.sizes().vec();  // not a view of what set_ sets
      const std::vector<int64_t> strides = variable.strides().vec();
      swaps.push_back({variable, &entry, entry, variable.storage()});
      at::Tensor(variable).set_(entry.storage(), 0, sizes, strides);
      entry = variable;  // apply()'s copy of it into the variable is a copy onto itself
    }
  } catch (...) {
    undo();
    throw;
  }
  try {
    apply();
  } catch (...) {
    undo();
    throw;
  }
}

}  // namespace internal

// ---- SaverSnapshot ------------------------------------------------------------------------------

struct SaverSnapshot::Impl {
  TrainingSnapshot contents;
  std::string path;
  // A synchronous save, which holds up training anyway, writes its two files on two cores; a
  // snapshot written while training goes on leaves the other core to training.
  bool parallel = false;
  size_t bytes = 0;
};

SaverSnapshot::SaverSnapshot() = default;
SaverSnapshot::~SaverSnapshot() = default;
SaverSnapshot::SaverSnapshot(SaverSnapshot&&) noexcept = default;
SaverSnapshot& SaverSnapshot::operator=(SaverSnapshot&&) noexcept = default;
bool SaverSnapshot::empty() const { return impl_ == nullptr; }
const std::string& SaverSnapshot::path() const {
  static const std::string kNone;
  return impl_ ? impl_->path : kNone;
}
int64_t SaverSnapshot::global_step() const { return impl_ ? impl_->contents.global_step : 0; }
double SaverSnapshot::wall_time() const { return impl_ ? impl_->contents.wall_time : 0; }
size_t SaverSnapshot::bytes() const { return impl_ ? impl_->bytes : 0; }

// ---- Saver --------------------------------------------------------------------------------------

Saver::Saver(Graph& graph, SaverOptions options)
    : graph_(&graph),
      options_(std::move(options)),
      clock_(options_.env.clock ? options_.env.clock : Env::system().clock) {}

Saver::~Saver() = default;

Env Saver::env_for(const Session& session) const {
  return Env{clock_, options_.env.sleeper, options_.env.log}
      .or_else(session.env())
      .or_else(Env::system());
}

bool Saver::checkpoint_exists(const std::string& path) {
  std::error_code ec;
  for (const std::string& file : default_checkpoint_format().files(path))
    if (!fs::is_regular_file(file, ec)) return false;
  return true;
}

void Saver::check_session(const Session& session, const char* what) const {
  if (&session.graph() != graph_)
    throw InvalidArgument(
        fmt::format("{}: the session runs another graph than this Saver's", what));
}

std::string Saver::write(Session& session, const std::string& path) {
  check_session(session, "Saver::write");
  internal::check_save_path("Saver::write", "path", path, /*prefix_of_step=*/false);
  return write(capture(path, /*copy=*/false));
}

SaverSnapshot Saver::snapshot(Session& session, const std::string& path, bool copy) {
  check_session(session, "Saver::snapshot");
  internal::check_save_path("Saver::snapshot", "path", path, /*prefix_of_step=*/false);
  return capture(path, copy);
}

SaverSnapshot Saver::capture(const std::string& path, bool copy) const {
  SaverSnapshot snap;
  snap.impl_ = std::make_unique<SaverSnapshot::Impl>();
  auto& impl = *snap.impl_;
  impl.parallel = !copy;
  impl.contents = capture_training_state(*graph_, copy, &impl.bytes);
  impl.path = path;
  impl.contents.wall_time = clock_->wall_seconds();
  return snap;
}

std::string Saver::write(SaverSnapshot snapshot) {
  if (snapshot.empty()) throw InvalidArgument("Saver::write: the snapshot is empty");
  SaverSnapshot::Impl& impl = *snapshot.impl_;
  default_checkpoint_format().write(impl.contents, impl.path, impl.parallel);
  return impl.path;
}

void Saver::restore(Session& session, const std::string& path) {
  check_session(session, "Saver::restore");
  if (path.empty()) throw InvalidArgument("Saver::restore: path must not be empty");
  TrainingSnapshot snapshot = read(session, path);
  internal::apply_adopting_storage(*graph_, snapshot, [&] { apply(session, snapshot, path); });
}

TrainingSnapshot Saver::read(Session& session, const std::string& path) const {
  check_session(session, "Saver::read");
  check_exists(path);
  env_for(session).info(fmt::format("Restoring parameters from {}", path));
  return default_checkpoint_format().read(path);
}

void Saver::apply(Session& session, const TrainingSnapshot& snapshot,
                  const std::string& path) const {
  check_session(session, "Saver::apply");
  restore_training_state(*graph_, snapshot, path, env_for(session));
}

std::function<void(Session&)> restore_checkpoint(std::shared_ptr<Saver> saver, std::string path) {
  if (!saver) throw InvalidArgument("restore_checkpoint: saver is null");
  return [saver = std::move(saver), path = std::move(path)](Session& session) {
    saver->restore(session, path);
  };
}

}  // namespace trainhooks
