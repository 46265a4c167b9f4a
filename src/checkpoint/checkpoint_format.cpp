#include "trainhooks/checkpoint/checkpoint_format.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "checkpoint/adopt_storage.h"
#include "checkpoint/format/safetensors/safetensors_format.h"
#include "checkpoint/format/trainhooks/trainhooks_format.h"
#include "trainhooks/errors.h"
#include "trainhooks/session.h"

namespace trainhooks {

namespace {

// Every format, the default first. A new format is one line here. Never destroyed: a writer
// thread may still write a checkpoint while the program exits.
const std::vector<std::unique_ptr<CheckpointFormat>>& formats() {
  static const auto* all = [] {
    auto* v = new std::vector<std::unique_ptr<CheckpointFormat>>();
    v->push_back(std::make_unique<internal::TrainhooksFormat>());
    v->push_back(std::make_unique<internal::SafetensorsFormat>());
    return v;
  }();
  return *all;
}

}  // namespace

const CheckpointFormat& default_checkpoint_format() { return *formats().front(); }

const CheckpointFormat& checkpoint_format(std::string_view name) {
  for (const auto& f : formats())
    if (f->name() == name) return *f;
  throw NotFoundError(fmt::format("Unknown checkpoint format '{}' (known: {})", name,
                                  fmt::join(checkpoint_format_names(), ", ")));
}

std::vector<std::string> checkpoint_format_names() {
  std::vector<std::string> names;
  for (const auto& f : formats()) names.push_back(f->name());
  return names;
}

const CheckpointFormat& checkpoint_format_of(const std::string& path) {
  for (const auto& f : formats())
    if (f.get() != formats().front().get() && !f->checkpoint_of(path).empty()) return *f;
  return default_checkpoint_format();
}

void export_checkpoint(const std::string& checkpoint, const std::string& path,
                       std::string_view format) {
  const CheckpointFormat& to = checkpoint_format(format);
  TrainingSnapshot snapshot = default_checkpoint_format().read(checkpoint);
  if (!to.holds_training_state()) {
    // What it cannot hold is dropped here, not by each format.
    snapshot.optimizers.clear();
    snapshot.cpu_rng.reset();
    snapshot.inputs.clear();
    snapshot.state.clear();
    snapshot.variables_only = true;
  }
  to.write(snapshot, path);
}

void import_variables(Session& session, const std::string& path, std::string_view format) {
  const CheckpointFormat& from =
      format.empty() ? checkpoint_format_of(path) : checkpoint_format(format);
  TrainingSnapshot snapshot = from.read(path);
  snapshot.variables_only = true;
  const Env env = session.env().or_else(Env::system());
  env.info(fmt::format("Restoring parameters from {}", path));
  internal::apply_adopting_storage(session.graph(), snapshot, [&] {
    restore_training_state(session.graph(), snapshot, path, env);
  });
}

}  // namespace trainhooks
