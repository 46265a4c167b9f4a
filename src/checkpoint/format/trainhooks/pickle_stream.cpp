#include "checkpoint/format/trainhooks/pickle_stream.h"

#include <torch/csrc/jit/serialization/pickler.h>

#include <fmt/format.h>

#include "trainhooks/errors.h"

namespace trainhooks::internal {

namespace {

std::vector<at::Tensor> pickle(const c10::IValue& value, std::vector<char>& out) {
  torch::jit::Pickler pickler(
      [&](const char* bytes, size_t n) { out.insert(out.end(), bytes, bytes + n); });
  pickler.protocol();
  pickler.pushIValue(value);
  pickler.stop();
  return pickler.tensorData();
}

}  // namespace

PickleStream::PickleStream(const c10::IValue& value,
                           const std::function<void(const void*, size_t)>& sink)
    : writer_(sink) {
  std::vector<char> bytes;  // only its tensors are needed now
  tensors_ = pickle(value, bytes);
}

void PickleStream::write_tensors() {
  size_t i = 0;
  for (const auto& t : tensors_) {
    const torch::jit::WriteableTensorData data = torch::jit::getWriteableTensorData(t);
    writer_.write_record(fmt::format("data/{}", i++), data.data(), data.sizeInBytes());
    storages_.push_back(t.storage().unsafeGetStorageImpl());
  }
  // The pickler memoizes tensors that have other references: holding them here would change
  // the pickle written by finish().
  tensors_.clear();
}

void PickleStream::finish(const c10::IValue& value) {
  std::vector<char> bytes;
  const std::vector<at::Tensor> tensors = pickle(value, bytes);
  bool same = tensors.size() == storages_.size();
  for (size_t i = 0; same && i < tensors.size(); ++i)
    same = tensors[i].storage().unsafeGetStorageImpl() == storages_[i];
  if (!same) throw InternalError("PickleStream: the value's tensors changed while writing it");
  writer_.write_record("data.pkl", bytes.data(), bytes.size());
  writer_.finish();
}

void pickle_to(const c10::IValue& value, const std::function<void(const void*, size_t)>& sink) {
  PickleStream stream(value, sink);
  stream.write_tensors();
  stream.finish(value);
}

std::vector<char> pickle_bytes(const c10::IValue& value) {
  std::vector<char> out;
  pickle_to(value, [&](const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    out.insert(out.end(), c, c + n);
  });
  return out;
}

}  // namespace trainhooks::internal
