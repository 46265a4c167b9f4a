#include "checkpoint/format/trainhooks/trainhooks_format.h"

#include <ATen/core/Dict.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <fmt/format.h>

#include <filesystem>
#include <functional>
#include <future>
#include <optional>
#include <system_error>
#include <utility>

#include "checkpoint/format/trainhooks/file_bytes.h"
#include "checkpoint/format/trainhooks/pickle_stream.h"
#include "checkpoint/format/trainhooks/sidecar.h"
#include "checkpoint/format/trainhooks/torch_zip_reader.h"
#include "trainhooks/errors.h"
#include "util/atomic_file.h"
#include "util/crc32c.h"
#include "util/first_line.h"

namespace trainhooks::internal {

namespace fs = std::filesystem;

CheckpointContents decode_checkpoint(const std::string& path) {
  const std::string side_path = sidecar_path(path);
  CheckpointContents cp;
  cp.path = path;

  // A big variables file is read and checksummed on another thread while the sidecar is decoded;
  // the sidecar's errors still come first.
  std::future<FileRead> vars_read;
  std::error_code ec;
  if (const auto size = fs::file_size(path, ec); !ec && size >= kMapAtLeast) {
    try {
      vars_read = std::async(std::launch::async, [&path] { return read_file(path, 0, 0); });
    } catch (const std::system_error&) {
      // no thread to be had: read after the sidecar
    }
  }

  const FileRead side_file = read_file(side_path, kSidecarHeaderSize, kSidecarHeaderSize);
  const FileBytes& side = *side_file.bytes;
  const uint32_t version = check_sidecar_framing(side, side_file.crc32c, side_path);
  c10::IValue root;
  try {
    root = unpickle(side_file.bytes, kSidecarHeaderSize, side.size() - kSidecarHeaderSize);
  } catch (const std::exception& e) {
    throw DataLossError(
        fmt::format("Checkpoint file '{}' is corrupt: its payload cannot be unpickled ({})",
                    side_path, first_line(e)));
  }
  check_tensor_extents(root, side_path);

  cp.sidecar_bytes = side.size();
  const VariablesRecord record = decode_sidecar_payload(root, version, side_path, cp);
  const int64_t vars_size = record.size;
  const uint32_t vars_crc = record.crc32c;

  const FileRead vars_file = vars_read.valid() ? vars_read.get() : read_file(path, 0, 0);
  const FileBytes& vars = *vars_file.bytes;
  if (static_cast<int64_t>(vars.size()) != vars_size) {
    throw DataLossError(
        fmt::format("Checkpoint file '{}' is {}: {} bytes, {} were written", path,
                    static_cast<int64_t>(vars.size()) < vars_size ? "truncated" : "corrupt",
                    vars.size(), vars_size));
  }
  cp.variables_bytes = vars.size();
  if (vars_file.crc32c != vars_crc) {
    throw DataLossError(fmt::format(
        "Checkpoint file '{}' is corrupt: its CRC32C does not match the one recorded in '{}'", path,
        side_path));
  }
  c10::IValue value;
  try {
    value = unpickle(vars_file.bytes, 0, vars.size());
  } catch (const std::exception& e) {
    throw DataLossError(fmt::format("Checkpoint file '{}' is corrupt: it cannot be unpickled ({})",
                                    path, first_line(e)));
  }
  check_tensor_extents(value, path);
  if (!value.isGenericDict())
    throw DataLossError(fmt::format("Checkpoint file '{}' does not hold a dict", path));
  for (const auto& kv : value.toGenericDict()) {
    if (!kv.key().isString() || !kv.value().isTensor()) {
      throw DataLossError(
          fmt::format("Checkpoint file '{}' is not a dict of name -> tensor", path));
    }
    cp.variables.emplace_back(kv.key().toStringRef(), kv.value().toTensor());
  }
  return cp;
}

void write_checkpoint_files(CheckpointContents& c, bool parallel) {
  // The variables file, streamed with its CRC32C.
  auto write_variables = [&c]() {
    uint32_t crc = 0;
    c10::Dict<std::string, at::Tensor> variables;
    for (const auto& [name, t] : c.variables) variables.insert(name, t);
    try {
      AtomicFileWriter file(c.path);
      pickle_to(c10::IValue(variables), [&](const void* p, size_t n) {
        crc = crc32c::extend(crc, p, n);
        file.append(p, n);
      });
      const uint64_t size = file.size();
      file.commit(/*sync_directory=*/false);  // the sidecar's commit syncs the directory
      return std::make_pair(size, crc);
    } catch (const Error& e) {
      throw_error(e.code(), fmt::format("Cannot write checkpoint file '{}': {}", c.path, e.what()));
    } catch (const std::exception& e) {
      throw InternalError(
          fmt::format("Cannot write checkpoint file '{}': {}", c.path, first_line(e)));
    }
  };
  // In parallel, the sidecar's tensors are written while the variables file is; the variables
  // file's size and CRC, which the sidecar records, go into its pickle, written last.
  std::future<std::pair<uint64_t, uint32_t>> variables_written;
  std::optional<std::pair<uint64_t, uint32_t>> variables_result;
  if (parallel) {
    try {
      variables_written = std::async(std::launch::async, write_variables);
    } catch (const std::system_error&) {
      parallel = false;  // no thread to be had: one after the other
    }
  }
  if (!parallel) variables_result = write_variables();
  auto variables_done = [&]() -> std::pair<uint64_t, uint32_t> {
    if (!variables_result) variables_result = variables_written.get();
    return *variables_result;
  };

  SidecarPayload sidecar =
      sidecar_payload(static_cast<TrainingSnapshot&>(c), fs::path(c.path).filename().string());
  c10::impl::GenericDict& payload = sidecar.dict;

  // The sidecar: a header whose length and CRC are known only at the end, then the payload.
  const std::string side_path = sidecar_path(c.path);
  bool variables_failed = false;
  try {
    AtomicFileWriter file(side_path);
    const char zeros[kSidecarHeaderSize] = {};
    file.append(zeros, kSidecarHeaderSize);
    uint32_t crc = 0;
    PickleStream stream(c10::IValue(payload), [&](const void* p, size_t n) {
      crc = crc32c::extend(crc, p, n);
      file.append(p, n);
    });
    stream.write_tensors();
    try {
      const auto [vars_size, vars_crc] = variables_done();
      c.variables_bytes = vars_size;
      set_variables_record(payload, vars_size, vars_crc);
    } catch (...) {
      variables_failed = true;
      throw;
    }
    stream.finish(c10::IValue(payload));
    const std::string header = sidecar_header(file.size() - kSidecarHeaderSize, crc);
    file.overwrite(0, header.data(), header.size());
    c.sidecar_bytes = file.size();
    file.commit();
  } catch (const std::exception& e) {
    if (variables_failed) throw;  // it names the variables file; nothing was put in place
    // The variables file's own error, if it has one, comes first, as without parallel writing.
    if (variables_written.valid()) variables_written.get();
    std::error_code ec;
    fs::remove(c.path, ec);  // unlisted and without its sidecar: of no use
    const auto* err = dynamic_cast<const Error*>(&e);
    throw_error(err ? err->code() : Code::kInternal,
                fmt::format("Cannot write checkpoint file '{}': {}", side_path,
                            err ? std::string(e.what()) : first_line(e)));
  }
}

// ---- TrainhooksFormat ---------------------------------------------------------------------------

std::vector<std::string> TrainhooksFormat::files(const std::string& path) const {
  return {path, sidecar_path(path)};
}

std::string TrainhooksFormat::checkpoint_of(const std::string& file) const {
  const std::string_view suffix(kSidecarSuffix);
  if (file.size() > suffix.size() && std::string_view(file).ends_with(suffix))
    return file.substr(0, file.size() - suffix.size());
  return file;
}

void TrainhooksFormat::write(TrainingSnapshot& snapshot, const std::string& path,
                             bool parallel) const {
  CheckpointContents c;
  static_cast<TrainingSnapshot&>(c) = std::move(snapshot);
  c.path = path;
  write_checkpoint_files(c, parallel);
}

TrainingSnapshot TrainhooksFormat::read(const std::string& path) const {
  CheckpointContents c = decode_checkpoint(path);
  return std::move(static_cast<TrainingSnapshot&>(c));
}

// One pickle (the container of torch::pickle_save) of the tuple (variables, payload): the two
// files' contents without their framing, which a buffer in memory does not need.
std::string TrainhooksFormat::to_bytes(const TrainingSnapshot& snapshot) const {
  c10::Dict<std::string, at::Tensor> variables;
  for (const auto& [name, t] : snapshot.variables) variables.insert(name, t);
  const SidecarPayload payload = sidecar_payload(snapshot, "");
  const std::vector<char> bytes =
      pickle_bytes(c10::ivalue::Tuple::create({c10::IValue(variables), c10::IValue(payload.dict)}));
  return std::string(bytes.begin(), bytes.end());
}

TrainingSnapshot TrainhooksFormat::from_bytes(std::string_view bytes,
                                              const std::string& source) const {
  c10::IValue value;
  try {
    value = unpickle(bytes.data(), bytes.size());
  } catch (const std::exception& e) {
    throw DataLossError(
        fmt::format("The training state from {} cannot be unpickled ({})", source, first_line(e)));
  }
  check_tensor_extents(value, source);
  if (!value.isTuple() || value.toTupleRef().elements().size() != 2 ||
      !value.toTupleRef().elements()[0].isGenericDict()) {
    throw DataLossError(
        fmt::format("The training state from {} is not (variables, state)", source));
  }
  TrainingSnapshot out;
  decode_sidecar_payload(value.toTupleRef().elements()[1], kCheckpointFormatVersion, source, out);
  for (const auto& kv : value.toTupleRef().elements()[0].toGenericDict()) {
    if (!kv.key().isString() || !kv.value().isTensor())
      throw DataLossError(fmt::format("The variables from {} are not name -> tensor", source));
    out.variables.emplace_back(kv.key().toStringRef(), kv.value().toTensor());
  }
  return out;
}

}  // namespace trainhooks::internal
